"""``MemoryTurn.prepare`` decides each request whole: the memory tool offered, described
or left out with the ``tool_choice`` that goes with it, and the cache hints, which every
entry point maps and none writes (``tests/unit/test_kit_imports.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.memory import SERVER

from stm_memory import TOOL_NAME, ShortTermMemory
from stm_memory.kit import (
    Breakpoints,
    MemoryContext,
    MemoryTurn,
    PreparedRequest,
    TurnOptions,
    count_breakpoints,
    drive,
    has_tool_traffic,
    prompt_cache_key,
)

HI = [{"role": "user", "content": "hi"}]
# An earlier call of a tool of the caller's, in the Messages API's blocks.
TRAFFIC = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
    {"role": "user", "content": "and now?"},
]


def begin(mem: ShortTermMemory, **options: Any) -> MemoryTurn:
    turn = drive(MemoryTurn.begin(mem, SERVER, options=TurnOptions(**options)))
    drive(turn.assemble())
    return turn


def test_an_offered_tool_keeps_the_callers_tool_choice(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    prepared = turn.prepare(HI, api="openai", tool_choice="required")
    assert (prepared.tool, prepared.tool_choice) == ("offer", "required")


@pytest.mark.parametrize(("api", "none"), [("anthropic", {"type": "none"}), ("openai", "none")])
def test_a_hidden_tool_beside_tool_traffic_is_described_for_the_messages_api(
    mem: ShortTermMemory, api: Any, none: Any
) -> None:
    # Behind an excluded provider's name the turn offers no tool; the Messages API
    # refuses tool blocks without tools: described, never callable, in the API's words.
    turn = begin(mem, provider="novelai")
    assert not turn.tool_offered
    form: Any = "anthropic" if api == "anthropic" else "messages"
    prepared = turn.prepare(TRAFFIC, form=form, api=api, tool_choice={"type": "auto"})
    if api == "anthropic":
        assert (prepared.tool, prepared.tool_choice) == ("describe", none)
    else:  # OpenAI's API takes tool traffic without tools: nothing to describe
        assert prepared.tool is None
    # An OpenAI-compatible endpoint in front of Anthropic (the Agents SDK's model):
    # the turn's provider says so; "none" in the OpenAI format the request is written in.
    options = TurnOptions(provider="anthropic")
    remember = "remember this for future conversations"
    front = drive(MemoryTurn.begin(mem, SERVER, options=options, user_message=remember))
    assert not front.tool_offered  # the long-term-intent guard hides it
    decided = front.request_tools(TRAFFIC, api="openai")
    assert (decided.tool, decided.tool_choice) == ("describe", "none")
    # Other tools define one already: the memory tool is simply left out.
    busy = turn.prepare(TRAFFIC, form=form, api=api, other_tools=True, tool_choice="auto")
    assert (busy.tool, busy.tool_choice) == (None, "auto")


def test_a_tool_choice_is_dropped_where_it_would_be_refused(mem: ShortTermMemory) -> None:
    turn = begin(mem, provider="novelai")  # the tool hidden
    # No tools at all: the API refuses a tool_choice.
    assert turn.prepare(HI, api="openai", tool_choice="auto").tool_choice is None
    # Forcing the memory tool while it is not offered: never.
    forced = {"type": "function", "function": {"name": TOOL_NAME}}
    mine = turn.prepare(HI, api="openai", other_tools=True, tool_choice=forced)
    assert mine.tool is None and mine.tool_choice is None
    theirs = {"type": "function", "function": {"name": "lookup"}}
    kept = turn.prepare(HI, api="openai", other_tools=True, tool_choice=theirs)
    assert kept.tool_choice == theirs


def test_the_openai_key_is_the_turns_and_the_callers_wins(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    assert turn.prepare(HI, api="openai").hints == {"prompt_cache_key": prompt_cache_key(SERVER)}
    own = turn.prepare(HI, api="openai", settings={"prompt_cache_key": "mine"})
    assert own.hints == {}  # the caller's key goes as it is
    assert turn.prepare(HI, api="openai", cache_hints=False).hints == {}
    assert begin(mem, cache_hints=False).prepare(HI, api="openai").hints == {}
    assert turn.prepare(HI, api="anthropic").hints == {}  # Messages: breakpoints instead
    assert turn.prepare(HI).hints == {}  # no API named: none
    # The Responses form is OpenAI's; a dict's user_id (ours) is not an API field.
    said = [{"role": "user", "content": "hi", "user_id": "u1"}]
    prepared = turn.prepare(said, form="responses", system="Be brief.")
    assert prepared.hints and prepared.messages == HI


def test_anthropic_breakpoints_within_one_budget(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    context = MemoryContext(content="MEM\n\nBRIEF", briefing_at=5)
    dialogue = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    prepared = turn.prepare(
        dialogue, form="anthropic", system="Be brief.", provider="anthropic", context=context
    )
    assert prepared.breakpoints == Breakpoints(("BRIEF",), 1)
    body = prepared.with_breakpoints({"system": prepared.system, "messages": prepared.messages})
    assert count_breakpoints(body) == 3  # the dialogue's, the memory's, the caller's prompt
    assert body["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral"}
    off = turn.prepare(dialogue, form="anthropic", context=context, cache_hints=False)
    assert off.breakpoints is None
    assert off.with_breakpoints({"messages": off.messages}) == {"messages": off.messages}
    # A framework's own messages: the one dialogue breakpoint, the budget counting the
    # request's markers and what a later layer keeps in reserve.
    bp = Breakpoints(("BRIEF",))
    contents = [
        "one",
        "two",
        [{"type": "text", "text": "three"}, {"type": "text", "text": "BRIEF"}],
    ]
    marker = {"type": "ephemeral", "ttl": "1h"}
    where = bp.on_dialogue(contents, 2, markers=[marker], reserved=2)
    assert where == (
        2,
        [
            {"type": "text", "text": "three", "cache_control": marker},
            {"type": "text", "text": "BRIEF"},
        ],
    )
    assert bp.on_dialogue(contents, 2, markers=[marker], reserved=3) is None  # no room
    assert bp.on_dialogue(contents, None, markers=[]) is None


def test_a_placing_error_still_decides_the_tool_and_the_hints(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stm_memory.kit.turn as turn_module

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("placement broke")

    turn = begin(mem)
    monkeypatch.setattr(turn_module, "place_request", broken)
    context = MemoryContext(content="MEM", content_depth=-1)
    said = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    prepared = turn.prepare(said, form="anthropic", provider="anthropic", context=context)
    # The caller's messages, as the API takes them (one user turn), without memory.
    assert prepared.messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]
    assert prepared.tool == "offer" and prepared.breakpoints is not None
    assert isinstance(prepared, PreparedRequest) and prepared.transient == ()


def test_tool_traffic_is_read_in_every_format() -> None:
    assert has_tool_traffic(TRAFFIC)  # Messages blocks
    assert has_tool_traffic([{"role": "assistant", "tool_calls": [{"id": "c"}]}])  # Chat
    assert has_tool_traffic([{"role": "tool", "tool_call_id": "c", "content": "ok"}])
    assert has_tool_traffic([{"type": "function_call", "call_id": "c"}])  # Responses
    assert has_tool_traffic([{"type": "function_call_output", "call_id": "c"}])

    class Item:  # an SDK object
        type = "custom_tool_call"

    assert has_tool_traffic([Item()])
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    assert has_tool_traffic([AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}])])
    assert has_tool_traffic([ToolMessage("ok", tool_call_id="1")])
    assert not has_tool_traffic([HumanMessage("hi"), AIMessage("hello")])
    assert not has_tool_traffic(HI) and not has_tool_traffic("hi")  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "novelai"])
def test_the_message_style_is_the_wires_whoever_serves_the_model(
    mem: ShortTermMemory, api: Any, provider: str
) -> None:
    # ``provider`` names who serves the model (an OpenAI-compatible endpoint in front
    # of Anthropic, say): its exclusion, prices and tool rules, never how a request
    # for ``api`` is written. The same request as with no provider named.
    mem.update(mem.begin_turn(SERVER), {"summary": "The crew meets at the mill."})
    said = [{"role": "system", "content": "You plan trips."}, *HI]

    def placed(**options: Any) -> list[Any]:
        return begin(mem, **options).prepare(said, api=api).messages

    written = placed(provider=provider)
    assert written == placed()
    assert any("The crew meets at the mill." in str(m) for m in written)
