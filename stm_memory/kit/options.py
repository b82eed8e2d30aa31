"""The options every entry point shares, with one set of names, defaults and checks.

Each entry point (the loops, ``ShortTermMemoryMiddleware``, ``ShortTermMemoryHistory``
and ``with_short_term_memory``, ``ShortTermMemorySession``) takes these as keyword
arguments and builds one :class:`TurnOptions` from them, so a default or a check is
written here once; ``docs/entry-points/options.md`` lists them and
``tests/unit/test_entry_point_options.py`` fails when an entry point drifts.

What is not here, and why: ``max_steps`` bounds *our* tool loop (the provider loops and
the LCEL chain, which run the model themselves); where the framework runs the loop
(``create_agent``, the Agents SDK's ``Runner``) its own limit applies
(``ModelCallLimitMiddleware``, ``max_turns``), and a second bound of ours would only
disagree with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar, overload

from stm_memory.endpoints.hosts import form_for_host
from stm_memory.errors import ConfigurationError
from stm_memory.kit.checks import (
    check_flag,
    check_memory_role,
    check_positive_int,
    check_provider,
    check_provider_name,
)
from stm_memory.kit.writer import Writer, as_writer
from stm_memory.prompt.placement import MemoryRole

__all__ = ["OptionsView", "TurnOption", "TurnOptions"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOptions:
    """How an entry point runs its memory turns. Checked when built: a wrong value is a
    :class:`~stm_memory.ConfigurationError` before any turn begins.

    Attributes:
        provider: who serves the model: the provider exclusion (``novelai`` by
            default), the cache prices the turn's decision of what to show is made
            at, and its API's rules for the tool (an OpenAI-compatible endpoint in
            front of Anthropic is ``"anthropic"``). Never sent to an SDK, and never
            how a request is written: that is the entry point's API (its wire) and
            :attr:`memory_role`; only LangChain messages for a chat model that names
            no provider are written in this provider's style. ``None``: the entry
            point's own (the loop's API, the chat model's LangSmith provider).
        trim_history: send the model only what the memory does not cover (the memory
            block, the turns since it was written, the current turn); ``False`` sends
            everything the caller gives, for a caller that windows its own history.
        memory_role: inject memory and nudge as ``"system"`` messages, as ``"user"``
            turns, or ``"inline"``: the portable form for open models behind
            OpenAI-compatible servers (vLLM, SGLang, TGI, llama.cpp, Ollama), whose chat
            templates take one leading system message and strict alternation — the
            memory joins your leading system message, the per-turn parts join the user
            message of their turn, and no message is added. ``None`` (default): by the
            host — an OpenAI-style entry point talking to a host other than OpenAI's or
            Azure's writes the portable form, every other the system form
            (:meth:`for_host`).
        cache_hints: send the provider's prompt-cache hints (``prompt_cache_key``,
            Anthropic breakpoints); the caller's own always win.
        tool_calling: the model can call tools. ``False`` (a model whose chat template
            has no tool support, e.g. SmolLM2 on llama.cpp): the memory tool is never
            offered and the nudge never sent; briefings, the cut at the context
            budget and erasure still work (docs/open-models.md).
        context_window: the model's context window in tokens: the history budget is
            sized from it (:func:`~stm_memory.endpoints.window.history_budget`, at
            most ``Limits.history_token_budget``). ``None`` (default): found where it
            can be (an OpenAI-compatible server's own model listing, the table of
            hosted models), else ``Limits.history_token_budget`` alone.
        keep_tool_results: names of tools whose results never leave a long turn's
            requests (a plan, a todo list the model works from): the others' older
            results leave in batches, readable back (docs/concepts/long-turns.md).
        writer: a chat model that writes the channel's memory in a call of its own, at
            the cadence the nudge would ask at, for a turn model that cannot write it
            (a small open model): a LangChain chat model, a function
            ``(WriteRequest) -> str`` or a :class:`~stm_memory.kit.writer.Writer`. The
            turn model is then offered no tool and sent no nudge. ``None`` (default):
            the turn model writes it, and stm-memory makes no model call of its own.
    """

    provider: str | None = None
    trim_history: bool = True
    memory_role: MemoryRole | None = None
    cache_hints: bool = True
    tool_calling: bool = True
    context_window: int | None = None
    keep_tool_results: tuple[str, ...] = ()
    writer: Writer | None = None

    @classmethod
    def given(cls, memory: object, **options: Any) -> TurnOptions:
        """The options as a developer gives them to an entry point on ``memory``:
        checked as any, ``provider`` must be a provider name stm-memory knows (or one
        the memory excludes), and ``writer`` is taken in any form it is given in."""
        check_provider_name(options.get("provider"), also=_excluded(memory))
        if "writer" in options:
            options["writer"] = as_writer(options["writer"])
        return cls(**options)

    def __post_init__(self) -> None:
        # " openai " is the provider the exclusion list names "openai".
        object.__setattr__(self, "provider", check_provider(self.provider))
        check_flag("trim_history", self.trim_history)
        if self.memory_role is not None:
            check_memory_role(self.memory_role)
        check_flag("cache_hints", self.cache_hints)
        check_flag("tool_calling", self.tool_calling)
        if self.context_window is not None:
            check_positive_int("context_window", self.context_window)
        object.__setattr__(self, "keep_tool_results", check_names(self.keep_tool_results))
        if self.writer is not None and not isinstance(self.writer, Writer):
            raise ConfigurationError(
                f"writer must be a stm_memory Writer, got {type(self.writer).__name__} "
                "(an entry point takes a chat model or a function too)"
            )

    @property
    def form(self) -> MemoryRole:
        """The form requests are written in: the named one, else the system form (an
        entry point that knows its host settles ``None`` first, :meth:`for_host`)."""
        return self.memory_role or "system"

    def for_host(self, base_url: object) -> TurnOptions:
        """These options for an OpenAI-style endpoint at ``base_url`` (None: the SDK's
        default, OpenAI's): the form settled by the host when none was named."""
        if self.memory_role is not None:
            return self
        return replace(self, memory_role=form_for_host(None, base_url))


def check_names(value: object) -> tuple[str, ...]:
    """``keep_tool_results``: tool names, as a tuple (a lone string is refused: it would
    read as its letters)."""
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise ConfigurationError(
            f"keep_tool_results must be a list of tool names, got {type(value).__name__}"
        )
    names = tuple(value)
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigurationError("keep_tool_results must hold non-empty tool names")
    return names


def _excluded(memory: object) -> frozenset[str]:
    """The providers ``memory`` excludes (none for a buffer not bound to one yet)."""
    found = getattr(memory, "excluded_providers", None)
    return frozenset(found) if isinstance(found, frozenset | set | tuple | list) else frozenset()


class _HasOptions(Protocol):
    options: TurnOptions


class TurnOption(Generic[T]):
    """An entry point's attribute standing for the :class:`TurnOptions` field of its
    name (``loop.provider``, ``middleware.trim_history`` …). Reading it reads the
    options; setting it rebuilds them, so the value is checked as at construction (a
    wrong one is a :class:`~stm_memory.ConfigurationError`) and the turns begun from
    then on take it. (The chat history reads its ``provider`` per request, as the
    chain wrapper fills it in from its model after the turn began.)"""

    name = ""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type[Any] | None = None) -> TurnOption[T]: ...

    @overload
    def __get__(self, obj: _HasOptions, objtype: type[Any] | None = None) -> T: ...

    def __get__(
        self, obj: _HasOptions | None, objtype: type[Any] | None = None
    ) -> TurnOption[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj.options, self.name)
        return value

    def __set__(self, obj: _HasOptions, value: T) -> None:
        if self.name == "provider":
            # The developer names it, as at construction.
            check_provider_name(value, also=_excluded(getattr(obj, "memory", None)))
        changes: dict[str, Any] = {self.name: value}
        if self.name == "writer":  # taken in any form, as at construction
            changes["writer"] = as_writer(changes["writer"])
        obj.options = replace(obj.options, **changes)


class OptionsView:
    """The memory options as attributes of an entry point that keeps them in
    ``self.options``: one object holds them, so they cannot drift apart."""

    options: TurnOptions
    provider = TurnOption[str | None]()
    trim_history = TurnOption[bool]()
    memory_role = TurnOption[MemoryRole | None]()
    cache_hints = TurnOption[bool]()
    tool_calling = TurnOption[bool]()
    context_window = TurnOption[int | None]()
    keep_tool_results = TurnOption[tuple[str, ...]]()
    writer = TurnOption[Writer | None]()
