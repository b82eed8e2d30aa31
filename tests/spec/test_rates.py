"""The rates in force (SPEC §6, "the bill decides"): which profile prices a model's
requests, chosen from its name, and the swap decision each family's cache rules give.

One table (``stm_memory/model/rates.py``) serves the swap rule, the offline cache model,
the fake provider, the benchmark and ``stm-memory eval``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from stm_memory.kit import cache_retention
from stm_memory.model.rates import CACHE_PROFILES, model_profile, profile_for
from stm_memory.prompt.swap import SwapInputs, decide


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("gpt-5.6-sol", "openai-gpt-5.6"),
        ("gpt-5.7", "openai-gpt-5.6"),  # "GPT-5.6 models and later model families"
        ("gpt-6-mini", "openai-gpt-5.6"),
        ("openai/gpt-5.6", "openai-gpt-5.6"),
        ("gpt-5.5-pro", "openai-gpt-5.5"),
        ("gpt-5.4-mini", "openai-gpt-5"),
        ("gpt-5", "openai-gpt-5"),
        ("gpt-5-nano", "openai-gpt-5"),
        ("gpt-4.1-mini", "openai-gpt-4.1"),
        ("gpt-4o", "openai-gpt-4o"),
        ("o3", "openai-gpt-4.1"),
        ("o3-mini", "openai-gpt-4o"),
        ("o4-mini", "openai-gpt-4.1"),
        ("o1", "openai-gpt-4o"),
        ("claude-opus-5", "anthropic-opus-5-5m"),
        ("claude-opus-4-8", "anthropic-opus-5m"),
        ("claude-opus-4-7", "anthropic-opus-4.7-5m"),
        ("claude-opus-4-6", "anthropic-opus-4.5-5m"),
        ("claude-opus-4-5-20251101", "anthropic-opus-4.5-5m"),
        ("claude-opus-4-1", "anthropic-opus-5m"),
        ("claude-sonnet-4-20250514", "anthropic-sonnet-5m"),
        ("claude-sonnet-5", "anthropic-sonnet-5m"),
        ("claude-haiku-4-5", "anthropic-haiku-4.5-5m"),
        ("claude-3-5-haiku-latest", "anthropic-haiku-5m"),
        ("claude-3-7-sonnet-latest", "anthropic-sonnet-5m"),
    ],
)
def test_a_models_name_chooses_its_profile(model: str, profile: str) -> None:
    found = model_profile(model)
    assert found is not None and found.name == profile
    assert profile_for("openai", model=model) == CACHE_PROFILES[profile]


@pytest.mark.parametrize(
    ("provider", "model", "default"),
    [
        ("openai", "my-finetune-7", "openai-gpt-5"),
        ("anthropic", "claude-test-7", "anthropic-sonnet-5m"),
    ],
)
def test_an_unknown_model_gets_its_providers_default_and_one_warning(
    provider: str, model: str, default: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert model_profile(model) is None
    with caplog.at_level("WARNING", logger="stm_memory"):
        for _ in range(3):
            assert profile_for(provider, model=model) == CACHE_PROFILES[default]
    warned = [r for r in caplog.records if model in r.getMessage()]
    assert len(warned) == 1
    assert "cache_profile=" in warned[0].getMessage()


def test_the_offline_models_bill_as_their_providers_default_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="stm_memory"):
        assert profile_for("anthropic", model="offline") == CACHE_PROFILES["anthropic-sonnet-5m"]
        assert profile_for("openai", model="offline") == CACHE_PROFILES["openai-gpt-5"]
    assert not caplog.records


def test_a_configured_profile_wins_over_the_models() -> None:
    chosen = profile_for("openai", "openai-gpt-4.1", model="gpt-5.6")
    assert chosen == CACHE_PROFILES["openai-gpt-4.1"]


@pytest.mark.parametrize(
    ("model", "retention", "profile"),
    [
        # Anthropic's 1-hour TTL is billed 2x to write: the family's 1-hour profile.
        ("claude-haiku-4-5", timedelta(hours=1), "anthropic-haiku-4.5-1h"),
        ("claude-opus-5", timedelta(minutes=5), "anthropic-opus-5-5m"),
        # OpenAI's extended retention.
        ("gpt-5-mini", timedelta(hours=24), "openai-gpt-5-24h"),
        ("gpt-4.1", timedelta(hours=24), "openai-gpt-4.1-24h"),
    ],
)
def test_the_retention_a_request_asks_for_chooses_the_variant(
    model: str, retention: timedelta, profile: str
) -> None:
    assert profile_for(None, model=model, retention=retention) == CACHE_PROFILES[profile]


def test_a_retention_without_a_profile_of_its_own_keeps_the_rates() -> None:
    chosen = profile_for("openai", model="gpt-5.6", retention=timedelta(hours=12))
    assert chosen.ttl == timedelta(hours=12)
    assert (chosen.read_multiplier, chosen.write_multiplier) == (0.1, 1.25)


# -- the swap decision, family by family --------------------------------------------------
# Swapping pays when horizon × read × (held − swapped) > write × swapped − read × held:
# a write premium moves the line. Held 3,000 tokens against 1,000 swapped, after a
# 1,600-token system prompt.


def inputs(age: int, *, idle: timedelta | None = None, held: int = 3000) -> SwapInputs:
    return SwapInputs(
        known=True, differs=True, held=held, swapped=1000, before=1600, idle=idle, age=age
    )


@pytest.mark.parametrize(
    ("profile", "case", "rule"),
    [
        # Four turns ahead: 800 saved; re-billing costs 700 with free writes, 950 at 1.25x.
        ("openai-gpt-5-24h", inputs(4), "pays"),
        ("openai-gpt-5.5", inputs(4), "pays"),
        ("openai-gpt-5.6", inputs(4), "hold"),
        ("anthropic-sonnet-5m", inputs(4), "hold"),
        # Six turns ahead: 1,200 saved; 950 at 1.25x, 1,700 at Anthropic's 1-hour 2x.
        ("openai-gpt-5.6", inputs(6), "pays"),
        ("anthropic-sonnet-5m", inputs(6), "pays"),
        ("anthropic-sonnet-1h", inputs(6), "hold"),
        # Twenty minutes idle: gone from a minutes-long cache, kept by gpt-5.6's 30.
        ("openai-gpt-5", inputs(1, idle=timedelta(minutes=20)), "lapsed"),
        ("openai-gpt-5.6", inputs(1, idle=timedelta(minutes=20)), "hold"),
        # A 1,900-token prompt: under Haiku 4.5's 4,096 minimum, over Opus 5's 512.
        ("anthropic-haiku-4.5-5m", inputs(1, held=300), "uncached"),
        ("anthropic-opus-5-5m", inputs(1, held=300), "hold"),
    ],
)
def test_the_swap_decision_follows_each_familys_rates(
    profile: str, case: SwapInputs, rule: str
) -> None:
    assert decide(case, CACHE_PROFILES[profile]).rule == rule


@pytest.mark.parametrize(
    ("settings", "retention"),
    [
        ({"prompt_cache_retention": "24h"}, timedelta(hours=24)),
        ({"prompt_cache_options": {"ttl": "30m"}}, timedelta(minutes=30)),
        ({"prompt_cache_options": {"mode": "explicit", "ttl": "12h"}}, timedelta(hours=12)),
        ({"prompt_cache_options": {"mode": "implicit"}}, None),
        ({}, None),
    ],
)
def test_the_retention_a_request_asks_for_is_read_from_its_settings(
    settings: dict[str, object], retention: timedelta | None
) -> None:
    assert cache_retention(settings) == retention
