"""Provider prompt-cache hints, written once for every integration. Pure.

Providers bill a repeated prompt prefix at about a tenth of the input price
(``docs/design.md#prompt-caching``). Placement already orders the prompt by how often
each part changes (:mod:`stm_memory.prompt.placement`); these hints tell the provider
where the stable prefix ends:

- **OpenAI** caches automatically; ``prompt_cache_key`` steers requests with the same
  key to the same cache. One key per server (per user in a DM, and per persona, whose
  prompt is its own): the channels of a server share the agent's prefix — its system
  prompt, its tools — so their requests route to one cache, which each channel's
  prefix warms for the others (per channel, a cold channel's first request missed the
  prefix the others had cached). The key is a hash: no id goes in the clear. A key the
  caller set wins.
- **Anthropic** caches only up to ``cache_control`` breakpoints, at most four per
  request, counting the caller's own (on tools, system blocks, message blocks, or the
  top-level automatic one). Ours go, in order of value: on the last block of the
  dialogue before what changes every turn — the current user message's own last block,
  ahead of the briefings merged after it (the next turn reads it back) — then on the
  last system block (this channel's memory: read back after the
  dialogue changes), and on the caller's last system block when the memory follows it
  (the caller's prompt is shared by every channel). Each is added only while the
  request stays within four; a block that already has one is left alone; ours take
  the TTL the caller's breakpoints use, so a request never mixes them in an order the
  API refuses.

Which hints a request gets is the turn's decision (``MemoryTurn.prepare``: the options'
``cache_hints``, the request's API, what the caller set), written into its
``PreparedRequest``; the functions here only say what a hint is and where it goes. No
integration calls them to write a hint (``tests/unit/test_kit_imports.py``).

Nothing here mutates its input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from stm_memory.kit.requests import current_user_index
from stm_memory.model import Scope

__all__ = [
    "MAX_BREAKPOINTS",
    "OPENAI_PROVIDERS",
    "RequestApi",
    "agreed_ttl",
    "anthropic_breakpoints",
    "api_of",
    "breakpoint_budget",
    "breakpoint_marker",
    "breakpoint_markers",
    "cache_retention",
    "count_breakpoints",
    "dialogue_breakpoint",
    "prompt_cache_key",
]

#: The Messages API refuses a request with more ``cache_control`` breakpoints.
MAX_BREAKPOINTS = 4

#: The API a request is written for, which says the hints it takes: ``"openai"`` (Chat
#: Completions, Responses: a ``prompt_cache_key`` setting, ``tool_choice: "none"``),
#: ``"anthropic"`` (Messages: ``cache_control`` breakpoints, ``{"type": "none"}``).
RequestApi = Literal["openai", "anthropic"]

#: Provider names (LangSmith's, the options') whose requests are OpenAI's API.
OPENAI_PROVIDERS = frozenset({"openai", "azure", "azure_openai"})


def api_of(provider: str | None) -> RequestApi | None:
    """The API a chat model of ``provider`` writes its requests for (None: one whose
    hints stm-memory does not write)."""
    if provider == "anthropic":
        return "anthropic"
    return "openai" if provider in OPENAI_PROVIDERS else None


def breakpoint_budget(existing: int, *, reserved: int = 0) -> int:
    """How many breakpoints we may add to a request that has ``existing`` ones, keeping
    ``reserved`` for a layer that adds its own after ours (a caching middleware inside
    ours): the one budget of every request we mark."""
    return MAX_BREAKPOINTS - existing - reserved


def prompt_cache_key(scope: Scope) -> str:
    """A stable, opaque cache-routing key for ``scope``'s requests: one per server (per
    user in a DM), and per persona (SPEC §6)."""
    route: list[str | None] = (
        ["server", scope.server_id] if scope.server_id is not None else ["user", scope.user_id]
    )
    route.append(scope.persona_id)
    text = json.dumps(route, ensure_ascii=False)  # unambiguous whatever the ids hold
    return "stm-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [content] if isinstance(content, Mapping) else []


def breakpoint_markers(request: Mapping[str, Any]) -> list[Any]:
    """Every ``cache_control`` marker a Messages request carries: the top-level automatic
    one, then tools, system blocks and message blocks."""
    found = [request.get("cache_control")]
    found += [t.get("cache_control") for t in request.get("tools") or () if isinstance(t, Mapping)]
    blocks = list(_blocks(request.get("system")))
    for message in request.get("messages") or ():
        if isinstance(message, Mapping):
            blocks += _blocks(message.get("content"))
    found += [b.get("cache_control") for b in blocks if isinstance(b, Mapping)]
    return [marker for marker in found if marker]


def count_breakpoints(request: Mapping[str, Any]) -> int:
    """Breakpoints a Messages request already has, the top-level automatic one included."""
    return len(breakpoint_markers(request))


def agreed_ttl(markers: Iterable[Any]) -> str | None:
    """The TTL every one of ``markers`` uses, when they agree (else the default): ours
    take it, since the API refuses a shorter TTL ahead of a longer one."""
    found = {m.get("ttl") for m in markers if isinstance(m, Mapping)}
    return found.pop() if len(found) == 1 else None


#: The retention each cache hint asks for (OpenAI ``prompt_cache_retention``, an
#: Anthropic breakpoint's ``ttl``); what a hint does not name is the provider's default.
_RETENTION = {"24h": timedelta(hours=24), "1h": timedelta(hours=1), "5m": timedelta(minutes=5)}


def cache_retention(settings: Mapping[str, Any], system: Any = None) -> timedelta | None:
    """How long the provider keeps this request's cached prefix, as its hints say:
    OpenAI's ``prompt_cache_retention`` (``"24h"``), else the TTL the caller's
    Anthropic breakpoints agree on (in ``settings`` — a body or create options — and
    the ``system`` blocks); None when they say nothing (the provider's default). The
    turn's decision of what to show is priced with it (:meth:`MemoryTurn.settle`)."""
    named = settings.get("prompt_cache_retention")
    if isinstance(named, str) and named in _RETENTION:
        return _RETENTION[named]
    body = {**settings, "system": system} if system is not None else settings
    ttl = agreed_ttl(breakpoint_markers(body))
    return _RETENTION.get(ttl) if ttl else None


def breakpoint_marker(ttl: str | None) -> dict[str, str]:
    """A ``cache_control`` marker with ``ttl`` (none: the API's 5 minutes)."""
    return {"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}


def _mark_last(content: Any, marker: Mapping[str, str]) -> Any | None:
    """``content`` as blocks with ``marker`` on its last block; None when that block
    cannot carry one (empty, thinking) or already has one."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list) or not blocks or not isinstance(blocks[-1], Mapping):
        return None
    last = blocks[-1]
    if last.get("cache_control") or last.get("type") in ("thinking", "redacted_thinking"):
        return None
    if last.get("type") == "text" and not last.get("text"):
        return None  # the API refuses a breakpoint on an empty text block
    return [*blocks[:-1], {**last, "cache_control": dict(marker)}]


def anthropic_breakpoints(
    request: Mapping[str, Any],
    *,
    caller_system_blocks: int = 0,
    injected: Collection[str] = (),
) -> dict[str, Any]:
    """``request`` (a Messages API body) with our breakpoints added (see the module
    docstring). ``caller_system_blocks``: how many leading system blocks are the
    caller's own (the memory block follows them); ``injected``: the texts placement
    merged into user turns this turn (briefings, nudge), which change every turn."""
    out = dict(request)
    budget = breakpoint_budget(count_breakpoints(request))
    marker = breakpoint_marker(agreed_ttl(breakpoint_markers(request)))
    steps: list[Callable[[dict[str, Any]], bool]] = [
        lambda body: _mark_dialogue(body, marker, frozenset(injected)),
        lambda body: _mark_system(body, marker, None),
    ]
    if caller_system_blocks:
        steps.append(lambda body: _mark_system(body, marker, caller_system_blocks - 1))
    for step in steps:
        if budget <= 0:
            break
        if step(out):
            budget -= 1
    return out


def _mark_dialogue(
    body: dict[str, Any], marker: Mapping[str, str], injected: frozenset[str]
) -> bool:
    messages = list(body.get("messages") or ())
    current = current_user_index(messages)
    if current is None:
        return False
    contents = [m.get("content") if isinstance(m, Mapping) else None for m in messages]
    found = dialogue_breakpoint(contents, current, marker, injected)
    if found is None:
        return False
    index, content = found
    messages[index] = {**messages[index], "content": content}
    body["messages"] = messages
    return True


def dialogue_breakpoint(
    contents: Sequence[Any],
    current: int,
    marker: Mapping[str, str],
    injected: Collection[str] = (),
    *,
    text_only: bool = False,
) -> tuple[int, list[Any]] | None:
    """Where the dialogue's breakpoint goes, given the messages' ``contents`` and the
    index of the current user message: ``(index, new content)`` with ``marker`` on the
    current message's own last block (ahead of the ``injected`` texts), else on the
    message before it; None when neither can carry one. ``text_only``: only a text
    block qualifies (LangChain AI messages carry their tool calls outside ``content``)."""
    for index in (current, current - 1):
        if index < 0:
            break
        own = _own_blocks(contents[index], injected)
        last = own[-1] if own else None
        if last is not None and (not text_only or _is_text(last)):
            content = _mark_own_last(contents[index], marker, injected)
            if content is not None:
                return index, content
        if own:
            return None  # its own last block cannot carry one: look no further back
    return None


def _is_text(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "text"


def _as_blocks(content: Any) -> list[Any]:
    """Message content as a block list (a string is one text block)."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _own_blocks(content: Any, injected: Collection[str]) -> list[Any]:
    """The blocks up to the last one that is not an ``injected`` text (the briefings and
    nudge placement merged in this turn)."""
    blocks = _as_blocks(content)
    end = len(blocks)
    while end and isinstance(blocks[end - 1], Mapping) and blocks[end - 1].get("text") in injected:
        end -= 1
    return blocks[:end]


def _mark_own_last(
    content: Any, marker: Mapping[str, str], injected: Collection[str] = ()
) -> list[Any] | None:
    """``content`` as blocks with ``marker`` on its own last block (ahead of the
    ``injected`` texts); None when that block cannot carry one."""
    own = _own_blocks(content, injected)
    marked = _mark_last(own, marker) if own else None
    if marked is None:
        return None
    return [*marked, *_as_blocks(content)[len(own) :]]


def _mark_system(body: dict[str, Any], marker: Mapping[str, str], index: int | None) -> bool:
    system = body.get("system")
    if not system:
        return False
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    at = len(blocks) - 1 if index is None else index
    if not 0 <= at < len(blocks) or (index is not None and at == len(blocks) - 1):
        return False
    marked = _mark_last(blocks[: at + 1], marker)
    if marked is None:
        return False
    body["system"] = [*marked, *blocks[at + 1 :]]
    return True
