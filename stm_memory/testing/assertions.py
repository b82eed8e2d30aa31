"""Assertion helpers for testing agents that use stm-memory.

Plain functions that raise :class:`AssertionError` with a message saying what was
there instead, so a failing test explains itself without a debugger::

    assert_memory_contains(memory, scope, "Friday")        # the scope's memory
    assert_tool_offered(memory, scope)                     # would a turn offer the tool?
    assert_tool_not_offered(result)                        # a TurnResult, request body, …
    assert_request_carries_memory(result.requests[0], "Friday")
    assert_request_lacks_memory(request_body, "secret plan")

What each looks at:

- **The memory of a scope** is its live entry (``memory.get(scope)``: hydrated from SQL
  on a cache miss, ``None`` once expired by the memory's clock). By default the
  *distilled* memory is searched (the summary and the category values); ``part=``
  selects ``"summary"``, ``"categories"``, ``"messages"`` (the captured raw turns) or
  ``"any"``.
- **Whether the tool was offered**: for a :class:`~stm_memory.TurnContext` its guards;
  for a :class:`~stm_memory.ShortTermMemory` plus a scope, a fresh turn's guards (a
  turn that is begun and dropped: nothing is counted or written); for a request body
  (OpenAI Chat Completions / Responses, Anthropic Messages; a dict, or its JSON text
  or bytes, or a recorded request with a ``body``) its ``tools``, where a
  ``tool_choice`` of ``none`` means nothing is callable; for a
  :class:`~stm_memory.kit.TurnResult` any of its requests; for a list of tools
  (LangChain tools, tool dicts) or an object with ``tools`` (a LangChain
  ``ModelRequest``) their names.
- **The memory a request carries** is every text part injected by stm-memory: the
  parts that carry the ``[Short-term memory]`` header (the memory content, and the
  default nudge), from the header on (where the memory was merged into a user turn,
  the user's words after it are part of that text). They are found in OpenAI ``messages``,
  Responses ``input`` and ``instructions``, Anthropic ``system`` and ``messages``
  (text blocks too), LangChain message lists (``SystemMessage`` or text merged into a
  ``HumanMessage``), a :class:`~stm_memory.kit.TurnResult` (all its requests) or a
  list of request bodies.

Texts are matched as substrings (case-sensitive); pass a compiled :mod:`re` pattern
to match with ``pattern.search`` instead.

The ``stm_assert`` fixture of the pytest plugin is a :class:`StmAssertions` bound to
the ``stm_memory`` fixture, so a scope is enough: ``stm_assert.tool_offered(scope)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, TypeAlias

from langchain_core.messages import BaseMessage

from stm_memory.engine import ShortTermMemory
from stm_memory.kit import (
    CONTENT_HEADER,
    TurnResult,
    is_request_body,
    offered_tool_names,
    read_request,
    tool_choice_none,
)
from stm_memory.model import MemoryEntry, Scope
from stm_memory.tool.turn import TOOL_NAME, TurnContext

__all__ = [
    "MemoryPart",
    "StmAssertions",
    "assert_memory_contains",
    "assert_request_carries_memory",
    "assert_request_lacks_memory",
    "assert_tool_not_offered",
    "assert_tool_offered",
    "injected_memory",
    "offered_tools",
]

#: Which part of a scope's memory :func:`assert_memory_contains` searches.
MemoryPart: TypeAlias = Literal["distilled", "summary", "categories", "messages", "any"]
Text: TypeAlias = str | re.Pattern[str]

_PARTS: dict[str, tuple[str, ...]] = {
    "distilled": ("summary", "categories"),
    "summary": ("summary",),
    "categories": ("categories",),
    "messages": ("messages",),
    "any": ("summary", "categories", "messages"),
}
_SHOWN = 1200  # characters of one value shown in a failure message
_OUTLINE = 12  # messages of a request shown in a failure message


# -- small pieces ----------------------------------------------------------------------


def _check_text(text: object) -> None:
    if isinstance(text, re.Pattern):
        return
    if not isinstance(text, str) or not text:
        raise TypeError(f"text must be a non-empty string or a re.Pattern, got {text!r}")


def _matches(haystack: str, text: Text) -> bool:
    if isinstance(text, re.Pattern):
        return text.search(haystack) is not None
    return text in haystack


def _describe(text: Text) -> str:
    return f"pattern {text.pattern!r}" if isinstance(text, re.Pattern) else repr(text)


def _clip(value: str, limit: int = _SHOWN) -> str:
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value) - limit} more characters)"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _fail(message: str) -> AssertionError:
    return AssertionError(message)


# -- the memory of a scope ---------------------------------------------------------------


def _searchable(entry: MemoryEntry, fields: Iterable[str]) -> list[str]:
    out: list[str] = []
    for name in fields:
        if name == "summary" and entry.summary:
            out.append(entry.summary)
        elif name == "categories":
            out.extend(entry.categories.values())
        elif name == "messages":
            out.extend(m.content for m in entry.messages)
    return out


def _entry_report(entry: MemoryEntry, searched: Sequence[str]) -> str:
    lines = [f"  summary: {_clip(entry.summary) if entry.summary else '(none)'}"]
    if entry.categories:
        lines.append("  categories:")
        lines += [f"    {slug}: {_clip(value)}" for slug, value in entry.categories.items()]
    else:
        lines.append("  categories: (none)")
    count = len(entry.messages)
    if "messages" in searched:
        lines.append(f"  messages: {count} captured")
        for m in entry.messages:
            speaker = m.name or m.role
            lines.append(f"    {speaker}: {_clip(m.content, 200)}")
    else:
        lines.append(f'  messages: {count} captured (not searched; pass part="messages" or "any")')
    return "\n".join(lines)


def _hours(delta: timedelta) -> str:
    return f"{delta / timedelta(hours=1):g} h"


def _why_missing(memory: ShortTermMemory, scope: Scope) -> str:
    key = scope.live_key
    now = memory.now()
    stored = memory._live.get_many([key]).get(key)
    if stored is None:
        return "none: nothing was stored for this scope"
    ttl = memory.limits.ttl_for(has_summary=stored.has_summary)
    kind = "summary TTL" if stored.has_summary else "TTL without summary"
    return (
        f"none live: it expired (last updated {stored.last_updated.isoformat()}, "
        f"{_hours(now - stored.last_updated)} before the memory's clock {now.isoformat()}; "
        f"{kind} {_hours(ttl)})"
    )


def assert_memory_contains(
    memory: ShortTermMemory,
    scope: Scope,
    text: Text,
    *,
    part: MemoryPart = "distilled",
) -> MemoryEntry:
    """Assert that the live memory of ``scope`` contains ``text``; returns the entry.

    ``part``: ``"distilled"`` (default: summary and category values), ``"summary"``,
    ``"categories"``, ``"messages"`` (captured raw turns) or ``"any"``.
    """
    __tracebackhide__ = True
    if not isinstance(memory, ShortTermMemory):
        raise TypeError(f"memory must be a ShortTermMemory, got {type(memory).__name__}")
    if not isinstance(scope, Scope):
        raise TypeError(f"scope must be a Scope, got {type(scope).__name__}")
    _check_text(text)
    if part not in _PARTS:
        raise ValueError(f"part must be one of {', '.join(_PARTS)}; got {part!r}")
    searched = _PARTS[part]
    entry = memory.get(scope)
    if entry is None:
        raise _fail(
            f"expected the short-term memory of {scope.live_key} to contain "
            f"{_describe(text)}, but there is {_why_missing(memory, scope)}"
        )
    if any(_matches(value, text) for value in _searchable(entry, searched)):
        return entry
    raise _fail(
        f"short-term memory of {entry.key} does not contain {_describe(text)} "
        f"(searched: {', '.join(searched)}); it holds:\n{_entry_report(entry, searched)}"
    )


# -- was the tool offered ----------------------------------------------------------------


def _as_request(value: Any) -> Any:
    """JSON text/bytes, a recorded request's ``body``, else the value itself."""
    if isinstance(value, bytes | bytearray):
        value = value.decode("utf-8")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise TypeError("a request given as text must be a JSON request body") from None
    body = getattr(value, "body", None)
    if body is not None and not isinstance(value, Mapping | BaseMessage):
        return _as_request(body)
    return value


def _body_offer(body: Mapping[str, Any]) -> tuple[bool, str]:
    names = offered_tool_names(body.get("tools"))
    if tool_choice_none(body):
        return False, f"tools {names} are defined with tool_choice none: none can be called"
    if TOOL_NAME in names:
        return True, f"the request offers tools {names}"
    return False, f"the request offers tools {names}" if names else "the request offers no tools"


def _offer(
    target: Any,
    scope: Scope | None,
    *,
    provider: str | None,
    user_message: str | None,
) -> tuple[bool, str]:
    """(offered?, what was seen) for any supported target."""
    if isinstance(target, ShortTermMemory):
        if not isinstance(scope, Scope):
            raise TypeError("with a ShortTermMemory, pass the Scope too: (memory, scope)")
        target = target.begin_turn(scope, provider=provider, user_message=user_message)
    if isinstance(target, TurnContext):
        reason = target.guard_reason()
        where = f"the turn in {target.scope.live_key}"
        if reason is None:
            return True, f"{where} offers it (no guard applies)"
        return False, f"{where} hides it: {reason}"
    if isinstance(target, TurnResult):
        seen = [_body_offer(r) for r in target.requests]
        if not seen:
            return False, "the turn sent no requests"
        lines = "\n".join(f"  request {i}: {detail}" for i, (_, detail) in enumerate(seen))
        return any(offered for offered, _ in seen), f"across the turn's requests:\n{lines}"
    target = _as_request(target)
    if is_request_body(target):
        return _body_offer(target)
    tools = getattr(target, "tools", None)
    if tools is not None and not isinstance(target, Mapping):
        target = tools
    if isinstance(target, Sequence) and not isinstance(target, str | bytes):
        names = offered_tool_names(target)
        return TOOL_NAME in names, f"the tools are {names}" if names else "there are no tools"
    raise TypeError(
        "expected a ShortTermMemory (with a scope), a TurnContext, a TurnResult, a request "
        f"body or a list of tools; got {type(target).__name__}"
    )


def offered_tools(request: Any) -> list[str]:
    """Names of the tools a request body (or list of tools, or ``ModelRequest``) offers."""
    request = _as_request(request)
    if is_request_body(request):
        return offered_tool_names(request.get("tools"))
    tools = getattr(request, "tools", request)
    if isinstance(tools, Sequence) and not isinstance(tools, str | bytes):
        return offered_tool_names(tools)
    raise TypeError(f"expected a request body or a list of tools, got {type(request).__name__}")


def assert_tool_offered(
    target: Any,
    scope: Scope | None = None,
    *,
    provider: str | None = None,
    user_message: str | None = None,
) -> None:
    """Assert that ``update_short_term_memory`` is offered (see the module docstring for
    the accepted targets). With a ``ShortTermMemory``, ``scope`` is required and
    ``provider`` / ``user_message`` are passed to ``begin_turn``."""
    __tracebackhide__ = True
    offered, seen = _offer(target, scope, provider=provider, user_message=user_message)
    if not offered:
        raise _fail(f"expected {TOOL_NAME} to be offered, but {seen}")


def assert_tool_not_offered(
    target: Any,
    scope: Scope | None = None,
    *,
    provider: str | None = None,
    user_message: str | None = None,
) -> None:
    """Assert that ``update_short_term_memory`` is not offered (the counterpart of
    :func:`assert_tool_offered`, same targets)."""
    __tracebackhide__ = True
    offered, seen = _offer(target, scope, provider=provider, user_message=user_message)
    if offered:
        raise _fail(f"expected {TOOL_NAME} not to be offered, but {seen}")


# -- the memory a request carries ---------------------------------------------------------


def _body_of(item: Any) -> Any:
    """``item`` as a request body (parsing JSON text, bytes, a recorded request), or None."""
    if isinstance(item, Mapping):
        return item if is_request_body(item) else None
    if isinstance(item, bytes | bytearray) or (
        getattr(item, "body", None) is not None and not isinstance(item, BaseMessage)
    ):
        parsed = _as_request(item)
        return parsed if is_request_body(parsed) else None
    return None


def _requests(target: Any) -> list[Any]:
    """The request bodies (or message lists) in ``target``."""
    if isinstance(target, TurnResult):
        return list(target.requests)
    if isinstance(target, str | bytes | bytearray):
        target = _as_request(target)
    body = _body_of(target)
    if body is not None:
        return [body]
    messages = getattr(target, "messages", None)  # a LangChain ModelRequest
    if messages is not None and not isinstance(target, Mapping):
        return [list(messages)]
    if isinstance(target, Sequence) and not isinstance(target, str):
        bodies = [_body_of(item) for item in target]
        if bodies and all(b is not None for b in bodies):
            return bodies
        return [list(target)]  # one list of messages
    raise TypeError(
        "expected a request body (dict, JSON text or bytes), a TurnResult, a list of "
        f"messages or a list of request bodies; got {type(target).__name__}"
    )


def _parts(request: Any) -> list[tuple[str, str]]:
    """(where, text) for every text part of one request body or message list."""
    return [(place.label, text) for place in read_request(request) for text in place.texts]


def injected_memory(request: Any) -> list[str]:
    """The memory texts stm-memory injected into ``request`` (see the module docstring):
    each text part carrying the ``[Short-term memory]`` header, from the header on."""
    out: list[str] = []
    for body in _requests(request):
        for _, text in _parts(body):
            at = text.find(CONTENT_HEADER)
            if at >= 0:
                out.append(text[at:])
    return out


def _outline(request: Any) -> str:
    lines: list[str] = []
    for n, body in enumerate(_requests(request)):
        parts = _parts(body)
        head = f"request {n}: " if isinstance(body, Mapping) else "messages: "
        lines.append(head + (f"{len(parts)} text parts" if parts else "no text parts"))
        for where, text in parts[:_OUTLINE]:
            lines.append(f"  {where}: {_clip(text, 160)}")
        if len(parts) > _OUTLINE:
            lines.append(f"  … and {len(parts) - _OUTLINE} more")
    return "\n".join(lines)


def _memory_report(texts: Sequence[str]) -> str:
    out: list[str] = []
    for i, text in enumerate(texts):
        shown = text if len(text) <= 2 * _SHOWN else f"{text[: 2 * _SHOWN]}… (cut)"
        out.append(f"  memory text {i}:\n{_indent(shown)}")
    return "\n".join(out)


def assert_request_carries_memory(request: Any, text: Text | None = None) -> list[str]:
    """Assert that ``request`` carries injected short-term memory, containing ``text``
    when given; returns the memory texts found."""
    __tracebackhide__ = True
    if text is not None:
        _check_text(text)
    texts = injected_memory(request)
    if not texts:
        wanted = f" with {_describe(text)}" if text is not None else ""
        raise _fail(
            f"expected the request to carry short-term memory{wanted}, but no text part "
            f"has the {CONTENT_HEADER!r} header. What it carries:\n{_outline(request)}"
        )
    if text is not None and not any(_matches(t, text) for t in texts):
        raise _fail(
            f"the short-term memory the request carries does not contain {_describe(text)}; "
            f"it carries:\n{_memory_report(texts)}"
        )
    return texts


def assert_request_lacks_memory(request: Any, text: Text | None = None) -> None:
    """Assert that ``request`` carries no injected short-term memory at all, or, with
    ``text``, none containing ``text`` (e.g. a private channel's memory)."""
    __tracebackhide__ = True
    if text is not None:
        _check_text(text)
    texts = injected_memory(request)
    hits = texts if text is None else [t for t in texts if _matches(t, text)]
    if hits:
        what = "short-term memory" if text is None else f"short-term memory with {_describe(text)}"
        raise _fail(
            f"expected the request to carry no {what}, but it carries:\n{_memory_report(hits)}"
        )


# -- bound to one memory (the ``stm_assert`` fixture) -------------------------------------


class StmAssertions:
    """The helpers above bound to one :class:`ShortTermMemory` (``stm_assert``)."""

    def __init__(self, memory: ShortTermMemory) -> None:
        self.memory = memory

    def memory_contains(
        self, scope: Scope, text: Text, *, part: MemoryPart = "distilled"
    ) -> MemoryEntry:
        """:func:`assert_memory_contains` on the bound memory."""
        __tracebackhide__ = True
        return assert_memory_contains(self.memory, scope, text, part=part)

    def _target(self, target: Any) -> tuple[Any, Scope | None]:
        return (self.memory, target) if isinstance(target, Scope) else (target, None)

    def tool_offered(
        self, target: Any, *, provider: str | None = None, user_message: str | None = None
    ) -> None:
        """:func:`assert_tool_offered`; a :class:`Scope` means a fresh turn in it."""
        __tracebackhide__ = True
        subject, scope = self._target(target)
        assert_tool_offered(subject, scope, provider=provider, user_message=user_message)

    def tool_not_offered(
        self, target: Any, *, provider: str | None = None, user_message: str | None = None
    ) -> None:
        """:func:`assert_tool_not_offered`; a :class:`Scope` means a fresh turn in it."""
        __tracebackhide__ = True
        subject, scope = self._target(target)
        assert_tool_not_offered(subject, scope, provider=provider, user_message=user_message)

    def request_carries_memory(self, request: Any, text: Text | None = None) -> list[str]:
        """:func:`assert_request_carries_memory`."""
        __tracebackhide__ = True
        return assert_request_carries_memory(request, text)

    def request_lacks_memory(self, request: Any, text: Text | None = None) -> None:
        """:func:`assert_request_lacks_memory`."""
        __tracebackhide__ = True
        assert_request_lacks_memory(request, text)
