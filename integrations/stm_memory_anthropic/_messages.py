"""The Anthropic Messages tool loop: a thin adapter over :mod:`stm_memory.providers.loop`.

The turn itself (begin → assemble → model ↔ tools → capture → end) lives once in
:func:`stm_memory.providers.loop.run_turn_steps`; this module only knows the Messages wire
shape: where memory goes in a request, how a response becomes a
:class:`~stm_memory.providers.loop.ModelReply`, and how tool results are sent back.

Request shape, per step:

- Top-position memory content is appended to ``system`` (after the caller's system
  prompt, so a cached prefix stays cached); the nudge and any non-top content are
  merged as text blocks into a neighbouring user turn, so roles keep alternating and
  an assistant ``tool_use`` is never separated from the user ``tool_result`` answering it.
- ``tools`` is the memory tool (while a guard does not hide it) followed by the
  caller's tools. The Messages API refuses ``tool_use``/``tool_result`` blocks in a
  request that defines no tools, so when nothing is offered but the history holds
  tool traffic the memory tool is defined with ``tool_choice: none`` (never callable).
- ``messages`` carry only ``role`` and ``content`` (a speaker ``name`` kept for
  capture is not an API field), with consecutive same-role messages merged into one
  turn: several users speaking in a row, or the next user message after a turn that
  ended with tool results, still make a strictly alternating conversation.
- All tool results of one assistant message go back in ONE user message, with
  ``is_error`` set when the result reports a failure.

``TurnResult.messages`` is the dialogue as the caller gave it plus the model's
messages and the tool results: no injected memory, no nudge. Feed it back, with the
next user message appended, on the next turn.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from stm_memory.errors import ValidationError
from stm_memory.model.messages import message_text
from stm_memory.prompt.placement import MemoryRole
from stm_memory.providers.loop import (
    ModelReply,
    Op,
    ToolCall,
    ToolHandler,
    TurnResult,
    Usage,
    adrive,
    check_memory_role,
    drive,
    run_turn_steps,
)
from stm_memory.tool.schema import anthropic_tool
from stm_memory.tool.turn import TOOL_NAME, TurnContext

try:
    import anthropic
except ImportError as exc:  # the SDK is an optional extra
    raise ImportError(
        'stm_memory_anthropic needs the Anthropic SDK: pip install "stm-memory[anthropic]"'
    ) from exc

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.model import Scope
    from stm_memory.prompt.placement import MemoryContext

__all__ = [
    "PROVIDER",
    "AnthropicLoop",
    "AnthropicMessagesAdapter",
    "AsyncAnthropicLoop",
    "parse_message",
]

PROVIDER = "anthropic"

#: ``system=``: a string, or a list of text blocks (e.g. with ``cache_control``).
System = str | Sequence[Mapping[str, Any]] | None
#: ``on_text=``: receives each streamed text delta; may be async in the async loop.
TextCallback = Callable[[str], Any]
Send = Callable[[dict[str, Any]], Any]
ASend = Callable[[dict[str, Any]], Awaitable[Any]]

# The loop owns these request fields; request_options may not set them.
_RESERVED_OPTIONS = frozenset({"model", "max_tokens", "messages", "system", "tools", "stream"})
# Tool results the loop reports as failures (ours, and a caller's tool that raised).
_FAILED_STATUSES = frozenset({"tool_execution_failed", "error"})


class _MessagesClient(Protocol):
    """Anything with ``.messages.create``/``.messages.stream``: ``anthropic.Anthropic``,
    ``AnthropicBedrock``, ``AnthropicVertex`` … (or their async twins)."""

    @property
    def messages(self) -> Any: ...


# -- pure parts ------------------------------------------------------------------------


def parse_message(message: Any) -> ModelReply:
    """A Messages API ``Message`` as a :class:`ModelReply`.

    Every block is kept in the transcript as the API sent it (thinking blocks and their
    signatures must be sent back unchanged). With ``stop_reason == "max_tokens"`` the
    reply was cut at the output limit, so its tool calls are marked truncated and are
    never executed.
    """
    blocks = [block.to_dict(mode="json", exclude_none=True) for block in message.content]
    truncated = message.stop_reason == "max_tokens"
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = tuple(
        ToolCall(str(b["id"]), str(b["name"]), b.get("input") or {}, truncated)
        for b in blocks
        if b.get("type") == "tool_use"
    )
    # An assistant message with no content is refused in a later request; drop it.
    transcript = ({"role": "assistant", "content": blocks},) if blocks else ()
    return ModelReply(text, calls, transcript, _usage(message.usage))


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    # Cache writes and reads are input too (OpenAI's prompt_tokens count them the same way).
    cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    return Usage(int(usage.input_tokens or 0) + cached, int(usage.output_tokens or 0))


def _is_failure(content: str) -> bool:
    if not content.startswith("{"):
        return False
    try:
        value = json.loads(content)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("status") in _FAILED_STATUSES


def _has_tool_blocks(messages: Sequence[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return True
    return False


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []


def _wire_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The messages as the API takes them: ``role`` and ``content`` only (a speaker
    ``name`` kept for capture is not an API field), and consecutive messages of one
    role merged into one turn (several users speaking in a row; a user message after a
    turn that ended with tool results), so roles strictly alternate."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if out and out[-1]["role"] == role and role in ("user", "assistant"):
            merged = [*_blocks(out[-1]["content"]), *_blocks(content)]
            out[-1] = {"role": role, "content": merged}
        else:
            out.append({"role": role, "content": content})
    return out


def _tool_result_only(content: Any) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
    )


def _system_value(system: System) -> str | list[dict[str, Any]] | None:
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, Mapping) or not isinstance(system, Sequence):
        raise ValidationError("system must be a string or a list of text blocks")
    blocks: list[dict[str, Any]] = []
    for block in system:
        if not isinstance(block, Mapping):
            raise ValidationError("system must be a string or a list of text blocks")
        blocks.append(dict(block))
    return blocks


class AnthropicMessagesAdapter:
    """The Messages API half of a turn (:class:`stm_memory.providers.loop.ProviderAdapter`).

    ``send``/``asend`` take the request dict and return an ``anthropic.types.Message``;
    the loops below provide them. Use this class directly only to drive
    :func:`stm_memory.providers.loop.run_turn_steps` yourself.
    """

    provider = PROVIDER

    def __init__(
        self,
        *,
        model: str,
        max_tokens: int,
        send: Send,
        asend: ASend,
        request_options: Mapping[str, Any] | None = None,
        system: System = None,
        summary_limit: int = 1500,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.request_options = dict(request_options or {})
        self.system = _system_value(system)
        self.summary_limit = summary_limit
        self._send = send
        self._asend = asend

    def build_request(
        self,
        transcript: Sequence[Any],
        context: MemoryContext,
        system: str | None,
        tools: Sequence[Any],
        turn: TurnContext,
    ) -> dict[str, Any]:
        caller_system = system if system is not None else self.system
        # The history cut reads turns on the transcript as it is: merged for the wire, a
        # new user message would join the tool results before it and hide the turn.
        kept = context.cut(transcript)
        placed_system, placed = context.apply_anthropic(
            _wire_messages(kept), caller_system, trim=False
        )
        messages = _wire_messages(placed)  # idempotent; keeps the alternation a guarantee
        # A private copy: the caller may reuse or mutate its messages after the turn,
        # and TurnResult.requests must keep showing what was sent.
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": copy.deepcopy(messages),
        }
        if placed_system:
            request["system"] = copy.deepcopy(placed_system)
        request.update(self.request_options)
        if tools:
            request["tools"] = copy.deepcopy(list(tools))
        elif _has_tool_blocks(messages):
            request["tools"] = [self.memory_tool(turn)]
            request["tool_choice"] = {"type": "none"}
        else:
            request.pop("tool_choice", None)  # refused without tools
        return request

    def call_op(self, request: dict[str, Any]) -> Op:
        async def arun() -> ModelReply:
            return parse_message(await self._asend(request))

        return Op(lambda: parse_message(self._send(request)), arun, "anthropic.messages")

    def tool_results(self, results: Sequence[tuple[ToolCall, str]]) -> list[Any]:
        blocks: list[dict[str, Any]] = []
        for call, content in results:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
            if content:  # an empty text block is refused; no content is allowed
                block["content"] = content
            block["is_error"] = _is_failure(content)
            blocks.append(block)
        return [{"role": "user", "content": blocks}]

    def memory_tool(self, turn: TurnContext) -> Any:
        return anthropic_tool(turn, limit=self.summary_limit)

    def user_text(self, messages: Sequence[Any]) -> str | None:
        """The newest user message that is not only tool results (for intent detection)."""
        for message in reversed(messages):
            if not isinstance(message, Mapping) or message.get("role") != "user":
                continue
            content = message.get("content")
            if _tool_result_only(content):
                continue
            return message_text(content) or None
        return None


# -- the loops -------------------------------------------------------------------------


def _check_messages(messages: Sequence[Any]) -> list[Any]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise ValidationError("messages must be a list of Messages API message dicts")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise ValidationError(f"messages[{i}] must be a dict with 'role' and 'content'")
    return list(messages)


def _check_tools(
    tools: Sequence[Any], tool_handlers: Mapping[str, ToolHandler] | None
) -> list[Any]:
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise ValidationError("tools must be a list of Messages API tool definitions")
    for tool in tools:
        if not isinstance(tool, Mapping):
            raise ValidationError(f"each tool must be a dict, got {type(tool).__name__}")
        if tool.get("name") == TOOL_NAME:
            raise ValidationError(f"{TOOL_NAME} is added by the loop; do not pass it in tools")
    if tool_handlers and TOOL_NAME in tool_handlers:
        raise ValidationError(f"{TOOL_NAME} is run by the memory; do not pass a handler for it")
    return list(tools)


class _BaseLoop:
    _wrong_client: ClassVar[type[Any]]
    _wrong_client_hint: ClassVar[str]

    def __init__(
        self,
        client: _MessagesClient,
        memory: ShortTermMemory,
        *,
        model: str,
        max_tokens: int = 1024,
        max_steps: int = 8,
        trim_history: bool = True,
        memory_role: MemoryRole = "system",
        **request_options: Any,
    ) -> None:
        if isinstance(client, self._wrong_client):
            raise TypeError(self._wrong_client_hint)
        if not isinstance(model, str) or not model:
            raise ValidationError("model must be a non-empty string")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValidationError("max_tokens must be a positive integer")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValidationError("max_steps must be a positive integer")
        reserved = sorted(_RESERVED_OPTIONS.intersection(request_options))
        if reserved:
            raise TypeError(
                f"{type(self).__name__} sets {', '.join(reserved)} itself; pass system= "
                "and tools= to run_turn instead"
            )
        self.client = client
        self.memory = memory
        self.model = model
        self.max_tokens = max_tokens
        self.max_steps = max_steps
        # False for a caller that windows its own history: nothing is cut.
        self.trim_history = bool(trim_history)
        check_memory_role(memory_role)
        self.memory_role: MemoryRole = memory_role
        self.request_options = request_options

    def _adapter(self, system: System, send: Send, asend: ASend) -> AnthropicMessagesAdapter:
        return AnthropicMessagesAdapter(
            model=self.model,
            max_tokens=self.max_tokens,
            send=send,
            asend=asend,
            request_options=self.request_options,
            system=system,
            summary_limit=self.memory.limits.max_summary_length,
        )

    def _steps(
        self,
        adapter: AnthropicMessagesAdapter,
        scope: Scope,
        messages: Sequence[Any],
        tools: Sequence[Any],
        tool_handlers: Mapping[str, ToolHandler] | None,
    ) -> Generator[Op, Any, TurnResult]:
        return run_turn_steps(
            self.memory,
            adapter,
            scope,
            _check_messages(messages),
            tools=_check_tools(tools, tool_handlers),
            tool_handlers=tool_handlers,
            max_steps=self.max_steps,
            trim_history=self.trim_history,
            memory_role=self.memory_role,
        )


class AnthropicLoop(_BaseLoop):
    """Agent tool loop over ``anthropic.Anthropic`` (Messages API) with short-term memory.

    ``request_options`` (``temperature``, ``tool_choice``, ``metadata``, ``thinking``,
    ``extra_headers``, ``timeout`` …) go into every ``messages.create`` call.
    """

    _wrong_client = anthropic.AsyncAnthropic
    _wrong_client_hint = "AnthropicLoop needs a synchronous client; use AsyncAnthropicLoop"

    def run_turn(
        self,
        scope: Scope,
        messages: Sequence[Any],
        *,
        system: System = None,
        tools: Sequence[Any] = (),
        tool_handlers: Mapping[str, ToolHandler] | None = None,
        on_text: TextCallback | None = None,
    ) -> TurnResult:
        """Run one responding turn; ``messages`` is the dialogue so far, ending with the
        user's message. ``tool_handlers`` maps each of your tools' names to a callable
        taking the tool input dict. With ``on_text`` the replies are streamed and each
        text delta is passed to it. Provider errors propagate after the turn is closed.
        """
        callables = [on_text, *(tool_handlers or {}).values()]
        if any(inspect.iscoroutinefunction(fn) for fn in callables):
            raise TypeError("AnthropicLoop cannot await async callables; use AsyncAnthropicLoop")
        send = self._create if on_text is None else _streamer(self.client, on_text)
        adapter = self._adapter(system, send, _sync_only)
        return drive(self._steps(adapter, scope, messages, tools, tool_handlers))

    def _create(self, request: dict[str, Any]) -> Any:
        return self.client.messages.create(**request)


class AsyncAnthropicLoop(_BaseLoop):
    """:class:`AnthropicLoop` over ``anthropic.AsyncAnthropic``; tool handlers and
    ``on_text`` may be async callables."""

    _wrong_client = anthropic.Anthropic
    _wrong_client_hint = "AsyncAnthropicLoop needs an async client; use AnthropicLoop"

    async def run_turn(
        self,
        scope: Scope,
        messages: Sequence[Any],
        *,
        system: System = None,
        tools: Sequence[Any] = (),
        tool_handlers: Mapping[str, ToolHandler] | None = None,
        on_text: TextCallback | None = None,
    ) -> TurnResult:
        """Async :meth:`AnthropicLoop.run_turn`."""
        asend = self._acreate if on_text is None else _astreamer(self.client, on_text)
        adapter = self._adapter(system, _async_only, asend)
        return await adrive(self._steps(adapter, scope, messages, tools, tool_handlers))

    async def _acreate(self, request: dict[str, Any]) -> Any:
        return await self.client.messages.create(**request)


def _streamer(client: _MessagesClient, on_text: TextCallback) -> Send:
    def send(request: dict[str, Any]) -> Any:
        with client.messages.stream(**request) as stream:
            for text in stream.text_stream:
                on_text(text)
            return stream.get_final_message()

    return send


def _astreamer(client: _MessagesClient, on_text: TextCallback) -> ASend:
    async def asend(request: dict[str, Any]) -> Any:
        async with client.messages.stream(**request) as stream:
            async for text in stream.text_stream:
                result = on_text(text)
                if inspect.isawaitable(result):
                    await result
            return await stream.get_final_message()

    return asend


def _sync_only(request: dict[str, Any]) -> Awaitable[Any]:
    raise TypeError("AnthropicLoop is synchronous; drive it with stm_memory.providers.loop.drive")


def _async_only(request: dict[str, Any]) -> Any:
    raise TypeError(
        "AsyncAnthropicLoop is asynchronous; drive it with stm_memory.providers.loop.adrive"
    )
