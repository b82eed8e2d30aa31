"""The providers' prompt-cache rates: what a cached, written and plain input token costs,
how long a prefix stays cached, the shortest one cached. Pure data.

The swap rule (:mod:`stm_memory.prompt.swap`) prices a request with these, and the
offline cache model (:mod:`stm_memory.testing.prompt_cache`), the fake provider and
the benchmark bill with the same table, so what the turn decides and what the bench
measures go by one set of numbers. Sources, checked 2026: OpenAI's and Anthropic's
prompt-caching guides and pricing pages (cited in ``testing/prompt_cache.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from stm_memory.errors import ConfigurationError

__all__ = ["CACHE_PROFILES", "DEFAULT_PROFILES", "CacheProfile", "check_profile", "profile_for"]

log = logging.getLogger("stm_memory")


@dataclass(frozen=True, slots=True)
class CacheProfile:
    """How one provider/model caches and prices a prompt prefix."""

    name: str
    provider: Literal["openai", "anthropic"]
    min_tokens: int  # shortest cacheable prefix
    step: int  # cached tokens are a multiple of this (OpenAI 128, Anthropic 1)
    read_multiplier: float  # price of a cached token, in input-token prices
    write_multiplier: float  # price of a token written to the cache
    ttl: timedelta  # OpenAI: retention after last use; Anthropic: the profile's write TTL
    output_multiplier: float = 4.0  # output tokens priced at 4x input (for cost())


def _profiles() -> dict[str, CacheProfile]:
    minutes5, hour, day = timedelta(minutes=5), timedelta(hours=1), timedelta(hours=24)
    out: dict[str, CacheProfile] = {}
    # OpenAI: no write fee; retention in memory (5 minutes here) or extended (24 h).
    for model, read in (("gpt-5", 0.1), ("gpt-4.1", 0.25)):
        for suffix, ttl in (("", minutes5), ("-24h", day)):
            name = f"openai-{model}{suffix}"
            out[name] = CacheProfile(name, "openai", 1024, 128, read, 1.0, ttl)
    # Anthropic: writes 1.25x for the 5-minute TTL, 2x for the 1-hour TTL; reads 0.1x.
    for family, minimum in (
        ("sonnet", 1024),  # Sonnet 4 / 4.5 / 3.7
        ("opus", 1024),  # Opus 4 / 4.1
        ("haiku", 2048),  # Haiku 3 / 3.5
        ("haiku-4.5", 4096),
        ("opus-4.5", 4096),  # also Opus 4.6
    ):
        for suffix, ttl, write in (("5m", minutes5, 1.25), ("1h", hour, 2.0)):
            name = f"anthropic-{family}-{suffix}"
            out[name] = CacheProfile(name, "anthropic", minimum, 1, 0.1, write, ttl)
    return out


CACHE_PROFILES: Mapping[str, CacheProfile] = _profiles()


#: The profile a request is priced with when none is configured, by the provider that
#: bills it: OpenAI's in-memory retention (minutes) and the gpt-5 family's 0.1x read;
#: Anthropic's default 5-minute TTL (the breakpoints we send carry no ``ttl``).
DEFAULT_PROFILES: Mapping[str, str] = {
    "openai": "openai-gpt-5",
    "anthropic": "anthropic-sonnet-5m",
    # stm_memory.testing's offline models and the evaluation's scripted one bill
    # their prompt caches as gpt-5.
    "stm-offline": "openai-gpt-5",
    "stm-scripted": "openai-gpt-5",
}
_warned: set[str] = set()


def check_profile(name: object, *, field: str = "cache_profile") -> str | None:
    """``name`` if it is a known profile or None; else a ConfigurationError naming
    ``field`` and the known names."""
    if name is None:
        return None
    if not isinstance(name, str) or name not in CACHE_PROFILES:
        known = ", ".join(sorted(CACHE_PROFILES))
        raise ConfigurationError(f"{field} must be one of {known} or None, got {name!r}")
    return name


def profile_for(provider: str | None, name: str | None = None) -> CacheProfile:
    """The rates a request to ``provider`` is billed at: the configured profile
    ``name``, else the provider's default; a provider with no profile of its own
    (an OpenAI-compatible server, a proxy) is priced as OpenAI, with one warning per
    name, since its bill is unknown here."""
    if name is not None:
        return CACHE_PROFILES[name]
    wire = (provider or "openai").strip().lower()
    default = DEFAULT_PROFILES.get(wire)
    if default is None:
        if wire not in _warned:
            _warned.add(wire)
            log.warning(
                "stm-memory: no prompt-cache rates known for provider %r; pricing its "
                "requests as %s (set cache_profile= to name its rates)",
                wire,
                DEFAULT_PROFILES["openai"],
            )
        default = DEFAULT_PROFILES["openai"]
    return CACHE_PROFILES[default]
