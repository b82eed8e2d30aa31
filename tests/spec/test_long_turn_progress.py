"""Progress survives a long turn: before its first batch of tool results leaves, one
request asks the model to note its progress with the memory tool, in the step it takes
anyway (the note stands at the request's end, for that request alone: the next request
extends the one before it). Once a turn (SPEC: one memory update per turn), never once
the memory was written, never in the portable form."""

from __future__ import annotations

import json
from typing import Any

from helpers.long_turn import transcript
from helpers.memory import SERVER

from stm_memory import ShortTermMemory, TurnOptions
from stm_memory._ops import drive
from stm_memory.kit import Ask, MemoryTurn, PreparedRequest
from stm_memory.prompt.clearing import ClearingRule, block_due, turn_results
from stm_memory.prompt.render import progress_text
from stm_memory.wire.openai_chat import CHAT_WIRE

NOTE = progress_text()


def requests(mem: ShortTermMemory, reads: int = 16, **options: Any) -> list[PreparedRequest]:
    turn = drive(
        MemoryTurn.begin(mem, SERVER, options=TurnOptions(context_window=8_192, **options))
    )
    drive(turn.assemble())
    return [
        turn.prepare(transcript(n), wire=CHAT_WIRE, ask=Ask(recall=True))
        for n in range(1, reads + 1)
    ]


def noted(request: PreparedRequest) -> bool:
    return any(NOTE in json.dumps(m) for m in request.messages)


def test_one_request_asks_before_the_first_batch_leaves(mem: ShortTermMemory) -> None:
    sent = requests(mem)
    asked = [i for i, r in enumerate(sent) if noted(r)]
    assert len(asked) == 1
    (at,) = asked
    cleared = [
        i for i, r in enumerate(sent) if "cleared from this request" in json.dumps(r.messages)
    ]
    # Asked while the model still sees what it read; the batch leaves a few steps later.
    assert "cleared from this request" not in json.dumps(sent[at].messages)
    assert at < cleared[0] <= at + 3
    # At the end of that request alone: the next one extends the one before the note.
    assert NOTE in json.dumps(sent[at].messages[-1])
    before, after = sent[at - 1].messages, sent[at + 1].messages
    assert after[: len(before)] == before and not noted(sent[at + 1])


def test_not_once_the_memory_was_written(mem: ShortTermMemory) -> None:
    turn = drive(MemoryTurn.begin(mem, SERVER, options=TurnOptions(context_window=8_192)))
    drive(turn.assemble())
    turn.prepare(transcript(1), wire=CHAT_WIRE, ask=Ask(recall=True))
    assert drive(turn.memory_call({"summary": "Reading the reports."}))["status"] == "completed"
    sent = [turn.prepare(transcript(n), wire=CHAT_WIRE, ask=Ask(recall=True)) for n in range(2, 17)]
    assert not any(noted(r) for r in sent)


def test_not_in_the_portable_form(mem: ShortTermMemory) -> None:
    assert not any(noted(r) for r in requests(mem, memory_role="inline"))


def test_a_block_is_due_only_while_the_newest_overlap_it() -> None:
    rule = ClearingRule(window=8_192)  # batch 2,048, keep 3
    messages = transcript(16)
    results = turn_results(messages)  # ~650 tokens each: a block of about four
    due = [n for n in range(1, 17) if block_due(results[:n], (), rule=rule)]
    assert due and due[0] >= 4  # no whole block before four results
    assert not block_due(results[:3], (), rule=rule)
