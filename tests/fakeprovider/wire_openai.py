"""OpenAI wire formats: Chat Completions and Responses (JSON and SSE)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stm_memory.testing.prompt_cache import CacheUsage

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
    refuse_breakpoints,
    reply_output_tokens,
    sse_result,
)

__all__ = ["ChatCompletionsEndpoint", "ResponsesEndpoint", "openai_error_body"]

_Emit = Callable[..., None]

_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}


def openai_error_body(
    message: str,
    *,
    status: int,
    error_type: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` as the OpenAI API sends."""
    default_type = (
        "server_error"
        if status >= 500
        else _DEFAULT_ERROR_TYPES.get(status, "invalid_request_error")
    )
    return {
        "error": {
            "message": message,
            "type": error_type or default_type,
            "param": param,
            "code": code,
        }
    }


def _render_openai_error(error: ErrorReply | WireError, request_id: str) -> WireResult:
    if isinstance(error, ErrorReply) and error.body is not None:
        # another server's own error JSON (vLLM, llama.cpp, SGLang ...), verbatim
        return json_result(error.status, dict(error.body), {"x-request-id": request_id})
    param = error.param if isinstance(error, WireError) else None
    body = openai_error_body(
        error.message,
        status=error.status,
        error_type=error.error_type,
        param=param,
        code=error.code,
    )
    return json_result(error.status, body, {"x-request-id": request_id})


def _call_ids(ctx: WireContext, reply: Reply) -> list[str]:
    return [call.id or ctx.ids.next("call_") for call in reply.tool_calls]


def _written(usage: CacheUsage) -> dict[str, int]:
    """Chat's ``cache_write_tokens``, reported where writes are billed (gpt-5.6 on)."""
    return {"cache_write_tokens": usage.cache_write_tokens} if usage.cache_write_tokens else {}


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else "unknown-model"


# ---------------------------------------------------------------------------------------
# Chat Completions
# ---------------------------------------------------------------------------------------


class ChatCompletionsEndpoint:
    """``POST /v1/chat/completions``."""

    def __init__(self, ctx: WireContext) -> None:
        self.ctx = ctx

    # -- validation ----------------------------------------------------------------------

    def validate(self, body: dict[str, Any]) -> None:
        if not isinstance(body.get("model"), str):
            raise WireError("you must provide a model parameter", param="model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise WireError(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                param="messages",
                code="empty_array",
            )
        pending: list[Any] = []
        pending_from = -1
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or "role" not in message:
                raise WireError(
                    f"Missing required parameter: 'messages[{i}].role'.",
                    param=f"messages.[{i}].role",
                )
            role = message["role"]
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in pending:
                    raise WireError(
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.",
                        param=f"messages.[{i}].role",
                    )
                pending.remove(call_id)
                continue
            if pending:
                raise self._unanswered(pending, pending_from)
            if role == "assistant":
                calls = message.get("tool_calls") or []
                pending = [c.get("id") for c in calls if isinstance(c, dict)]
                pending_from = i
        if pending:
            raise self._unanswered(pending, pending_from)
        refuse_breakpoints(body, messages, "messages")

    @staticmethod
    def _unanswered(pending: list[Any], index: int) -> WireError:
        return WireError(
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(str(p) for p in pending),
            param=f"messages.[{index}].role",
        )

    # -- rendering ----------------------------------------------------------------------------

    def render_error(self, error: ErrorReply | WireError, request_id: str) -> WireResult:
        return _render_openai_error(error, request_id)

    def render(self, reply: Reply, body: dict[str, Any], request_id: str) -> WireResult:
        completion_id = self.ctx.ids.next("chatcmpl-")
        call_ids = _call_ids(self.ctx, reply)
        usage = self._usage(reply, body)
        finish_reason = (
            "length" if reply.truncated else ("tool_calls" if reply.tool_calls else "stop")
        )
        headers = {"x-request-id": request_id}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = self._chunks(
                reply, body, completion_id, call_ids, finish_reason, usage, include_usage
            )
            events: list[tuple[str | None, str]] = [(None, dumps(c)) for c in chunks]
            events.append((None, "[DONE]"))
            return sse_result(events, headers)

        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if reply.text is not None else (None if reply.tool_calls else ""),
            "refusal": None,
            "annotations": [],
        }
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call, call_id in zip(reply.tool_calls, call_ids, strict=True)
            ]
        obj = {
            "id": completion_id,
            "object": "chat.completion",
            "created": self.ctx.created,
            "model": _model(body),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": usage,
            "service_tier": "default",
            "system_fingerprint": None,
        }
        return json_result(200, obj, headers)

    def _usage(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        # prompt_tokens counts every input token; the cached ones are in the details.
        cache = input_usage(self.ctx, "openai_chat", body, reply)
        prompt = cache.input_tokens
        completion = reply_output_tokens(reply)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {
                "cached_tokens": cache.cached_tokens,
                "audio_tokens": 0,
                **_written(cache),
            },
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _chunks(
        self,
        reply: Reply,
        body: dict[str, Any],
        completion_id: str,
        call_ids: list[str],
        finish_reason: str,
        usage: dict[str, Any],
        include_usage: bool,
    ) -> Iterator[dict[str, Any]]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            obj: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": self.ctx.created,
                "model": _model(body),
                "service_tier": "default",
                "system_fingerprint": None,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                obj["usage"] = None
            return obj

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in chunk_text(reply.text or ""):
            yield chunk({"content": piece})
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, call_ids, strict=True)):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            for piece in chunk_json(call.arguments_json()):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, finish_reason)
        if include_usage:
            final = chunk({})
            final["choices"] = []
            final["usage"] = usage
            yield final


# ---------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------


def _normalize_input(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    raise WireError("Invalid type for 'input': expected a string or an array.", param="input")


class ResponsesEndpoint:
    """``POST /v1/responses``."""

    def __init__(self, ctx: WireContext) -> None:
        self.ctx = ctx

    # -- validation ----------------------------------------------------------------------

    def _history(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        previous = body.get("previous_response_id")
        items: list[dict[str, Any]] = []
        if previous is not None:
            with self.ctx.lock:
                stored = self.ctx.stored_responses.get(str(previous))
            if stored is None:
                raise WireError(
                    f"Previous response with id '{previous}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            items.extend(stored)
        items.extend(_normalize_input(body.get("input")))
        return items

    def validate(self, body: dict[str, Any]) -> None:
        if not isinstance(body.get("model"), str):
            raise WireError(
                "Missing required parameter: 'model'.",
                param="model",
                code="missing_required_parameter",
            )
        items = self._history(body)
        answered = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
        called: set[Any] = set()
        for item in items:
            kind = item.get("type")
            if kind == "function_call":
                called.add(item.get("call_id"))
            elif kind == "function_call_output" and item.get("call_id") not in called:
                call_id = item.get("call_id")
                raise WireError(
                    f"No tool call found for function call output with call_id {call_id}.",
                    param="input",
                )
        for item in items:
            if item.get("type") == "function_call" and item.get("call_id") not in answered:
                raise WireError(
                    f"No tool output found for function call {item.get('call_id')}.", param="input"
                )
        refuse_breakpoints(body, items, "input")

    # -- rendering ----------------------------------------------------------------------------

    def render_error(self, error: ErrorReply | WireError, request_id: str) -> WireResult:
        return _render_openai_error(error, request_id)

    def render(self, reply: Reply, body: dict[str, Any], request_id: str) -> WireResult:
        response_id = self.ctx.ids.next("resp_")
        items = self._output_items(reply)
        with self.ctx.lock:
            history = self._history_unchecked(body)
            self.ctx.stored_responses[response_id] = history + items
        # The prompt the model reads is the stored history plus this input, in one go.
        prompt = {k: v for k, v in body.items() if k != "previous_response_id"}
        usage = input_usage(self.ctx, "openai_responses", {**prompt, "input": history}, reply)
        final = self._response(reply, body, response_id, items, usage, final=True)
        headers = {"x-request-id": request_id}
        if not body.get("stream"):
            return json_result(200, final, headers)
        events = self._events(reply, body, response_id, items, usage, final)
        return sse_result(((e["type"], dumps(e)) for e in events), headers)

    def _history_unchecked(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        # Called with ctx.lock held; validation already succeeded.
        stored = self.ctx.stored_responses.get(str(body.get("previous_response_id")), [])
        return [*stored, *_normalize_input(body.get("input"))]

    def _output_items(self, reply: Reply) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.text is not None or not reply.tool_calls:
            items.append(
                {
                    "id": self.ctx.ids.next("msg_"),
                    "type": "message",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "annotations": [],
                            "logprobs": [],
                            "text": reply.text or "",
                        }
                    ],
                    "role": "assistant",
                }
            )
        for call in reply.tool_calls:
            items.append(
                {
                    "id": self.ctx.ids.next("fc_"),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": call.arguments_json(),
                    "call_id": call.id or self.ctx.ids.next("call_"),
                    "name": call.name,
                }
            )
        if reply.truncated and items:
            items[-1]["status"] = "incomplete"
        return items

    def _response(
        self,
        reply: Reply,
        body: dict[str, Any],
        response_id: str,
        items: list[dict[str, Any]],
        usage: CacheUsage,
        *,
        final: bool,
    ) -> dict[str, Any]:
        status = "completed"
        if not final:
            status = "in_progress"
        elif reply.truncated:
            status = "incomplete"
        input_tokens = usage.input_tokens
        output_tokens = reply_output_tokens(reply)
        text_config = body.get("text") if isinstance(body.get("text"), dict) else None
        return {
            "id": response_id,
            "object": "response",
            "created_at": self.ctx.created,
            "status": status,
            "background": False,
            "completed_at": self.ctx.created if final and not reply.truncated else None,
            "error": None,
            "incomplete_details": (
                {"reason": "max_output_tokens"} if final and reply.truncated else None
            ),
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": body.get("max_tool_calls"),
            "model": _model(body),
            "output": items if final else [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": text_config or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_logprobs": 0,
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": (
                {
                    "input_tokens": input_tokens,
                    "input_tokens_details": {
                        "cached_tokens": usage.cached_tokens,
                        "cache_write_tokens": usage.cache_write_tokens,
                    },
                    "output_tokens": output_tokens,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": input_tokens + output_tokens,
                }
                if final
                else None
            ),
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    def _events(
        self,
        reply: Reply,
        body: dict[str, Any],
        response_id: str,
        items: list[dict[str, Any]],
        usage: CacheUsage,
        final: dict[str, Any],
    ) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []

        def emit(event_type: str, **fields: Any) -> None:
            events.append({"type": event_type, "sequence_number": len(events), **fields})

        in_progress = self._response(reply, body, response_id, items, usage, final=False)
        emit("response.created", response=in_progress)
        emit("response.in_progress", response=in_progress)
        for index, item in enumerate(items):
            if item["type"] == "message":
                self._message_events(emit, index, item)
            else:
                self._function_call_events(emit, index, item)
        emit("response.incomplete" if reply.truncated else "response.completed", response=final)
        return events

    @staticmethod
    def _message_events(emit: _Emit, index: int, item: dict[str, Any]) -> None:
        item_id = item["id"]
        text = item["content"][0]["text"]
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        empty_part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        emit(
            "response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=empty_part,
        )
        for piece in chunk_text(text):
            emit(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        emit(
            "response.output_text.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        emit(
            "response.content_part.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=item["content"][0],
        )
        emit("response.output_item.done", output_index=index, item=item)

    @staticmethod
    def _function_call_events(emit: _Emit, index: int, item: dict[str, Any]) -> None:
        item_id = item["id"]
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        for piece in chunk_json(item["arguments"]):
            emit(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=piece,
            )
        if item["status"] == "completed":
            emit(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=item)
