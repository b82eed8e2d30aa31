"""A long turn's cleared results are kept in the live cache (stm_memory/live/results.py):
a later turn of the same user in the same channel reads one back byte for byte, even
when its caller sends only the new message; another scope's id, an expired result, an
erased user or channel is a failed tool result naming the problem, never the text."""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers.factory import MemFactory
from helpers.long_turn import begin, doc, transcript
from helpers.memory import SERVER

from stm_memory import ShortTermMemory
from stm_memory._ops import drive
from stm_memory.kit import Ask
from stm_memory.live.replay import evict_deleted
from stm_memory.model import RESULTS_PREFIX, Scope
from stm_memory.prompt.clearing import RECALL_TOOL
from stm_memory.testing.clock import FrozenClock
from stm_memory.wire.openai_chat import CHAT_WIRE


def long_turn(mem: ShortTermMemory, scope: Scope = SERVER, reads: int = 16) -> list[str]:
    """One turn of ``reads`` reads, a request per step, finished; the ids it cleared."""
    turn = begin(mem, scope)
    for n in range(1, reads + 1):
        turn.prepare(transcript(n), wire=CHAT_WIRE, ask=Ask(recall=True))
    record = [*transcript(reads), {"role": "assistant", "content": "All read."}]
    drive(turn.finish(record, start=0))
    return [r.call_id for r in turn._long_turn().cleared()]


def recall(mem: ShortTermMemory, call_id: str, scope: Scope = SERVER, offset: int = 0) -> str:
    """What a later turn's retrieval call answers, its caller sending nothing but the
    new message (no record to read the result from)."""
    turn = begin(mem, scope)
    turn.prepare([{"role": "user", "content": "What did report 0 say?"}], wire=CHAT_WIRE)
    return drive(turn.recall_call({"call_id": call_id, "offset": offset}))


def failed(answer: str) -> str:
    parsed = json.loads(answer)
    assert parsed["status"] == "tool_execution_failed" and parsed["tool_name"] == RECALL_TOOL
    return str(parsed["reason"])


@pytest.fixture(params=["disk", "redis"])
def cached(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    if request.param == "redis":
        request.getfixturevalue("redis_url")
    return make_mem(cache=request.param)


def test_a_later_turn_reads_a_cleared_result_back_byte_for_byte(cached: ShortTermMemory) -> None:
    cleared = long_turn(cached)
    assert "call_0" in cleared and len(cleared) >= 8
    assert recall(cached, "call_0") == doc(0)
    assert recall(cached, cleared[-1]) == doc(int(cleared[-1].removeprefix("call_")))


def test_another_scopes_id_is_a_failure_never_its_text(cached: ShortTermMemory) -> None:
    long_turn(cached)
    for other in (
        dataclasses.replace(SERVER, user_id="u2"),  # another user, same channel
        dataclasses.replace(SERVER, channel_id="c2"),  # same user, another channel
    ):
        answer = recall(cached, "call_0", other)
        assert "No tool result with call id 'call_0'" in failed(answer)
        assert "Report 0" not in answer


def test_forgetting_the_user_or_the_channel_erases_kept_results(cached: ShortTermMemory) -> None:
    long_turn(cached)
    long_turn(cached, dataclasses.replace(SERVER, channel_id="c2"))
    cached.clear_channel("c1")
    assert "No tool result" in failed(recall(cached, "call_0"))
    assert recall(cached, "call_0", dataclasses.replace(SERVER, channel_id="c2")) == doc(0)
    cached.clear_user("u1")
    assert "No tool result" in failed(
        recall(cached, "call_0", dataclasses.replace(SERVER, channel_id="c2"))
    )
    assert list(cached._cache.iter_keys(RESULTS_PREFIX)) == []


def test_a_later_turn_never_keeps_again_what_was_erased(mem: ShortTermMemory) -> None:
    """The caller's thread still holds the erased user's results: a later turn clears
    them again in its requests, but keeps only what its own calls returned."""
    long_turn(mem)
    mem.clear_user("u1")
    turn = begin(mem)
    later = [*transcript(16), {"role": "assistant", "content": "All read."}]
    later.append({"role": "user", "content": "Thanks."})
    turn.prepare(later, wire=CHAT_WIRE, ask=Ask(recall=True))
    drive(turn.finish([*later, {"role": "assistant", "content": "You're welcome."}], start=0))
    assert list(mem._cache.iter_keys(RESULTS_PREFIX)) == []


def test_kept_results_expire_with_a_summarised_entrys_life(
    mem: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    long_turn(mem)
    fake_clock.advance(mem.limits.summary_ttl)
    assert "No tool result" in failed(recall(mem, "call_0"))


def test_a_user_in_full_privacy_has_nothing_kept(mem: ShortTermMemory) -> None:
    long_turn(mem)
    mem.configure_user("u1", full_privacy=True)
    assert list(mem._cache.iter_keys(RESULTS_PREFIX)) == []  # what was kept leaves
    long_turn(mem)
    assert list(mem._cache.iter_keys(RESULTS_PREFIX)) == []  # and nothing new is kept


def test_bad_input_to_a_kept_result_names_the_problem(mem: ShortTermMemory) -> None:
    long_turn(mem)
    assert "past the result's end" in failed(recall(mem, "call_0", offset=10**6))
    assert "call_id must be" in failed(drive(begin(mem).recall_call({"call_id": 3})))


def test_a_deletion_replayed_after_an_outage_reaches_kept_results(mem: ShortTermMemory) -> None:
    long_turn(mem)
    long_turn(mem, dataclasses.replace(SERVER, user_id="u2"))
    evict_deleted(mem._cache, [("user", "u1")])
    assert "No tool result" in failed(recall(mem, "call_0"))
    assert recall(mem, "call_0", dataclasses.replace(SERVER, user_id="u2")) == doc(0)
    evict_deleted(mem._cache, [("channel", "c1")])
    assert list(mem._cache.iter_keys(RESULTS_PREFIX)) == []
