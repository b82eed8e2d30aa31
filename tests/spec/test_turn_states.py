"""The memory turn's states (SPEC §10 ``MemoryTurn``; ``stm_memory.kit.state``): every
phase × step of the one table, driven on a real turn, and what the phases promise."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers.memory import SERVER, refresh

from stm_memory import MemoryTurn, Scope, ShortTermMemory, TurnOrderError
from stm_memory.kit import TurnPhase, drive
from stm_memory.kit.state import TRANSITIONS, Move, TurnEvent

USER_MSG = {"role": "user", "content": "what next?"}
B, A, F = TurnPhase.BEGUN, TurnPhase.ASSEMBLED, TurnPhase.FINISHED
E = TurnEvent

#: phase → step → the phase it leaves the turn in, or the error it raises.
EXPECTED: dict[TurnPhase, dict[TurnEvent, TurnPhase | str]] = {
    B: {
        E.NOTE_USER: B,
        E.ASSEMBLE: A,
        E.REQUEST: r"prepare\(\) before assemble\(\)",
        E.MEMORY_CALL: B,
        E.ABANDON: B,
        E.FINISH: F,
    },
    A: {
        E.NOTE_USER: A,
        E.ASSEMBLE: A,
        E.REQUEST: A,
        E.MEMORY_CALL: A,
        E.ABANDON: A,
        E.FINISH: F,
    },
    F: {
        E.NOTE_USER: F,
        E.ASSEMBLE: r"assemble\(\) after finish\(\)",
        E.REQUEST: F,
        E.MEMORY_CALL: r"memory_call\(\) after finish\(\)",
        E.ABANDON: F,
        E.FINISH: F,
    },
}


def begin(mem: ShortTermMemory, scope: Scope | None = SERVER, **kw: Any) -> MemoryTurn:
    return drive(MemoryTurn.begin(mem, scope, **kw))


def counted_turns(mem: ShortTermMemory, scope: Scope = SERVER) -> int:
    entry = mem.get(scope)
    return entry.turns_since_refresh if entry is not None else 0


def turn_in(mem: ShortTermMemory, phase: TurnPhase) -> MemoryTurn:
    turn = begin(mem)
    if phase is not B:
        drive(turn.assemble())
    if phase is F:
        drive(turn.finish([USER_MSG], start=0))
    assert turn.status.phase is phase
    return turn


def fire(turn: MemoryTurn, event: TurnEvent) -> None:
    if event is E.NOTE_USER:
        turn.note_user_message("what next?")
    elif event is E.ASSEMBLE:
        drive(turn.assemble())
    elif event is E.REQUEST:
        turn.prepare([USER_MSG])
    elif event is E.MEMORY_CALL:
        drive(turn.memory_call({"summary": "The plan."}))
    elif event is E.ABANDON:
        drive(turn.abandon())
    else:
        drive(turn.finish([USER_MSG], start=0))


def test_the_table_covers_every_phase_and_step_as_the_spec_says() -> None:
    assert set(TRANSITIONS) == {(p, e) for p in TurnPhase for e in TurnEvent}
    for (phase, event), found in TRANSITIONS.items():
        expected = EXPECTED[phase][event]
        assert isinstance(found, Move) == isinstance(expected, TurnPhase), (phase, event)
        if isinstance(found, Move):
            assert found.to is expected, (phase, event)


@pytest.mark.parametrize("event", list(TurnEvent), ids=lambda e: e.name.lower())
@pytest.mark.parametrize("phase", list(TurnPhase), ids=lambda p: p.name.lower())
def test_every_step_in_every_phase(
    mem: ShortTermMemory, phase: TurnPhase, event: TurnEvent
) -> None:
    turn = turn_in(mem, phase)
    expected = EXPECTED[phase][event]
    if isinstance(expected, str):
        with pytest.raises(TurnOrderError, match=expected):
            fire(turn, event)
        assert turn.status.phase is phase  # a refused step moves nothing
    else:
        fire(turn, event)
        assert turn.status.phase is expected


@pytest.mark.parametrize("event", [E.FINISH, E.ABANDON], ids=["finish", "abandon"])
def test_a_step_that_already_ran_does_nothing_again(mem: ShortTermMemory, event: TurnEvent) -> None:
    turn = turn_in(mem, F)
    assert counted_turns(mem) == 1
    fire(turn, event)
    assert counted_turns(mem) == 1 and turn.status.phase is F


@pytest.mark.parametrize("scope", [SERVER, None], ids=["on", "off"])
def test_a_turn_moves_from_begun_to_assembled_to_finished(
    mem: ShortTermMemory, scope: Scope | None
) -> None:
    # An off turn (no scope) goes through the same states: off is not a state of its own.
    turn = begin(mem, scope)
    assert turn.status.phase is TurnPhase.BEGUN
    drive(turn.assemble())
    assert turn.status.phase is TurnPhase.ASSEMBLED
    drive(turn.assemble())  # once: a second call changes nothing
    assert turn.status.phase is TurnPhase.ASSEMBLED
    turn.prepare([USER_MSG])
    drive(turn.memory_call({"summary": "The plan."}))
    assert turn.status.phase is TurnPhase.ASSEMBLED  # requests and calls do not move it
    drive(turn.finish([USER_MSG], start=0))
    assert turn.status.phase is TurnPhase.FINISHED
    drive(turn.finish([USER_MSG], start=0))
    assert turn.status.phase is TurnPhase.FINISHED


def test_every_way_to_make_a_turn_starts_it_begun(mem: ShortTermMemory) -> None:
    turns = [
        begin(mem),
        begin(mem, None),
        MemoryTurn(mem, SERVER),  # built off: a placeholder, no I/O
    ]
    assert [t.status.phase for t in turns] == [TurnPhase.BEGUN] * 3


def test_a_turn_may_finish_without_assembling_and_then_builds_no_request(
    mem: ShortTermMemory,
) -> None:
    turn = begin(mem)
    drive(turn.finish([USER_MSG], start=0))
    assert turn.status.phase is TurnPhase.FINISHED
    with pytest.raises(TurnOrderError, match=r"prepare\(\) before assemble\(\)"):
        turn.prepare([USER_MSG])
    with pytest.raises(TurnOrderError, match=r"assemble\(\) after finish\(\)"):
        drive(turn.assemble())
    assert turn.status.phase is TurnPhase.FINISHED
    assert counted_turns(mem) == 1


def test_a_finished_turn_keeps_the_context_it_assembled(mem: ShortTermMemory) -> None:
    refresh(mem, SERVER, "The heist is on Friday.")
    turn = begin(mem)
    context = drive(turn.assemble())
    drive(turn.finish([USER_MSG], start=0))
    assert turn.status.context is context
    assert "The heist is on Friday." in str(turn.prepare([USER_MSG]).messages)


def test_abandon_leaves_the_state_where_it_was(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    drive(turn.abandon())
    assert turn.status.phase is TurnPhase.BEGUN  # counted, not finished: the caller may go on
    drive(turn.assemble())
    drive(turn.abandon())
    assert turn.status.phase is TurnPhase.ASSEMBLED
    drive(turn.finish([USER_MSG], start=0))
    assert turn.status.phase is TurnPhase.FINISHED and counted_turns(mem) == 1


def test_the_state_is_read_only(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.status.phase = TurnPhase.FINISHED  # type: ignore[misc]
    with pytest.raises(AttributeError):
        turn.status = turn.status  # type: ignore[misc]
    assert turn.status.phase is TurnPhase.BEGUN


def test_a_finish_while_assembling_is_not_undone(mem: ShortTermMemory) -> None:
    # The memory is read outside the lock: a finish() that lands meanwhile stays final.
    turn = begin(mem)
    steps = turn.assemble()
    step = next(steps)  # the read, not run yet
    drive(turn.finish([USER_MSG], start=0))
    with pytest.raises(StopIteration):
        steps.send(step.run())
    assert turn.status.phase is TurnPhase.FINISHED
    with pytest.raises(TurnOrderError, match=r"memory_call\(\) after finish\(\)"):
        drive(turn.memory_call({"summary": "late"}))


def test_an_assembly_cut_short_can_run_again(mem: ShortTermMemory) -> None:
    # A read that never returned (a task cancelled while it awaited the store) leaves
    # the turn begun: the next assemble() reads the memory, and requests are built on it.
    refresh(mem, SERVER, "The heist is on Friday.")
    turn = begin(mem)
    steps = turn.assemble()
    next(steps)  # the read, not run yet
    steps.close()  # cut short
    assert turn.status.phase is TurnPhase.BEGUN
    drive(turn.assemble())
    assert turn.status.phase is TurnPhase.ASSEMBLED
    assert "The heist is on Friday." in str(turn.prepare([USER_MSG]).messages)
