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
from typing import Any, Literal

from stm_memory.model import Scope
from stm_memory.wire.anthropic import agreed_ttl, breakpoint_markers

__all__ = ["OPENAI_PROVIDERS", "RequestApi", "api_of", "cache_retention", "prompt_cache_key"]

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
