"""Each API a request is written for, as one value: the rules the turn applies for it.

``MemoryTurn.prepare`` names no API: it looks up the request's API here and reads the
answer (pydantic-ai's habit: a wire is a value, not an ``if``). The API decides the
``tool_choice`` that keeps a tool defined but uncallable, whether a history with tool
blocks needs a tool defined, which cache hints the request takes, and whether a message
dict may carry our speaker id. Where the dialogue goes is the request's *form*
(:mod:`stm_memory.kit.placing`); the two meet in :data:`FORM_API`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from stm_memory.kit.cache_hints import RequestApi, api_of, prompt_cache_key
from stm_memory.kit.placing import RequestForm
from stm_memory.model import Scope

__all__ = [
    "ANTHROPIC",
    "CONVERTED",
    "FORM_API",
    "OPENAI",
    "ApiRules",
    "request_hints",
    "rules_for",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiRules:
    """What one API takes and refuses (module docstring)."""

    api: RequestApi | None
    #: Keeps a tool defined but uncallable (a described memory tool).
    none_choice: str | Mapping[str, str] = "none"
    #: Refuses a request whose history holds tool blocks when it defines no tool; the
    #: memory tool is then described, uncallable. Holds through any endpoint in front of
    #: the API (an OpenAI-compatible proxy before Anthropic).
    tool_blocks_need_a_tool: bool = False
    #: Takes OpenAI's ``prompt_cache_key`` setting.
    cache_key: bool = False
    #: Takes Anthropic's ``cache_control`` breakpoints.
    breakpoints: bool = False
    #: A message dict's ``user_id`` (ours, for capture) is not one of its fields.
    strips_speaker_ids: bool = False

    def no_tool_choice(self) -> str | dict[str, str]:
        """:attr:`none_choice`, a fresh copy (the caller's request may be edited)."""
        choice = self.none_choice
        return choice if isinstance(choice, str) else dict(choice)


#: Chat Completions and Responses.
OPENAI: Final = ApiRules(api="openai", cache_key=True, strips_speaker_ids=True)
#: Messages.
ANTHROPIC: Final = ApiRules(
    api="anthropic",
    none_choice={"type": "none"},
    tool_blocks_need_a_tool=True,
    breakpoints=True,
)
#: LangChain messages a chat model converts for an API we write no hints for.
CONVERTED: Final = ApiRules(api=None)

_BY_API: Final[Mapping[RequestApi | None, ApiRules]] = {
    "openai": OPENAI,
    "anthropic": ANTHROPIC,
    None: CONVERTED,
}

#: The API a request of each form is written for when the caller names none.
FORM_API: Final[Mapping[RequestForm, RequestApi | None]] = {
    "messages": None,
    "responses": "openai",
    "anthropic": "anthropic",
}


def rules_for(api: RequestApi | None, *, provider: str | None = None) -> ApiRules:
    """The rules of ``api``; with ``provider`` (the model's), that provider's own API's
    refusals hold too, whatever endpoint the request goes through."""
    rules = _BY_API[api]
    if provider is None or rules.tool_blocks_need_a_tool:
        return rules
    native = _BY_API[api_of(provider)]
    if not native.tool_blocks_need_a_tool:
        return rules
    return replace(rules, tool_blocks_need_a_tool=True)


def request_hints(
    scope: Scope | None, settings: Mapping[str, Any], *, api: RequestApi | None, send: bool
) -> dict[str, Any]:
    """The request settings a scope's requests add for ``api``: OpenAI's
    ``prompt_cache_key`` (one per server, :func:`~stm_memory.kit.prompt_cache_key`) when
    ``send`` (the options' ``cache_hints``) and the caller's ``settings`` hold no key of
    their own (the caller's wins); else nothing. Every request of a turn carries it
    (``PreparedRequest.hints``); an entry point that sets model settings once for every
    turn (the Agents SDK session's ``agent()``) asks here, without a turn."""
    if not send or scope is None or not rules_for(api).cache_key:
        return {}
    if "prompt_cache_key" in settings:
        return {}
    return {"prompt_cache_key": prompt_cache_key(scope)}
