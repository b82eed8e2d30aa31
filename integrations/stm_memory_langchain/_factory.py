"""``ShortTermMemoryHistoryFactory``: ``get_session_history`` for
``RunnableWithMessageHistory``, one :class:`ShortTermMemoryHistory` per conversation."""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.runnables import ConfigurableFieldSpec

from stm_memory import ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory.kit import TurnOptions, check_memory_setup

from ._history import ShortTermMemoryHistory
from ._scope import SCOPE_FIELDS, scope_from_values

__all__ = ["MAX_CACHED_HISTORIES", "ShortTermMemoryHistoryFactory"]

# Options a factory passes to each history (the others are scope fields).
_HISTORY_OPTIONS = ("provider", "trim_history", "memory_role")
# Factories keep this many histories (one per conversation) before dropping the oldest.
MAX_CACHED_HISTORIES = 10_000


class ShortTermMemoryHistoryFactory:
    """``get_session_history`` for ``RunnableWithMessageHistory``: one
    :class:`ShortTermMemoryHistory` per conversation, built from the keys the chain is
    configured with.

    ``RunnableWithMessageHistory`` calls it with ``config["configurable"]["session_id"]``
    by default, or with the keys of its ``history_factory_config`` by name (pass the
    same ``keys`` here, and ``history_factory_config=factory.config_specs``). The
    scope is built from those values and the scope fields given as keyword options
    (``user_id``, ``server_id``, ``persona_id``, names …): ``channel_id`` is the
    ``channel_id`` key, else ``thread_id``, else ``session_id``. Integer ids are
    turned into strings. Or pass ``scope=`` a callable taking the keys by name. Keys
    and fields that can never give a user and a channel are a ``ConfigurationError``
    here, where the factory is built.

    A ``server_id`` shares memory: every conversation of that server is briefed with
    the others, whoever's they are. For conversations of separate end users, leave it
    out and key by user (``keys=("user_id", "session_id")``).

    ``history=`` builds each conversation's full record from the same keys (default:
    in memory). Other options (``provider``, ``trim_history``, ``memory_role``) go to
    every history. The factory keeps the histories it built (the most recent
    ``MAX_CACHED_HISTORIES``), so an in-memory record lives as long as it does.
    """

    def __init__(
        self,
        memory: ShortTermMemory,
        *,
        keys: Sequence[str] = ("session_id",),
        scope: Callable[..., Scope] | None = None,
        history: Callable[..., BaseChatMessageHistory] | None = None,
        **options: Any,
    ) -> None:
        check_memory_setup(memory)
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
        self.options = TurnOptions(**{k: options.pop(k) for k in _HISTORY_OPTIONS if k in options})
        self.memory = memory
        self.keys = tuple(keys)
        self.scope = scope
        self.history = history
        self.scope_defaults = options  # user_id=, server_id=, …
        self._built: OrderedDict[tuple[Any, ...], ShortTermMemoryHistory] = OrderedDict()
        self._lock = threading.Lock()
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

    def __call__(self, *args: Any, **kwargs: Any) -> ShortTermMemoryHistory:
        if len(args) > len(self.keys):
            raise TypeError(f"expected at most {len(self.keys)} arguments ({self.keys})")
        values = dict(zip(self.keys, args, strict=False))
        values.update(kwargs)
        missing = [k for k in self.keys if k not in values]
        if missing:
            raise TypeError(f"missing {', '.join(missing)}")
        key = tuple(values[k] for k in self.keys)
        with self._lock:
            built = self._built.get(key)
            if built is not None:
                self._built.move_to_end(key)
                return built
        history = ShortTermMemoryHistory(
            self.memory,
            self._scope(values),
            history=self.history(**values) if self.history is not None else None,
            provider=self.options.provider,
            trim_history=self.options.trim_history,
            memory_role=self.options.memory_role,
        )
        with self._lock:
            built = self._built.setdefault(key, history)
            while len(self._built) > MAX_CACHED_HISTORIES:
                self._built.popitem(last=False)
            return built

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
