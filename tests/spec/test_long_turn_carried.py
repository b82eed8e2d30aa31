"""What a long turn's requests left out stays out in later turns, in the same bytes,
whatever a later request's own size: the call ids are stored with the channel's shown
state (ShownState.cleared), ids only. The rule alone would decide the same below the
high mark; a refusal's refit, or the high mark, decides from one request's size, which
a later turn need not repeat."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

from helpers.long_turn import transcript
from helpers.memory import SERVER

from stm_memory import ShortTermMemory, TurnOptions
from stm_memory._ops import drive
from stm_memory.kit import Ask, MemoryTurn
from stm_memory.model.shown import CLEARED_IDS, ShownState
from stm_memory.wire.openai_chat import CHAT_WIRE

WINDOW = 65_536  # a batch of 12,000 tokens: six reports never make one


class Refused(Exception):
    """The provider's 400 for a request longer than the model's context."""

    status_code: ClassVar[int] = 400
    body: ClassVar[dict[str, Any]] = {
        "error": {
            "message": f"This model's maximum context length is {WINDOW} tokens. However, "
            "your messages resulted in 70000 tokens.",
            "code": "context_length_exceeded",
        }
    }


def begin(mem: ShortTermMemory) -> MemoryTurn:
    turn = drive(MemoryTurn.begin(mem, SERVER, options=TurnOptions(context_window=WINDOW)))
    drive(turn.assemble())
    return turn


def results_sent(messages: Any) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


def test_a_later_turn_leaves_out_what_a_refit_left_out(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    record = transcript(6)
    turn.prepare(record, wire=CHAT_WIRE, ask=Ask(recall=True))
    assert turn.refit(record, Refused())  # the provider refused: all but the newest leave
    last = turn.prepare(record, wire=CHAT_WIRE, ask=Ask(recall=True)).messages
    left = results_sent(last)
    assert [c for c, text in left.items() if "cleared" in text] == [f"call_{k}" for k in range(5)]
    answered = [*record, {"role": "assistant", "content": "All read."}]
    drive(turn.finish(answered, start=0))

    later = [*answered, {"role": "user", "content": "And the first one?"}]
    sent = begin(mem).prepare(later, wire=CHAT_WIRE, ask=Ask(recall=True)).messages
    assert results_sent(sent) == left  # the same bytes, though no rule would clear them now


def test_the_shown_state_keeps_ids_only_and_the_newest() -> None:
    at = datetime(2026, 12, 7, tzinfo=UTC)
    state = ShownState().later(at, cleared=("a", "b")).later(at, cleared=("b", "c"))
    assert state.cleared == ("a", "b", "c")
    assert ShownState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    many = ShownState().later(at, cleared=[f"id{i}" for i in range(CLEARED_IDS + 10)])
    assert len(many.cleared) == CLEARED_IDS and many.cleared[-1] == f"id{CLEARED_IDS + 9}"
    assert "cleared" not in ShownState().to_dict()  # a channel without long turns: as before
