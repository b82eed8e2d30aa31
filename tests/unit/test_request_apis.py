"""Each API a request is written for, as one value (stm_memory.kit.apis): the rules the
turn reads instead of naming an API, as a table."""

from __future__ import annotations

import pytest

from stm_memory.kit.apis import ANTHROPIC, CONVERTED, FORM_API, OPENAI, ApiRules, rules_for


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
