"""What a history factory is built with, checked where it is built: the keys
``RunnableWithMessageHistory`` calls it with, the scope fields or ``scope=`` callable
that turn their values into a conversation's scope, the record to wrap, the options
every history gets.

The factory itself (:class:`~stm_memory_langchain.ShortTermMemoryHistoryFactory`,
which builds and keeps one history per conversation) lives beside the history it
builds, in ``_history.py``, where ``ShortTermMemoryHistory.factory`` returns one: this
module is its base and imports nothing of the history's, so the dependency runs one
way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.runnables import ConfigurableFieldSpec

from stm_memory import ConfigurationError, Scope, ValidationError
from stm_memory.kit import TurnOptions

from ._scope import SCOPE_FIELDS, scope_from_values

__all__ = ["HistoryFactoryBase"]

# Options a factory passes to each history (the others are scope fields).
_HISTORY_OPTIONS = (
    "provider",
    "trim_history",
    "memory_role",
    "tool_calling",
    "context_window",
    "keep_tool_results",
    "writer",
)


class HistoryFactoryBase:
    """Everything of :class:`~stm_memory_langchain.ShortTermMemoryHistoryFactory` but
    building the histories: its keys and options, checked here (keys and scope fields
    that can never make a scope are a ``ConfigurationError``), the ``config_specs`` and
    signature ``RunnableWithMessageHistory`` reads, and the scope a call's values make.
    """

    def __init__(
        self,
        *,
        keys: Sequence[str] = ("session_id",),
        scope: Callable[..., Scope] | None = None,
        history: Callable[..., BaseChatMessageHistory] | None = None,
        **options: Any,
    ) -> None:
        if isinstance(keys, str) or not keys or not all(isinstance(k, str) for k in keys):
            raise ConfigurationError("keys must be a non-empty sequence of names")
        if len(set(keys)) != len(keys):
            raise ConfigurationError(f"keys must be distinct, got {list(keys)}")
        for name, value in (("scope", scope), ("history", history)):
            if value is not None and not callable(value):
                raise ConfigurationError(f"{name} must be a callable, got {type(value).__name__}")
        unknown = sorted(set(options) - {*SCOPE_FIELDS, *_HISTORY_OPTIONS})
        if unknown:
            raise ConfigurationError(
                f"unknown option(s) {', '.join(unknown)}: the factory takes the scope fields "
                f"({', '.join(SCOPE_FIELDS)}) and {', '.join(_HISTORY_OPTIONS)}"
            )
        if scope is not None and any(k in SCOPE_FIELDS for k in options):
            raise ConfigurationError("give either scope= or scope fields, not both")
        if scope is None:
            _check_scope_keys(keys, options)
        # Every history gets the same options: checked once, here, as TurnOptions.
        self.options = TurnOptions.given(
            getattr(self, "memory", None),
            **{k: options.pop(k) for k in _HISTORY_OPTIONS if k in options},
        )
        self.keys = tuple(keys)
        self.scope = scope
        self.history = history
        self.scope_defaults = options  # user_id=, server_id=, …
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in self.keys]
        )

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """``history_factory_config`` for ``RunnableWithMessageHistory``."""
        return [
            ConfigurableFieldSpec(
                id=k,
                annotation=str,
                name=k.replace("_", " ").title(),
                description=f"The conversation's {k} (short-term memory scope).",
                default="",
                is_shared=True,
            )
            for k in self.keys
        ]

    def _values(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """A call's key values by name, as the signature binds them."""
        if len(args) > len(self.keys):
            raise TypeError(f"expected at most {len(self.keys)} arguments ({self.keys})")
        values = dict(zip(self.keys, args, strict=False))
        values.update(kwargs)
        missing = [k for k in self.keys if k not in values]
        if missing:
            raise TypeError(f"missing {', '.join(missing)}")
        return values

    def _scope(self, values: Mapping[str, Any]) -> Scope:
        if self.scope is not None:
            scope = self.scope(**values)
            if not isinstance(scope, Scope):
                raise ValidationError(
                    f"the scope callable must return a Scope, got {type(scope).__name__}"
                )
            return scope
        merged = {**self.scope_defaults, **values}
        if merged.get("channel_id") is None and merged.get("thread_id") is None:
            merged["channel_id"] = merged.get("session_id")
        try:
            return scope_from_values(None, merged)
        except ValidationError as exc:
            # scope_from_values speaks to the middleware's callers; name this factory's
            # own options instead.
            given = ", ".join(f"{k}={values[k]!r}" for k in self.keys)
            raise ValidationError(
                f"ShortTermMemoryHistory.factory could not make a scope from {given}: "
                f"{_WANTS}; give the factory keys= that carry them, those fields as "
                "keyword options (user_id=...), or scope= a callable taking the keys"
            ) from exc


# What a scope needs, said the same way at construction and at first use.
_WANTS = "a scope needs a user_id and a channel (channel_id, thread_id or session_id)"


def _check_scope_keys(keys: Sequence[str], defaults: Mapping[str, Any]) -> None:
    """Fail where the factory is built when its keys and scope fields can never make a
    scope (a key it does not know of, say ``conversation_id``, names no channel)."""
    known = {*keys, *(k for k, v in defaults.items() if v is not None)}
    missing = [
        what
        for what, names in (("a user_id", ("user_id",)), ("a channel", _CHANNEL_KEYS))
        if not known.intersection(names)
    ]
    if missing:
        raise ConfigurationError(
            f"ShortTermMemoryHistory.factory(keys={list(keys)}) can never make a scope: "
            f"nothing gives it {' or '.join(missing)} ({_WANTS}); add them to keys=, give them as "
            "keyword options (user_id='u1'), or pass scope= a callable that builds the "
            "Scope from the keys"
        )


# The keys a conversation's channel is read from, in order (see _scope).
_CHANNEL_KEYS = ("channel_id", "thread_id", "session_id")
