"""A model that writes its tool calls as text (``scripted:textcalls``), with and without
``writer=`` (the ``stm-writer`` strategy): no answer is our tool's JSON, one extra call
in all without a writer, and the writer's calls bring the recall back, reported as the
extra calls they are."""

from __future__ import annotations

import json

import pytest

from stm_memory import TOOL_NAME
from stm_memory.evaluation import ConversationSet, EvalReport, run_eval


@pytest.fixture(scope="module")
def textcalls(long_conversation: ConversationSet) -> EvalReport:
    return run_eval(
        "scripted:textcalls",
        conversation=long_conversation,
        strategies=["stm-loop", "stm-middleware", "stm-writer", "full-history"],
    )


def test_no_answer_is_the_tools_json(textcalls: EvalReport) -> None:
    for key in ("stm-loop", "stm-middleware", "stm-writer"):
        result = textcalls.strategy(key)
        assert all(TOOL_NAME not in turn.answer for turn in result.turns), key


def test_without_a_writer_the_one_extra_call_is_the_first_retry(textcalls: EvalReport) -> None:
    for key in ("stm-loop", "stm-middleware"):
        result = textcalls.strategy(key)
        assert result.extra_calls == 1, key
        assert result.memory_writes == 1, key  # the call written as text, run as the write
        # From then on no tool in any request.
        later = [r for turn in result.turns[1:] for r in turn.requests]
        assert all(TOOL_NAME not in json.dumps(r.body.get("tools", [])) for r in later), key


def test_a_writer_recalls_what_the_full_history_does_and_more(textcalls: EvalReport) -> None:
    writer, full = textcalls.strategy("stm-writer"), textcalls.strategy("full-history")
    loop = textcalls.strategy("stm-loop")
    assert writer.recall.same_channel.rate >= full.recall.same_channel.rate
    assert writer.recall.cross_channel.rate > max(full.recall.cross_channel.rate, 0.5)
    assert writer.recall.overall.rate > loop.recall.overall.rate
    # Its calls are side calls, each an extra call, and the turn model is sent no tool.
    side = sum(len(turn.side_requests) for turn in writer.turns)
    assert writer.extra_calls == side > 0
    assert writer.memory_writes == side
    sent = [r for turn in writer.turns for r in turn.requests]
    assert all(not r.body.get("tools") for r in sent)
