"""Tunable constants, each overridable by environment variable and by constructor argument.

Precedence: explicit constructor argument > environment variable > default.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from typing import Any

from stm_memory.errors import ConfigurationError
from stm_memory.model.rates import check_profile
from stm_memory.model.settings import ServerSettings

__all__ = ["ENV_VARS", "Limits", "unknown_options"]


def unknown_options(where: str, unknown: Iterable[str], valid: Iterable[str]) -> ConfigurationError:
    """The one error for options nobody takes: each unknown name (with the nearest
    known one when it looks like a typo), then every option ``where`` takes."""
    known = sorted(valid)
    named = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, known, n=1)
        setting = difflib.get_close_matches(name, [f.name for f in fields(ServerSettings)], n=1)
        if close:
            named.append(f"{name!r} (did you mean {close[0]!r}?)")
        elif setting:
            named.append(
                f"{name!r} (a server setting? memory.configure_server(server_id, {setting[0]}=...))"
            )
        else:
            named.append(repr(name))
    return ConfigurationError(
        f"{where}: unknown option(s) {', '.join(named)}; the options are: {', '.join(known)}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The engine's tunable constants. All durations are :class:`datetime.timedelta`.

    Why these defaults: ``docs/design.md#expiry-24-h-and-12-h``.
    """

    # An entry with a distilled summary is worth keeping for a day of silence.
    summary_ttl: timedelta = timedelta(hours=24)
    # Raw messages (and categories-only entries) go stale faster: half a day.
    bare_ttl: timedelta = timedelta(hours=12)
    # Hard cap on every stored value, in Unicode code points.
    max_summary_length: int = 1500
    # Raw dialogue turns kept per channel by passive capture (more while the memory has
    # not been written since they were said: a write checks them, model/changes.py).
    messages_kept: int = 10
    # Code points of excerpts kept beside the written memory: what the turns a write
    # let the cut drop said that the memory does not carry (stm_memory/model/kept.py).
    # The summary's own limit: a writer that leaves out a third of the facts keeps about
    # that much over 200 turns (stm-memory eval). Past it the oldest excerpts leave (named
    # in the write's result); turns of one write that alone pass it stay raw.
    detail_budget: int = 1500
    # Other-channel entries rendered into the prompt.
    other_channels_shown: int = 3
    # Rows untouched this long are deleted by the janitor.
    janitor_retention: timedelta = timedelta(days=90)
    # Let start-up finish before the first sweep competes for the database.
    janitor_first_run: timedelta = timedelta(seconds=60)
    janitor_interval: timedelta = timedelta(hours=24)
    # Covered turns still sent before the uncovered ones: the turn the memory was
    # written in, so the model sees how its summary connects to what follows.
    history_overlap: int = 1
    # The most tokens (estimated) of earlier dialogue a request keeps when no memory
    # covers it (a model that never writes its memory): until then it is sent what a
    # full-history caller sends, so adding memory never costs recall (SPEC §6 "no
    # regret"); past it the oldest uncovered turns go in steps of half the budget. Half
    # of a 128k-token context, leaving room for the system prompt, tools and answer; a
    # model with a smaller window wants it lower.
    history_token_budget: int = 64_000
    # A cap in turns on top of the budget (0: none). It was the only bound, 30 turns, and
    # dropped what nothing covered long before any context limit: the budget replaced it.
    max_raw_turns: int = 0
    # The prompt-cache rates a request is priced at when the turn decides whether
    # showing the newest memory pays (stm_memory/prompt/swap.py): a name of
    # stm_memory.model.rates.CACHE_PROFILES (e.g. "anthropic-sonnet-1h",
    # "openai-gpt-5-24h"), or None: the default of the provider the request goes to.
    cache_profile: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _NAMES:
                check_profile(value, field=f.name)
            elif isinstance(value, timedelta):
                if value <= timedelta(0) and f.name != "janitor_first_run":
                    raise ConfigurationError(f"{f.name} must be positive, got {value}")
            elif not isinstance(value, int) or isinstance(value, bool):
                raise ConfigurationError(f"{f.name} must be an integer, got {value!r}")
            elif value < (0 if f.name in _MAY_BE_ZERO else 1):
                floor = "a non-negative" if f.name in _MAY_BE_ZERO else "a positive"
                raise ConfigurationError(f"{f.name} must be {floor} integer, got {value!r}")

    def ttl_for(self, *, has_summary: bool) -> timedelta:
        return self.summary_ttl if has_summary else self.bare_ttl

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Limits:
        """Defaults, then environment variables, then ``overrides`` (``None`` values ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_VARS[f.name])
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(f.name, raw, is_duration=f.name in _DURATION_UNITS)
        base = cls(**values)
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise unknown_options("Limits", unknown, (f.name for f in fields(cls)))
        given = {k: _coerce(k, v) for k, v in overrides.items() if v is not None}
        return replace(base, **given) if given else base


_MAY_BE_ZERO = frozenset({"history_overlap", "max_raw_turns"})
# Fields that hold a name (checked against the known ones), not a number.
_NAMES = frozenset({"cache_profile"})

# Unit of the number given in each duration's environment variable.
_DURATION_UNITS: dict[str, str] = {
    "summary_ttl": "seconds",
    "bare_ttl": "seconds",
    "janitor_retention": "days",
    "janitor_first_run": "seconds",
    "janitor_interval": "seconds",
}

ENV_VARS: dict[str, str] = {
    "summary_ttl": "STM_SUMMARY_TTL_SECONDS",
    "bare_ttl": "STM_TTL_SECONDS",
    "max_summary_length": "STM_MAX_SUMMARY_LENGTH",
    "messages_kept": "STM_MESSAGES_KEPT",
    "detail_budget": "STM_DETAIL_BUDGET",
    "other_channels_shown": "STM_OTHER_CHANNELS_SHOWN",
    "janitor_retention": "STM_JANITOR_RETENTION_DAYS",
    "janitor_first_run": "STM_JANITOR_FIRST_RUN_SECONDS",
    "janitor_interval": "STM_JANITOR_INTERVAL_SECONDS",
    "history_overlap": "STM_HISTORY_OVERLAP",
    "history_token_budget": "STM_HISTORY_TOKEN_BUDGET",
    "max_raw_turns": "STM_MAX_RAW_TURNS",
    "cache_profile": "STM_CACHE_PROFILE",
}


def _parse(name: str, raw: str, *, is_duration: bool) -> int | timedelta | str:
    if name in _NAMES:
        return raw.strip()
    try:
        number = float(raw) if is_duration else int(raw)
    except ValueError:
        raise ConfigurationError(f"{ENV_VARS[name]}={raw!r} is not a number") from None
    if is_duration:
        return timedelta(**{_DURATION_UNITS[name]: number})
    return int(number)


def _coerce(name: str, value: Any) -> Any:
    # Durations may be given as timedelta or as a number in the env var's unit.
    if name in _DURATION_UNITS and isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(**{_DURATION_UNITS[name]: value})
    return value
