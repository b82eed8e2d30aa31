"""The offline model as a LangChain chat model (supports ``bind_tools`` and streaming)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, SkipValidation

from stm_memory.model.messages import message_text
from stm_memory.prompt.tokens import text_tokens
from stm_memory.testing.offline import OfflineModel
from stm_memory.testing.prompt_cache import CACHE_PROFILES, PromptCache
from stm_memory.wire import message_role

__all__ = ["OfflineChatModel", "stream_chunk"]


def _role(message: BaseMessage) -> str:
    # The offline model reads unknown kinds as something the user said.
    role = message_role(message)
    return "user" if role == "other" else role


def stream_chunk(
    message: AIMessage, run_manager: CallbackManagerForLLMRun | None = None
) -> ChatGenerationChunk:
    """A whole scripted reply as one final stream chunk, tool calls included.

    Why: LangChain streams a model whenever a messages-mode stream handler is attached,
    and the stock fakes drop tool calls there; a fake model's ``_stream`` yields this.
    """
    chunk = AIMessageChunk(
        content=message.content,
        id=message.id,
        chunk_position="last",
        response_metadata=message.response_metadata,
        usage_metadata=message.usage_metadata,
        tool_call_chunks=[
            {
                "name": c["name"],
                "args": json.dumps(c["args"]),
                "id": c["id"],
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(message.tool_calls)
        ],
    )
    if run_manager:
        token = str(message.content)
        run_manager.on_llm_new_token(token, chunk=ChatGenerationChunk(message=chunk))
    return ChatGenerationChunk(message=chunk)


class OfflineChatModel(BaseChatModel):
    """Deterministic chat model: scripted answers, memory updates when nudged.

    ``prompts`` records every prompt it was given (for assertions), ``model`` is the
    provider-neutral :class:`OfflineModel` doing the deciding.
    """

    # SkipValidation: the model is a plain object with a lock; nothing to validate.
    model: SkipValidation[OfflineModel] = Field(default_factory=OfflineModel)
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    # Names of the tools bound for each call, in call order (for assertions).
    tools_seen: list[list[str]] = Field(default_factory=list)
    # Provider settings, as ``ChatOpenAI(model_kwargs=...)`` takes them (e.g.
    # ``prompt_cache_retention``, which the middleware prices its swap with); unused here.
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    # Its replies report usage as a provider's do (``usage_metadata``: input tokens,
    # those its prompt cache served, output tokens), priced as OpenAI's gpt-5 caches, so
    # the turns it answers are billed in the channel's receipt (``stm-memory savings``).
    # ``report_usage=False``: no usage, as before (a benchmark that times the
    # middleware, not the stand-in's cache).
    prompt_cache: SkipValidation[PromptCache] = Field(
        default_factory=lambda: PromptCache(CACHE_PROFILES["openai-gpt-5"])
    )
    report_usage: bool = True

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "stm-offline"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        # Its provider, as tracing and stm-memory read it: priced as OpenAI's gpt-5
        # (its prompt cache is that profile's), see stm_memory.model.rates.
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "stm-offline"
        return params

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _reply(self, messages: list[BaseMessage], tools: Sequence[Any]) -> AIMessage:
        self.prompts.append(list(messages))
        self.tools_seen.append([t["function"]["name"] for t in tools])
        dialogue = [(_role(m), message_text(m.content)) for m in messages]
        schemas = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
        reply = self.model.respond(dialogue, tools=schemas)
        n = self.model.calls
        calls = [
            {"name": name, "args": args, "id": f"call_{n}_{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        if not self.report_usage:
            return AIMessage(content=reply.text, tool_calls=calls, id=f"offline-{n}")
        body = {
            "model": "stm-offline",
            "messages": convert_to_openai_messages(messages),
            "tools": list(tools),
        }
        usage = self.prompt_cache.observe(body, api="openai_chat")
        output = text_tokens(reply.text) + sum(
            text_tokens(json.dumps(args)) for _, args in reply.tool_calls
        )
        return AIMessage(
            content=reply.text,
            tool_calls=calls,
            id=f"offline-{n}",
            usage_metadata={
                "input_tokens": usage.input_tokens,
                "output_tokens": output,
                "total_tokens": usage.input_tokens + output,
                "input_token_details": {"cache_read": usage.cached_tokens},
            },
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._reply(messages, kwargs.get("tools", []))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._reply(messages, kwargs.get("tools", []))
        yield stream_chunk(message, run_manager)
