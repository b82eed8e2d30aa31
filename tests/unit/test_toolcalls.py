"""Tests for stm_memory.tool.vetting: a cut-short or malformed call is never executed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stm_memory.tool.turn import TOOL_NAME
from stm_memory.tool.vetting import ToolCallCheck, check_tool_call, is_truncated


def assert_failed(check: ToolCallCheck, *fragments: str) -> str:
    assert not check.ok
    assert check.args is None
    assert check.result is not None
    assert set(check.result) == {"status", "reason", "tool_name"}
    assert check.result["status"] == "tool_execution_failed"
    assert check.result["tool_name"] == TOOL_NAME
    reason = check.result["reason"]
    assert isinstance(reason, str) and reason
    for fragment in fragments:
        assert fragment in reason
    return reason


# --- truncation markers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "markers",
    [
        {"finish_reason": "length"},  # OpenAI Chat Completions
        {"stop_reason": "max_tokens"},  # Anthropic Messages
        {"incomplete_reason": "max_output_tokens"},  # OpenAI Responses
        {"finish_reason": "stop", "stop_reason": "max_tokens"},
    ],
)
def test_is_truncated_true(markers: dict[str, str]) -> None:
    assert is_truncated(**markers)


@pytest.mark.parametrize(
    "markers",
    [
        {},
        {"finish_reason": "tool_calls"},
        {"finish_reason": "stop"},
        {"stop_reason": "tool_use"},
        {"stop_reason": "end_turn"},
        {"incomplete_reason": "content_filter"},
        {"finish_reason": None, "stop_reason": None, "incomplete_reason": None},
    ],
)
def test_is_truncated_false(markers: dict[str, Any]) -> None:
    assert not is_truncated(**markers)


@pytest.mark.parametrize(
    "raw",
    ['{"summary": "complete and valid"}', '{"summary": "cut sh', "", None, {"summary": "x"}],
)
def test_truncated_call_is_never_executed(raw: str | Mapping[str, Any] | None) -> None:
    # Even syntactically valid arguments may be a prefix of what the model meant to send.
    reason = assert_failed(check_tool_call(raw, truncated=True), "not executed")
    assert "cut off" in reason


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason", "incomplete_reason"),
    [("length", None, None), (None, "max_tokens", None), (None, None, "max_output_tokens")],
)
def test_truncation_from_provider_markers(
    finish_reason: str | None, stop_reason: str | None, incomplete_reason: str | None
) -> None:
    truncated = is_truncated(
        finish_reason=finish_reason,
        stop_reason=stop_reason,
        incomplete_reason=incomplete_reason,
    )
    assert_failed(check_tool_call('{"summary": "x"}', truncated=truncated), "not executed")


# --- JSON parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"summary": "unterminated',
        '{"summary": "x"',
        "{summary: 'x'}",
        "not json at all",
        "   ",
        '{"summary": "x"} trailing',
        "[" * 100_000,  # deep nesting must not escape as RecursionError
        '{"a":' * 100_000,
    ],
)
def test_invalid_json_is_failed(raw: str) -> None:
    assert_failed(check_tool_call(raw), "not valid JSON", "not executed")


@pytest.mark.parametrize("raw", ['"a string"', "[1, 2]", "42", "null", "true", "3.5"])
def test_non_object_json_is_failed(raw: str) -> None:
    assert_failed(check_tool_call(raw), "JSON object", "not executed")


@pytest.mark.parametrize("raw", [["summary"], "x", 5])
def test_non_object_parsed_values_are_failed(raw: Any) -> None:
    # Anything that is not a str/Mapping is treated as JSON text and rejected cleanly.
    assert not check_tool_call(raw).ok


@pytest.mark.parametrize(
    ("raw", "args"),
    [
        ('{"summary": "We met Ann."}', {"summary": "We met Ann."}),
        ('  {"plot": "heist", "mood": "tense"}\n', {"plot": "heist", "mood": "tense"}),
        ('{"summary": "\\ud83d\\ude00 caf\\u00e9"}', {"summary": "😀 café"}),
        ('{"summary": "lone \\ud800"}', {"summary": "lone \ud800"}),
        ("{}", {}),
        ("", {}),  # providers send "" / {} for a call without arguments
        (None, {}),
        ({"summary": "already parsed"}, {"summary": "already parsed"}),
        (MappingProxyType({"summary": "mapping"}), {"summary": "mapping"}),
    ],
)
def test_valid_arguments_are_returned(
    raw: str | Mapping[str, Any] | None, args: dict[str, Any]
) -> None:
    check = check_tool_call(raw)
    assert check.ok
    assert check.result is None
    assert check.args == args
    assert type(check.args) is dict


def test_parsed_mapping_is_copied() -> None:
    original = {"summary": "x"}
    check = check_tool_call(original)
    assert check.args == original
    assert check.args is not original


def test_valid_args_still_go_through_argument_validation() -> None:
    # check_tool_call only decides executability; unknown keys are the tool's business.
    check = check_tool_call('{"bogus": 1}')
    assert check.ok and check.args == {"bogus": 1}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=60), st.booleans())
def test_arbitrary_text_never_raises(raw: str, truncated: bool) -> None:
    check = check_tool_call(raw, truncated=truncated)
    assert check.ok == (check.result is None)
    if truncated:
        assert not check.ok


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_round_trip_of_json_values(value: Any) -> None:
    check = check_tool_call(json.dumps(value))
    assert check.ok == isinstance(value, dict)
    if check.ok:
        assert check.args == value
