"""What each strategy sent and got back, in one form for every entry point.

A :class:`RecordedTurn` holds the request bodies of one conversation turn (Chat
Completions, Messages or Responses bodies, as :mod:`stm_memory.testing.prompt_cache`
prices them), the extra calls made beside them (a summarizer's), the output tokens, and
the usage the API reported. The LangChain strategies are recorded by a callback handler
(:class:`LangChainRecorder`); their messages become Chat Completions bodies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import LLMResult

from stm_memory.kit import Usage, usage_of
from stm_memory.kit.writer import WRITER_TAG
from stm_memory.testing.prompt_cache import count_text_tokens
from stm_memory.wire.base import breakpoints_in

__all__ = [
    "LangChainRecorder",
    "RecordedCall",
    "RecordedRequest",
    "RecordedTurn",
    "chat_body",
    "output_tokens_of",
    "usage_of_message",
]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as sent: its API (``openai_chat``, ``openai_responses``,
    ``anthropic``) and its body (read-only by convention)."""

    api: str
    body: Mapping[str, Any] = field(hash=False)


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """One conversation turn of one strategy."""

    index: int
    channel: str
    at: datetime
    requests: tuple[RecordedRequest, ...]
    side_requests: tuple[RecordedRequest, ...] = ()  # extra LLM calls (a summarizer's)
    output_tokens: int = 0  # count_text_tokens of the replies' text and tool arguments
    side_output_tokens: int = 0
    reported: Usage = field(default_factory=Usage)  # as the API reported it, all calls
    answer: str = ""
    memory_written: bool = False


def output_tokens_of(text: str, tool_arguments: Sequence[Any] = ()) -> int:
    """The modelled output tokens of a reply: its text and its tool calls' arguments."""
    args = "".join(
        a if isinstance(a, str) else json.dumps(a, ensure_ascii=False) for a in tool_arguments
    )
    return count_text_tokens(text) + count_text_tokens(args)


def usage_of_message(message: Any) -> Usage:
    """A LangChain ``AIMessage``'s ``usage_metadata`` as :class:`Usage` (zero without)."""
    return usage_of(message) or Usage()


def chat_body(model: str, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> dict[str, Any]:
    """LangChain messages and bound tools as the Chat Completions body they stand for."""
    converted = convert_to_openai_messages(list(messages))
    for message, sent in zip(messages, converted, strict=True):
        if breakpoints_in(message) and isinstance(message.content, list):
            # ChatOpenAI sends marked text blocks as they are (convert_to_openai_messages
            # would drop the mark): the cache breakpoints gpt-5.6 and later are sent.
            sent["content"] = [dict(b) if isinstance(b, Mapping) else b for b in message.content]
    body: dict[str, Any] = {"model": model, "messages": converted}
    if tools:
        body["tools"] = [dict(t) if isinstance(t, Mapping) else t for t in tools]
    return body


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One chat-model call seen by the recorder."""

    request: RecordedRequest
    side: bool
    text: str
    output_tokens: int
    reported: Usage


class LangChainRecorder(BaseCallbackHandler):
    """Every chat-model call of a LangChain run: the prompt (with the tools bound), the
    reply, its usage. A call made outside the agent's ``model`` node (a middleware's own
    model, such as ``SummarizationMiddleware``'s summarizer) is a side call."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.calls: list[RecordedCall] = []
        self._open: dict[UUID, tuple[RecordedRequest, bool]] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        node = (metadata or {}).get("langgraph_node")
        tools = (kwargs.get("invocation_params") or {}).get("tools") or ()
        body = chat_body(self.model_name, messages[0], tools)
        # A writer= call is made inside the model node, tagged as the writer's.
        side = node not in (None, "model") or WRITER_TAG in (kwargs.get("tags") or ())
        self._open[run_id] = (RecordedRequest("openai_chat", body), side)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        opened = self._open.pop(run_id, None)
        if opened is None:
            return
        message = getattr(response.generations[0][0], "message", None)
        text = message.text if isinstance(message, AIMessage) else ""
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        self.calls.append(
            RecordedCall(
                request=opened[0],
                side=opened[1],
                text=text,
                output_tokens=output_tokens_of(text, [c["args"] for c in calls]),
                reported=usage_of_message(message),
            )
        )

    def take(self) -> list[RecordedCall]:
        """The calls recorded since the last take."""
        calls, self.calls = self.calls, []
        return calls
