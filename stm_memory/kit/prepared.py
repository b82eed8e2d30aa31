"""What one model request of a turn carries, as the turn decided it. Data only.

:class:`PreparedRequest` (:meth:`MemoryTurn.prepare <stm_memory.kit.MemoryTurn.prepare>`)
is the whole request: the messages and system prompt with the memory placed, the memory
tool offered, described or left out with its ``tool_choice`` (:class:`ToolRequest`), and
the cache hints (:class:`Breakpoints` for Anthropic's; OpenAI's ``prompt_cache_key`` in
``hints``). An integration maps it onto its framework's types and decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from stm_memory.wire import Breakpoints
from stm_memory.wire.base import ToolSpec

if TYPE_CHECKING:
    from stm_memory.prompt.placement import MemoryContext

__all__ = ["Ask", "Breakpoints", "PlacedView", "PreparedRequest", "ToolOffer", "ToolRequest"]

#: How a request carries the memory tool: ``"offer"`` callable, ``"describe"`` defined
#: but uncallable (``tool_choice: none``), None not at all.
ToolOffer = Literal["offer", "describe"] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """What a caller's model request says besides its messages and its wire
    (:meth:`MemoryTurn.prepare <stm_memory.kit.MemoryTurn.prepare>`):

    - ``system``: its system prompt (or ``instructions``), for a wire that keeps it apart;
    - ``provider``: the provider placement writes for and the turn's decision is priced
      at (default: the wire's family for the style, the options' for the price);
    - ``settings``: its request options or model settings (a cache hint there wins; the
      retention they ask for prices the decision), ``tool_choice`` its own, and
      ``other_tools`` whether it carries tools of its own;
    - ``cache_hints``: overrides the options' for this request; ``retention``: the
      cache retention, when the settings do not say it;
    - ``nudge``: False holds the nudge back (e.g. until the user's message is known);
    - ``context``: a hand-built context instead of the turn's;
    - ``recall``: the entry point routes the retrieval tool (``MemoryTurn.recall_call``):
      a long turn's older tool results may then leave its requests, readable back
      (:mod:`stm_memory.prompt.clearing`)."""

    system: Any = None
    provider: str | None = None
    settings: Mapping[str, Any] | None = None
    tool_choice: Any = None
    other_tools: bool = False
    cache_hints: bool | None = None
    retention: timedelta | None = None
    nudge: bool | None = None
    context: MemoryContext | None = None
    recall: bool = False

    @classmethod
    def of_options(
        cls,
        options: Mapping[str, Any],
        tools: Sequence[Any],
        *,
        cache_hints: bool | None,
        system: Any = None,
        provider: str | None = None,
        context: MemoryContext | None = None,
    ) -> Ask:
        """A loop's request: its create ``options`` (the caller's ``tool_choice`` and
        cache hints among them) as the settings, and whether the caller's ``tools``
        come along. A loop runs the retrieval tool (``recall``)."""
        return cls(
            system=system,
            provider=provider,
            settings=options,
            tool_choice=options.get("tool_choice"),
            other_tools=bool(tools),
            cache_hints=cache_hints,
            context=context,
            recall=True,
        )


@dataclass(frozen=True, slots=True)
class PlacedView:
    """A view with the turn's memory placed (:meth:`MemoryTurn.view
    <stm_memory.kit.MemoryTurn.view>`): a history or session read before the user's
    message exists, for a framework that sends it as it is (the entry point's one
    placement point). ``items``: the view, the stand-in for the user's message where
    placement left it; ``nudge``: the nudge it carries."""

    items: tuple[Any, ...]
    nudge: str | None = None


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """How one request carries the memory tool (:meth:`MemoryTurn.request_tools`):
    ``tool`` offered, described or not at all (:data:`ToolOffer`), and the
    ``tool_choice`` to send: the caller's as given, the API's "none" (a described tool,
    never callable), or None for no ``tool_choice`` at all (the caller's is dropped: a
    request without tools, or one forcing the memory tool while it is not offered)."""

    tool: ToolOffer = None
    tool_choice: Any = None


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """One model request of a turn, whole, as the turn decided it
    (:meth:`MemoryTurn.prepare`); an integration maps it onto its framework's types and
    sends it, deciding nothing:

    - ``messages`` and ``system``: the dialogue with this request's memory placed, and
      the caller's ``system`` prompt (or ``instructions``) as it goes (with the memory,
      for a form that keeps it apart);
    - ``transient``: the texts placed after the dialogue's stable part that change every
      turn (no cache breakpoint after them; none when nothing was placed);
    - ``tool`` and ``tool_choice``: the memory tool offered (``"offer"``), described but
      uncallable (``"describe"``) or left out (None), and the ``tool_choice`` to send
      (:class:`ToolRequest`; None: send none);
    - ``hints``: request settings to add (OpenAI's ``prompt_cache_key``, when the
      options send hints and the caller set none);
    - ``breakpoints``: the Anthropic cache breakpoints, applied to the provider's body
      (:meth:`with_breakpoints`) or messages (:meth:`Breakpoints.on_dialogue`); None:
      none;
    - ``tool_spec``: the memory tool to write in the API's format, when ``tool`` offers
      or describes it (each wire module's ``chat_tool``, ``responses_tool``,
      ``messages_tool``);
    - ``recall_spec``: the retrieval tool, offered beside it once a request of the turn
      lacks a tool result its input holds (``Ask.recall``)."""

    messages: list[Any]
    system: Any = None
    transient: tuple[str, ...] = field(default=(), repr=False)
    tool: ToolOffer = None
    tool_choice: Any = None
    hints: Mapping[str, Any] = field(default_factory=dict)
    breakpoints: Breakpoints | None = None
    tool_spec: ToolSpec | None = None
    recall_spec: ToolSpec | None = None

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """Our tools as the request carries them, in order: the memory tool (offered or
        described), then the retrieval tool; each adapter writes them in its API's
        format ahead of the caller's."""
        return tuple(s for s in (self.tool_spec, self.recall_spec) if s is not None)

    def with_breakpoints(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A Messages API ``body`` with this request's breakpoints (a copy; unchanged
        when it gets none)."""
        return self.breakpoints.on_body(body) if self.breakpoints is not None else dict(body)
