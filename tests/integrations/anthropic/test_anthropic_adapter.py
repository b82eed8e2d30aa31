"""The Anthropic adapter without HTTP: request shape, parsing, tool results, guards.

A stub client stands in for the SDK's transport; responses are real
``anthropic.types.Message`` objects, so parsing runs on the SDK's own models.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
from typing import Any

import anthropic
import pytest

import stm_memory_anthropic
from stm_memory import (
    TOOL_NAME,
    ConfigurationError,
    MemoryTurn,
    Scope,
    ShortTermMemory,
    TurnOptions,
    ValidationError,
)
from stm_memory.kit import drive
from stm_memory.kit.loop import ToolCall
from stm_memory.prompt.placement import MemoryContext
from stm_memory.wire.anthropic import count_breakpoints
from stm_memory_anthropic import (
    AnthropicLoop,
    AnthropicMessagesAdapter,
    AsyncAnthropicLoop,
    parse_message,
)

MODEL = "claude-haiku-4-5"
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
TOOL = {"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}


def message(
    *content: dict[str, Any], stop_reason: str = "end_turn", **usage: int
) -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": list(content),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
        }
    )


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


class StubMessages:
    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []

    def create(self, **request: Any) -> Any:
        self.requests.append(copy.deepcopy(request))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


class StubClient:
    def __init__(self, *replies: Any) -> None:
        self.messages = StubMessages(list(replies))


def adapter(**kw: Any) -> AnthropicMessagesAdapter:
    def unused(request: dict[str, Any]) -> Any:
        raise AssertionError("no I/O in these tests")

    return AnthropicMessagesAdapter(model=MODEL, max_tokens=100, send=unused, asend=unused, **kw)


@pytest.fixture
def mem(make_mem: Any) -> ShortTermMemory:
    memory: ShortTermMemory = make_mem(cache="memory")
    return memory


# -- surface ---------------------------------------------------------------------------


def test_public_surface() -> None:
    assert stm_memory_anthropic.__all__ == sorted(stm_memory_anthropic.__all__)
    for name in stm_memory_anthropic.__all__:
        assert getattr(stm_memory_anthropic, name) is not None


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("stm_memory_anthropic")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # what a missing package looks like
    with pytest.raises(ImportError, match=r'pip install "stm-memory\[anthropic\]"'):
        importlib.import_module("stm_memory_anthropic")


# -- parsing ---------------------------------------------------------------------------


def test_parse_text_and_tool_calls() -> None:
    reply = parse_message(
        message(
            text("Checking. "),
            tool_use("toolu_1", "lookup", {"q": None}),
            text("Done."),
            stop_reason="tool_use",
            cache_read_input_tokens=7,
            cache_creation_input_tokens=3,
        )
    )
    assert reply.text == "Checking. Done."
    assert reply.tool_calls == (ToolCall("toolu_1", "lookup", {"q": None}, False),)
    assert reply.transcript == (
        {
            "role": "assistant",
            "content": [
                {"text": "Checking. ", "type": "text"},
                {"id": "toolu_1", "input": {"q": None}, "name": "lookup", "type": "tool_use"},
                {"text": "Done.", "type": "text"},
            ],
        },
    )
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (20, 5)


def test_parse_max_tokens_marks_calls_truncated() -> None:
    reply = parse_message(message(tool_use("toolu_1", TOOL_NAME, {}), stop_reason="max_tokens"))
    assert [c.truncated for c in reply.tool_calls] == [True]


def test_parse_empty_reply_adds_nothing_to_the_dialogue() -> None:
    reply = parse_message(message())
    assert (reply.text, reply.tool_calls, reply.transcript) == ("", (), ())


# -- tool results ------------------------------------------------------------------------


def test_tool_results_are_one_user_message() -> None:
    calls = [ToolCall(f"toolu_{i}", "lookup", {}) for i in range(4)]
    failed = json.dumps({"status": "tool_execution_failed", "reason": "no"})
    errored = json.dumps({"status": "error", "reason": "boom"})
    (msg,) = adapter().tool_results(
        list(zip(calls, ['{"status": "completed"}', failed, errored, ""], strict=True))
    )
    assert msg["role"] == "user"
    assert [(b["tool_use_id"], b["is_error"]) for b in msg["content"]] == [
        ("toolu_0", False),
        ("toolu_1", True),
        ("toolu_2", True),
        ("toolu_3", False),
    ]
    assert msg["content"][0]["content"] == '{"status": "completed"}'
    assert "content" not in msg["content"][3]  # an empty result sends no content


# -- requests ----------------------------------------------------------------------------


def test_top_content_joins_the_system_prompt(mem: ShortTermMemory) -> None:
    turn = drive(MemoryTurn.begin(mem, SCOPE, options=TurnOptions(provider="anthropic")))
    ctx = MemoryContext(content="[Short-term memory]\nX", content_depth=-1)
    dialogue = [{"role": "user", "content": "hi"}]
    plain = adapter(system="Be brief.", cache_hints=False)
    as_text = plain.build_request(dialogue, None, [], turn, context=ctx)
    # A block of its own after the caller's prompt, which stays a shared prefix.
    assert as_text["system"] == [text("Be brief."), text("[Short-term memory]\nX")]
    assert as_text["messages"] == dialogue
    cached = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    as_blocks = adapter(system=cached, cache_hints=False).build_request(
        dialogue, None, [], turn, context=ctx
    )
    assert as_blocks["system"] == [*cached, text("[Short-term memory]\nX")]
    alone = adapter(cache_hints=False).build_request(dialogue, None, [], turn, context=ctx)
    assert alone["system"] == "[Short-term memory]\nX"
    nothing = adapter().build_request(dialogue, None, [], turn, context=MemoryContext())
    # No memory to place; the tool is the turn's to offer (the adapter writes it first).
    assert "system" not in nothing and [t["name"] for t in nothing["tools"]] == [TOOL_NAME]


def test_cache_breakpoints_where_the_stable_prefix_ends(mem: ShortTermMemory) -> None:
    turn = drive(MemoryTurn.begin(mem, SCOPE, options=TurnOptions(provider="anthropic")))
    ctx = MemoryContext(content="MEM\n\nBRIEF", briefing_at=5)
    dialogue = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    request = adapter(system="Be brief.").build_request(dialogue, None, [], turn, context=ctx)
    cc = {"type": "ephemeral"}
    # The caller's prompt (shared by every channel), this channel's memory, and the
    # user's own words ahead of the briefing merged after them (read back next turn).
    assert request["system"] == [text("Be brief.", cache_control=cc), text("MEM", cache_control=cc)]
    assert request["messages"][2]["content"] == [text("three", cache_control=cc), text("BRIEF")]
    # The caller's own breakpoints are counted: never more than four in all.
    own = [{"name": f"t{i}", "input_schema": {}, "cache_control": cc} for i in range(3)]
    busy = adapter(system="Be brief.").build_request(dialogue, None, own, turn, context=ctx)
    assert count_breakpoints(busy) == 4
    assert busy["messages"][2]["content"][0]["cache_control"] == cc
    off = adapter(system="Be brief.", cache_hints=False).build_request(
        dialogue, None, [], turn, context=ctx
    )
    assert count_breakpoints(off) == 0


def test_injections_merge_into_user_turns(mem: ShortTermMemory) -> None:
    turn = drive(MemoryTurn.begin(mem, SCOPE, options=TurnOptions(provider="anthropic")))
    dialogue: list[dict[str, Any]] = [
        {"role": "user", "content": "one", "name": "Ann"},
        {"role": "user", "content": "two", "name": "Bob"},
        {"role": "assistant", "content": [tool_use("toolu_1", "lookup", {})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
        {"role": "user", "content": "three"},
    ]
    before = copy.deepcopy(dialogue)
    ctx = MemoryContext(content="MEM", nudge="NUDGE", content_depth=1, nudge_depth=1)
    request = adapter(cache_hints=False).build_request(dialogue, None, [TOOL], turn, context=ctx)
    assert dialogue == before  # the caller's list and messages are untouched
    assert request["messages"] == [
        {
            "role": "user",
            "content": [text("one"), text("two"), text("MEM"), text("NUDGE")],
        },
        {"role": "assistant", "content": [tool_use("toolu_1", "lookup", {})]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}, text("three")],
        },
    ]


def test_tool_history_without_tools_gets_uncallable_definition(mem: ShortTermMemory) -> None:
    # Behind an excluded provider's name the turn offers no tool; the history still
    # holds an earlier turn's memory call, which the API refuses without `tools`.
    options = TurnOptions(provider="novelai")
    turn = drive(MemoryTurn.begin(mem, SCOPE, options=options))
    assert not turn.status.tool_offered
    dialogue = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [tool_use("toolu_1", TOOL_NAME, {"summary": "s"})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    request = adapter(request_options={"temperature": 0.2}).build_request(
        dialogue, None, [], turn, context=MemoryContext()
    )
    assert [t["name"] for t in request["tools"]] == [TOOL_NAME]
    assert request["tool_choice"] == {"type": "none"}
    assert request["temperature"] == 0.2
    auto = {"tool_choice": {"type": "auto"}}
    offered = adapter(request_options=auto).build_request(
        dialogue, None, [TOOL], turn, context=MemoryContext()
    )
    assert offered["tool_choice"] == {"type": "auto"}
    plain = [{"role": "user", "content": "hi"}]
    bare = adapter(request_options=auto).build_request(
        plain, None, [], turn, context=MemoryContext()
    )
    assert "tools" not in bare and "tool_choice" not in bare


# -- loops -------------------------------------------------------------------------------


def test_constructor_checks(mem: ShortTermMemory) -> None:
    sync_client = anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:9")
    async_client = anthropic.AsyncAnthropic(api_key="test", base_url="http://127.0.0.1:9")
    # What a loop is built with is configuration, the client included.
    with pytest.raises(ConfigurationError, match="AsyncAnthropicLoop"):
        AnthropicLoop(async_client, mem, model=MODEL)
    with pytest.raises(ConfigurationError, match="AnthropicLoop"):
        AsyncAnthropicLoop(sync_client, mem, model=MODEL)
    with pytest.raises(ConfigurationError, match="system"):
        AnthropicLoop(sync_client, mem, model=MODEL, system="no")
    with pytest.raises(ConfigurationError):
        AnthropicLoop(sync_client, mem, model="")
    with pytest.raises(ConfigurationError):
        AnthropicLoop(sync_client, mem, model=MODEL, max_tokens=0)
    with pytest.raises(ConfigurationError):
        AnthropicLoop(sync_client, mem, model=MODEL, max_steps=0)


def test_bad_arguments_fail_before_the_turn_begins(mem: ShortTermMemory) -> None:
    client = StubClient()
    loop = AnthropicLoop(client, mem, model=MODEL)
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValidationError):
        loop.run_turn(SCOPE, "hi")
    with pytest.raises(ValidationError):
        loop.run_turn(SCOPE, hi, tools=[{"name": TOOL_NAME, "input_schema": {}}])
    with pytest.raises(ValidationError):
        loop.run_turn(SCOPE, hi, tool_handlers={TOOL_NAME: lambda args: None})
    with pytest.raises(ValidationError):
        loop.run_turn(SCOPE, hi, system=42)  # type: ignore[arg-type]

    async def handler(args: dict[str, Any]) -> str:
        return "never awaited"

    with pytest.raises(ValidationError, match="AsyncAnthropicLoop"):
        loop.run_turn(SCOPE, hi, tools=[TOOL], tool_handlers={"lookup": handler})
    assert client.messages.requests == [] and mem.get(SCOPE) is None


def test_steps_are_bounded_and_options_pass_through(mem: ShortTermMemory) -> None:
    looping = message(tool_use("toolu_1", "lookup", {}), stop_reason="tool_use")
    client = StubClient(looping, looping, looping)
    loop = AnthropicLoop(client, mem, model=MODEL, max_steps=2, temperature=0)
    result = loop.run_turn(
        SCOPE,
        [{"role": "user", "content": "go"}],
        tools=[TOOL],
        tool_handlers={"lookup": lambda args: "ok"},
    )
    assert result.steps == 2 and len(client.messages.requests) == 2
    assert all(r["temperature"] == 0 for r in client.messages.requests)
    assert client.messages.requests == result.requests


def test_any_client_error_propagates_after_end_turn(mem: ShortTermMemory) -> None:
    first = AnthropicLoop(StubClient(message(text("hi"))), mem, model=MODEL)
    first.run_turn(SCOPE, [{"role": "user", "content": "hi"}])
    entry = mem.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 1
    failing = AnthropicLoop(StubClient(RuntimeError("socket closed")), mem, model=MODEL)
    with pytest.raises(RuntimeError, match="socket closed"):
        failing.run_turn(SCOPE, [{"role": "user", "content": "again"}])
    entry = mem.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 2


async def test_async_loop_awaits_async_handlers(mem: ShortTermMemory) -> None:
    class AsyncMessages:
        def __init__(self) -> None:
            self.replies = [
                message(tool_use("toolu_1", "lookup", {"q": "x"}), stop_reason="tool_use"),
                message(text("found")),
            ]

        async def create(self, **request: Any) -> Any:
            return self.replies.pop(0)

    class AsyncStub:
        messages = AsyncMessages()

    async def lookup(args: dict[str, Any]) -> dict[str, str]:
        return {"q": args["q"], "hit": "yes"}

    loop = AsyncAnthropicLoop(AsyncStub(), mem, model=MODEL)
    result = await loop.run_turn(
        SCOPE,
        [{"role": "user", "content": "find x"}],
        tools=[TOOL],
        tool_handlers={"lookup": lookup},
    )
    assert result.text == "found"
    (block,) = result.messages[2]["content"]
    assert json.loads(block["content"]) == {"hit": "yes", "q": "x"}
