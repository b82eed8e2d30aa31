"""Each API a request is written for, as one value (stm_memory.kit.apis): the rules the
turn reads instead of naming an API, as a table."""

from __future__ import annotations

import pytest

from stm_memory import Scope
from stm_memory.kit import prompt_cache_key
from stm_memory.kit.apis import (
    ANTHROPIC,
    CONVERTED,
    FORM_API,
    OPENAI,
    ApiRules,
    request_hints,
    rules_for,
)


@pytest.mark.parametrize(
    ("api", "provider", "none_choice", "needs_a_tool", "cache_key", "breakpoints", "strips"),
    [
        ("openai", None, "none", False, True, False, True),
        ("openai", "openai", "none", False, True, False, True),
        # An OpenAI-compatible endpoint in front of Anthropic refuses what Anthropic does,
        # in the endpoint's own words.
        ("openai", "anthropic", "none", True, True, False, True),
        ("anthropic", None, {"type": "none"}, True, False, True, False),
        ("anthropic", "openai", {"type": "none"}, True, False, True, False),
        (None, None, "none", False, False, False, False),
        (None, "anthropic", "none", True, False, False, False),  # ChatAnthropic's messages
        (None, "novelai", "none", False, False, False, False),  # an API we write nothing for
    ],
)
def test_the_rules_of_each_api(
    api: str | None,
    provider: str | None,
    none_choice: object,
    needs_a_tool: bool,
    cache_key: bool,
    breakpoints: bool,
    strips: bool,
) -> None:
    rules = rules_for(api, provider=provider)  # type: ignore[arg-type]
    assert rules.no_tool_choice() == none_choice
    assert rules.tool_blocks_need_a_tool is needs_a_tool
    assert (rules.cache_key, rules.breakpoints, rules.strips_speaker_ids) == (
        cache_key,
        breakpoints,
        strips,
    )


def test_each_form_names_its_api() -> None:
    assert dict(FORM_API) == {"messages": None, "responses": "openai", "anthropic": "anthropic"}
    assert [rules_for(FORM_API[f]) for f in ("messages", "responses", "anthropic")] == [
        CONVERTED,
        OPENAI,
        ANTHROPIC,
    ]


def test_the_none_choice_is_a_fresh_copy() -> None:
    first = ANTHROPIC.no_tool_choice()
    assert isinstance(first, dict)
    first["type"] = "auto"  # a caller editing its request
    assert ANTHROPIC.no_tool_choice() == {"type": "none"}
    assert isinstance(ANTHROPIC, ApiRules)


_SCOPE = Scope(channel_id="c-1", user_id="u-1", server_id="g-1")


@pytest.mark.parametrize(
    ("scope", "settings", "api", "send", "hinted"),
    [
        (_SCOPE, {}, "openai", True, True),
        (_SCOPE, {}, "openai", False, False),  # the options send no hints
        (_SCOPE, {"prompt_cache_key": "mine"}, "openai", True, False),  # the caller's wins
        (_SCOPE, {}, "anthropic", True, False),  # breakpoints, not a key
        (_SCOPE, {}, None, True, False),  # a converted request: no hint of ours
        (None, {}, "openai", True, False),  # no scope: nothing to key
    ],
)
def test_request_hints_are_the_key_of_the_scopes_server(
    scope: Scope | None, settings: dict[str, str], api: str | None, send: bool, hinted: bool
) -> None:
    hints = request_hints(scope, settings, api=api, send=send)  # type: ignore[arg-type]
    assert hints == ({"prompt_cache_key": prompt_cache_key(_SCOPE)} if hinted else {})
    other = Scope(channel_id="c-2", user_id="u-2", server_id="g-1")
    if hinted:  # one key per server: another channel and user of it share the cache
        assert request_hints(other, settings, api=api, send=send) == hints  # type: ignore[arg-type]
