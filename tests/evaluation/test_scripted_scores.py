"""The harness scores the scripted models as they were constructed, for every strategy.

Each scripted model is a perfect reader of its prompt, so what it answers right is
exactly what a strategy put in front of it: these tests predict each answer from the
conversation set and the strategy's rule, and compare.
"""

from __future__ import annotations

from stm_memory.evaluation import (
    DEFAULT_STRATEGIES,
    ConversationSet,
    EvalReport,
    Probe,
    StrategyResult,
    dropped_facts,
)


def _right(result: StrategyResult) -> dict[str, bool]:
    return {p.probe_id: p.correct for p in result.probes}


def _last_change(conversation: ConversationSet, probe: Probe) -> int:
    fact = conversation.fact(probe.fact_id)
    return max(t for t in (fact.planted_at, *fact.corrected_at) if t < probe.turn)


def test_every_strategy_ran_and_answered_every_probe(
    perfect: EvalReport, conversation: ConversationSet
) -> None:
    assert [s.key for s in perfect.strategies] == list(DEFAULT_STRATEGIES)
    for result in perfect.strategies:
        assert result.skipped is None
        assert [p.probe_id for p in result.probes] == [p.id for p in conversation.probes]
        assert len(result.turns) == len(conversation.turns)


def test_full_history_of_the_whole_server_recalls_everything(perfect: EvalReport) -> None:
    assert perfect.strategy("full-server").recall.overall.rate == 1.0


def test_full_history_per_channel_recalls_exactly_its_own_channel(
    perfect: EvalReport, conversation: ConversationSet
) -> None:
    result = perfect.strategy("full-history")
    expected = {p.id: p.kind == "same_channel" for p in conversation.probes}
    assert _right(result) == expected
    assert result.recall.same_channel.rate == 1.0
    assert result.recall.cross_channel.rate == 0.0


def test_the_window_loses_exactly_the_facts_older_than_it(
    perfect: EvalReport, conversation: ConversationSet
) -> None:
    window = 6  # StrategyOptions().window_turns
    position: dict[int, int] = {}
    seen: dict[str, int] = {}
    for turn in conversation.turns:  # each turn's place in its own channel
        position[turn.index] = seen[turn.channel] = seen.get(turn.channel, -1) + 1
    expected = {}
    for probe in conversation.probes:
        age = position[probe.turn] - position[_last_change(conversation, probe)]
        expected[probe.id] = probe.kind == "same_channel" and age <= window
    assert _right(perfect.strategy("window")) == expected
    # Both sides of the window are exercised.
    assert True in expected.values() and any(
        p.kind == "same_channel" and not expected[p.id] for p in conversation.probes
    )


def test_ours_with_the_perfect_model(perfect: EvalReport, conversation: ConversationSet) -> None:
    for key in ("stm-loop", "stm-middleware"):
        result = perfect.strategy(key)
        assert result.recall.same_channel.rate == 1.0, key
        assert result.extra_calls == 0, key  # the memory rides along in the answer
        # Rewritten several times in every channel.
        assert result.memory_writes >= 2 * len(conversation.channels), key
        # Another channel knows a fact once the fact's channel has written its memory
        # after the fact's last change (the briefing shows that memory, not raw turns).
        writes = [t for t in result.turns if t.memory_written]
        for probe in conversation.probes:
            if probe.kind != "cross_channel":
                continue
            fact = conversation.fact(probe.fact_id)
            since = _last_change(conversation, probe)
            briefed = any(
                t.channel == fact.channel and since <= t.index < probe.turn for t in writes
            )
            assert _right(result)[probe.id] == briefed, (key, probe)
        per_channel = perfect.strategy("full-history").recall.cross_channel.rate or 0.0
        assert (result.recall.cross_channel.rate or 0.0) > per_channel, key


def test_the_model_that_never_calls_the_tool_recalls_less_under_ours(
    long_perfect: EvalReport, toolless: EvalReport
) -> None:
    ours, never = long_perfect.strategy("stm-loop"), toolless.strategy("stm-loop")
    assert never.memory_writes == 0
    assert never.recall.overall.correct < ours.recall.overall.correct
    # What it misses is what only the memory carried: other channels' facts.
    assert never.recall.cross_channel.correct < ours.recall.cross_channel.correct


def test_the_forgetful_model_misses_only_facts_it_drops(
    perfect: EvalReport, forgetful: EvalReport, conversation: ConversationSet
) -> None:
    dropped = dropped_facts(conversation)
    assert dropped
    for key in ("stm-loop", "summarization"):
        good, bad = _right(perfect.strategy(key)), _right(forgetful.strategy(key))
        lost = [p for p in conversation.probes if good[p.id] and not bad[p.id]]
        assert all(p.fact_id in dropped for p in lost), key
        assert not any(bad[p] and not good[p] for p in good), key  # it never gains
    assert (
        forgetful.strategy("stm-loop").recall.overall.correct
        < perfect.strategy("stm-loop").recall.overall.correct
    )


def test_summarization_calls_its_summarizer(perfect: EvalReport) -> None:
    result = perfect.strategy("summarization")
    assert result.extra_calls >= 1
    assert sum(len(t.side_requests) for t in result.turns) == result.extra_calls
    assert result.recall.same_channel.rate == 1.0  # the perfect summarizer keeps all
    assert result.recall.cross_channel.rate == 0.0  # one thread per channel


def test_a_scripted_report_says_it_measures_the_harness(perfect: EvalReport) -> None:
    assert perfect.scripted == "perfect"
    assert "measure the harness" in perfect.notice and "not any real model" in perfect.notice
    assert perfect.notice in perfect.to_markdown()
    assert perfect.to_dict()["notice"] == perfect.notice
