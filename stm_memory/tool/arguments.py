"""Pure validation of ``update_short_term_memory`` arguments against a turn's schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stm_memory.model import Category
from stm_memory.model.text import clean_value, storage_safe, truncate_code_points

__all__ = ["UpdateArgs", "parse_update_arguments"]


@dataclass(frozen=True, slots=True)
class UpdateArgs:
    """Cleaned values: ``summary`` in summary mode, else ``categories`` (slug → value).
    ``cut`` names the fields that were longer than the limit and were cut to it."""

    summary: str | None = None
    categories: Mapping[str, str] | None = None
    cut: tuple[str, ...] = ()

    def note(self, limit: int) -> str | None:
        """What the model should learn from a completed write: which values were cut
        (the write still completed), so it keeps the next ones within the limit."""
        if not self.cut:
            return None
        names = ", ".join(f"'{n}'" for n in self.cut)
        return (
            f"Stored, but {names} exceeded {limit} characters and was cut to {limit}. "
            f"Keep each value within {limit} characters."
        )


def _clean_values(
    args: Mapping[Any, Any],
    expected: Sequence[str],
    *,
    summary_mode: bool,
    limit: int,
    unknown_note: str,
) -> tuple[dict[str, str], list[str]] | str:
    """The expected fields' values, cleaned and cut to ``limit`` (with the names of
    those cut), or the first value's failure (an empty summary also names the unknown
    keys: the model may have put the summary under one). A null or, in category mode,
    blank value is no value: the stored one stays."""
    cleaned: dict[str, str] = {}
    cut: list[str] = []
    for name in expected:
        value: Any = args.get(name)
        if value is None:
            # Models send null for a field they leave alone (strict schemas require
            # every key); LangChain's tooling does too.
            continue
        if not isinstance(value, str):
            return f"Field '{name}' must be a string, got {_describe(value)}."
        # Cleaned in full first, so a value longer than the limit is known to be cut.
        safe = storage_safe(value)
        whole = clean_value(safe, limit=len(safe))
        text = truncate_code_points(whole, limit).rstrip()
        if not text:
            if summary_mode:
                return (
                    "Field 'summary' is empty. Provide a compact summary of the dialogue."
                    + unknown_note
                )
            continue  # category mode: a blank value keeps the stored one
        if len(whole) > limit:
            cut.append(name)
        cleaned[name] = text
    return cleaned, cut


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

    Checked in a fixed order, so the model is told the first thing to fix: a value
    that is not a string; an empty/blank value; no category value given; unknown keys
    (named back so the model can fix the call).

    ``null`` is "no value", as an omitted key: a category given null keeps its stored
    value, and a call whose values are all null (or omitted) gives no value, in
    either mode. This is the one place that says so: every path that runs the tool
    (the provider loops, the LangChain tool, histories and sessions) hands the
    arguments here as the model sent them.
    """
    if not isinstance(args, Mapping):
        return f"Arguments must be a JSON object, got {_describe(args)}."
    expected = ["summary"] if summary_mode else [c.slug for c in categories]
    allowed = ", ".join(repr(n) for n in expected)
    unknown = sorted(str(k) for k in args if k not in expected)
    # Named in every failure, also when no known key was given: a misspelt key
    # ("weathr") is the usual reason for "no value", and the model can only fix it
    # if it is told which key was not understood.
    unknown_text = (
        f"Unknown field(s): {', '.join(repr(u) for u in unknown)}. Allowed: {allowed}."
        if unknown
        else ""
    )
    unknown_note = f" {unknown_text}" if unknown else ""
    values = _clean_values(
        args, expected, summary_mode=summary_mode, limit=limit, unknown_note=unknown_note
    )
    if isinstance(values, str):
        return values
    cleaned, cut = values
    if not cleaned:
        fields = ", ".join(f"'{n}'" for n in expected)
        return (
            f"No value given. Provide a non-empty string for {fields} (each ≤ {limit} chars)."
            + unknown_note
        )
    if unknown:
        return unknown_text
    if summary_mode:
        return UpdateArgs(summary=cleaned["summary"], cut=tuple(cut))
    return UpdateArgs(categories=cleaned, cut=tuple(cut))
