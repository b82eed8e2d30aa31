"""``MemoryTurn``: the one turn lifecycle every entry point drives (begin, assemble,
request context, memory call, abandon, finish), and ``TurnOptions``, the one set of
option checks. Driven here with ``drive`` and ``adrive``, as the entry points do."""

from __future__ import annotations

import asyncio
import inspect
import logging
from datetime import timedelta
from typing import Any

import pytest
from helpers.memory import SERVER, dialogue, refresh

from stm_memory import (
    TOOL_NAME,
    ConfigurationError,
    MemoryTurn,
    Scope,
    ShortTermMemory,
    StorageError,
    TurnOptions,
    TurnOrderError,
    ValidationError,
)
from stm_memory.kit import (
    Ask,
    ModelReply,
    Op,
    ToolCall,
    TurnEngine,
    TurnRecord,
    adrive,
    answered_then_remembered,
    drive,
    run_turn_steps,
)
from stm_memory.testing import FrozenClock
from stm_memory.tool.schema import tool_spec
from stm_memory_langchain._tool import turn_tool

USER_MSG = {"role": "user", "content": "what next?"}


def begin(mem: ShortTermMemory, scope: Scope | None = SERVER, **kw: Any) -> MemoryTurn:
    return drive(MemoryTurn.begin(mem, scope, **kw))


def counted_turns(mem: ShortTermMemory, scope: Scope = SERVER) -> int:
    entry = mem.get(scope)
    return entry.turns_since_refresh if entry is not None else 0


# -- begin -------------------------------------------------------------------------------


def test_a_turn_without_scope_is_off_and_touches_nothing(mem: ShortTermMemory) -> None:
    turn = begin(mem, None)
    assert (
        not turn.status.active
        and not turn.status.tool_offered
        and turn_tool(turn, turn.status.offer) is None
    )
    assert drive(turn.assemble()).is_empty
    assert turn.prepare([USER_MSG]).messages == [USER_MSG]
    result = drive(turn.memory_call('{"summary": "x"}'))
    assert result["status"] == "tool_execution_failed"
    drive(turn.finish([USER_MSG], start=0))
    assert mem.get(SERVER) is None


def test_a_scope_that_is_not_a_scope_is_refused_before_anything_runs(
    mem: ShortTermMemory,
) -> None:
    steps = MemoryTurn.begin(mem, "c1")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="scope must be a Scope"):
        next(steps)
    worded = MemoryTurn.begin(mem, SERVER, user_message=3)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="user_message"):
        next(worded)


def test_a_turn_that_cannot_begin_goes_on_without_memory(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise StorageError("settings unreadable")

    monkeypatch.setattr(mem, "begin_turn", broken)
    with caplog.at_level(logging.ERROR, logger="stm_memory"):
        turn = begin(mem)
    assert not turn.status.active and turn_tool(turn, turn.status.offer) is None
    assert "beginning the turn failed" in caplog.text


# -- the request ---------------------------------------------------------------------------


def test_assemble_reads_once(mem: ShortTermMemory) -> None:
    refresh(mem, SERVER, "the plot so far")
    turn = begin(mem)
    first = drive(turn.assemble())
    assert first.memory is not None and "the plot so far" in first.memory
    again = turn.assemble()
    with pytest.raises(StopIteration) as stop:  # no Op: nothing is read again
        next(again)
    assert stop.value.value is first


def test_the_nudge_stays_for_every_step_of_the_turn(mem: ShortTermMemory) -> None:
    """SPEC §3/§6 (amended 2026-12-01): the guards are decided at the turn's start, so
    the tool stays offered after this turn's update, and every later step sends the
    same nudge again (each request extends the last); only a second *execution* fails."""
    for _ in range(mem.server_settings("g1").refresh_cadence):
        drive(begin(mem).finish([USER_MSG], start=0))
    turn = begin(mem)
    drive(turn.assemble())
    before = turn.prepare([USER_MSG]).messages
    held = turn.prepare([USER_MSG], ask=Ask(nudge=False)).messages
    assert TOOL_NAME in str([m for m in before if m not in held])  # the nudge
    assert drive(turn.memory_call({"summary": "done"}))["status"] == "completed"
    assert (
        turn.status.updated
        and turn.status.tool_offered
        and turn_tool(turn, turn.status.offer) is not None
    )
    assert turn.prepare([USER_MSG]).messages == before
    assert turn.prepare([USER_MSG], ask=Ask(nudge=False)).messages == held
    second = drive(turn.memory_call({"summary": "again"}))
    assert second["status"] == "tool_execution_failed"
    assert "already updated" in second["reason"].lower()
    entry = mem.get(SERVER)
    assert entry is not None and entry.summary == "done"


def test_the_nudge_is_held_back_while_a_guard_hides_the_tool(mem: ShortTermMemory) -> None:
    for _ in range(mem.server_settings("g1").refresh_cadence):
        drive(begin(mem).finish([USER_MSG], start=0))
    turn = begin(mem, user_message="please remember that I like tea")
    drive(turn.assemble())
    assert not turn.status.tool_offered and turn_tool(turn, turn.status.offer) is None
    assert TOOL_NAME not in str(turn.prepare([USER_MSG]).messages)


def test_a_request_follows_the_options(mem: ShortTermMemory) -> None:
    earlier = dialogue(40)
    drive(begin(mem).finish(earlier, start=0))
    refresh(mem, SERVER, "memory")
    turn = begin(mem, options=TurnOptions(memory_role="user", trim_history=False))
    drive(turn.assemble())
    sent = turn.prepare([*earlier, USER_MSG]).messages
    assert all(m in sent for m in earlier)  # untrimmed: nothing cut
    memory = [m for m in sent if "[Short-term memory]" in str(m["content"])]
    assert memory and all(m["role"] == "user" for m in memory)


def test_one_update_per_turn_for_every_caller(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    assert drive(turn.memory_call('{"summary": "first"}'))["status"] == "completed"
    second = drive(turn.memory_call('{"summary": "second"}'))
    assert second["status"] == "tool_execution_failed"
    entry = mem.get(SERVER)
    assert entry is not None and entry.summary == "first"


# -- the end -------------------------------------------------------------------------------


def test_finish_counts_once_and_abandon_does_not_count_again(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    drive(turn.abandon())
    drive(turn.finish([USER_MSG, {"role": "assistant", "content": "ok"}], start=0))
    drive(turn.finish([USER_MSG], start=0))
    assert counted_turns(mem) == 1
    entry = mem.get(SERVER)
    # A caller that recovered after the failed step still gets its dialogue captured.
    assert entry is not None and [m.content for m in entry.messages] == ["what next?", "ok"]


def test_finish_puts_the_stored_dialogue_in_front_of_a_lone_message(
    mem: ShortTermMemory,
) -> None:
    alice = Scope(channel_id="c1", user_id="alice", server_id="g1")
    bob = Scope(channel_id="c1", user_id="bob", server_id="g1")
    said = [{"role": "user", "content": "alice here"}, {"role": "assistant", "content": "hi"}]
    drive(begin(mem, alice).finish(said, start=0))
    # Bob's caller passes only his new message: capture must not drop Alice's turn,
    # and her words stay hers (erasure reaches them).
    lone = [{"role": "user", "content": "bob here"}, {"role": "assistant", "content": "yo"}]
    drive(begin(mem, bob).finish(lone, start=0))
    entry = mem.get(bob)
    assert entry is not None
    assert [(m.content, m.user_id) for m in entry.messages] == [
        ("alice here", "alice"),
        ("hi", "alice"),  # a reply is its turn's user's (erasure takes it with her)
        ("bob here", "bob"),
        ("yo", "bob"),
    ]


def test_a_lone_message_follows_the_turns_assembly_read_without_reading_again(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = Scope(channel_id="c1", user_id="alice", server_id="g1")
    said = [{"role": "user", "content": "alice here"}, {"role": "assistant", "content": "hi"}]
    drive(begin(mem, alice).finish(said, start=0))
    turn = begin(mem, alice)
    drive(turn.assemble())
    reads: list[list[str]] = []
    read_many = mem._cache.read_many

    def counting(keys: Any) -> Any:
        reads.append(list(keys))
        return read_many(keys)

    monkeypatch.setattr(mem._cache, "read_many", counting)
    drive(
        turn.finish(
            [{"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"}], start=0
        )
    )
    assert reads == []  # the write alone: it checks the turns it follows itself
    entry = mem.get(alice)
    assert entry is not None
    assert [m.content for m in entry.messages] == ["alice here", "hi", "again", "ok"]


ALICE = Scope(channel_id="c1", user_id="alice", server_id="g1")


def two_in_flight(mem: ShortTermMemory) -> tuple[MemoryTurn, MemoryTurn]:
    """Alice's and Bob's turns of one channel, both begun and assembled after Alice's
    first turn ("first") was stored: Alice's the slow one, Bob's the fast one."""
    bob = Scope(channel_id="c1", user_id="bob", server_id="g1")
    drive(begin(mem, ALICE).finish([{"role": "user", "content": "first"}], start=0))
    slow, fast = begin(mem, ALICE), begin(mem, bob)
    drive(slow.assemble())
    drive(fast.assemble())
    return slow, fast


def test_concurrent_lone_messages_on_one_channel_lose_no_turn(mem: ShortTermMemory) -> None:
    # Two turns of one channel in flight at once, each caller passing only its new
    # message: the one that finishes second follows what the first one stored, not
    # the turns it read when it began.
    slow, fast = two_in_flight(mem)
    drive(
        fast.finish(
            [{"role": "user", "content": "bob's"}, {"role": "assistant", "content": "b"}], start=0
        )
    )
    drive(
        slow.finish(
            [{"role": "user", "content": "alice's"}, {"role": "assistant", "content": "a"}], start=0
        )
    )
    entry = mem.get(ALICE)
    assert entry is not None
    assert [(m.content, m.user_id) for m in entry.messages] == [
        ("first", "alice"),
        ("bob's", "bob"),
        ("b", "bob"),
        ("alice's", "alice"),
        ("a", "alice"),
    ]
    assert entry.turns_since_refresh == 3  # every turn counted once


def test_a_tool_list_built_apart_keeps_the_tool_a_sent_nudge_asked_for(
    mem: ShortTermMemory,
) -> None:
    offered = begin(mem)
    assert offered.status.tool_listed(nudged=False) and offered.status.tool_listed(nudged=True)
    hidden = begin(mem, user_message="Remember this permanently: I am vegetarian.")
    assert not hidden.status.tool_offered
    assert not hidden.status.tool_listed(nudged=False)
    assert hidden.status.tool_listed(nudged=True)  # its call gets the guard's failed result
    off = begin(mem, None)
    assert not off.status.tool_listed(nudged=True)


def test_the_async_driver_runs_the_same_steps(mem: ShortTermMemory) -> None:
    async def run() -> MemoryTurn:
        turn = await adrive(MemoryTurn.begin(mem, SERVER))
        await adrive(turn.assemble())
        await adrive(turn.memory_call({"summary": "async"}))
        await adrive(turn.finish([USER_MSG], start=0))
        return turn

    turn = asyncio.run(run())
    entry = mem.get(SERVER)
    assert turn.status.updated and entry is not None and entry.summary == "async"


def test_an_off_turns_tool_is_described_from_the_defaults_on_the_memorys_clock(
    mem: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    fake_clock.advance(timedelta(minutes=7))  # the memory's clock, not the wall clock
    off = MemoryTurn(mem, SERVER)  # no state: the tool is described from the defaults
    assert off.state is None and not off.status.active
    defaults = mem.default_turn(SERVER)  # what the off turn's tool is described from
    assert defaults.started_at == fake_clock() and defaults.summary_mode
    assert off.tool_spec() == tool_spec(defaults, limit=mem.limits.max_summary_length)


# -- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"provider": ""}, "provider"),
        ({"provider": 3}, "provider"),
        ({"memory_role": "assistant"}, "memory_role"),
        ({"trim_history": "yes"}, "trim_history"),
        ({"cache_hints": 1}, "cache_hints"),
    ],
)
def test_options_are_checked_once_for_every_entry_point(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TurnOptions(**options)


def test_a_provider_name_is_read_as_the_exclusion_list_names_it() -> None:
    assert TurnOptions(provider=" novelai ").provider == "novelai"


# -- the epilogue rule ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names", "ends"),
    [
        ("Here you go.", [TOOL_NAME], True),
        ("", [TOOL_NAME], False),  # nothing answered yet: the model must run again
        ("Here you go.", [TOOL_NAME, "lookup"], False),  # it must see lookup's result
        ("Here you go.", [], False),
    ],
)
def test_one_epilogue_rule(text: str, names: list[str], ends: bool) -> None:
    assert answered_then_remembered(text, names) is ends


class _ScriptedAdapter:
    """A provider API reduced to what the loop asks of it; replies come from a script."""

    provider = "openai"

    def __init__(self, replies: list[ModelReply]) -> None:
        self.replies = replies
        self.sent: list[dict[str, Any]] = []

    def build_request(
        self, transcript: Any, system: Any, tools: Any, turn: Any, *, context: Any = None
    ) -> dict[str, Any]:
        return {"messages": list(transcript), "tools": list(tools)}

    def call_op(self, request: dict[str, Any]) -> Op:
        def reply() -> ModelReply:
            self.sent.append(request)
            return self.replies.pop(0)

        async def areply() -> ModelReply:
            return reply()

        return Op(reply, areply, "scripted")

    def tool_results(self, results: Any) -> list[Any]:
        return [{"role": "tool", "tool_call_id": c.id, "content": r} for c, r in results]

    def memory_tool(self, turn: Any) -> Any:
        return {"name": TOOL_NAME}

    def user_text(self, messages: Any) -> str | None:
        return "what next?"


def test_the_loop_runs_the_model_again_when_a_callers_tool_rode_with_the_memory_call(
    mem: ShortTermMemory,
) -> None:
    both = (
        ToolCall("m1", TOOL_NAME, '{"summary": "noted"}'),
        ToolCall("t1", "lookup", "{}"),
    )
    adapter = _ScriptedAdapter(
        [
            ModelReply("Let me check.", both, ({"role": "assistant", "content": "x"},)),
            ModelReply("It is 4.", (), ({"role": "assistant", "content": "It is 4."},)),
        ]
    )
    result = drive(
        run_turn_steps(
            mem, adapter, SERVER, [USER_MSG], tool_handlers={"lookup": lambda _args: "4"}
        )
    )
    assert result.steps == 2 and result.text == "It is 4." and result.stm_updated
    assert {"role": "tool", "tool_call_id": "t1", "content": "4"} in adapter.sent[1]["messages"]


def test_finish_keeps_the_stored_dialogue_when_it_cannot_read_it(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "noted"}]
    drive(begin(mem).finish(said, start=0))
    turn = begin(mem)

    def unreadable(*_: Any, **__: Any) -> Any:
        raise StorageError("cache down")

    with monkeypatch.context() as patch:
        patch.setattr(mem, "get", unreadable)
        drive(turn.finish([USER_MSG], start=0))
    entry = mem.get(SERVER)
    # Capture replaces the stored messages: this turn alone must not overwrite them.
    assert entry is not None and [m.content for m in entry.messages] == ["earlier", "noted"]
    assert entry.turns_since_refresh == 2  # the turn still counts


def test_a_framework_tool_is_described_from_the_turns_snapshot(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", ["Plot", "Mood"])
    turn = begin(mem)
    assert set(turn.tool_spec().parameters["properties"]) == {"plot", "mood"}
    assert "category" in turn.tool_spec().description
    mem.set_categories("g1", [])  # an admin edit mid-turn does not change this turn's tool
    assert set(turn.tool_spec().parameters["properties"]) == {"plot", "mood"}


# -- the order of the steps -------------------------------------------------------------


@pytest.mark.parametrize("scope", [SERVER, None], ids=["on", "off"])
def test_a_request_before_the_memory_is_read_is_refused(
    mem: ShortTermMemory, scope: Scope | None
) -> None:
    turn = begin(mem, scope)
    with pytest.raises(TurnOrderError, match=r"before assemble\(\).*begin → assemble"):
        turn.view([], {"role": "user", "content": ""})
    with pytest.raises(TurnOrderError, match="before assemble"):
        turn.prepare([{"role": "user", "content": "hi"}])
    drive(turn.assemble())
    assert turn.prepare([{"role": "user", "content": "hi"}]).messages  # in order: placed


def test_no_step_runs_after_the_turn_finished(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    drive(turn.assemble())
    drive(turn.finish([{"role": "user", "content": "hi"}], start=0))
    with pytest.raises(TurnOrderError, match=r"memory_call\(\) after finish\(\)"):
        drive(turn.memory_call({"summary": "late"}))
    with pytest.raises(TurnOrderError, match=r"assemble\(\) after finish\(\)"):
        drive(turn.assemble())
    entry = mem.get(SERVER)
    assert entry is not None and entry.summary is None  # nothing was written late
    drive(turn.finish([], start=0))  # finishing again stays a no-op


def test_the_engine_is_reached_through_its_narrow_protocol(mem: ShortTermMemory) -> None:
    # Every member of TurnEngine is the real engine's, sync or async alike.
    members = [
        name
        for cls in TurnEngine.__mro__
        if cls.__name__ in ("TurnEngine", "MemoryWriter")
        for name, value in vars(cls).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    ]
    assert {"begin_turn", "abuild_context", "commit", "update", "limits"} <= set(members)
    for name in members:
        theirs = getattr(type(mem), name, None) or getattr(mem, name)
        ours = getattr(TurnEngine, name)
        if callable(ours):
            assert inspect.iscoroutinefunction(theirs) == inspect.iscoroutinefunction(ours), name


# -- finish: capture and count in one write ------------------------------------------------


def test_finish_captures_and_counts_in_one_transaction(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    drive(begin(mem).finish([USER_MSG, {"role": "assistant", "content": "first"}], start=0))
    assert counted_turns(mem) == 1
    import stm_memory.engine as engine

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("counting broke")

    # The count fails inside the write: the capture of the same write is not kept
    # either (one transaction), and the turn still ends without raising.
    monkeypatch.setattr(engine, "counted", broken)
    said = [USER_MSG, {"role": "assistant", "content": "second"}]
    drive(begin(mem).finish(said, start=0))
    entry = mem.get(SERVER)
    assert entry is not None
    assert [m.content for m in entry.messages] == ["what next?", "first"]
    assert entry.turns_since_refresh == 1
    monkeypatch.undo()
    drive(begin(mem).finish(said, start=0))
    assert counted_turns(mem) == 2
    assert [m.content for m in mem.get(SERVER).messages][-1] == "second"  # type: ignore[union-attr]


def test_finish_still_counts_when_the_capture_cannot_be_written(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    drive(begin(mem).finish([USER_MSG, {"role": "assistant", "content": "first"}], start=0))
    import stm_memory.engine as engine

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("capture broke")

    monkeypatch.setattr(engine, "captured", broken)
    with caplog.at_level(logging.ERROR, logger="stm_memory"):
        drive(begin(mem).finish([USER_MSG, {"role": "assistant", "content": "second"}], start=0))
    assert "capture broke" in caplog.text  # reported, the turn not failed
    entry = mem.get(SERVER)
    assert entry is not None and entry.turns_since_refresh == 2  # counted all the same
    assert [m.content for m in entry.messages] == ["what next?", "first"]


def test_finish_counts_a_turn_whose_dialogue_cannot_be_read(
    mem: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    drive(begin(mem).finish([USER_MSG], start=0))
    with caplog.at_level(logging.ERROR, logger="stm_memory"):
        unreadable = [{"role": "user", "content": object()}]
        mem.commit(TurnRecord(turn=mem.begin_turn(SERVER), dialogue=unreadable))
    assert counted_turns(mem) == 2
    assert "not captured" in caplog.text
    assert [m.content for m in mem.get(SERVER).messages] == ["what next?"]  # type: ignore[union-attr]


# -- a view and a request: each entry point places once, at one of them -----------------


def test_a_view_places_around_a_stand_in_and_a_request_places_on_the_whole_input(
    mem: ShortTermMemory,
) -> None:
    # A history or session read before the user's message exists places a view around a
    # stand-in (for a framework that sends it as it is); an entry point that sees the
    # whole input places there instead, once, the nudge after the user's words.
    earlier = dialogue(6)
    drive(begin(mem).finish(earlier, start=0))
    refresh(mem, SERVER, "They planned the heist.")
    for _ in range(mem.server_settings("g1").refresh_cadence):
        drive(begin(mem).finish([USER_MSG], start=0))
    turn = begin(mem)
    drive(turn.assemble())
    stand_in = {"role": "user", "content": ""}
    placed = turn.view(earlier, stand_in)
    assert placed is not None and stand_in in placed.items
    assert "They planned the heist." in str(placed.items)  # the memory was placed in it
    system = {"role": "system", "content": "Be brief."}
    sent = turn.prepare([system, *earlier, USER_MSG]).messages
    assert sum("[Short-term memory]\n" in str(m["content"]) for m in sent) == 1
    assert TOOL_NAME in str(sent[-1]["content"])  # the nudge, after the user


def test_a_lone_message_whose_turns_moved_and_cannot_be_read_again_still_counts(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    slow, fast = two_in_flight(mem)
    drive(fast.finish([{"role": "user", "content": "bob's"}], start=0))

    def unreadable(scope: Scope) -> None:
        raise RuntimeError("cache on fire")

    monkeypatch.setattr(mem, "get", unreadable)
    with caplog.at_level(logging.ERROR, logger="stm_memory"):
        drive(slow.finish([{"role": "user", "content": "alice's"}], start=0))
    monkeypatch.undo()
    entry = mem.get(ALICE)
    assert entry is not None
    # Bob's turn is not overwritten by Alice's alone; her turn still counts.
    assert [m.content for m in entry.messages] == ["first", "bob's"]
    assert entry.turns_since_refresh == 3
    assert any("not captured" in r.getMessage() for r in caplog.records)


def test_the_model_is_named_once_and_an_openai_style_host_settles_the_form(
    mem: ShortTermMemory,
) -> None:
    turn = begin(mem)
    assert turn.name_model("gpt-5").form == "system"  # no host said: the options' form
    # A framework names its model at each call: the first name stays the turn's.
    assert turn.name_model("another").form == "system"
    assert turn._model == "gpt-5"
    # An OpenAI-style client at a host other than OpenAI's: the portable form, from now.
    assert turn.name_model(None, host="http://127.0.0.1:8080/v1").form == "inline"
    assert turn.name_model("gpt-5").form == "inline"
    assert begin(mem).name_model(None, host=None).form == "system"  # the SDK's default host
    named = begin(mem, options=TurnOptions(memory_role="system"), model="m")
    assert named.name_model("x", host="http://127.0.0.1:8080/v1").form == "system"  # named wins
    assert named._model == "m"
