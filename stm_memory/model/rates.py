"""The providers' prompt-cache rates: what a cached, written and plain input token costs,
how long a prefix stays cached, the shortest one cached, and which model is billed by
which. Pure data and one lookup.

The swap rule (:mod:`stm_memory.prompt.swap`) prices a request with these, and the
offline cache model (:mod:`stm_memory.testing.prompt_cache`), the fake provider, the
benchmark and ``stm-memory eval`` bill with the same table, so what the turn decides and
what the bench measures go by one set of numbers.

Sources (checked 2026-12):

- OpenAI, "Prompt caching" guide (developers.openai.com/api/docs/guides/prompt-caching)
  and the API reference of ``prompt_cache_options`` / ``prompt_cache_breakpoint``
  (openai-python 3.63, ``chat/completion_create_params.py``): prompts of 1024 tokens or
  more; cached input 0.1x for the gpt-5 family, 0.25x gpt-4.1 / o3 / o4-mini, 0.5x
  gpt-4o / o1 (pricing page); no write fee before gpt-5.6; gpt-5.5 and later keep a
  prefix 24 h (the only ``prompt_cache_retention`` they take). "For GPT-5.6 models and
  later model families, cache writes cost 1.25x the uncached input token rate"; they
  match a cached prefix only at a cache breakpoint (one implicit, at the end of the
  newest message, and up to three explicit ones written per request), with a TTL of at
  least ``30m``; explicit breakpoints sent to an older model are refused (400).
- Anthropic, "Prompt caching" (platform.claude.com/docs/en/build-with-claude/prompt-caching):
  reads 0.1x, writes 1.25x (``ttl`` "5m", the default) or 2x ("1h"); the minimum
  cacheable prefix by model: 512 tokens Opus 5; 1024 Sonnet 3.7 / 4 / 4.5 / 4.6 /
  5, Opus 4 / 4.1 / 4.8; 2048 Opus 4.7, Haiku 3 / 3.5; 4096 Opus 4.5 / 4.6, Haiku 4.5.
  A prefix below it is silently not cached.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal

from stm_memory.errors import ConfigurationError

__all__ = [
    "CACHE_PROFILES",
    "DEFAULT_PROFILES",
    "PROVIDER_NAMES",
    "CacheProfile",
    "check_profile",
    "model_profile",
    "profile_for",
]

log = logging.getLogger("stm_memory")

#: The provider names an entry point's ``provider=`` may take (beside the ones a memory
#: excludes: kit/checks.py), kept with the providers' prices: LangChain's own
#: (``init_chat_model``), the OpenAI-compatible servers by name, and the providers
#: excluded by default. A name outside it is refused: a typo would silently change
#: nothing (no exclusion, the default prices, the default API rules).
PROVIDER_NAMES = frozenset(
    {
        *("anthropic", "anthropic_bedrock", "azure", "azure_ai", "azure_openai", "baseten"),
        *("bedrock", "bedrock_converse", "cohere", "deepseek", "fireworks"),
        *("google_anthropic_vertex", "google_genai", "google_vertexai", "groq"),
        *("huggingface", "ibm", "litellm", "meta", "mistralai", "nvidia", "ollama"),
        *("openai", "openrouter", "perplexity", "together", "upstage", "xai"),
        *("vllm", "sglang", "tgi", "llamacpp", "lmstudio"),
        "novelai",
    }
)


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
    #: A prefix is matched only where a cache breakpoint ends it, and the request may
    #: carry explicit ones (OpenAI gpt-5.6 and later); without, any prefix matches.
    breakpoints: bool = False


_MINUTES5, _MINUTES30, _HOUR, _DAY = (
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=24),
)

#: Anthropic families: the minimum cacheable prefix of each (see the module docstring).
_ANTHROPIC_MINIMUM = {
    "sonnet": 1024,
    "opus": 1024,
    "haiku": 2048,
    "haiku-4.5": 4096,
    "opus-4.5": 4096,
    "opus-4.7": 2048,
    "opus-5": 512,
}


def _profiles() -> dict[str, CacheProfile]:
    out: dict[str, CacheProfile] = {}
    # OpenAI before gpt-5.6: no write fee; in-memory retention (minutes) or 24 h.
    for model, read in (("gpt-5", 0.1), ("gpt-4.1", 0.25), ("gpt-4o", 0.5)):
        for suffix, ttl in (("", _MINUTES5), ("-24h", _DAY)):
            name = f"openai-{model}{suffix}"
            out[name] = CacheProfile(name, "openai", 1024, 128, read, 1.0, ttl)
    out["openai-gpt-5.5"] = CacheProfile("openai-gpt-5.5", "openai", 1024, 128, 0.1, 1.0, _DAY)
    # gpt-5.6 and later: writes 1.25x, matched at breakpoints (not rounded to a block).
    out["openai-gpt-5.6"] = CacheProfile(
        "openai-gpt-5.6", "openai", 1024, 1, 0.1, 1.25, _MINUTES30, breakpoints=True
    )
    # Anthropic: writes 1.25x for the 5-minute TTL, 2x for the 1-hour TTL; reads 0.1x.
    for family, minimum in _ANTHROPIC_MINIMUM.items():
        for suffix, ttl, write in (("5m", _MINUTES5, 1.25), ("1h", _HOUR, 2.0)):
            name = f"anthropic-{family}-{suffix}"
            out[name] = CacheProfile(name, "anthropic", minimum, 1, 0.1, write, ttl)
    return out


CACHE_PROFILES: Mapping[str, CacheProfile] = _profiles()


#: The profile a request is priced with when neither a profile nor a known model names
#: one, by the provider that bills it: OpenAI's in-memory retention (minutes) and the
#: gpt-5 family's 0.1x read; Anthropic's default 5-minute TTL (the breakpoints we send
#: carry no ``ttl``).
DEFAULT_PROFILES: Mapping[str, str] = {
    "openai": "openai-gpt-5",
    "anthropic": "anthropic-sonnet-5m",
    # stm_memory.testing's offline models and the evaluation's scripted one bill
    # their prompt caches as gpt-5.
    "stm-offline": "openai-gpt-5",
    "stm-scripted": "openai-gpt-5",
}
_warned: set[str] = set()

# "gpt-5.6-sol", "gpt-5-mini", "gpt-4.1-nano", "openai/gpt-5.4" ...
_GPT = re.compile(r"gpt-(\d+)(?:\.(\d+))?(o)?")
# "claude-opus-4-6", "claude-sonnet-4-20250514", "claude-3-5-haiku-latest" ...
_CLAUDE = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:[-.](\d{1,2}))?(?!\d)")
_CLAUDE_3 = re.compile(r"claude-3(?:[-.](\d))?-(opus|sonnet|haiku)")
#: OpenAI's reasoning models by name, and the rates their cached input is billed at.
_O_SERIES = (
    ("o4-mini", "openai-gpt-4.1"),
    ("o3-mini", "openai-gpt-4o"),
    ("o3", "openai-gpt-4.1"),
    ("o1", "openai-gpt-4o"),
)


def _openai_family(name: str) -> str | None:
    gpt = _GPT.match(name)
    if gpt is not None:
        major, minor = int(gpt.group(1)), int(gpt.group(2) or 0)
        if gpt.group(3):  # gpt-4o
            return "openai-gpt-4o"
        if (major, minor) >= (5, 6):  # "gpt-5.6 and later model families"
            return "openai-gpt-5.6"
        if (major, minor) == (5, 5):
            return "openai-gpt-5.5"
        if major == 5:
            return "openai-gpt-5"
        if (major, minor) == (4, 1):
            return "openai-gpt-4.1"
        return None
    for prefix, profile in _O_SERIES:
        if name.startswith(prefix):
            return profile
    return None


def _anthropic_family(name: str) -> str | None:
    legacy = _CLAUDE_3.match(name)
    if legacy is not None:  # claude-3-haiku, claude-3-5-haiku, claude-3-7-sonnet
        family = legacy.group(2)
        return {"haiku": "haiku", "sonnet": "sonnet"}.get(family)
    claude = _CLAUDE.match(name)
    if claude is None:
        return None
    family, version = claude.group(1), (int(claude.group(2)), int(claude.group(3) or 0))
    if family == "sonnet":
        return "sonnet"
    if family == "haiku":
        return "haiku-4.5" if version >= (4, 5) else "haiku"
    if version >= (5, 0):
        return "opus-5"
    if version in ((4, 5), (4, 6)):
        return "opus-4.5"
    if version == (4, 7):
        return "opus-4.7"
    return "opus"  # Opus 4, 4.1, 4.8


#: The offline models of ``stm_memory.testing`` and the evaluation's scripted ones
#: (named "offline" on the wire) bill as their provider's default, without a warning.
_OFFLINE_MODELS = frozenset({"offline"})


def model_profile(model: str) -> CacheProfile | None:
    """The rates ``model`` (a provider's model name, ``"provider/"`` prefix allowed) is
    billed at, with the provider's default retention; None for a name not in the table."""
    name = model.rsplit("/", 1)[-1].strip().casefold()
    if name.startswith("claude"):
        family = _anthropic_family(name)
        return CACHE_PROFILES[f"anthropic-{family}-5m"] if family else None
    found = _openai_family(name)
    return CACHE_PROFILES[found] if found else None


def check_profile(name: object, *, field: str = "cache_profile") -> str | None:
    """``name`` if it is a known profile or None; else a ConfigurationError naming
    ``field`` and the known names."""
    if name is None:
        return None
    if not isinstance(name, str) or name not in CACHE_PROFILES:
        known = ", ".join(sorted(CACHE_PROFILES))
        raise ConfigurationError(f"{field} must be one of {known} or None, got {name!r}")
    return name


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


def _retained(profile: CacheProfile, retention: timedelta) -> CacheProfile:
    """``profile`` kept for ``retention``, as the request asks: Anthropic's 1-hour TTL
    is the family's 1-hour profile (its writes cost 2x), OpenAI's 24 h the extended
    retention; any other span keeps the profile's rates."""
    if profile.provider == "anthropic":
        base = profile.name.rsplit("-", 1)[0]
        named = CACHE_PROFILES[f"{base}-{'1h' if retention >= _HOUR else '5m'}"]
    else:
        named = CACHE_PROFILES.get(f"{profile.name}-24h", profile)
    return named if named.ttl == retention else replace(named, ttl=retention)


def profile_for(
    provider: str | None,
    name: str | None = None,
    *,
    model: str | None = None,
    retention: timedelta | None = None,
) -> CacheProfile:
    """The rates a request is billed at: the configured profile ``name``; else the
    ``model``'s (:func:`model_profile`), kept for the ``retention`` the request asks
    for; else ``provider``'s default. A model not in the table, or a provider with no
    profile of its own (an OpenAI-compatible server, a proxy), is priced with the
    provider's default (OpenAI's), with one warning per name, since its bill is unknown
    here."""
    if name is not None:
        return CACHE_PROFILES[name]
    wire = (provider or "openai").strip().lower()
    default = DEFAULT_PROFILES.get(wire)
    if default is None:
        _warn_once(
            wire,
            "stm-memory: no prompt-cache rates known for provider %r; pricing its "
            "requests as %s (set cache_profile= to name its rates)",
            wire,
            DEFAULT_PROFILES["openai"],
        )
        default = DEFAULT_PROFILES["openai"]
    profile = CACHE_PROFILES[default]
    if model and model not in _OFFLINE_MODELS:
        found = model_profile(model)
        if found is None and wire in ("openai", "anthropic"):
            _warn_once(
                f"{wire}:{model}",
                "stm-memory: no prompt-cache rates known for model %r; pricing its "
                "requests as %s (set cache_profile= to name its rates)",
                model,
                default,
            )
        elif found is not None:
            profile = found
    return _retained(profile, retention) if retention is not None else profile
