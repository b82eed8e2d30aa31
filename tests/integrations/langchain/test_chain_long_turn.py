"""A long tool loop through ``with_short_term_memory`` (issue "long turns"): the caller
runs its own tools and calls the wrapped model again; every request stays inside the
model's window (gpt-4's 8,192 tokens, from the hosted table), valid, and the retrieval
tool, answered inside the wrapper and never shown to the caller, brings a cleared
result back byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from helpers.dialogues import validity_errors
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit import RECALL_TOOL
from stm_memory.prompt.clearing import turn_results
from stm_memory.prompt.tokens import text_tokens
from stm_memory_langchain import with_short_term_memory

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
WINDOW = 8192  # gpt-4's, from the hosted table
READS = 24


def report(k: int) -> str:
    lines = [f"Report {k}, section {i}: the committee reviewed item {i * k}." for i in range(52)]
    lines.insert(11, f"CODE_{k} = {(k * 104729) % 1000000:06d}-R{k}")
    return "\n".join(lines)


class Scripted(GenericFakeChatModel):
    """Scripted replies; named gpt-4 (its window: 8,192 tokens); tools bind."""

    model_name: str = "gpt-4"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


class Requests(BaseCallbackHandler):
    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.tools: list[list[str]] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: UUID, **kw: Any
    ) -> None:
        self.sent += [list(m) for m in messages]
        tools = (kw.get("invocation_params") or {}).get("tools") or []
        self.tools.append([t["function"]["name"] for t in tools])


def replies() -> Iterator[AIMessage]:
    for k in range(READS):
        call = {"name": "open_report", "args": {"name": f"report_{k}"}, "id": f"call_{k}"}
        yield AIMessage("", tool_calls=[call])
    yield AIMessage(
        "", tool_calls=[{"name": RECALL_TOOL, "args": {"call_id": "call_0"}, "id": "back"}]
    )
    yield AIMessage("The code in the first report is 000000-R0.")


def tokens(messages: list[BaseMessage]) -> int:
    return sum(
        text_tokens(str(m.content)) + text_tokens(str(getattr(m, "tool_calls", "")))
        for m in messages
    )


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_a_callers_tool_loop_stays_in_the_window(
    stm_memory: ShortTermMemory, mode: str
) -> None:
    model = Scripted(messages=replies())
    wrapped = with_short_term_memory(
        model.bind_tools([_open_report_schema()]), stm_memory, scope=SCOPE
    )
    requests = Requests()
    config: Any = {"callbacks": [requests]}
    messages: list[BaseMessage] = [HumanMessage("Read all the reports, then tell me CODE_0.")]
    for _ in range(READS + 2):
        reply = (
            wrapped.invoke(messages, config)
            if mode == "invoke"
            else await wrapped.ainvoke(messages, config)
        )
        assert isinstance(reply, AIMessage)
        messages.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            assert call["name"] == "open_report"  # ours never reach the caller
            messages.append(
                ToolMessage(
                    report(int(call["args"]["name"].split("_")[1])), tool_call_id=call["id"]
                )
            )
    assert messages[-1].content == "The code in the first report is 000000-R0."
    assert sum(len(report(k)) for k in range(READS)) / 4 > 2 * WINDOW
    for sent in requests.sent:
        assert tokens(sent) <= 0.75 * WINDOW
        assert validity_errors("langchain", sent) == []
    assert any("result cleared from this request" in str(m.content) for m in requests.sent[-1])
    assert RECALL_TOOL not in requests.tools[0] and RECALL_TOOL in requests.tools[-1]
    # The wrapper ran the retrieval call: its result, byte for byte, went to the model.
    (back,) = [r for r in turn_results(requests.sent[-1]) if r.call_id == "back"]
    assert back.text == report(0)
    # The caller's transcript keeps every result whole: only requests are cut.
    assert all(r.text == report(int(r.call_id.split("_")[1])) for r in turn_results(messages))


def _open_report_schema() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "open_report",
            "description": "Open a report by name.",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
