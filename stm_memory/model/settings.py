"""Per-server settings, per-user settings and categories: validated when built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypeAlias

from stm_memory.errors import ConfigurationError
from stm_memory.model.text import storable_text_problem

__all__ = [
    "DEFAULT_CATEGORY",
    "MAX_CATEGORIES",
    "Category",
    "RenderMode",
    "ServerSettings",
    "UserSettings",
]

RenderMode: TypeAlias = Literal["crude_summary", "supersede"]


@dataclass(frozen=True, slots=True)
class Category:
    """A per-server memory category. ``slug`` is assigned by ``set_categories``."""

    label: str
    description: str = ""
    slug: str = ""


def _validate_fields(obj: object, checks: Mapping[str, Any]) -> None:
    for name, check in checks.items():
        value = getattr(obj, name)
        problem = check(value)
        if problem:
            raise ConfigurationError(f"{name}: {problem} (got {value!r})")


def _bool(v: object) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _int_at_least(lo: int) -> Any:
    def check(v: object) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= lo
        return None if ok else f"must be an integer >= {lo}"

    return check


def _opt_text(v: object) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        return "must be a string or None"
    return storable_text_problem(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """Per-server settings, with their defaults. Only an explicit ``False`` disables memory."""

    short_term_memory_enabled: bool = True
    # The staleness bound: the nudge goes at the latest this many turns after a write,
    # earlier when a write pays (stm_memory.prompt.swap.write_pays). 10 bills less and
    # other channels learn later: measured in docs/cost-recall.md.
    refresh_cadence: int = 5
    render_mode: RenderMode = "supersede"
    crude_message_count: int = 6
    tool_description_override: str | None = None
    update_nudge_override: str | None = None
    nudge_injection_depth: int = 2
    content_injection_depth: int = -1
    private_channel_ids: frozenset[str] = frozenset()
    stm_privacy_bypass: bool = False

    def __post_init__(self) -> None:
        # Accept any iterable of ids for convenience, keep a frozenset.
        if not isinstance(self.private_channel_ids, frozenset):
            ids = self.private_channel_ids
            if isinstance(ids, str) or not hasattr(ids, "__iter__"):
                raise ConfigurationError("private_channel_ids must be a collection of ids")
            object.__setattr__(self, "private_channel_ids", frozenset(str(i) for i in ids))
        _validate_fields(
            self,
            {
                "short_term_memory_enabled": _bool,
                "refresh_cadence": _int_at_least(1),
                "render_mode": lambda v: (
                    None
                    if v in ("crude_summary", "supersede")
                    else "must be 'crude_summary' or 'supersede'"
                ),
                "crude_message_count": _int_at_least(0),
                "tool_description_override": _opt_text,
                "update_nudge_override": _opt_text,
                "nudge_injection_depth": _int_at_least(0),
                "content_injection_depth": _int_at_least(-1),
                "stm_privacy_bypass": _bool,
            },
        )

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    def with_changes(self, **changes: Any) -> ServerSettings:
        unknown = set(changes) - self.field_names()
        if unknown:
            known = ", ".join(sorted(self.field_names()))
            raise ConfigurationError(
                f"unknown server setting(s): {', '.join(sorted(unknown))}; known: {known}"
            )
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["private_channel_ids"] = sorted(self.private_channel_ids)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class UserSettings:
    """Per-user privacy settings."""

    cross_server_opt_in: bool = False
    full_privacy: bool = False

    def __post_init__(self) -> None:
        _validate_fields(self, {"cross_server_opt_in": _bool, "full_privacy": _bool})

    def with_changes(self, **changes: Any) -> UserSettings:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ConfigurationError(
                f"unknown user setting(s): {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(known))}"
            )
        return replace(self, **changes)


DEFAULT_CATEGORY = Category(
    "summary", "A compact summary of the recent conversation in this channel.", "summary"
)
MAX_CATEGORIES = 5
