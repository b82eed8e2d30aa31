"""One dialogue, four wire formats: the history-cut tests build a conversation once
(turns of user messages and assistant steps with tool calls) and render it as OpenAI
Chat dicts, Responses items, Anthropic dicts or LangChain messages; the validity checks
say what each provider accepts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from stm_memory import TOOL_NAME

FORMATS = ("openai", "responses", "anthropic", "langchain")


@dataclass(frozen=True)
class Step:
    """One model reply: optional text and tool calls ``(id, name)``; results follow."""

    text: str | None = None
    calls: tuple[tuple[str, str], ...] = ()
    reasoning: bool = False  # Responses: a reasoning item opens the reply


@dataclass(frozen=True)
class Turn:
    users: tuple[str, ...]
    steps: tuple[Step, ...] = field(default=())


def say(*users: str, answer: str | None = "ok") -> Turn:
    return Turn(users, (Step(answer),) if answer is not None else ())


def render(fmt: str, turns: Sequence[Turn], *, system: str | None = None) -> list[Any]:
    out: list[Any] = []
    if system is not None:
        out.append(_system(fmt, system))
    for turn in turns:
        for text in turn.users:
            out.append(_user(fmt, text))
        for step in turn.steps:
            out.extend(_reply(fmt, step))
            out.extend(_results(fmt, step))
    return out


def render_turns(fmt: str, turns: Sequence[Turn]) -> list[list[Any]]:
    return [render(fmt, [t]) for t in turns]


def _system(fmt: str, text: str) -> Any:
    if fmt == "langchain":
        from langchain_core.messages import SystemMessage

        return SystemMessage(text)
    if fmt == "responses":
        return {"type": "message", "role": "system", "content": text}
    return {"role": "system", "content": text}


def _user(fmt: str, text: str) -> Any:
    if fmt == "langchain":
        return HumanMessage(text)
    if fmt == "responses":
        return {"type": "message", "role": "user", "content": text}
    return {"role": "user", "content": text}


def _reply(fmt: str, step: Step) -> list[Any]:
    args = '{"summary": "s"}'
    if fmt == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": step.text}
        if step.calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": args}}
                for i, n in step.calls
            ]
        return [message]
    if fmt == "responses":
        items: list[Any] = []
        if step.reasoning:
            items.append({"type": "reasoning", "id": f"rs_{id(step)}", "summary": []})
        if step.text is not None:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": step.text}],
                }
            )
        items += [
            {"type": "function_call", "call_id": i, "name": n, "arguments": args}
            for i, n in step.calls
        ]
        return items
    if fmt == "anthropic":
        blocks: list[dict[str, Any]] = []
        if step.text is not None:
            blocks.append({"type": "text", "text": step.text})
        blocks += [
            {"type": "tool_use", "id": i, "name": n, "input": {"summary": "s"}}
            for i, n in step.calls
        ]
        return [{"role": "assistant", "content": blocks}]
    calls = [
        {"name": n, "args": {"summary": "s"}, "id": i, "type": "tool_call"} for i, n in step.calls
    ]
    return [AIMessage(content=step.text or "", tool_calls=calls)]


def _results(fmt: str, step: Step) -> list[Any]:
    if not step.calls:
        return []
    if fmt == "openai":
        return [{"role": "tool", "tool_call_id": i, "content": "done"} for i, _ in step.calls]
    if fmt == "responses":
        return [
            {"type": "function_call_output", "call_id": i, "output": "done"} for i, _ in step.calls
        ]
    if fmt == "anthropic":
        blocks = [
            {"type": "tool_result", "tool_use_id": i, "content": "done"} for i, _ in step.calls
        ]
        return [{"role": "user", "content": blocks}]
    return [ToolMessage(content="done", tool_call_id=i) for i, _ in step.calls]


# -- what each provider accepts --------------------------------------------------------


def merged_anthropic(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive same-role turns merged, as the loop sends them (and as the API reads
    them)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": [*out[-1]["content"], *blocks]}
        else:
            out.append({"role": m["role"], "content": list(blocks)})
    return out


def validity_errors(fmt: str, messages: Sequence[Any]) -> list[str]:
    """Why a provider would refuse the request (empty: it accepts it)."""
    if fmt == "openai":
        return _chat_errors(messages)
    if fmt == "responses":
        return _responses_errors(messages)
    if fmt == "anthropic":
        return _anthropic_errors(merged_anthropic([m for m in messages if m["role"] != "system"]))
    return _langchain_errors(messages)


def _chat_errors(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    pending: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m["tool_call_id"] not in pending:
                errors.append(f"{i}: tool message answers no call of the assistant before it")
            pending.discard(m["tool_call_id"])
            continue
        if pending:
            errors.append(f"{i}: calls {sorted(pending)} have no tool message")
        pending = {c["id"] for c in m.get("tool_calls") or []}
        if m["role"] == "assistant" and not m.get("tool_calls") and m.get("content") in (None, ""):
            errors.append(f"{i}: empty assistant message")
    if pending:
        errors.append(f"end: calls {sorted(pending)} have no tool message")
    return errors


def _responses_errors(items: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                errors.append(f"{i}: output for unknown call {item['call_id']}")
            answered.add(item["call_id"])
        elif kind == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else None
            if nxt is None or nxt.get("type") == "reasoning" or nxt.get("role") == "user":
                errors.append(f"{i}: reasoning item without the item it precedes")
    if calls - answered:
        errors.append(f"calls without output: {sorted(calls - answered)}")
    return errors


def _anthropic_errors(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    errors: list[str] = []
    if messages and messages[0]["role"] != "user":
        errors.append("0: the first message is not a user turn")
    for i, m in enumerate(messages):
        uses = {b["id"] for b in m["content"] if b.get("type") == "tool_use"}
        results = [b["tool_use_id"] for b in m["content"] if b.get("type") == "tool_result"]
        if results:
            before = messages[i - 1] if i else None
            asked = (
                {b["id"] for b in before["content"] if b.get("type") == "tool_use"}
                if before
                else set()
            )
            if not set(results) <= asked:
                errors.append(f"{i}: tool_result answers no tool_use of the message before it")
        if uses:
            after = messages[i + 1] if i + 1 < len(messages) else None
            got = {b.get("tool_use_id") for b in after["content"]} if after else set()
            if not uses <= got:
                errors.append(f"{i}: tool_use without its tool_result in the next message")
        if not m["content"]:
            errors.append(f"{i}: empty message")
    return errors


def _langchain_errors(messages: Sequence[BaseMessage]) -> list[str]:
    errors: list[str] = []
    pending: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in pending:
                errors.append(f"{i}: ToolMessage answers no call of the AIMessage before it")
            pending.discard(m.tool_call_id)
            continue
        if pending:
            errors.append(f"{i}: calls {sorted(pending)} have no ToolMessage")
        pending = {str(c["id"]) for c in m.tool_calls} if isinstance(m, AIMessage) else set()
    if pending:
        errors.append(f"end: calls {sorted(pending)} have no ToolMessage")
    return errors


def memory_call_count(fmt: str, messages: Sequence[Any]) -> int:
    """Memory-tool calls and results left in ``messages``."""
    n = 0
    for m in messages:
        if isinstance(m, AIMessage):
            n += sum(c["name"] == TOOL_NAME for c in m.tool_calls)
        elif isinstance(m, ToolMessage):
            n += 0
        elif isinstance(m, Mapping):
            if m.get("type") == "function_call" and m.get("name") == TOOL_NAME:
                n += 1
            for c in m.get("tool_calls") or []:
                n += c["function"]["name"] == TOOL_NAME
            content = m.get("content")
            if isinstance(content, list):
                n += sum(
                    isinstance(b, Mapping)
                    and b.get("type") == "tool_use"
                    and b.get("name") == TOOL_NAME
                    for b in content
                )
    return n


def turn_count(messages: Sequence[Any]) -> int:
    """Dialogue turns in a request (leading system messages and injections aside)."""
    from stm_memory.prompt.cut import split_turns

    return len(split_turns(messages)[1])


def earlier_memory_calls(messages: Sequence[Any]) -> int:
    """Memory-tool calls left in the turns before the current one."""
    from stm_memory.prompt.cut import split_turns

    turns = split_turns(messages)[1]
    return sum(memory_call_count("any", t) for t in turns[:-1])
