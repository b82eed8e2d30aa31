"""The provider kit on its own: its surface, the argument checks (our own errors), the
drivers, the request reader and the wire helpers of each API."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

import stm_memory.kit as kit
from stm_memory import TOOL_NAME, Category, ConfigurationError, Scope, ValidationError
from stm_memory.kit import (
    CONTENT_HEADER,
    Op,
    ToolCall,
    adrive,
    as_messages,
    check_memory,
    check_memory_role,
    check_memory_setup,
    check_message_list,
    check_model,
    check_positive_int,
    check_provider,
    check_tools,
    current_user_text,
    drive,
    missing_extra,
    offered_tool_names,
    read_request,
    refuse_async_callables,
    refuse_reserved,
    refuse_wrong_client,
    tool_choice_none,
    tool_name,
    tool_result_text,
)
from stm_memory.tool.call import run_memory_call
from stm_memory.wire.anthropic import (
    anthropic_system,
    anthropic_tool_results,
    is_failed_result,
    wire_messages,
)
from stm_memory.wire.openai_chat import chat_tool_call, chat_tool_results
from stm_memory.wire.responses import responses_tool_results


def _ruff_order(name: str) -> tuple[int, str]:
    # RUF022's order: SCREAMING_CASE, then CamelCase, then the rest.
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def test_surface_is_sorted_and_complete() -> None:
    assert kit.__all__ == sorted(kit.__all__, key=_ruff_order)
    for name in kit.__all__:
        assert getattr(kit, name) is not None, name
    with pytest.raises(AttributeError):
        kit.nope  # noqa: B018


# -- checks: what an integration is built with is a ConfigurationError, what a call is
# given a ValidationError ------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: check_model(""),
        lambda: check_model(3),
        lambda: check_positive_int("max_steps", 0),
        lambda: check_positive_int("max_steps", True),
        lambda: check_positive_int("max_tokens", 1.5),
        lambda: check_memory_role("assistant"),
        lambda: check_memory_setup(object()),
        lambda: check_memory("Loop", "not a memory"),
        lambda: check_memory("Loop", None),
        lambda: check_provider(""),
        lambda: check_provider("  "),
        lambda: check_provider(3),
    ],
)
def test_bad_options_are_configuration_errors(call: Any) -> None:
    with pytest.raises(ConfigurationError):
        call()


def test_a_provider_is_a_name_or_none() -> None:
    assert check_provider(None) is None
    assert check_provider(" openrouter ") == "openrouter"
    with pytest.raises(ConfigurationError, match="provider must be a non-empty string"):
        check_provider(["openai"])


def test_the_memory_is_checked(make_mem: Any) -> None:
    check_memory("Loop", make_mem(cache="memory"))
    with pytest.raises(ConfigurationError, match="Loop needs a ShortTermMemory as memory, got str"):
        check_memory("Loop", "not a memory")


@pytest.mark.parametrize(
    "call",
    [
        lambda: as_messages({"role": "user"}),
        lambda: check_message_list("hi", what="Messages API"),
        lambda: check_message_list([{"content": "no role"}], what="Messages API"),
        lambda: check_tools({"name": "t"}, None, what="Messages API"),
        lambda: check_tools(["t"], None, what="Messages API"),
        lambda: check_tools([{"name": TOOL_NAME}], None, what="Messages API"),
        lambda: check_tools([], {TOOL_NAME: print}, what="Messages API"),
        lambda: anthropic_system(42),
        lambda: anthropic_system(["text"]),
    ],
)
def test_bad_arguments_are_validation_errors(call: Any) -> None:
    with pytest.raises(ValidationError):
        call()


def test_memory_setup_checks_the_scope_only_when_given(make_mem: Any) -> None:
    memory = make_mem(cache="memory")
    check_memory_setup(memory)
    with pytest.raises(ConfigurationError, match="scope must be a Scope"):
        check_memory_setup(memory, scope="c1")


def test_wrong_kinds_are_our_errors() -> None:
    # The client and the request options are what a loop is built with; the handlers
    # are what run_turn is given.
    class Sync: ...

    class Async: ...

    with pytest.raises(
        ConfigurationError, match=r"Loop needs a \S+\.Sync client, got a \S+\.Async; use"
    ):
        refuse_wrong_client("Loop", Async(), needs=Sync, wrong=Async, twin="AsyncLoop")
    refuse_wrong_client("Loop", object(), needs=Sync, wrong=Async, twin="AsyncLoop")
    with pytest.raises(ConfigurationError, match="Loop sets messages, stream itself"):
        refuse_reserved(
            "Loop", {"stream": 1, "messages": 2, "temperature": 0}, {"messages", "stream"}
        )

    async def handler(args: dict[str, Any]) -> str:
        return ""

    with pytest.raises(ValidationError, match=r"\(lookup, on_text\); use AsyncLoop"):
        refuse_async_callables("Loop", "AsyncLoop", {"lookup": handler}, handler)
    refuse_async_callables("Loop", "AsyncLoop", {"lookup": print}, print)


def test_missing_extra_names_the_pip_install() -> None:
    error = missing_extra("pkg", "the SDK", "openai")
    assert isinstance(error, ImportError)
    assert str(error) == 'pkg needs the SDK: pip install "stm-memory[openai]"'


# -- drivers ------------------------------------------------------------------------------


def _body(log: list[str]) -> Generator[Op, Any, str]:
    async def aone() -> int:
        return 1

    async def aboom() -> None:
        raise KeyError("x")

    def boom() -> None:
        raise KeyError("x")

    first = yield Op(lambda: 1, aone, "one")
    try:
        yield Op(boom, aboom, "boom")
    except KeyError:
        log.append("caught")
    return f"got {first}"


async def test_one_body_runs_blocking_and_awaited() -> None:
    sync_log: list[str] = []
    async_log: list[str] = []
    assert drive(_body(sync_log)) == "got 1"
    assert await adrive(_body(async_log)) == "got 1"
    assert sync_log == async_log == ["caught"]


def test_a_memory_call_outside_the_loops_takes_null_as_no_value(make_mem: Any) -> None:
    # Histories and sessions run the call here; null follows the engine's one rule.
    memory = make_mem(cache="memory")
    memory.set_categories("g1", [Category("Plot", "What happened"), Category("Mood", "Tone")])
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    result = drive(run_memory_call(memory, memory.begin_turn(scope), '{"plot": "p", "mood": null}'))
    assert result == {"status": "completed"}
    entry = memory.get(scope)
    assert entry is not None and dict(entry.categories) == {"plot": "p"}
    none_given = drive(run_memory_call(memory, memory.begin_turn(scope), {"plot": None}))
    assert none_given["status"] == "tool_execution_failed"
    assert "No value given" in none_given["reason"]


# -- the request reader -------------------------------------------------------------------

MEMORY = f"{CONTENT_HEADER}\nAnn plans a trip."


def test_reads_every_format_the_same_way() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": MEMORY},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        ]
    }
    responses = {
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": MEMORY},
            {"type": "message", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "{}"},
        ],
    }
    anthropic = {
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": MEMORY}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]},
        ],
    }
    langchain = [SystemMessage(MEMORY), HumanMessage("hi"), AIMessage("hello")]
    kinds = {
        "chat": [p.kind for p in read_request(chat)],
        "responses": [p.kind for p in read_request(responses)],
        "anthropic": [p.kind for p in read_request(anthropic)],
        "langchain": [p.kind for p in read_request(langchain)],
    }
    assert kinds == {
        "chat": ["system", "memory", "user", "assistant", "tool"],
        "responses": ["system", "memory", "user"],
        "anthropic": ["memory", "user", "tool"],
        "langchain": ["memory", "user", "assistant"],
    }
    labels = [p.label for p in read_request(responses)]
    assert labels == ["instructions", "message 0 (developer)", "message 1 (message)"]


def test_tool_names_and_tool_choice() -> None:
    tools = [
        {"type": "function", "function": {"name": "chat_tool"}},
        {"type": "function", "name": "responses_tool"},
        {"name": "anthropic_tool", "input_schema": {}},
        {"no": "name"},
        print,
    ]
    assert offered_tool_names(tools) == ["chat_tool", "responses_tool", "anthropic_tool", "print"]
    assert tool_name({"function": {"name": 3}}) is None
    assert tool_choice_none({"tool_choice": "none"})
    assert tool_choice_none({"tool_choice": {"type": "none"}})
    assert not tool_choice_none({"tool_choice": "auto"})


# -- wire helpers -------------------------------------------------------------------------

CALL = ToolCall("c1", "lookup", "{}")
FAILED = tool_result_text({"status": "tool_execution_failed", "reason": "no"})


def test_tool_results_per_api() -> None:
    results = [(CALL, "ok"), (ToolCall("c2", "free", {"input": "x"}), "")]
    assert chat_tool_results(results) == [
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
    ]
    assert responses_tool_results(results, {"c2"}) == [
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": ""},
    ]
    assert anthropic_tool_results([(CALL, FAILED), (CALL, "")]) == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": FAILED, "is_error": True},
                {"type": "tool_result", "tool_use_id": "c1", "is_error": False},
            ],
        }
    ]


def test_one_way_to_write_a_tool_result() -> None:
    assert tool_result_text("as is") == "as is"
    assert tool_result_text({"b": "é", "a": 1}) == '{"a": 1, "b": "é"}'
    assert is_failed_result(FAILED) and is_failed_result('{"status": "error"}')
    assert not is_failed_result('{"status": "completed"}') and not is_failed_result("{oops")


def test_chat_tool_calls_read_function_and_custom_tools() -> None:
    function = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    custom = {"id": "c2", "type": "custom", "custom": {"name": "g", "input": "free text"}}
    assert chat_tool_call(function, False) == ToolCall("c1", "f", "{}", False)
    assert chat_tool_call(custom, True) == ToolCall("c2", "g", {"input": "free text"}, True)


def test_anthropic_turns_alternate_and_user_text_skips_tool_results() -> None:
    messages = [
        {"role": "user", "content": "one", "name": "Ann"},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]},
    ]
    assert wire_messages(messages) == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]},
    ]
    assert current_user_text(messages) == "two"
    assert anthropic_system([{"type": "text", "text": "s"}]) == [{"type": "text", "text": "s"}]


def test_one_finder_of_the_current_user_message() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    assert current_user_text([]) is None
    chat = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    assert current_user_text([*chat, {"role": "user", "content": "second"}]) == "second"
    assert current_user_text(chat) == "first"
    responses = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
    ]
    assert current_user_text(responses) == "hi"
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "remember"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
    ]
    assert current_user_text(anthropic) == "remember"
    mixed = [{"type": "tool_result", "tool_use_id": "t"}, {"type": "text", "text": "and now"}]
    assert current_user_text([*anthropic[:2], {"role": "user", "content": mixed}]) == "and now"
    summary = HumanMessage("Earlier: …", additional_kwargs={"lc_source": "summarization"})
    assert current_user_text([HumanMessage("real"), AIMessage("ok"), summary]) == "real"


# -- the former name -----------------------------------------------------------------------
