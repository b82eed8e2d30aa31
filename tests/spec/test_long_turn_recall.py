"""A long turn's results (stm_memory.kit.long_turn): what left stays left in the same
bytes, the retrieval tool returns a result byte for byte, page by page, and bad input
is a failed tool result naming the problem."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from helpers import long_turn

from stm_memory import ConfigurationError, TurnOptions
from stm_memory.kit.long_turn import RECALL_SPEC, LongTurn
from stm_memory.prompt.clearing import INDEX_TITLE, RECALL_TOOL, ClearingRule, turn_results
from stm_memory.prompt.tokens import text_tokens


def doc(k: int) -> str:
    return long_turn.doc(k, lines=120)


def transcript(reads: int) -> list[dict[str, Any]]:
    return long_turn.transcript(reads, system="You read reports.", document=doc)


def tokens(messages: Any) -> int:
    return sum(text_tokens(json.dumps(m)) for m in messages)


def steps(long: LongTurn, reads: int) -> list[list[Any]]:
    """The requests of a turn that reads ``reads`` reports, one per step."""
    sent = []
    for n in range(1, reads + 1):
        messages = transcript(n)
        sent.append(long.placed(messages, messages, tokens))
    return sent


def test_a_long_turn_stays_in_its_window_and_each_batch_rewrites_once() -> None:
    window = 24_576
    long = LongTurn(ClearingRule(window=window))
    sent = steps(long, 40)  # 40 reports of ~1,700 tokens: 68k read
    assert max(tokens(r) for r in sent) <= 0.75 * window
    # Every request extends the one before, except where a batch left: few rewrites.
    rewrites = sum(1 for a, b in itertools.pairwise(sent) if b[: len(a)] != a)
    assert 1 <= rewrites <= 12  # ten blocks of ~6k tokens, and the high mark's
    # What left stays left, in the same bytes, in every later request.
    first = next(r for r in sent if "cleared" in json.dumps(r[3]))
    assert all(r[3] == first[3] for r in sent[sent.index(first) :])
    # Never the newest: the last request holds the last three reports whole.
    assert [m["content"] for m in sent[-1][-5::2]] == [doc(37), doc(38), doc(39)]
    assert long.offered


def test_a_cleared_result_comes_back_byte_for_byte_page_by_page() -> None:
    long = LongTurn(ClearingRule(window=8_192))
    steps(long, 12)
    # Each report is over an eighth of this window: it enters as its head and a handle.
    head = long.placed(transcript(12), transcript(12), tokens)[3]["content"]
    assert head.startswith("[Result of open (call call_0)") and doc(0) not in head
    text, offset, pages = "", 0, 0
    while True:
        page = long.recall({"call_id": "call_0", "offset": offset})
        pages += 1
        more = page.rfind("\n[")
        if f"{RECALL_TOOL}(" in page[more:] and more >= 0:
            text += page[:more]
            offset = int(page[more:].split("offset=")[1].rstrip(")]"))
        else:
            text += page
            break
    assert text == doc(0) and pages > 1
    # JSON text, as a model's arguments arrive, reads the same.
    assert long.recall(json.dumps({"call_id": "call_0"})).startswith(doc(0)[:200])


def test_a_result_the_input_still_holds_comes_back_too() -> None:
    """An earlier long turn's results the history cut dropped (a batch's worth): the
    request names each in an index, the tool is offered, and reads them from the
    caller's record."""
    long = LongTurn(ClearingRule(window=8_192))
    messages = transcript(2)
    index = long.index(messages, lambda: messages[:2])  # the request dropped both
    assert index is not None and index.startswith(INDEX_TITLE)
    assert index.splitlines()[1:] == [
        "- call_0 (open): Report 0, line 0: the committee deferred item 0.",
        "- call_1 (open): Report 1, line 0: the committee deferred item 0.",
    ]
    long.placed(messages, messages[:2], tokens)
    assert long.offered
    assert long.index(messages, lambda: []) == index  # decided once a turn
    page = long.recall({"call_id": "call_1"})
    assert page.startswith(doc(1)[: long.page]) and f"offset={long.page})" in page


def test_a_few_small_results_the_cut_dropped_do_not_bring_the_tool() -> None:
    """A conversation with tools whose earlier turns the cut drops keeps its tool list
    (and its cached prefix): a result is still read back if asked for."""
    long = LongTurn(ClearingRule(window=128_000))
    messages = transcript(2)
    assert long.index(messages, lambda: messages[:2]) is None
    long.placed(messages, messages[:2], tokens)
    assert not long.offered
    assert long.recall({"call_id": "call_0"}) == doc(0)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"call_id": "call_99"}, "No tool result with call id 'call_99'"),
        ({"call_id": ""}, "call_id must be"),
        ({"call_id": 7}, "call_id must be"),
        ({}, "call_id must be"),
        ({"call_id": "call_0", "offset": -1}, "offset must be"),
        ({"call_id": "call_0", "offset": "2"}, "offset must be"),
        ({"call_id": "call_0", "offset": 10**9}, "past the result's end"),
        ("not json", "JSON object"),
        (["call_0"], "JSON object"),
    ],
)
def test_bad_input_is_a_failed_result_naming_the_problem(arguments: Any, problem: str) -> None:
    long = LongTurn(ClearingRule(window=8_192))
    steps(long, 12)
    answer = json.loads(long.recall(arguments))
    assert answer["status"] == "tool_execution_failed" and answer["tool_name"] == RECALL_TOOL
    assert problem in answer["reason"]


def test_no_result_is_missing_until_one_leaves() -> None:
    long = LongTurn(ClearingRule(window=1_000_000))
    for request in steps(long, 5):
        assert turn_results(request)[-1].text == doc(len(turn_results(request)) - 1)
    assert not long.offered


def test_a_refused_request_clears_all_but_the_newest() -> None:
    long = LongTurn(ClearingRule(window=1_000_000))
    messages = transcript(6)
    assert long.placed(messages, messages, tokens) == messages  # nothing due
    assert long.refit(messages)
    after = long.placed(messages, messages, tokens)
    kept = [r.call_id for r in turn_results(after) if "cleared" not in r.text]
    assert kept == ["call_5"]
    assert not long.refit(messages)  # nothing left to clear: the refusal stands


def test_the_retrieval_tool_takes_one_required_string() -> None:
    params = RECALL_SPEC.parameters
    assert params["required"] == ["call_id"]
    assert params["properties"]["call_id"]["type"] == "string"
    assert RECALL_SPEC.name == RECALL_TOOL and not RECALL_SPEC.strict


def test_results_of_the_tools_the_caller_keeps_never_leave() -> None:
    long = LongTurn(ClearingRule(window=8_192), keep=("open",))
    for request in steps(long, 12):
        assert all(
            "cleared" not in r.text and "at once" not in r.text for r in turn_results(request)
        )
    messages = transcript(12)
    assert not long.refit(messages)  # nothing of the turn may leave: the refusal stands


def test_keep_tool_results_takes_names() -> None:
    assert TurnOptions(keep_tool_results=["plan", "todo"]).keep_tool_results == ("plan", "todo")
    with pytest.raises(ConfigurationError, match="list of tool names"):
        TurnOptions(keep_tool_results="plan")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="non-empty"):
        TurnOptions(keep_tool_results=["plan", " "])


def test_a_later_turn_sends_an_earlier_long_turn_as_its_own_last_request_did() -> None:
    """The history cut keeps an earlier long turn: its results are cleared as they were
    in that turn, in the same bytes, so the next turn's request extends the last one
    (decided from the results alone; a request pushed past the high mark clears more,
    which a smaller later request may send whole again)."""
    first = LongTurn(ClearingRule(window=65_536))
    last = steps(first, 20)[-1]
    answered = [*transcript(20), {"role": "assistant", "content": "All read."}]
    later = [*answered, {"role": "user", "content": "What did report 0 say?"}]
    sent = LongTurn(ClearingRule(window=65_536)).placed(later, later, tokens)
    assert "cleared" in json.dumps(last) and sent[: len(last)] == last
