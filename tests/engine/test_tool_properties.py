"""Property-based tests: no argument the model can send makes the tool raise, and nothing
longer than the limit (1500 code points) is ever stored, in any value."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage

from stm_memory import TOOL_NAME, Category, Scope, ShortTermMemory
from stm_memory.model.text import clean_value, storage_safe

LIMIT = 1500
SUMMARY_SCOPE = Scope(channel_id="c-summary", user_id="u1", server_id="g-summary")
CATEGORY_SCOPE = Scope(channel_id="c-cats", user_id="u1", server_id="g-cats")
DM_SCOPE = Scope(channel_id="c-dm", user_id="u1")
LABELS = ["Plot", "Mood", "Self", "Run manager", "1st act"]
SLUGS = ["plot", "mood", "self", "run_manager", "c_1st_act"]

PROPERTY_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- strategies ----------------------------------------------------------------------------

# Every code point, lone surrogates and NUL included, plus brace/placeholder fragments.
special = st.sampled_from(
    [
        "\x00",
        "\ud800",
        "\udfff",
        "\ud83d",
        "{",
        "}",
        "{{",
        "}}",
        "{user}",
        "{{x}}",
        " ",
        "\n",
        "😀",
        "👍🏽",
        "e\u0301",
        "\u3000",
        "\ufeff",
    ]
)
unicode_text = st.lists(
    st.one_of(st.text(alphabet=st.characters(), max_size=12), special), max_size=12
).map("".join)
# Long values without generating thousands of characters one by one.
long_text = st.builds(lambda piece, n: piece * n, unicode_text.filter(bool), st.integers(1, 1700))
any_text = st.one_of(unicode_text, long_text)

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(unicode_text, children, max_size=3)
    ),
    max_leaves=8,
)
keys = st.one_of(
    st.sampled_from(
        [
            "summary",
            "Summary",
            *SLUGS,
            "run_manager",
            "callbacks",
            "config",
            "tool_call_id",
            "args",
            "kwargs",
            "model_config",
            "__class__",
            "",
            " ",
        ]
    ),
    unicode_text,
)
arbitrary_dicts = st.dictionaries(keys, st.one_of(any_text, json_like), max_size=6)


def dicts_for(scope: Scope) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly-valid calls for the scope's schema (so the write path runs), calls with a
    few wrong values or keys, and arbitrary dicts."""
    valid = SLUGS if scope.server_id == "g-cats" else ["summary"]
    good = st.dictionaries(st.sampled_from(valid), any_text, min_size=1, max_size=len(valid))
    near = st.builds(
        lambda base, extra: {**base, **extra},
        st.dictionaries(st.sampled_from(valid), st.one_of(any_text, json_like), max_size=5),
        st.dictionaries(keys, json_like, max_size=1),
    )
    return st.one_of(good, good, near, arbitrary_dicts)


SCOPES = [SUMMARY_SCOPE, CATEGORY_SCOPE, DM_SCOPE]
scoped_dicts = st.sampled_from(SCOPES).flatmap(lambda sc: st.tuples(st.just(sc), dicts_for(sc)))
scoped_arguments = st.sampled_from(SCOPES).flatmap(
    lambda sc: st.tuples(st.just(sc), st.one_of(dicts_for(sc), json_like))
)


# --- fixtures and checks ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def mem() -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url("sqlite://")
    memory.set_categories("g-cats", [Category(label, f"about {label}") for label in LABELS])
    assert [c.slug for c in memory.categories("g-cats")] == SLUGS
    yield memory
    memory.close()


def check_result(result: Any) -> dict[str, Any]:
    assert isinstance(result, dict)
    event(str(result.get("status")))
    if result.get("status") == "completed":
        # A value cut to the limit completes with a note that says so; one that leaves
        # out details of the turns it replaces names them.
        assert set(result) <= {"status", "note", "left_out", "dropped"}
        assert "note" not in result or "was cut to" in result["note"] or len(result) > 2
    else:
        assert set(result) == {"status", "reason", "tool_name"}
        assert result["status"] == "tool_execution_failed"
        assert result["tool_name"] == TOOL_NAME
        assert isinstance(result["reason"], str) and result["reason"]
    return result


def check_value(value: str) -> None:
    assert isinstance(value, str)
    assert 0 < len(value) <= LIMIT
    assert value == value.strip()
    assert "\x00" not in value
    value.encode("utf-8")  # no lone surrogates


def snapshot(mem: ShortTermMemory, scope: Scope) -> list[tuple[str | None, dict[str, str]]]:
    """Every stored value of every key the scope writes, all checked against the limit."""
    state: list[tuple[str | None, dict[str, str]]] = []
    for key in scope.keys:
        entry = mem.get_key(key)
        if entry is None:
            state.append((None, {}))
            continue
        if entry.summary is not None:
            check_value(entry.summary)
        for slug, value in entry.categories.items():
            assert isinstance(slug, str)
            check_value(value)
        state.append((entry.summary, dict(entry.categories)))
    return state


def expected_value(raw: str) -> str:
    return clean_value(storage_safe(raw), limit=LIMIT)


def check_effect(
    mem: ShortTermMemory,
    scope: Scope,
    args: Any,
    result: dict[str, Any],
    before: list[tuple[str | None, dict[str, str]]],
) -> None:
    after = snapshot(mem, scope)
    if result["status"] != "completed":
        assert after == before  # a failed call stores nothing
        return
    assert isinstance(args, dict)
    summary, categories = after[-1]  # the live key
    if scope.server_id == "g-cats":
        for slug in SLUGS:
            given_value = args.get(slug)
            if isinstance(given_value, str) and expected_value(given_value):
                assert categories[slug] == expected_value(given_value)
            else:
                assert categories.get(slug) == before[-1][1].get(slug)
    else:
        assert summary == expected_value(args["summary"])


# --- properties ----------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(case=scoped_arguments)
def test_update_never_raises_and_bounds_storage(
    mem: ShortTermMemory, case: tuple[Scope, Any]
) -> None:
    scope, args = case
    turn = mem.begin_turn(scope, provider="openai")
    before = snapshot(mem, scope)
    result = check_result(mem.update(turn, args))
    check_effect(mem, scope, args, result, before)


@PROPERTY_SETTINGS
@given(case=scoped_dicts)
def test_tool_invoke_never_raises_and_bounds_storage(
    mem: ShortTermMemory, case: tuple[Scope, dict[str, Any]]
) -> None:
    scope, args = case
    turn = mem.begin_turn(scope, provider="openai")
    tool = mem.tool(turn)
    assert tool is not None
    before = snapshot(mem, scope)
    content = tool.invoke(args)
    assert isinstance(content, str)
    result = check_result(json.loads(content))
    # null is "not given" on every path: check_effect counts a non-string as no value.
    check_effect(mem, scope, args, result, before)


@PROPERTY_SETTINGS
@given(case=scoped_dicts)
def test_tool_call_always_yields_a_tool_message(
    mem: ShortTermMemory, case: tuple[Scope, dict[str, Any]]
) -> None:
    scope, args = case
    tool = mem.tool(mem.begin_turn(scope, provider="openai"))
    assert tool is not None
    message = tool.invoke({"name": TOOL_NAME, "args": args, "id": "call_p", "type": "tool_call"})
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call_p"
    assert isinstance(message.content, str)
    check_result(json.loads(message.content))
    snapshot(mem, scope)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=scoped_dicts)
def test_ainvoke_never_raises_and_bounds_storage(
    mem: ShortTermMemory, case: tuple[Scope, dict[str, Any]]
) -> None:
    scope, args = case
    tool = mem.tool(mem.begin_turn(scope, provider="openai"))
    assert tool is not None
    content = asyncio.run(tool.ainvoke(args))
    assert isinstance(content, str)
    check_result(json.loads(content))
    snapshot(mem, scope)


@PROPERTY_SETTINGS
@given(text=any_text)
def test_any_unicode_summary_is_stored_cleaned(mem: ShortTermMemory, text: str) -> None:
    turn = mem.begin_turn(SUMMARY_SCOPE, provider="openai")
    result = check_result(mem.update(turn, {"summary": text}))
    if expected_value(text):
        assert result["status"] == "completed"
        entry = mem.get(SUMMARY_SCOPE)
        assert entry is not None and entry.summary == expected_value(text)
    else:
        assert "empty" in result["reason"]
    snapshot(mem, SUMMARY_SCOPE)


@PROPERTY_SETTINGS
@given(user_message=any_text)
def test_any_user_message_begins_a_turn(mem: ShortTermMemory, user_message: str) -> None:
    # The intent detector sees arbitrary text too; it must never break the turn.
    turn = mem.begin_turn(SUMMARY_SCOPE, provider="openai", user_message=user_message)
    assert isinstance(turn.long_term_intent, bool)
    assert (mem.tool(turn) is None) == turn.long_term_intent
