"""A later turn whose history cut leaves out an earlier long turn names its results in
an index beside the memory (stm_memory/prompt/clearing.py, ``results_index``): the
call id, the tool, the start of each result. The retrieval tool comes with it, so the
model asks for one by an id the request shows; what erasure removed is never named."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from helpers.long_turn import begin, doc, transcript
from helpers.memory import SERVER

from stm_memory import ShortTermMemory
from stm_memory._ops import drive
from stm_memory.kit import Ask
from stm_memory.model import Scope
from stm_memory.prompt.clearing import INDEX_TITLE
from stm_memory.wire.openai_chat import CHAT_WIRE

ASK = {"role": "user", "content": "What did report 0 say?"}


def read_turn(mem: ShortTermMemory, record: list[dict[str, Any]], scope: Scope, reads: int) -> None:
    """A turn of ``scope``'s user reading ``reads`` reports, appended to ``record``."""
    turn = begin(mem, scope)
    start = len(record)
    record.append({"role": "user", "content": "Read every report.", "user_id": scope.user_id})
    for message in transcript(reads)[1:]:
        record.append(message)
        turn.prepare(record, wire=CHAT_WIRE, ask=Ask(recall=True))
    record.append({"role": "assistant", "content": "All read."})
    drive(turn.finish(record, start=start))


def written(mem: ShortTermMemory, scope: Scope = SERVER) -> None:
    turn = mem.begin_turn(scope)
    assert mem.update(turn, {"summary": "The user had the reports read."})["status"] == "completed"
    mem.end_turn(turn)


def test_a_later_turn_names_the_results_the_cut_left_out(mem: ShortTermMemory) -> None:
    record: list[dict[str, Any]] = []
    read_turn(mem, record, SERVER, 16)
    written(mem)  # the memory now covers the long turn: the cut leaves it out
    turn = begin(mem)
    request = turn.prepare([*record, ASK], wire=CHAT_WIRE, ask=Ask(recall=True))
    text = json.dumps(request.messages)
    assert "Report 3, line 1" not in text  # the turn itself is left out
    assert INDEX_TITLE in text and "- call_0 (open): Report 0, line 0" in text
    assert request.recall_spec is not None
    assert drive(turn.recall_call({"call_id": "call_0"})) == doc(0)
    # Fixed for the turn: its next request extends this one.
    more = [*record, ASK, {"role": "assistant", "content": "Reading it."}]
    again = turn.prepare(more, wire=CHAT_WIRE, ask=Ask(recall=True))
    assert again.messages[: len(request.messages)] == request.messages


def test_an_entry_point_without_the_retrieval_tool_gets_no_index(mem: ShortTermMemory) -> None:
    record: list[dict[str, Any]] = []
    read_turn(mem, record, SERVER, 16)
    written(mem)
    request = begin(mem).prepare([*record, ASK], wire=CHAT_WIRE)
    assert INDEX_TITLE not in json.dumps(request.messages) and request.recall_spec is None


def test_an_erased_users_results_are_never_named(mem: ShortTermMemory) -> None:
    other = dataclasses.replace(SERVER, user_id="u2")
    record: list[dict[str, Any]] = []
    read_turn(mem, record, other, 16)
    written(mem, other)
    mem.clear_user("u2")
    turn = begin(mem)
    request = turn.prepare([*record, ASK], wire=CHAT_WIRE, ask=Ask(recall=True))
    text = json.dumps(request.messages)
    assert INDEX_TITLE not in text and "Report 0" not in text
    answer = json.loads(drive(turn.recall_call({"call_id": "call_0"})))
    assert answer["status"] == "tool_execution_failed"  # not from the thread either
