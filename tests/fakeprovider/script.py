"""Provider-neutral reply specs and the FIFO script a test fills.

A test says what the model "says" next (text, tool calls, a truncated reply, an
HTTP error); the endpoint the client happens to call decides the wire shape.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

__all__ = [
    "EXCEEDED_KINDS",
    "ErrorReply",
    "ExceededKind",
    "Reply",
    "ReplyFn",
    "Script",
    "ScriptEntry",
    "ToolCall",
    "context_exceeded_body",
]


@dataclass(frozen=True)
class ToolCall:
    """One function/tool call the model makes.

    ``arguments`` is either a mapping (serialised as compact JSON) or a raw JSON
    string sent verbatim, e.g. a partial JSON prefix for a truncated call.
    ``id`` overrides the deterministic call id the server would otherwise assign.
    """

    name: str
    arguments: Mapping[str, Any] | str
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Reply:
    """What the model produces in one turn.

    ``truncated`` means the output limit was hit: OpenAI Chat ``finish_reason``
    "length", Responses ``status`` "incomplete" with ``incomplete_details.reason``
    "max_output_tokens", Anthropic ``stop_reason`` "max_tokens". The last part of
    the reply (the last tool call, else the text) is the one that was cut.
    ``input_tokens``/``output_tokens`` override the approximate usage counts.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    truncated: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error the provider returns instead of a completion.

    Rendered in the called provider's error JSON shape. ``error_type`` defaults
    to the provider's usual type for ``status`` (e.g. 429 -> rate limit). ``body``,
    when given, is sent verbatim instead (another server's own error JSON, e.g.
    :func:`context_exceeded_body`); ``message`` then only describes it.
    """

    status: int
    message: str
    error_type: str | None = None
    code: str | None = None
    body: Mapping[str, Any] | None = None


#: Whose "context length exceeded" answer :func:`context_exceeded_body` writes.
ExceededKind: TypeAlias = Literal[
    "openai",
    "openai-responses",
    "anthropic",
    "anthropic-max-tokens",
    "llamacpp",
    "llamacpp-old",
    "vllm",
    "vllm-older",
    "vllm-oldest",
    "sglang",
    "ollama",
]
EXCEEDED_KINDS: tuple[ExceededKind, ...] = get_args(ExceededKind)


def context_exceeded_body(
    kind: ExceededKind, *, limit: int, requested: int, completion: int = 0
) -> dict[str, Any]:
    """The exact HTTP 400 body each server sends for a request longer than the
    model's context of ``limit`` tokens; ``requested`` is the request's token count
    (for the kinds that count the reply: prompt + ``completion``).

    - ``openai``: the Chat Completions body (``code`` ``context_length_exceeded``),
      e.g. https://github.com/chathub-dev/chathub/issues/126.
    - ``openai-responses``: the Responses API's, without numbers
      (https://github.com/dyad-sh/dyad/issues/1672).
    - ``anthropic``: "prompt is too long: N tokens > L maximum"
      (https://github.com/anthropics/claude-code/issues/12186); ``anthropic-max-tokens``:
      "input length and `max_tokens` exceed context limit: P + C > L"
      (https://github.com/docker/docker-agent/issues/569).
    - ``llamacpp``: llama-server's ``exceed_context_size_error`` with the
      ``n_prompt_tokens`` / ``n_ctx`` fields current builds add
      (tools/server/server-context.cpp, server-task.cpp in ggml-org/llama.cpp);
      ``llamacpp-old``: the same without them, as measured in issue #48.
    - ``vllm``: vLLM's ``VLLMValidationError`` from ``vllm/renderers/params.py``
      (``TokenizeParams._token_len_check``; ``str()`` appends the parameter and value)
      in ``{"error": {...}}`` (``vllm/entrypoints/serve/utils/error_response.py``);
      ``vllm-older``: the earlier "...your prompt contains at least N input tokens..."
      wording; ``vllm-oldest``: the first "you requested N tokens (A in the messages, B
      in the completion)" wording in the top-level ``{"object": "error"}`` body.
    - ``sglang``: ``_validate_token_len`` in
      ``python/sglang/srt/managers/tokenizer_manager.py``, top-level ``ErrorResponse``
      (``python/sglang/srt/entrypoints/openai/protocol.py``) in sgl-project/sglang.
    - ``ollama``: ``llm/llama_server.go`` in ollama/ollama, as ``/v1`` renders it
      (``openai/openai.go`` ``NewError``), without numbers.
    """
    prompt = requested - completion
    if kind == "openai":
        return {
            "error": {
                "message": f"This model's maximum context length is {limit} tokens. However, "
                f"your messages resulted in {requested} tokens. Please reduce the length of "
                "the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    if kind == "openai-responses":
        return {
            "error": {
                "message": "Your input exceeds the context window of this model. Please "
                "adjust your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        }
    if kind in ("anthropic", "anthropic-max-tokens"):
        message = (
            f"prompt is too long: {requested} tokens > {limit} maximum"
            if kind == "anthropic"
            else f"input length and `max_tokens` exceed context limit: {prompt} + "
            f"{completion} > {limit}, decrease input length or `max_tokens` and try again"
        )
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if kind in ("llamacpp", "llamacpp-old"):
        error: dict[str, Any] = {
            "code": 400,
            "message": f"request ({requested} tokens) exceeds the available context size "
            f"({limit} tokens), try increasing it",
            "type": "exceed_context_size_error",
        }
        if kind == "llamacpp":
            error |= {"n_prompt_tokens": requested, "n_ctx": limit}
        return {"error": error}
    if kind == "vllm":
        message = (
            f"You passed {prompt} input tokens and requested {completion} output tokens. "
            f"However, the model's context length is only {limit} tokens, resulting in a "
            f"maximum input length of {limit - completion} tokens. Please reduce the length "
            f"of the input prompt. (parameter=input_tokens, value={prompt})"
        )
        return {
            "error": {
                "message": message,
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }
        }
    if kind == "vllm-older":
        message = (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{completion} output tokens and your prompt contains at least {prompt} input "
            f"tokens, for a total of at least {requested} tokens. Please reduce the length "
            "of the input prompt or the number of requested output tokens. "
            f"(parameter=input_tokens, value={prompt})"
        )
        return {
            "error": {
                "message": message,
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }
        }
    if kind == "vllm-oldest":
        message = (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{requested} tokens ({prompt} in the messages, {completion} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    if kind == "sglang":
        return {
            "object": "error",
            "message": f"The input ({requested} tokens) is longer than the model's context "
            f"length ({limit} tokens).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    if kind == "ollama":
        return {
            "error": {
                "message": "the prompt is longer than the context length currently available "
                "to the model; shorten the prompt, adjust the context length in settings, or "
                "use a model with a longer context length",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    raise ValueError(f"unknown context-exceeded kind {kind!r}; one of {EXCEEDED_KINDS}")


ReplyFn: TypeAlias = Callable[[dict[str, Any]], Reply | ErrorReply]
ScriptEntry: TypeAlias = Reply | ErrorReply | ReplyFn

ToolCallLike: TypeAlias = ToolCall | tuple[str, Mapping[str, Any] | str]


def _as_tool_call(call: ToolCallLike) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    name, arguments = call
    return ToolCall(name=name, arguments=arguments)


class Script:
    """Thread-safe FIFO of scripted replies; each request consumes one entry.

    Every ``reply_*`` method returns the script so calls can be chained.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: deque[ScriptEntry] = deque()

    # -- enqueueing -----------------------------------------------------------------

    def push(self, entry: ScriptEntry) -> Script:
        """Enqueue a ready-made :class:`Reply`, :class:`ErrorReply` or callable."""
        with self._lock:
            self._entries.append(entry)
        return self

    def reply_text(self, text: str) -> Script:
        return self.push(Reply(text=text))

    def reply_tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        text_before: str | None = None,
        id: str | None = None,
    ) -> Script:
        return self.push(Reply(text=text_before, tool_calls=(ToolCall(name, arguments, id),)))

    def reply_tool_calls(
        self, calls: Iterable[ToolCallLike], *, text_before: str | None = None
    ) -> Script:
        """Several tool calls in one reply (parallel tool calls)."""
        tool_calls = tuple(_as_tool_call(c) for c in calls)
        if not tool_calls:
            raise ValueError("reply_tool_calls needs at least one call")
        return self.push(Reply(text=text_before, tool_calls=tool_calls))

    def reply_truncated_tool_call(
        self, name: str, partial_json: str, *, text_before: str | None = None
    ) -> Script:
        """A tool call whose arguments were cut off by the output-token limit."""
        return self.push(
            Reply(text=text_before, tool_calls=(ToolCall(name, partial_json),), truncated=True)
        )

    def reply_truncated_text(self, text: str) -> Script:
        """Text cut off by the output-token limit."""
        return self.push(Reply(text=text, truncated=True))

    def reply_error(
        self,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        code: str | None = None,
    ) -> Script:
        return self.push(
            ErrorReply(status=status, message=message, error_type=error_type, code=code)
        )

    def context_exceeded(
        self, kind: ExceededKind, *, limit: int, requested: int, completion: int = 0
    ) -> Script:
        """The next request is refused as longer than the model's context, with the
        exact 400 body ``kind``'s server sends (:func:`context_exceeded_body`)."""
        body = context_exceeded_body(kind, limit=limit, requested=requested, completion=completion)
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else body.get("message")
        return self.push(ErrorReply(status=400, message=str(message), body=body))

    def reply_with(self, fn: ReplyFn) -> Script:
        """Decide the reply when the request arrives: ``fn(parsed_body) -> Reply``."""
        return self.push(fn)

    # -- inspection / consumption ---------------------------------------------------------

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def pop(self) -> ScriptEntry | None:
        """Take the next entry, or ``None`` when the script is empty."""
        with self._lock:
            return self._entries.popleft() if self._entries else None
