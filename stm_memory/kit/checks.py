"""Argument checks the integrations share, raised before a turn begins so a wrong call
never counts as a turn or sends a request. Two errors, as in the rest of the library
(:mod:`stm_memory.errors`): what a loop, middleware, session or chain is *built* with
(the memory, the client, the model, options) is a
:class:`~stm_memory.ConfigurationError`; what a *call* is given (messages, system,
tools, handlers) is a :class:`~stm_memory.ValidationError`. Both are ``ValueError``s
and :class:`~stm_memory.StmError`s, so one ``except`` catches every mistake of ours."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeGuard, TypeVar, cast

from stm_memory.config import unknown_options
from stm_memory.engine import ShortTermMemory
from stm_memory.errors import ConfigurationError, ValidationError
from stm_memory.model import Scope
from stm_memory.model.rates import PROVIDER_NAMES
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "MEMORY_ROLES",
    "as_messages",
    "check_flag",
    "check_memory",
    "check_memory_role",
    "check_memory_setup",
    "check_message_list",
    "check_model",
    "check_positive_int",
    "check_provider",
    "check_tools",
    "named_options",
    "refuse_async_callables",
    "refuse_reserved",
    "refuse_wrong_client",
]

#: The roles memory can be injected with (see ``MemoryContext.role``).
MEMORY_ROLES = ("system", "user", "inline")

# check_memory_setup(scope=...) left out: the caller has no fixed scope to check.
_NO_SCOPE: Any = object()


def _sequence(value: object) -> TypeGuard[Sequence[Any]]:
    # A str, bytes or one dict is a sequence (or iterable) too, and always a mistake here.
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | Mapping)


def check_memory_role(value: object) -> None:
    """Refuse a ``memory_role`` the integrations do not know."""
    if value not in MEMORY_ROLES:
        raise ConfigurationError(f"memory_role must be 'system', 'user' or 'inline', got {value!r}")


def check_memory(owner: str, memory: object) -> None:
    """``memory``, given to ``owner`` (a loop, middleware, session or chain), is a
    :class:`~stm_memory.ShortTermMemory`. Refused when built: anything else would only
    fail inside the first turn, after the model was already called."""
    if not isinstance(memory, ShortTermMemory):
        raise ConfigurationError(
            f"{owner} needs a ShortTermMemory as memory, got {type(memory).__name__}"
        )


def check_memory_setup(memory: object, *, scope: object = _NO_SCOPE) -> None:
    """The constructor checks of every integration bound to a memory: ``memory`` is a
    :class:`~stm_memory.ShortTermMemory`, ``scope`` (when given) a
    :class:`~stm_memory.Scope`. (The options are :class:`TurnOptions`' to check.)"""
    if not isinstance(memory, ShortTermMemory):
        raise ConfigurationError(f"memory must be a ShortTermMemory, got {type(memory).__name__}")
    if scope is not _NO_SCOPE and not isinstance(scope, Scope):
        raise ConfigurationError(f"scope must be a Scope, got {type(scope).__name__}")


def check_model(model: object) -> None:
    if not isinstance(model, str) or not model:
        raise ConfigurationError("model must be a non-empty string")


def check_provider(provider: object) -> str | None:
    """A provider name memory's provider rules go by (the provider exclusion): None
    (the integration's own provider) or a non-empty string. Anything else is refused,
    not read as "no provider", since a provider that cannot be named could never be
    excluded. (A chat model's own provider name, read off the model, can be any.)"""
    if provider is None:
        return None
    if not isinstance(provider, str) or not provider.strip():
        shown = repr(provider) if isinstance(provider, str) else type(provider).__name__
        raise ConfigurationError(f"provider must be a non-empty string or None, got {shown}")
    # " openai " is the provider the exclusion list names "openai".
    return provider.strip()


def check_provider_name(provider: object, *, also: Collection[str] = ()) -> str | None:
    """``provider=`` as a developer names it: :func:`check_provider`, and one of
    :data:`~stm_memory.model.rates.PROVIDER_NAMES` or ``also`` (the memory's
    ``excluded_providers``: a name given to be excluded is known). A typo would
    silently change nothing: no exclusion, the default prices, the default API rules."""
    name = check_provider(provider)
    known = PROVIDER_NAMES | {p.lower() for p in also}
    if name is not None and name.lower() not in known:
        raise ConfigurationError(
            f"provider: unknown provider {name!r}; the known ones are "
            f"{', '.join(sorted(known))} (an OpenAI-compatible server is "
            '"openai", or its own name; a provider you exclude is named in '
            "ShortTermMemory's excluded_providers; None: the entry point's own)"
        )
    return name


F = TypeVar("F", bound=Callable[..., Any])


def named_options(target: F) -> F:
    """Make an unknown keyword given to ``target(...)`` (an entry point's class, or a
    function that builds one) a :class:`~stm_memory.ConfigurationError` naming it, the
    option it may have meant, and every option ``target`` takes (not Python's bare
    ``TypeError``)."""
    init: Callable[..., Any] = getattr(target, "__init__") if isinstance(target, type) else target  # noqa: B009 - mypy: unsound on a type
    parameters = inspect.signature(init).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return target  # takes anything: nothing to check here
    names = [n for n in parameters if n != "self"]

    def refuse(owner: str, kwargs: Mapping[str, Any]) -> None:
        unknown = set(kwargs) - set(names)
        if unknown:
            raise unknown_options(owner, unknown, names)

    if not isinstance(target, type):

        @functools.wraps(target)
        def called(*args: Any, **kwargs: Any) -> Any:
            refuse(target.__name__, kwargs)
            return target(*args, **kwargs)

        return cast(F, called)

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        refuse(type(self).__name__, kwargs)
        init(self, *args, **kwargs)

    setattr(target, "__init__", checked)  # noqa: B010 - see above
    return target


def check_flag(name: str, value: object) -> None:
    """An on/off option (``cache_hints`` …): a ``bool``, not something truthy."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {type(value).__name__}")


def check_positive_int(name: str, value: object) -> None:
    """``max_steps``, ``max_tokens`` …: an ``int`` (not a ``bool``) of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")


def refuse_reserved(owner: str, options: Collection[str], reserved: Collection[str]) -> None:
    """Refuse request options the loop sets itself (the dialogue, the tools …)."""
    clash = sorted(set(reserved).intersection(options))
    if clash:
        raise ConfigurationError(
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
        raise ConfigurationError(
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
        raise ValidationError(
            f"{owner} cannot await async callables ({', '.join(found)}); use {twin}"
        )


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
