"""The wire codecs (stm_memory.wire): per format, what placement and the history cut ask
of a message — its role, its text, the memory calls it carries and the message without
them — and how injections are written; and which codec a message or a list gets."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from stm_memory.errors import ValidationError
from stm_memory.tool.turn import TOOL_NAME
from stm_memory.wire import codec_for, codec_of, message_role
from stm_memory.wire.anthropic import ANTHROPIC, append_system
from stm_memory.wire.langchain import LANGCHAIN, LEADING_SYSTEM_ONLY
from stm_memory.wire.openai_chat import CHAT
from stm_memory.wire.responses import RESPONSES
from stm_memory.wire.shorthand import SHORTHAND


def _chat_call(call_id: str, name: str = TOOL_NAME) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


# -- which codec ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "codec"),
    [
        ({"role": "user", "content": "hi"}, CHAT),
        ({"type": "function_call", "call_id": "c", "name": "f"}, RESPONSES),
        ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}]}, ANTHROPIC),
        (HumanMessage("hi"), LANGCHAIN),
        (("user", "hi"), SHORTHAND),
        ("hi", SHORTHAND),
        (object(), SHORTHAND),
    ],
)
def test_each_message_is_read_by_the_codec_of_its_shape(message: Any, codec: Any) -> None:
    assert codec_of(message) is codec


def test_a_list_is_written_in_its_format() -> None:
    chat = [{"role": "user", "content": "hi"}]
    anthropic = [{"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f"}]}]
    assert codec_for(chat) is CHAT
    assert codec_for([*chat, {"type": "reasoning"}]) is RESPONSES
    assert codec_for(chat, provider="anthropic") is ANTHROPIC
    assert codec_for(anthropic) is ANTHROPIC
    assert codec_for(anthropic, provider="openai") is CHAT  # the hint wins over the blocks
    assert codec_for([*chat, HumanMessage("hi")]) is LANGCHAIN
    assert codec_for([HumanMessage("hi")], provider="Google_GenAI") is LEADING_SYSTEM_ONLY
    assert codec_for([("user", "hi"), "hello"]) is CHAT


def test_dict_lists_never_load_the_langchain_codec() -> None:
    # The dict formats are read and written without importing LangChain through wire/.
    code = (
        "import sys\n"
        "from stm_memory.wire import codec_for, message_role\n"
        "from stm_memory.prompt.placement import MemoryContext\n"
        "msgs = [{'role': 'user', 'content': 'hi'}, ('user', 'x'), 'y']\n"
        "MemoryContext(content='C', nudge='N').apply(msgs)\n"
        "[message_role(m) for m in msgs]\n"
        "assert 'stm_memory.wire.langchain' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- roles and text -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "role"),
    [
        ({"role": "developer", "content": "x"}, "system"),
        ({"role": "human", "content": "x"}, "user"),
        ({"role": "tool", "tool_call_id": "c", "content": "x"}, "tool"),
        ({"role": "narrator", "content": "x"}, "other"),
        ({"type": "function_call_output", "call_id": "c"}, "tool"),
        ({"type": "web_search_call", "id": "w"}, "assistant"),
        ({"type": "reasoning", "id": "r"}, "reasoning"),
        ({"type": "item_reference", "id": "r"}, "other"),
        ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}]}, "tool"),
        (AIMessage("x"), "assistant"),
        (ToolMessage("x", tool_call_id="c"), "tool"),
        (ChatMessage(role="developer", content="x"), "system"),
        (("ai", "x"), "assistant"),
        ((), "other"),
        ("x", "user"),
        (3, "other"),
    ],
)
def test_roles(message: Any, role: str) -> None:
    assert message_role(message) == role


def test_text_is_the_visible_words() -> None:
    parts = [{"type": "input_text", "text": "a"}, {"type": "image_url"}, "b"]
    assert CHAT.text({"role": "user", "content": parts}) == "a\nb"
    assert RESPONSES.text({"type": "function_call", "call_id": "c"}) == ""
    assert ANTHROPIC.text({"role": "user", "content": [{"type": "text", "text": "t"}]}) == "t"
    assert LANGCHAIN.text(AIMessage([{"type": "text", "text": "t"}, "u"])) == "t\nu"
    assert SHORTHAND.text(("user", "hi")) == "hi"
    assert SHORTHAND.text("hi") == "hi"
    with pytest.raises(ValidationError):
        CHAT.text({"role": "user", "content": 3})


def test_user_words_count_an_anthropic_turn_with_text_after_its_results() -> None:
    results = [{"type": "tool_result", "tool_use_id": "c"}]
    assert not ANTHROPIC.user_words({"role": "user", "content": results})
    both = {"role": "user", "content": [*results, {"type": "text", "text": "also"}]}
    assert ANTHROPIC.user_words(both)
    assert CHAT.user_words({"role": "user", "content": "hi"})
    assert not RESPONSES.user_words({"type": "function_call_output", "call_id": "c"})


# -- memory calls, per format ---------------------------------------------------------


def test_chat_memory_calls() -> None:
    reply = {
        "role": "assistant",
        "content": "noted",
        "tool_calls": [_chat_call("m"), _chat_call("s", "search")],
    }
    assert CHAT.memory_call_ids(reply, TOOL_NAME) == {"m"}
    assert CHAT.without_calls(reply, {"m"}) == {**reply, "tool_calls": [_chat_call("s", "search")]}
    only = {"role": "assistant", "content": None, "tool_calls": [_chat_call("m")]}
    assert CHAT.without_calls(only, {"m"}) is None
    worded = {**only, "content": "done"}
    assert CHAT.without_calls(worded, {"m"}) == {"role": "assistant", "content": "done"}
    assert CHAT.without_calls({"role": "tool", "tool_call_id": "m", "content": "ok"}, {"m"}) is None
    assert CHAT.without_calls(reply, {"x"}) is reply


def test_responses_memory_calls() -> None:
    call = {"type": "function_call", "call_id": "m", "name": TOOL_NAME, "arguments": "{}"}
    other = {**call, "call_id": "s", "name": "search"}
    assert RESPONSES.memory_call_ids(call, TOOL_NAME) == {"m"}
    assert RESPONSES.memory_call_ids(other, TOOL_NAME) == set()
    assert RESPONSES.without_calls(call, {"m"}) is None
    output = {"type": "function_call_output", "call_id": "m", "output": "ok"}
    assert RESPONSES.without_calls(output, {"m"}) is None
    assert RESPONSES.without_calls(other, {"m"}) is other
    assert RESPONSES.follows_reasoning(call)
    assert not RESPONSES.follows_reasoning(output)


def test_anthropic_memory_calls() -> None:
    use = {"type": "tool_use", "id": "m", "name": TOOL_NAME, "input": {}}
    text = {"type": "text", "text": "noted"}
    reply = {"role": "assistant", "content": [text, use]}
    assert ANTHROPIC.memory_call_ids(reply, TOOL_NAME) == {"m"}
    assert ANTHROPIC.without_calls(reply, {"m"}) == {"role": "assistant", "content": [text]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "m"}]}
    assert ANTHROPIC.without_calls(result, {"m"}) is None
    assert ANTHROPIC.without_calls(reply, {"x"}) is reply


def test_langchain_memory_calls_in_every_place_a_partner_model_puts_them() -> None:
    calls = [{"id": "m", "name": TOOL_NAME, "args": {}}, {"id": "s", "name": "search", "args": {}}]
    reply = AIMessage("noted", tool_calls=calls)
    assert LANGCHAIN.memory_call_ids(reply, TOOL_NAME) == {"m"}
    kept = LANGCHAIN.without_calls(reply, {"m"})
    assert isinstance(kept, AIMessage) and [c["id"] for c in kept.tool_calls] == ["s"]
    raw = AIMessage("", additional_kwargs={"tool_calls": [_chat_call("m")]})
    assert LANGCHAIN.memory_call_ids(raw, TOOL_NAME) == {"m"}
    assert LANGCHAIN.without_calls(raw, {"m"}) is None
    blocks = AIMessage([{"type": "tool_use", "id": "m", "name": TOOL_NAME, "input": {}}])
    assert LANGCHAIN.memory_call_ids(blocks, TOOL_NAME) == {"m"}
    assert LANGCHAIN.without_calls(ToolMessage("ok", tool_call_id="m"), {"m"}) is None
    human = HumanMessage("hi")
    assert LANGCHAIN.without_calls(human, {"m"}) is human
    assert LANGCHAIN.memory_call_ids(human, TOOL_NAME) == set()


def test_shorthand_carries_no_calls() -> None:
    message = ("assistant", "hi")
    assert SHORTHAND.memory_call_ids(message, TOOL_NAME) == set()
    assert SHORTHAND.without_calls(message, {"m"}) is message


# -- writing injections ---------------------------------------------------------------


def test_chat_injections_are_messages_of_their_own() -> None:
    assert CHAT.system_at(top=True) and CHAT.system_at(top=False)
    assert CHAT.system_message("S", [{"role": "system", "content": "x"}]) == {
        "role": "system",
        "content": "S",
    }
    developer = [{"role": "developer", "content": "x"}]
    assert CHAT.system_message("S", developer) == {"role": "developer", "content": "S"}
    assert CHAT.user_message(["a", "b"]) == {"role": "user", "content": "a\n\nb"}
    assert not CHAT.can_prepend({"role": "user", "content": "x"})
    assert not RESPONSES.can_append({"role": "user", "content": "x"})


def test_anthropic_injections_merge_into_user_turns() -> None:
    assert not ANTHROPIC.system_at(top=True)
    with pytest.raises(ValidationError):
        ANTHROPIC.system_message("S", [])
    user = {"role": "user", "content": "hi"}
    assert ANTHROPIC.can_prepend(user)
    assert ANTHROPIC.prepend(user, ["M"]) == {
        "role": "user",
        "content": [{"type": "text", "text": "M"}, {"type": "text", "text": "hi"}],
    }
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}]}
    assert not ANTHROPIC.can_prepend(results) and ANTHROPIC.can_append(results)
    assert ANTHROPIC.append(results, ["B"])["content"][-1] == {"type": "text", "text": "B"}
    assert ANTHROPIC.user_message(["a"]) == {
        "role": "user",
        "content": [{"type": "text", "text": "a"}],
    }
    assert user == {"role": "user", "content": "hi"}  # never mutated


def test_anthropic_system_parameter_gets_a_block_of_its_own() -> None:
    assert append_system(None, "M") == "M"
    assert append_system("base", "M") == [
        {"type": "text", "text": "base"},
        {"type": "text", "text": "M"},
    ]


def test_langchain_injections_are_langchain_messages() -> None:
    assert type(LANGCHAIN.system_message("S", [])) is SystemMessage
    assert LANGCHAIN.system_at(top=False)
    assert LEADING_SYSTEM_ONLY.system_at(top=True)
    assert not LEADING_SYSTEM_ONLY.system_at(top=False)
    new = LANGCHAIN.user_message(["a", "b"])
    assert type(new) is HumanMessage and new.content == "a\n\nb"
    human = HumanMessage("hi")
    assert LANGCHAIN.prepend(human, ["M"]).content == "M\n\nhi"
    assert LANGCHAIN.append(human, ["B"]).content == [
        {"type": "text", "text": "hi"},
        {"type": "text", "text": "B"},
    ]
    assert not LANGCHAIN.can_prepend(AIMessage("x"))
    assert human.content == "hi"


def test_views_for_token_counting() -> None:
    view = CHAT.view({"role": "assistant", "content": "x", "tool_calls": [_chat_call("m")]})
    assert (
        view is not None
        and view.label == "assistant"
        and view.extra == {"tool_calls": [_chat_call("m")]}
    )
    item = RESPONSES.view({"type": "message", "role": "user", "content": "x"})
    assert item is not None and item.extra is None
    lc = LANGCHAIN.view(AIMessage("x", name="ada"))
    assert lc is not None and (lc.label, lc.name, lc.extra) == ("ai", "ada", None)
    assert SHORTHAND.view(("user", "x")) is None
