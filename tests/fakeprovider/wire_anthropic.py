"""Anthropic Messages wire format (JSON and SSE) with conversation validation."""

from __future__ import annotations

import json
from typing import Any

from stm_memory.testing.prompt_cache import request_parts

from .script import ErrorReply, Reply
from .wire_common import (
    WireContext,
    WireError,
    WireResult,
    chunk_json,
    chunk_text,
    dumps,
    input_usage,
    json_result,
    reply_output_tokens,
    sse_result,
)

__all__ = ["MessagesEndpoint", "anthropic_error_body", "parse_partial_json"]

_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error_body(
    message: str, *, status: int, error_type: str | None = None, request_id: str | None = None
) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    default_type = _DEFAULT_ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": error_type or default_type, "message": message},
    }
    if request_id is not None:
        body["request_id"] = request_id
    return body


# ---------------------------------------------------------------------------------------
# Partial JSON (what a truncated tool_use input looks like once parsed)
# ---------------------------------------------------------------------------------------


class _Incomplete(Exception):
    """Raised when the input ends inside a value; ``value`` is the usable prefix, if any."""

    def __init__(self, value: Any = None, *, has_value: bool = False) -> None:
        super().__init__("incomplete JSON")
        self.value = value
        self.has_value = has_value


class _PartialParser:
    _WS = " \t\r\n"

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in self._WS:
            self.pos += 1

    def _peek(self) -> str:
        self._skip_ws()
        if self.pos >= len(self.text):
            raise _Incomplete()
        return self.text[self.pos]

    def value(self) -> Any:
        ch = self._peek()
        if ch == "{":
            return self._object()
        if ch == "[":
            return self._array()
        if ch == '"':
            return self._string()
        return self._scalar()

    def _object(self) -> dict[str, Any]:
        self.pos += 1
        result: dict[str, Any] = {}
        try:
            if self._peek() == "}":
                self.pos += 1
                return result
            while True:
                key = self._string()
                if self._peek() != ":":
                    raise ValueError("expected ':'")
                self.pos += 1
                try:
                    result[key] = self.value()
                except _Incomplete as inc:
                    if inc.has_value:
                        result[key] = inc.value
                    raise
                sep = self._peek()
                self.pos += 1
                if sep == "}":
                    return result
                if sep != ",":
                    raise ValueError("expected ',' or '}'")
        except _Incomplete:
            raise _Incomplete(result, has_value=True) from None

    def _array(self) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        try:
            if self._peek() == "]":
                self.pos += 1
                return result
            while True:
                try:
                    result.append(self.value())
                except _Incomplete as inc:
                    if inc.has_value:
                        result.append(inc.value)
                    raise
                sep = self._peek()
                self.pos += 1
                if sep == "]":
                    return result
                if sep != ",":
                    raise ValueError("expected ',' or ']'")
        except _Incomplete:
            raise _Incomplete(result, has_value=True) from None

    def _string(self) -> str:
        if self._peek() != '"':
            raise ValueError("expected string")
        start = self.pos
        self.pos += 1
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            self.pos += 1
            if ch == '"':
                parsed: str = json.loads(self.text[start : self.pos])
                return parsed
        raise _Incomplete()  # an unterminated string is dropped, like jiter's partial mode

    def _scalar(self) -> Any:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ",]}" + self._WS:
            self.pos += 1
        token = self.text[start : self.pos]
        if self.pos >= len(self.text):
            try:  # a number at the very end is kept; a cut literal ("tru") is not
                scalar = json.loads(token)
            except ValueError:
                raise _Incomplete() from None
            raise _Incomplete(scalar, has_value=True)
        return json.loads(token)


def parse_partial_json(text: str) -> Any:
    """Best-effort parse of a JSON prefix (unterminated strings and keys are dropped).

    Mirrors how the Anthropic SDK's stream accumulator (jiter ``partial_mode``) reads
    a truncated ``input_json_delta`` sequence. Returns ``None`` if nothing usable.
    """
    parser = _PartialParser(text)
    try:
        return parser.value()
    except _Incomplete as inc:
        return inc.value if inc.has_value else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------
# Messages endpoint
# ---------------------------------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


class MessagesEndpoint:
    """``POST /v1/messages``."""

    def __init__(self, ctx: WireContext) -> None:
        self.ctx = ctx

    # -- validation ----------------------------------------------------------------------

    def validate(self, body: dict[str, Any]) -> None:
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                raise WireError(f"{name}: Field required")
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise WireError("messages: at least one message is required")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                raise WireError(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if messages[0]["role"] != "user":
            raise WireError('messages: first message must use the "user" role')
        try:  # more than four cache_control breakpoints, or an unknown ttl
            request_parts(body, provider="anthropic")
        except ValueError as exc:
            raise WireError(str(exc)) from None

        turns: list[tuple[int, str, list[dict[str, Any]]]] = []  # (first index, role, blocks)
        for i, message in enumerate(messages):
            role = message["role"]
            if turns and turns[-1][1] == role:
                if self.ctx.strict_anthropic_alternation:
                    raise WireError(
                        'messages: roles must alternate between "user" and "assistant", '
                        f'but found multiple "{role}" roles in a row'
                    )
                turns[-1][2].extend(_blocks(message))  # the live API merges consecutive turns
                continue
            turns.append((i, role, list(_blocks(message))))

        for t, (index, role, blocks) in enumerate(turns):
            if role != "user":
                continue
            previous = turns[t - 1][2] if t > 0 else []
            tool_use_ids = [b.get("id") for b in previous if b.get("type") == "tool_use"]
            for j, block in enumerate(blocks):
                if (
                    block.get("type") == "tool_result"
                    and block.get("tool_use_id") not in tool_use_ids
                ):
                    raise WireError(
                        f"messages.{index}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            missing = [str(u) for u in tool_use_ids if u not in answered]
            if missing:
                raise WireError(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )

    # -- rendering ----------------------------------------------------------------------------

    def render_error(self, error: ErrorReply | WireError, request_id: str) -> WireResult:
        if isinstance(error, ErrorReply) and error.body is not None:
            # a given error JSON, verbatim; the API's own shape gets its request id
            raw = dict(error.body)
            if raw.get("type") == "error":
                raw.setdefault("request_id", request_id)
            return json_result(error.status, raw, {"request-id": request_id})
        body = anthropic_error_body(
            error.message, status=error.status, error_type=error.error_type, request_id=request_id
        )
        return json_result(error.status, body, {"request-id": request_id})

    def render(self, reply: Reply, body: dict[str, Any], request_id: str) -> WireResult:
        message_id = self.ctx.ids.next("msg_", 2)
        content: list[dict[str, Any]] = []
        raw_inputs: list[str | None] = []  # serialized tool input per block, None for text
        if reply.text is not None or not reply.tool_calls:
            content.append({"type": "text", "text": reply.text or ""})
            raw_inputs.append(None)
        for k, call in enumerate(reply.tool_calls):
            raw = call.arguments_json()
            cut = reply.truncated and k == len(reply.tool_calls) - 1
            parsed = parse_partial_json(raw) if cut else json.loads(raw)
            content.append(
                {
                    "type": "tool_use",
                    "id": call.id or self.ctx.ids.next("toolu_", 2),
                    "name": call.name,
                    "input": parsed if isinstance(parsed, dict) else {},
                }
            )
            raw_inputs.append(raw)
        if reply.truncated:
            stop_reason = "max_tokens"
        else:
            stop_reason = "tool_use" if reply.tool_calls else "end_turn"
        # input_tokens is only what follows the last breakpoint (or cache hit).
        usage = input_usage(self.ctx, "anthropic", body, reply)
        output_tokens = reply_output_tokens(reply)
        headers = {"request-id": request_id}

        def message(
            blocks: list[dict[str, Any]], stop: str | None, out_tokens: int
        ) -> dict[str, Any]:
            return {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage.uncached_tokens,
                    "cache_creation_input_tokens": usage.cache_write_tokens,
                    "cache_read_input_tokens": usage.cached_tokens,
                    "output_tokens": out_tokens,
                    "service_tier": "standard",
                },
            }

        if not body.get("stream"):
            return json_result(200, message(content, stop_reason, output_tokens), headers)

        events: list[tuple[str | None, str]] = []

        def emit(event: dict[str, Any]) -> None:
            events.append((event["type"], dumps(event)))

        emit({"type": "message_start", "message": message([], None, 1)})
        events.append(("ping", dumps({"type": "ping"})))
        for index, (block, raw_json) in enumerate(zip(content, raw_inputs, strict=True)):
            if raw_json is None:
                emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
                for piece in chunk_text(block["text"]):
                    emit(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        }
                    )
            else:
                emit(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {**block, "input": {}},
                    }
                )
                for piece in ["", *chunk_json(raw_json)]:
                    emit(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        }
                    )
            emit({"type": "content_block_stop", "index": index})
        emit(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        )
        emit({"type": "message_stop"})
        return sse_result(events, headers)
