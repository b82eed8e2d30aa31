"""Argument checks the integrations share: one error type for a developer's mistake
(:class:`~stm_memory.ValidationError`), raised before a turn begins so a wrong call
never counts as a turn or sends a request. A wrong *kind* of object where the loop
needs another (an async client for a sync loop, an async handler it cannot await,
an option the loop sets itself) is a :class:`TypeError`, as Python raises for it."""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeGuard

from stm_memory.engine import ShortTermMemory
from stm_memory.errors import ValidationError
from stm_memory.model import Scope
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "MEMORY_ROLES",
    "as_messages",
    "check_memory_role",
    "check_memory_setup",
    "check_message_list",
    "check_model",
    "check_positive_int",
    "check_tools",
    "refuse_async_callables",
    "refuse_reserved",
    "refuse_wrong_client",
]

#: The roles memory can be injected with (see ``MemoryContext.role``).
MEMORY_ROLES = ("system", "user")

# check_memory_setup(scope=...) left out: the caller has no fixed scope to check.
_NO_SCOPE: Any = object()


def _sequence(value: object) -> TypeGuard[Sequence[Any]]:
    # A str, bytes or one dict is a sequence (or iterable) too, and always a mistake here.
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | Mapping)


def check_memory_role(value: object) -> None:
    """Refuse a ``memory_role`` the integrations do not know."""
    if value not in MEMORY_ROLES:
        raise ValidationError(f"memory_role must be 'system' or 'user', got {value!r}")


def check_memory_setup(
    memory: object, *, scope: object = _NO_SCOPE, memory_role: object = "system"
) -> None:
    """The constructor checks of every integration bound to a memory: ``memory`` is a
    :class:`~stm_memory.ShortTermMemory`, ``scope`` (when given) a
    :class:`~stm_memory.Scope`, ``memory_role`` one of :data:`MEMORY_ROLES`."""
    if not isinstance(memory, ShortTermMemory):
        raise ValidationError(f"memory must be a ShortTermMemory, got {type(memory).__name__}")
    if scope is not _NO_SCOPE and not isinstance(scope, Scope):
        raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}")
    check_memory_role(memory_role)


def check_model(model: object) -> None:
    if not isinstance(model, str) or not model:
        raise ValidationError("model must be a non-empty string")


def check_positive_int(name: str, value: object) -> None:
    """``max_steps``, ``max_tokens`` …: an ``int`` (not a ``bool``) of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be an integer >= 1")


def refuse_reserved(owner: str, options: Collection[str], reserved: Collection[str]) -> None:
    """Refuse request options the loop sets itself (the dialogue, the tools …)."""
    clash = sorted(set(reserved).intersection(options))
    if clash:
        raise TypeError(
            f"{owner} sets {', '.join(clash)} itself; give the dialogue, system= and "
            "tools= to run_turn"
        )


def _client_name(cls: type[Any]) -> str:
    name = f"{cls.__module__.split('.')[0]}.{cls.__name__}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def refuse_wrong_client(
    owner: str, client: object, *, needs: type[Any], wrong: type[Any], twin: str
) -> None:
    """Refuse the SDK's client of the other kind (async for a sync loop and back);
    any other client (Bedrock, Vertex, a stub) is taken as it is."""
    if isinstance(client, wrong):
        raise TypeError(
            f"{owner} needs {_client_name(needs)} client, got {_client_name(wrong)}; use {twin}"
        )


def refuse_async_callables(
    owner: str, twin: str, tool_handlers: Mapping[str, Any] | None, on_text: object
) -> None:
    """A blocking loop cannot await: an async tool handler or text callback would
    never run (its coroutine dropped), so it is refused before the turn."""
    named = [*(tool_handlers or {}).items(), ("on_text", on_text)]
    found = [name for name, fn in named if inspect.iscoroutinefunction(fn)]
    if found:
        raise TypeError(f"{owner} cannot await async callables ({', '.join(found)}); use {twin}")


def as_messages(messages: str | Sequence[Any]) -> list[Any]:
    """The caller's dialogue as a new list; a bare string is one user message."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not _sequence(messages):
        raise ValidationError("messages must be a list of messages (or one user string)")
    return list(messages)


def check_message_list(messages: object, *, what: str) -> list[Any]:
    """A list of message dicts, each with a ``role`` (``what`` names their format)."""
    if not _sequence(messages):
        raise ValidationError(f"messages must be a list of {what} message dicts")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise ValidationError(f"messages[{i}] must be a dict with 'role' and 'content'")
    return list(messages)


def check_tools(tools: object, tool_handlers: Mapping[str, Any] | None, *, what: str) -> list[Any]:
    """The caller's tool definitions (dicts in ``what``'s format), none of them the
    memory tool, which the loop adds and runs itself."""
    if not _sequence(tools):
        raise ValidationError(f"tools must be a list of {what} tool definitions")
    for tool in tools:
        if not isinstance(tool, Mapping):
            raise ValidationError(f"each tool must be a dict, got {type(tool).__name__}")
        if tool.get("name") == TOOL_NAME:
            raise ValidationError(f"{TOOL_NAME} is added by the loop; do not pass it in tools")
    if tool_handlers and TOOL_NAME in tool_handlers:
        raise ValidationError(f"{TOOL_NAME} is run by the memory; do not pass a handler for it")
    return list(tools)
