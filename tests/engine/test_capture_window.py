"""The one capture window (MemoryTurn.finish and MemoryTurn.capture_window): every
entry point hands the turn what it keeps, and the turn reads only as far back as
capture needs — never so little that stored dialogue is replaced with less."""

from __future__ import annotations

from typing import Any

from helpers.memory import SERVER

from stm_memory import ShortTermMemory
from stm_memory.kit import CAPTURE_WINDOW, MemoryTurn, drive


def record(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    return out


def stored(mem: ShortTermMemory) -> list[str]:
    entry = mem.get(SERVER)
    return [m.content for m in entry.messages] if entry is not None else []


def test_a_whole_record_is_captured_as_its_last_messages(mem: ShortTermMemory) -> None:
    full = record(300)
    turn = drive(MemoryTurn.begin(mem, SERVER, user_message="q299"))
    drive(turn.finish(full, start=len(full) - 2))
    kept = mem.limits.messages_kept
    assert stored(mem) == [m["content"] for m in full[-kept:]]


def test_a_group_channel_with_unstored_speakers_still_fills_what_is_kept(
    mem: ShortTermMemory,
) -> None:
    mem.configure_user("shy", full_privacy=True)
    full: list[dict[str, Any]] = []
    for i in range(40):  # the private user speaks twice as often as the others
        full += [
            {"role": "user", "content": f"shy {i}a", "user_id": "shy"},
            {"role": "user", "content": f"shy {i}b", "user_id": "shy"},
            {"role": "user", "content": f"ann {i}", "user_id": "u1"},
            {"role": "assistant", "content": f"a{i}"},
        ]
    turn = drive(MemoryTurn.begin(mem, SERVER, user_message="ann 39"))
    drive(turn.finish(full, start=len(full) - 4))
    kept = mem.limits.messages_kept
    words = stored(mem)
    assert len(words) == kept and not any(w.startswith("shy") for w in words)


def test_a_record_read_from_its_end_reads_the_window_then_all_when_short(
    mem: ShortTermMemory,
) -> None:
    turn = drive(MemoryTurn.begin(mem, SERVER))
    kept = mem.limits.messages_kept
    first = turn.capture_window(3)
    assert first == max(CAPTURE_WINDOW, 3 + 4 * kept)
    assert first is not None
    dialogue = record(first // 2)
    assert turn.capture_window(3, dialogue) == len(dialogue)  # enough: no second read
    tools = [{"role": "tool", "content": "x"}] * first  # a window of tool traffic only
    assert turn.capture_window(3, tools) is None  # read the whole record
    assert turn.capture_window(3, record(5)) == 10  # a short record is all there is
