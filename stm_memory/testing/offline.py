"""A deterministic offline chat model that answers from a script and calls
``update_short_term_memory`` when the prompt nudges it to.

One provider-neutral core (:class:`OfflineModel`) and thin shapes around it: a
LangChain chat model, OpenAI Chat Completions / Anthropic Messages response bodies,
and in-process SDK clients (no network) for testing the provider loops. Each body
reports its usage as the provider would: with a :class:`~stm_memory.testing.PromptCache`
(``cache=``) the tokens a repeated prefix would be served from the provider's cache are
reported as cached, in the provider's own usage fields.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stm_memory.model.messages import message_text
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.testing.prompt_cache import CacheUsage, PromptCache, request_parts
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "OfflineModel",
    "OfflineReply",
    "anthropic_message_body",
    "named_call",
    "openai_chat_body",
    "openai_responses_body",
    "user_words",
]


@dataclass(frozen=True, slots=True)
class OfflineReply:
    text: str
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def _first_sentence(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    for stop in (". ", "? ", "! "):
        if stop in line:
            line = line.split(stop, 1)[0] + stop.strip()
            break
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _own_text(text: str) -> str:
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    kept = [p for p in paragraphs if TOOL_NAME not in p and not p.startswith(CONTENT_HEADER)]
    return "\n\n".join(kept).strip()


def user_words(dialogue: Sequence[tuple[str, str]]) -> tuple[int, str]:
    """The index of the last user message holding words of the user's own (not only a
    block or note of ours, e.g. one merged after tool results) and those words;
    ``(-1, "")`` when there is none."""
    said = [i for i, (role, text) in enumerate(dialogue) if role == "user" and _own_text(text)]
    return (said[-1], _own_text(dialogue[said[-1]][1])) if said else (-1, "")


def named_call(text: str, begins: str, tool: str) -> str | None:
    """The call id that ``text`` names for a result of ``tool`` whose first line begins
    with ``begins``: in a cleared result's placeholder, or in a line of the index of
    results a history cut left out (stm_memory/prompt/clearing.py); None when neither
    names one. How a model reading the request finds what to read back."""
    found = re.search(rf'call_id="([^"]+)"\)[^\]]*{re.escape(begins)}', text) or re.search(
        rf"^- (\S+) \({re.escape(tool)}\): {re.escape(begins)}", text, re.MULTILINE
    )
    return found.group(1) if found else None


@dataclass
class OfflineModel:
    """Scripted answers; memory updates when nudged.

    ``answers`` is a list consumed in order (then ``default_answer`` is used), or a
    callable ``(user_text) -> answer``. The model calls the memory tool when the tool is
    offered and the prompt names it (our nudge does), at most once per user turn,
    answering in the same reply — exactly the "answer, then update" the nudge asks for.
    """

    answers: Sequence[str] | Callable[[str], str] = ()
    default_answer: str = "Understood: {topic}"
    summary_items: int = 5
    calls: int = 0
    tool_calls_made: int = 0
    _cursor: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _answer(self, user_text: str) -> str:
        if callable(self.answers):
            return self.answers(user_text)
        with self._lock:
            index = self._cursor
            self._cursor += 1
        if index < len(self.answers):
            return self.answers[index]
        return self.default_answer.format(topic=_first_sentence(user_text, 60))

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        """``dialogue`` is (role, text) pairs, roles ``system``/``user``/``assistant``/``tool``;
        ``tools`` maps offered tool names to their JSON parameter schemas."""
        self.calls += 1
        tools = tools or {}
        last_user = max((i for i, (r, _) in enumerate(dialogue) if r == "user"), default=-1)
        user_text = _own_text(dialogue[last_user][1]) if last_user >= 0 else ""
        after = dialogue[last_user + 1 :]
        if any(role == "tool" for role, _ in after):
            # A tool already ran this turn: wrap up without calling it again.
            return OfflineReply(self._answer(user_text))
        nudged = any(TOOL_NAME in text for role, text in dialogue if role in ("system", "user"))
        answer = self._answer(user_text)
        if TOOL_NAME in tools and nudged:
            self.tool_calls_made += 1
            args = self._memory_arguments(dialogue, tools[TOOL_NAME])
            return OfflineReply(answer, ((TOOL_NAME, args),))
        return OfflineReply(answer)

    def _memory_arguments(
        self, dialogue: Sequence[tuple[str, str]], schema: Mapping[str, Any]
    ) -> dict[str, Any]:
        # Memory blocks and nudges may be merged into user turns (Anthropic placement):
        # keep the user's own paragraphs, drop the injected ones.
        users = [own for r, t in dialogue if r == "user" and (own := _own_text(t))]
        points = [_first_sentence(t) for t in users[-self.summary_items :]]
        summary = "Recent conversation: " + " | ".join(points) if points else "No dialogue yet."
        properties = list((schema.get("properties") or {"summary": {}}).keys())
        if properties == ["summary"]:
            return {"summary": summary[:1400]}
        return {name: f"{name.replace('_', ' ')}: {summary}"[:1400] for name in properties}


# -- provider shapes ---------------------------------------------------------------------


def _input_usage(
    request: Mapping[str, Any], api: str, cache: PromptCache | None, at: datetime | None
) -> CacheUsage:
    """The request's input tokens, split by the provider's cache when one is given (it
    raises ValueError for a request the provider refuses, e.g. five breakpoints)."""
    if cache is not None:
        return cache.observe(request, at=at, api=api)
    return CacheUsage(sum(p.tokens for p in request_parts(request, provider=api)))


def _openai_dialogue(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for m in body.get("messages", []):
        role = m.get("role", "user")
        role = "system" if role == "developer" else role
        out.append((role, message_text(m.get("content"))))
    return out


def _openai_tools(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    tools: dict[str, Mapping[str, Any]] = {}
    for t in body.get("tools", []) or []:
        fn = t.get("function", t)
        tools[fn["name"]] = fn.get("parameters") or {}
    return tools


def openai_chat_body(
    model: OfflineModel,
    request: Mapping[str, Any],
    *,
    cache: PromptCache | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """A Chat Completions response body for a request body (deterministic ids); ``cache``
    (observed at ``at``) decides ``usage.prompt_tokens_details.cached_tokens``."""
    usage = _input_usage(request, "openai_chat", cache, at)
    reply = model.respond(_openai_dialogue(request), tools=_openai_tools(request))
    n = model.calls
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    prompt = usage.input_tokens
    completion = len(json.dumps(message)) // 4
    return {
        "id": f"chatcmpl-offline-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": str(request.get("model", "offline")),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {
                "cached_tokens": usage.cached_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
            },
        },
    }


def _anthropic_dialogue(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    system = body.get("system")
    if system:
        out.append(("system", message_text(system)))
    for m in body.get("messages", []):
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        for block in results:  # what the tool returned, as the other APIs' tool messages
            out.append(("tool", message_text(block.get("content")) or "tool result"))
        others = [b for b in blocks if not any(b is r for r in results)]
        # One paragraph per text block, so injected memory blocks stay separable.
        text = "\n\n".join(message_text([b]) for b in others) if blocks else message_text(content)
        if text or not blocks:
            out.append((m.get("role", "user"), text))
    return out


def anthropic_message_body(
    model: OfflineModel,
    request: Mapping[str, Any],
    *,
    cache: PromptCache | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """An Anthropic Messages response body for a request body (deterministic ids);
    ``cache`` (observed at ``at``) splits the input into ``input_tokens`` (after the last
    breakpoint), ``cache_read_input_tokens`` and ``cache_creation_input_tokens``."""
    usage = _input_usage(request, "anthropic", cache, at)
    tools = {t["name"]: t.get("input_schema") or {} for t in request.get("tools", []) or []}
    reply = model.respond(_anthropic_dialogue(request), tools=tools)
    n = model.calls
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, (name, args) in enumerate(reply.tool_calls):
        content.append(
            {"type": "tool_use", "id": f"toolu_{n:02d}_{i}", "name": name, "input": args}
        )
    return {
        "id": f"msg_offline_{n}",
        "type": "message",
        "role": "assistant",
        "model": str(request.get("model", "offline")),
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.uncached_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_read_input_tokens": usage.cached_tokens,
            "output_tokens": len(json.dumps(content)) // 4,
        },
    }


def _responses_dialogue(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if body.get("instructions"):
        out.append(("system", str(body["instructions"])))
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            out.append(("tool", str(item.get("output", ""))))
        elif kind == "message" or "role" in item:
            role = item.get("role", "user")
            out.append(
                ("system" if role == "developer" else role, message_text(item.get("content")))
            )
    return out


def openai_responses_body(
    model: OfflineModel,
    request: Mapping[str, Any],
    *,
    cache: PromptCache | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """A Responses API response body for a request body (deterministic ids); ``cache``
    (observed at ``at``) decides ``usage.input_tokens_details.cached_tokens``."""
    usage = _input_usage(request, "openai_responses", cache, at)
    tools = {
        t["name"]: t.get("parameters") or {}
        for t in request.get("tools", []) or []
        if t.get("type") == "function"
    }
    dialogue = _responses_dialogue(request)
    reply = model.respond(dialogue, tools=tools)
    n = model.calls
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(
            {
                "id": f"msg_offline_{n}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, (name, args) in enumerate(reply.tool_calls):
        output.append(
            {
                "id": f"fc_offline_{n}_{i}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": json.dumps(args, ensure_ascii=False),
            }
        )
    prompt = usage.input_tokens
    completion = len(json.dumps(output)) // 4
    return {
        "id": f"resp_offline_{n}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "model": str(request.get("model", "offline")),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {
                "cached_tokens": usage.cached_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
            },
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }
