"""Each API a request is written for, as one value (a ``Wire``, exported by the API's
wire module): the rules the turn reads instead of naming an API, as a table."""

from __future__ import annotations

import pytest

from stm_memory import Scope
from stm_memory.kit import MESSAGES_WIRE, Wire, prompt_cache_key, request_hints, wire_for
from stm_memory.wire.anthropic import ANTHROPIC_WIRE
from stm_memory.wire.openai_chat import CHAT_WIRE
from stm_memory.wire.responses import RESPONSES_WIRE


@pytest.mark.parametrize(
    ("wire", "none_choice", "needs_a_tool", "cache_key", "breakpoints", "strips"),
    [
        (CHAT_WIRE, "none", False, True, False, True),
        (RESPONSES_WIRE, "none", False, True, False, True),
        (ANTHROPIC_WIRE, {"type": "none"}, True, False, True, False),
        # ChatAnthropic's messages: Anthropic's rules, placed as a list.
        (ANTHROPIC_WIRE.as_messages(), {"type": "none"}, True, False, True, False),
        (MESSAGES_WIRE, "none", False, False, False, False),
    ],
)
def test_the_rules_of_each_api(
    wire: Wire,
    none_choice: object,
    needs_a_tool: bool,
    cache_key: bool,
    breakpoints: bool,
    strips: bool,
) -> None:
    assert wire.no_tool_choice() == none_choice
    assert wire.tool_blocks_need_a_tool is needs_a_tool
    assert (wire.cache_key, wire.breakpoints, wire.strips_speaker_ids) == (
        cache_key,
        breakpoints,
        strips,
    )


@pytest.mark.parametrize(
    ("provider", "wire"),
    [
        ("openai", CHAT_WIRE),
        ("azure_openai", CHAT_WIRE),
        ("anthropic", ANTHROPIC_WIRE.as_messages()),
        ("google_genai", MESSAGES_WIRE),  # an API we write nothing for
        ("novelai", MESSAGES_WIRE),
        (None, MESSAGES_WIRE),
    ],
)
def test_one_map_from_a_chat_models_provider_to_its_wire(provider: str | None, wire: Wire) -> None:
    assert wire_for(provider) == wire


def test_a_converted_wire_keeps_its_apis_rules_and_places_a_list() -> None:
    converted = ANTHROPIC_WIRE.as_messages()
    assert converted.place is MESSAGES_WIRE.place
    assert converted.sent is list
    assert converted.family == "anthropic"
    assert ANTHROPIC_WIRE.place is not MESSAGES_WIRE.place  # turns beside ``system``


def test_the_none_choice_is_a_fresh_copy() -> None:
    first = ANTHROPIC_WIRE.no_tool_choice()
    assert isinstance(first, dict)
    first["type"] = "auto"  # a caller editing its request
    assert ANTHROPIC_WIRE.no_tool_choice() == {"type": "none"}


_SCOPE = Scope(channel_id="c-1", user_id="u-1", server_id="g-1")


@pytest.mark.parametrize(
    ("scope", "settings", "wire", "send", "hinted"),
    [
        (_SCOPE, {}, CHAT_WIRE, True, True),
        (_SCOPE, {}, RESPONSES_WIRE, True, True),
        (_SCOPE, {}, CHAT_WIRE, False, False),  # the options send no hints
        (_SCOPE, {"prompt_cache_key": "mine"}, CHAT_WIRE, True, False),  # the caller's wins
        (_SCOPE, {}, ANTHROPIC_WIRE, True, False),  # breakpoints, not a key
        (_SCOPE, {}, MESSAGES_WIRE, True, False),  # a converted request: no hint of ours
        (None, {}, CHAT_WIRE, True, False),  # no scope: nothing to key
    ],
)
def test_request_hints_are_the_key_of_the_scopes_server(
    scope: Scope | None, settings: dict[str, str], wire: Wire, send: bool, hinted: bool
) -> None:
    hints = request_hints(scope, settings, wire=wire, send=send)
    assert hints == ({"prompt_cache_key": prompt_cache_key(_SCOPE)} if hinted else {})
    other = Scope(channel_id="c-2", user_id="u-2", server_id="g-1")
    if hinted:  # one key per server: another channel and user of it share the cache
        assert request_hints(other, settings, wire=wire, send=send) == hints
