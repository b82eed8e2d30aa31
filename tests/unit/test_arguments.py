"""Tests for stm_memory.tool.arguments: validation and cleaning of tool arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stm_memory.model import Category
from stm_memory.model.text import storage_safe
from stm_memory.tool.arguments import UpdateArgs, parse_update_arguments

PLOT = Category("Plot", "What happened", "plot")
MOOD = Category("Mood", "Tone of the scene", "mood")
CATEGORIES = (PLOT, MOOD)


def parse_summary(args: object, *, limit: int = 1500) -> UpdateArgs | str:
    return parse_update_arguments(args, summary_mode=True, categories=(), limit=limit)


def parse_categories(args: object, *, limit: int = 1500) -> UpdateArgs | str:
    return parse_update_arguments(args, summary_mode=False, categories=CATEGORIES, limit=limit)


def reason_of(result: UpdateArgs | str) -> str:
    assert isinstance(result, str), f"expected a failure reason, got {result!r}"
    return result


# --- the order of argument errors, table driven ------------------------------------------

# (args, fragments that must all appear in the reason). Fragments identify *which* check
# fired, so the table also pins the order: not a string > empty/blank > no value > unknown.
SUMMARY_FAILURES: list[tuple[object, tuple[str, ...]]] = [
    # not a string (beats everything else about the arguments)
    ({"summary": 5}, ("'summary'", "must be a string", "int")),
    ({"summary": 1.5}, ("'summary'", "must be a string", "float")),
    ({"summary": True}, ("'summary'", "must be a string", "bool")),
    ({"summary": ["a"]}, ("'summary'", "must be a string", "list")),
    ({"summary": {"text": "a"}}, ("'summary'", "must be a string", "dict")),
    ({"summary": 5, "bogus": "x"}, ("must be a string",)),
    # empty / blank
    ({"summary": ""}, ("'summary'", "empty")),
    ({"summary": "   \n\t "}, ("'summary'", "empty")),
    ({"summary": "\u3000"}, ("'summary'", "empty")),  # ideographic space is whitespace too
    ({"summary": " ", "bogus": "x"}, ("empty", "Unknown field(s): 'bogus'")),
    # no value given at all (null is no value, as an omitted key)
    ({}, ("No value given", "'summary'")),
    ({"summary": None}, ("No value given", "'summary'")),
    ({"summary": None, "bogus": "x"}, ("No value given", "Unknown field(s): 'bogus'")),
    ({"Summary": "wrong case"}, ("No value given", "'summary'", "Unknown field(s): 'Summary'")),
    ({"bogus": "x"}, ("No value given", "Unknown field(s): 'bogus'", "Allowed: 'summary'")),
    # unknown keys, named back sorted, with the allowed names
    ({"summary": "ok", "bogus": "x"}, ("Unknown field", "'bogus'", "Allowed: 'summary'")),
    ({"summary": "ok", "zeta": 1, "alpha": None}, ("Unknown field", "'alpha', 'zeta'")),
    # non-dict arguments
    (["summary", "x"], ("JSON object", "list")),
    ("summary", ("JSON object", "str")),
    (None, ("JSON object", "null")),
    (42, ("JSON object", "int")),
]


@pytest.mark.parametrize(("args", "fragments"), SUMMARY_FAILURES)
def test_summary_mode_failures_in_spec_order(args: object, fragments: tuple[str, ...]) -> None:
    reason = reason_of(parse_summary(args))
    for fragment in fragments:
        assert fragment in reason


CATEGORY_FAILURES: list[tuple[object, tuple[str, ...]]] = [
    # A non-string anywhere wins, even after a blank or next to unknown keys.
    ({"plot": 3}, ("'plot'", "must be a string", "int")),
    ({"plot": "", "mood": 3}, ("'mood'", "must be a string")),
    ({"plot": ["x"], "bogus": "y"}, ("'plot'", "must be a string", "list")),
    # Blank and null values are skipped in category mode; none left means no value.
    ({"plot": "  ", "mood": ""}, ("No value given", "'plot', 'mood'")),
    ({"plot": None, "mood": None}, ("No value given", "'plot', 'mood'")),
    ({"plot": None, "mood": " "}, ("No value given", "'plot', 'mood'")),
    ({}, ("No value given", "'plot', 'mood'")),
    ({"summary": "category mode has no summary"}, ("No value given",)),
    # No value beats unknown keys (the check order).
    ({"bogus": "x"}, ("No value given",)),
    ({"plot": " ", "bogus": "x"}, ("No value given",)),
    # Unknown keys are named back with the allowed slugs.
    (
        {"plot": "p", "summary": "s", "Mood": "m"},
        ("Unknown field", "'Mood', 'summary'", "Allowed: 'plot', 'mood'"),
    ),
    ((("plot", "p"),), ("JSON object", "tuple")),
]


@pytest.mark.parametrize(("args", "fragments"), CATEGORY_FAILURES)
def test_category_mode_failures_in_spec_order(args: object, fragments: tuple[str, ...]) -> None:
    reason = reason_of(parse_categories(args))
    for fragment in fragments:
        assert fragment in reason


@pytest.mark.parametrize(
    ("args", "expected_check"),
    [
        ({"summary": 1, "x": 2}, "must be a string"),
        ({"summary": "", "x": 2}, "is empty"),
        ({"x": 2}, "No value given"),
        ({"summary": "ok", "x": 2}, "Unknown field"),
    ],
)
def test_each_check_fires_only_when_earlier_ones_pass(args: object, expected_check: str) -> None:
    reason = reason_of(parse_summary(args))
    checks = {"must be a string", "is empty", "No value given", "Unknown field"}
    # Unknown keys are named in every failure after the type check (the model can only
    # fix a misspelt key it is told about), so they may follow another check's reason.
    others = checks - {expected_check, "Unknown field"}
    assert reason.startswith(expected_check) or expected_check in reason.split(". ")[0]
    assert not any(other in reason for other in others)
    if expected_check in ("is empty", "No value given"):
        assert "Unknown field(s): 'x'" in reason


def test_non_string_keys_are_named_back_not_crashing() -> None:
    reason = reason_of(parse_summary({"summary": "ok", 1: "x", None: "y"}))
    assert "Unknown field" in reason
    assert "'1'" in reason and "'None'" in reason


# --- success and cleaning ------------------------------------------------------------------


def test_summary_success() -> None:
    assert parse_summary({"summary": "  We met Ann.  "}) == UpdateArgs(summary="We met Ann.")


def test_category_success_keeps_server_order_and_skips_blanks() -> None:
    result = parse_categories({"mood": " tense ", "plot": "heist"})
    assert isinstance(result, UpdateArgs)
    assert result.summary is None
    assert result.categories is not None
    assert list(result.categories.items()) == [("plot", "heist"), ("mood", "tense")]

    partial = parse_categories({"plot": "  ", "mood": "calm"})
    assert isinstance(partial, UpdateArgs)
    assert dict(partial.categories or {}) == {"mood": "calm"}


def test_a_null_category_is_left_alone_like_an_omitted_one() -> None:
    # Strict schemas make every key required; a model leaves a category alone by
    # sending null, and that must complete, not fail the call.
    result = parse_categories({"plot": "The vault is open.", "mood": None})
    assert result == parse_categories({"plot": "The vault is open."})
    assert isinstance(result, UpdateArgs)
    assert dict(result.categories or {}) == {"plot": "The vault is open."}


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("  padded \n", "padded"),
        ("{{secret}} and {Foo}", "secret and Foo"),
        ("{user} met {{Char}} and {USER_TERM}", "{user} met {{Char}} and {USER_TERM}"),
        ("{{user_formatted}} / {bot}", "{{user_formatted}} / {bot}"),
        ("{foo bar} {1} {} {_x}", "{foo bar} {1} {} {_x}"),
        ("a\x00b", "a\ufffdb"),
        ("emoji 😀 stays", "emoji 😀 stays"),
    ],
)
def test_cleaning(raw: str, stored: str) -> None:
    assert parse_summary({"summary": raw}) == UpdateArgs(summary=stored)
    result = parse_categories({"plot": raw})
    assert isinstance(result, UpdateArgs)
    assert dict(result.categories or {}) == {"plot": stored}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("x" * 1500, "x" * 1500),
        ("x" * 1501, "x" * 1500),
        ("😀" * 1600, "😀" * 1500),  # code points, not UTF-16 units or bytes
        ("x" * 1499 + "😀😀", "x" * 1499 + "😀"),
        ("é" * 2000, "é" * 1500),
        ("x" * 1499 + " yz", "x" * 1499),  # whitespace exposed by the cut is trimmed
        ("  " + "y" * 1600, "y" * 1500),  # trimmed before the cut
    ],
)
def test_truncation_at_1500_code_points(raw: str, expected: str) -> None:
    result = parse_summary({"summary": raw})
    cut = ("summary",) if len(raw.strip()) > 1500 else ()
    assert result == UpdateArgs(summary=expected, cut=cut)
    assert isinstance(result, UpdateArgs) and result.summary is not None
    assert len(result.summary) <= 1500


def test_limit_is_a_parameter() -> None:
    cut = UpdateArgs(summary="abcd", cut=("summary",))
    assert parse_summary({"summary": "abcdefghij"}, limit=4) == cut
    assert "≤ 4" in reason_of(parse_summary({}, limit=4))


def test_sanitizing_happens_before_truncation() -> None:
    # The budget is spent on stored text: "{{a}}" costs 1 character, not 5.
    result = parse_summary({"summary": "{{a}}" + "b" * 1499})
    assert result == UpdateArgs(summary="a" + "b" * 1499)


# --- storage_safe ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["plain", "", "nul\x00inside", "lone \ud800 surrogate", "\udfff", "pair \ud83d\ude00", "😀"],
)
def test_storage_safe_output_is_utf8_and_nul_free(text: str) -> None:
    safe = storage_safe(text)
    assert "\x00" not in safe
    safe.encode("utf-8")  # must not raise


def test_storage_safe_keeps_valid_text_unchanged() -> None:
    text = "Ann 😀 {user} — ünïcödé"
    assert storage_safe(text) is text or storage_safe(text) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=40))
def test_storage_safe_property(text: str) -> None:
    safe = storage_safe(text)
    assert "\x00" not in safe
    safe.encode("utf-8")
    if "\x00" not in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert safe == text


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from(["summary", "plot", "mood"]), st.text(max_size=8)),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text()),
        max_size=4,
    ),
    st.booleans(),
)
def test_parse_never_raises_and_bounds_values(args: dict[str, Any], summary_mode: bool) -> None:
    result = parse_update_arguments(
        args, summary_mode=summary_mode, categories=CATEGORIES, limit=1500
    )
    if isinstance(result, str):
        assert result
        return
    values = [result.summary] if summary_mode else list((result.categories or {}).values())
    assert values
    for value in values:
        assert isinstance(value, str)
        assert value and value == value.strip()
        assert len(value) <= 1500
        assert "\x00" not in value
        value.encode("utf-8")


def test_an_unknown_key_is_named_when_no_known_key_is_given() -> None:
    # A misspelt category key: the reason names it, not only "No value given".
    weather = Category("Weather", "Sky", "weather")
    reason = reason_of(
        parse_update_arguments(
            {"weathr": "rain"}, summary_mode=False, categories=(weather,), limit=100
        )
    )
    assert "No value given" in reason and "'weathr'" in reason and "Allowed: 'weather'" in reason


def test_a_value_over_the_limit_completes_and_says_it_was_cut() -> None:
    parsed = parse_summary({"summary": "x" * 40}, limit=25)
    assert isinstance(parsed, UpdateArgs) and parsed.summary == "x" * 25
    assert parsed.cut == ("summary",)
    note = parsed.note(25)
    assert note is not None and "'summary'" in note and "cut to 25" in note
    within = parse_summary({"summary": "x" * 25}, limit=25)
    assert isinstance(within, UpdateArgs) and within.cut == () and within.note(25) is None
    # Trailing whitespace past the limit is not a cut value.
    spaced = parse_summary({"summary": "x" * 25 + "     "}, limit=25)
    assert isinstance(spaced, UpdateArgs) and spaced.cut == ()
    both = parse_categories({"plot": "p" * 30, "mood": "ok"}, limit=10)
    assert isinstance(both, UpdateArgs) and both.cut == ("plot",)
