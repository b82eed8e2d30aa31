"""Where a LangChain run's memory lives: the :class:`~stm_memory.Scope` of one run.

Pure (no LangChain import), so the classic buffer can use it without ``langchain``.

Sources, in order of precedence:

1. a caller-supplied ``scope``: a :class:`Scope`, or a callable ``(runtime, config)``
   returning one (``None`` from the callable means: no memory for this run);
2. the runtime context (``agent.invoke(..., context=...)``): a dict, dataclass or
   pydantic object with ``channel_id`` / ``user_id`` / ``server_id`` / ``persona_id``
   (and optionally ``parent_channel_id`` and the display names);
3. ``config["configurable"]``: the same keys, with ``thread_id`` standing in for a
   missing ``channel_id``.

Sources 2 and 3 merge field by field (the context wins), so a thread's ``thread_id``
can name the channel while the context names the user. Integer ids (Discord,
Telegram …) are accepted and turned into strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeAlias

from stm_memory import Scope, ValidationError

__all__ = ["SCOPE_FIELDS", "ScopeResolver", "ScopeSource", "resolve_scope", "scope_from_values"]

ScopeResolver: TypeAlias = Callable[[Any, Mapping[str, Any]], Scope | None]
"""Called with ``(runtime, config)``; returns the run's scope, or ``None`` for no memory."""

ScopeSource: TypeAlias = Scope | ScopeResolver | None

SCOPE_FIELDS = (
    "channel_id",
    "user_id",
    "server_id",
    "persona_id",
    "parent_channel_id",
    "channel_name",
    "server_name",
    "user_name",
)


def _value(source: Any, name: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _as_id(value: Any) -> Any:
    # bool is an int subclass, but True is never a sensible id: let Scope reject it.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def scope_from_values(context: Any, configurable: Mapping[str, Any] | None) -> Scope:
    """Merge the runtime context over ``configurable`` into a Scope.

    Raises :class:`ValidationError` naming what is missing (no user or channel id) or
    malformed.
    """
    conf: Mapping[str, Any] = configurable or {}
    values: dict[str, Any] = {}
    for name in SCOPE_FIELDS:
        value = _value(context, name)
        if value is None:
            value = conf.get(name)
        if value is None and name == "channel_id":
            value = conf.get("thread_id")
        if value is not None:
            values[name] = _as_id(value)
    missing = [n for n in ("user_id", "channel_id") if n not in values]
    if missing:
        where = " and ".join(missing)
        raise ValidationError(
            f"no {where} for short-term memory: pass them in the runtime context "
            "(agent.invoke(..., context={'user_id': ..., 'channel_id': ...})) or in "
            "config['configurable'] (user_id; channel_id or thread_id), or give the "
            "middleware scope=..."
        )
    if all(type(v) is str for v in values.values()):
        return _scope(tuple(values.items()))
    return Scope(**values)  # raises the ValidationError naming the bad value


@lru_cache(maxsize=1024)
def _scope(values: tuple[tuple[str, str], ...]) -> Scope:
    # Every run of an agent resolves its scope, mostly the same few channels: a Scope
    # is immutable, and checking its ids every time is the cost of building one. (A
    # value that fails the checks raises, and nothing is remembered.)
    return Scope(**dict(values))


def resolve_scope(
    source: ScopeSource, runtime: Any, config: Mapping[str, Any] | None
) -> Scope | None:
    """The scope of one run (see the module docstring); ``None`` when a resolver
    callable declines. Raises :class:`ValidationError` when no scope can be formed."""
    if isinstance(source, Scope):
        return source
    if source is not None:
        result = source(runtime, config or {})
        if result is not None and not isinstance(result, Scope):
            raise ValidationError(
                f"the scope resolver must return a Scope or None, got {type(result).__name__}"
            )
        return result
    configurable = (config or {}).get("configurable")
    return scope_from_values(
        _value(runtime, "context"),
        configurable if isinstance(configurable, Mapping) else None,
    )
