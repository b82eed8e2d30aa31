"""Pure validation of ``update_short_term_memory`` arguments against a turn's schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .text import clean_value
from .types import Category

__all__ = ["UpdateArgs", "parse_update_arguments", "storage_safe"]


@dataclass(frozen=True, slots=True)
class UpdateArgs:
    """Cleaned values: ``summary`` in summary mode, else ``categories`` (slug → value)."""

    summary: str | None = None
    categories: Mapping[str, str] | None = None


def storage_safe(text: str) -> str:
    """Make text storable everywhere: PostgreSQL rejects NUL, UTF-8 rejects lone
    surrogates. Both become U+FFFD so the rest of the value survives."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _describe(value: object) -> str:
    return "null" if value is None else type(value).__name__


def parse_update_arguments(
    args: object,
    *,
    summary_mode: bool,
    categories: Sequence[Category],
    limit: int,
) -> UpdateArgs | str:
    """Return cleaned arguments, or a reason (for the model) why they are unusable.

    Checked in the SPEC's order: a value that is not a string; an empty/blank value;
    no category value given; unknown keys (named back so the model can fix the call).
    """
    if not isinstance(args, Mapping):
        return f"Arguments must be a JSON object, got {_describe(args)}."
    expected = ["summary"] if summary_mode else [c.slug for c in categories]
    cleaned: dict[str, str] = {}
    for name in expected:
        if name not in args:
            continue
        value: Any = args[name]
        if not isinstance(value, str):
            return f"Field '{name}' must be a string, got {_describe(value)}."
        text = clean_value(storage_safe(value), limit=limit)
        if not text:
            if summary_mode:
                return "Field 'summary' is empty. Provide a compact summary of the dialogue."
            continue  # category mode: a blank value keeps the stored one
        cleaned[name] = text
    if not cleaned:
        fields = ", ".join(f"'{n}'" for n in expected)
        return f"No value given. Provide a non-empty string for {fields} (each ≤ {limit} chars)."
    unknown = sorted(str(k) for k in args if k not in expected)
    if unknown:
        return (
            f"Unknown field(s): {', '.join(repr(u) for u in unknown)}. "
            f"Allowed: {', '.join(repr(n) for n in expected)}."
        )
    if summary_mode:
        return UpdateArgs(summary=cleaned["summary"])
    return UpdateArgs(categories=cleaned)
