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
- **Anthropic** caches only up to ``cache_control`` breakpoints: where ours go is the
  Messages API's rule, in its wire module (:mod:`stm_memory.wire.anthropic`);
  :func:`cache_retention` reads the TTL the caller's breakpoints agree on.

Which hints a request gets is the turn's decision (``MemoryTurn.prepare``: the options'
``cache_hints``, the request's API, what the caller set), written into its
``PreparedRequest``; the functions here only say what a hint is and where it goes. No
integration calls them to write a hint (``tests/unit/test_kit_imports.py``).

Nothing here mutates its input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from stm_memory.model import Scope
from stm_memory.wire.base import Wire, agreed_ttl, breakpoint_markers

__all__ = ["cache_retention", "prompt_cache_key", "request_hints"]


def prompt_cache_key(scope: Scope) -> str:
    """A stable, opaque cache-routing key for ``scope``'s requests: one per server (per
    user in a DM), and per persona (SPEC §6)."""
    route: list[str | None] = (
        ["server", scope.server_id] if scope.server_id is not None else ["user", scope.user_id]
    )
    route.append(scope.persona_id)
    text = json.dumps(route, ensure_ascii=False)  # unambiguous whatever the ids hold
    return "stm-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


#: The retention each cache hint asks for (OpenAI ``prompt_cache_retention``, an
#: Anthropic breakpoint's ``ttl``); what a hint does not name is the provider's default.
_RETENTION = {
    "24h": timedelta(hours=24),
    "12h": timedelta(hours=12),
    "1h": timedelta(hours=1),
    "30m": timedelta(minutes=30),
    "5m": timedelta(minutes=5),
}


def cache_retention(settings: Mapping[str, Any], system: Any = None) -> timedelta | None:
    """How long the provider keeps this request's cached prefix, as its hints say:
    OpenAI's ``prompt_cache_options.ttl`` (gpt-5.6 on: ``"30m"``, the default, or
    ``"12h"``) or ``prompt_cache_retention`` (``"24h"``), else the TTL the caller's
    Anthropic breakpoints agree on (in ``settings`` — a body or create options — and
    the ``system`` blocks); None when they say nothing (the provider's default). The
    turn's decision of what to show is priced with it (:meth:`MemoryTurn.settle`)."""
    options = settings.get("prompt_cache_options")
    named = options.get("ttl") if isinstance(options, Mapping) else None
    if not isinstance(named, str):
        named = settings.get("prompt_cache_retention")
    if isinstance(named, str) and named in _RETENTION:
        return _RETENTION[named]
    body = {**settings, "system": system} if system is not None else settings
    ttl = agreed_ttl(breakpoint_markers(body))
    return _RETENTION.get(ttl) if ttl else None


def request_hints(
    scope: Scope | None, settings: Mapping[str, Any], *, wire: Wire, send: bool
) -> dict[str, Any]:
    """The request settings a scope's requests add on ``wire``: OpenAI's
    ``prompt_cache_key`` (one per server, :func:`prompt_cache_key`) when ``send`` (the
    options' ``cache_hints``) and the caller's ``settings`` hold no key of their own
    (the caller's wins); else nothing. Every request of a turn carries it
    (``PreparedRequest.hints``); an entry point that sets model settings once for every
    turn (the Agents SDK session's ``agent()``) asks here, without a turn."""
    if not send or scope is None or not wire.cache_key:
        return {}
    if "prompt_cache_key" in settings:
        return {}
    return {"prompt_cache_key": prompt_cache_key(scope)}
