"""Cost as billed: each strategy's recorded requests replayed through the project's one
prompt-cache model (:class:`~stm_memory.testing.prompt_cache.PromptCache`), and the usage
the API reported, both priced with the same cache profile and, when known, a price in
US dollars per million tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stm_memory.errors import ConfigurationError
from stm_memory.evaluation._recording import RecordedTurn
from stm_memory.kit import Usage
from stm_memory.model.rates import profile_for
from stm_memory.testing.prompt_cache import CacheProfile, CacheUsage, PromptCache

__all__ = ["PRICES", "Cost", "Price", "bill", "cache_profile_for", "price_for", "reported_cost"]


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens: uncached input and output. Cached input and
    cache writes are priced with the cache profile's multipliers of the input price."""

    input_per_mtok: float
    output_per_mtok: float

    def __post_init__(self) -> None:
        if self.input_per_mtok < 0 or self.output_per_mtok < 0:
            raise ConfigurationError("prices must not be negative")


#: List prices (USD per million tokens) as the providers published them in 2025, for a
#: first estimate only; pass ``price=`` for yours. Matched on the model name's start.
PRICES: Mapping[str, Price] = {
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-5-nano": Price(0.05, 0.40),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5": Price(1.25, 10.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-opus-4-1": Price(15.00, 75.00),
}


def price_for(model_name: str) -> Price | None:
    """The listed price of ``model_name`` (longest matching prefix), else None."""
    name = model_name.rsplit("/", 1)[-1].casefold()
    matches = [key for key in PRICES if name.startswith(key)]
    return PRICES[max(matches, key=len)] if matches else None


def cache_profile_for(provider: str, model_name: str) -> CacheProfile:
    """The prompt-cache profile a model is billed by, with its provider's default
    retention: the one table of model families (:func:`~stm_memory.model.rates.profile_for`;
    a name not in it is priced as its provider's default, with one warning)."""
    return profile_for(provider if provider != "other" else None, model=model_name)


@dataclass(frozen=True, slots=True)
class Cost:
    """Tokens and what they cost. ``units`` is the project's convention (one uncached
    input token = 1; cached, written and output tokens at the profile's multipliers);
    ``usd`` needs a :class:`Price` (None without one)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    units: float = 0.0
    usd: float | None = None

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cached_tokens - self.cache_write_tokens

    @property
    def cache_share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


def _priced(usage: CacheUsage, output: int, profile: CacheProfile, price: Price | None) -> Cost:
    usd = None
    if price is not None:
        input_units = usage.cost(profile)  # input only, in input-token units
        usd = (input_units * price.input_per_mtok + output * price.output_per_mtok) / 1e6
    return Cost(
        input_tokens=usage.input_tokens,
        cached_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=output,
        units=usage.cost(profile, output_tokens=output),
        usd=usd,
    )


def bill(turns: Sequence[RecordedTurn], profile: CacheProfile, price: Price | None = None) -> Cost:
    """``turns`` replayed in order through one fresh prompt cache (one customer), each
    request at its turn's time; a turn's side calls (the summarizer runs before the
    model) first."""
    cache = PromptCache(profile)
    usage = CacheUsage(0)
    output = 0
    for turn in turns:
        for request in (*turn.side_requests, *turn.requests):
            usage = usage + cache.observe(request.body, at=turn.at, api=request.api)
        output += turn.output_tokens + turn.side_output_tokens
    return _priced(usage, output, profile, price)


def reported_cost(usage: Usage, profile: CacheProfile, price: Price | None = None) -> Cost:
    """What the API reported, priced with the same profile and price."""
    cache_usage = CacheUsage(
        usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens
    )
    return _priced(cache_usage, usage.output_tokens, profile, price)
