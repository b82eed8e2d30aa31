"""Cost: the prompt-cache model re-applied to each strategy's recorded requests gives the
reported figure; the API's usage is kept beside it; a real run is estimated first and
``max_cost`` stops it before anything is sent."""

from __future__ import annotations

import pytest

from stm_memory.errors import ConfigurationError
from stm_memory.evaluation import (
    BudgetExceeded,
    EvalReport,
    ScriptedModel,
    estimate_cost,
    generate_conversation,
    run_eval,
)
from stm_memory.testing import CACHE_PROFILES, CacheUsage, PromptCache, offline_openai_client
from stm_memory.tool.turn import TOOL_NAME


def test_each_strategys_cost_is_the_prompt_cache_model_over_its_requests(
    perfect: EvalReport,
) -> None:
    profile = CACHE_PROFILES[perfect.cache_profile]
    for result in perfect.strategies:
        cache = PromptCache(profile)  # one customer per strategy
        usage, output = CacheUsage(0), 0
        for turn in result.turns:
            for request in (*turn.side_requests, *turn.requests):
                usage = usage + cache.observe(request.body, at=turn.at, api=request.api)
            output += turn.output_tokens + turn.side_output_tokens
        cost = result.cost
        assert (cost.input_tokens, cost.cached_tokens, cost.cache_write_tokens) == (
            usage.input_tokens,
            usage.cached_tokens,
            usage.cache_write_tokens,
        ), result.key
        assert cost.output_tokens == output > 0, result.key
        assert cost.units == pytest.approx(usage.cost(profile, output_tokens=output)), result.key


def test_the_recorded_requests_are_what_was_sent(perfect: EvalReport) -> None:
    loop = perfect.strategy("stm-loop")
    tools = {t["function"]["name"] for t in loop.turns[-1].requests[0].body["tools"]}
    assert TOOL_NAME in tools  # ours offers the memory tool ...
    window = perfect.strategy("window")
    assert "tools" not in window.turns[-1].requests[0].body  # ... the window none
    assert len(window.turns[-1].requests[0].body["messages"]) == 1 + 2 * 6 + 1


def test_the_usage_the_api_reports_is_kept_beside_the_model(perfect: EvalReport) -> None:
    for result in perfect.strategies:
        # The offline provider counts the same bodies with the same tokenizer; what it
        # serves from its cache differs (its requests come back to back).
        assert result.reported.input_tokens == result.cost.input_tokens, result.key
        assert result.reported.output_tokens > 0, result.key


def _client_model(turns: int = 16) -> tuple[object, ScriptedModel]:
    conversation = generate_conversation(seed=3, turns=turns)
    model = ScriptedModel(conversation=conversation)
    return offline_openai_client(model), model


def test_a_real_run_is_estimated_first_and_max_cost_stops_it_before_any_call() -> None:
    client, model = _client_model()
    conversation = generate_conversation(seed=3, turns=16)
    kwargs = {
        "conversation": conversation,
        "model_name": "gpt-4.1-mini",
        "strategies": ["stm-loop", "full-history"],
    }
    estimate = estimate_cost(client, **kwargs)  # type: ignore[arg-type]
    assert estimate.usd is not None and estimate.usd > 0
    assert estimate.cache_profile == "openai-gpt-4.1"
    assert model.calls == 0  # estimating calls no model
    seen = []
    with pytest.raises(BudgetExceeded, match="nothing was sent"):
        run_eval(client, max_cost=estimate.usd / 10, on_estimate=seen.append, **kwargs)  # type: ignore[arg-type]
    assert seen == [estimate]
    assert model.calls == 0


def test_a_client_runs_through_our_loop_and_through_langchain() -> None:
    client, model = _client_model()
    report = run_eval(
        client,
        conversation=generate_conversation(seed=3, turns=16),
        model_name="gpt-4.1-mini",
        strategies=["stm-loop", "full-history"],
        max_cost=5.0,
    )
    assert report.scripted is None and "not a benchmark" in report.notice
    assert model.calls == sum(s.model_calls for s in report.strategies) > 0
    for result in report.strategies:
        assert result.cost.usd is not None and result.cost.usd > 0
        assert result.reported.usd is not None


def test_max_cost_needs_a_price() -> None:
    client, _ = _client_model()
    with pytest.raises(ConfigurationError, match="needs a price"):
        run_eval(client, model_name="my-own-model", turns=16, max_cost=1.0)


def test_the_spend_is_checked_while_the_run_goes() -> None:
    from stm_memory.evaluation._pricing import Price
    from stm_memory.evaluation._recording import RecordedTurn
    from stm_memory.evaluation._runner import _Budget
    from stm_memory.kit import Usage
    from stm_memory.testing import FrozenClock

    budget = _Budget(0.001, CACHE_PROFILES["openai-gpt-5"], Price(1.0, 1.0))
    turn = RecordedTurn(0, "c", FrozenClock()(), (), reported=Usage(600, 0))
    budget.charge(turn)  # $0.0006
    with pytest.raises(BudgetExceeded, match="spent"):
        budget.charge(turn)


def test_an_anthropic_client_runs_our_anthropic_loop_priced_as_anthropic_bills() -> None:
    from stm_memory.testing import offline_anthropic_client

    conversation = generate_conversation(seed=3, turns=16)
    model = ScriptedModel(conversation=conversation)
    report = run_eval(
        offline_anthropic_client(model),
        conversation=conversation,
        model_name="claude-haiku-4-5",
        strategies=["stm-loop"],
    )
    assert report.cache_profile == "anthropic-haiku-4.5-5m"
    result = report.strategy("stm-loop")
    assert {r.api for t in result.turns for r in t.requests} == {"anthropic"}
    assert "system" in result.turns[0].requests[0].body  # a Messages body, as sent
    assert result.recall.overall.total == len(conversation.probes)
    assert result.cost.usd is not None and model.calls == result.model_calls


def test_a_model_without_usage_is_charged_its_requests_uncached() -> None:
    from stm_memory.evaluation._pricing import Price
    from stm_memory.evaluation._recording import RecordedRequest, RecordedTurn
    from stm_memory.evaluation._runner import _Budget
    from stm_memory.testing import FrozenClock

    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 4000}]}
    turn = RecordedTurn(0, "c", FrozenClock()(), (RecordedRequest("openai_chat", body),))
    budget = _Budget(0.0005, CACHE_PROFILES["openai-gpt-5"], Price(1.0, 1.0))
    with pytest.raises(BudgetExceeded):
        budget.charge(turn)  # about 1,000 tokens at $1 per million: above $0.0005


def test_under_a_breakpoint_profile_the_middleware_is_recorded_with_its_breakpoints() -> None:
    # gpt-5.6 and later match a cached prefix only at a breakpoint: the scripted model
    # stands in for such a model, so create_agent's middleware marks its requests as it
    # would for ChatOpenAI(model="gpt-5.6"), and the recording keeps the marks (as
    # ChatOpenAI sends them) for the cache model to bill.
    from stm_memory.wire.base import breakpoints_in

    report = run_eval(
        "scripted:perfect",
        conversation=generate_conversation(seed=7, turns=24),
        strategies=("stm-loop", "stm-middleware"),
        cache_profile="openai-gpt-5.6",
    )
    loop, middleware = report.strategy("stm-loop"), report.strategy("stm-middleware")
    for result in (loop, middleware):
        body = result.turns[-1].requests[0].body
        assert body["model"] == "gpt-5.6", result.key
        assert sum(breakpoints_in(m) for m in body["messages"]) >= 1, result.key
    # Marked alike, billed alike (before, the middleware's unmarked requests missed the
    # cache the loop's hit: 1.8x the loop at 60 turns).
    assert middleware.cost.units == pytest.approx(loop.cost.units, rel=0.05)
