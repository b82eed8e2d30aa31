"""Hostile input (issue 8), on SQLite + diskcache and on PostgreSQL + Redis: SQL
injection strings, brace placeholders, 1 MB values, 10,000-character labels, lone
surrogates and NUL bytes are bounded, stored safely, or rejected with a clear error —
ValidationError / ConfigurationError for developer input, a failed tool result for
model input. Never a raw exception, never a silently dropped write."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from helpers.deployment import Deployment
from helpers.inspection import assert_cache_matches_sql, raw_rows
from helpers.memory import refresh, turn

from stm_memory import (
    Category,
    ConfigurationError,
    Scope,
    ShortTermMemory,
    ValidationError,
)

INJECTIONS = [
    "'; DROP TABLE short_term_memories; --",
    "Robert'); DELETE FROM stm_categories; --",
    '" OR 1=1 --',
    "%' OR '%'='",
    "1; UPDATE short_term_memories SET summary = 'pwned'",
    "$1 $$ :param %(key)s ? \\",
    "*",
    "[a-z]*",
    "shortterm:*",
]
FAILED = "tool_execution_failed"


def table_counts(mem: ShortTermMemory) -> tuple[int, int]:
    cats = sum(len(mem._store.get_categories(g)) for g in ("g1",))
    return mem._store.count_rows(), cats


# -- SQL injection --------------------------------------------------------------------------


def test_injection_strings_are_plain_data(deployment: Deployment) -> None:
    mem = deployment.open()
    mem.set_categories("g1", [Category("Plot", "What happened")])
    bystander = Scope(channel_id="c1", user_id="u1", server_id="g0")
    refresh(mem, bystander, "must survive")
    for i, text in enumerate(INJECTIONS):
        scope = Scope(
            channel_id=f"{text}#{i}", user_id=text, server_id=f"g:{text}", persona_id=text
        )
        assert turn(mem, scope, {"summary": text})["status"] == "completed"
        mem.capture(scope, [{"role": "user", "content": text, "name": text}])
        live = mem.get(scope)
        assert live is not None
        assert (live.summary, live.messages[0].content, live.messages[0].name) == (
            text.strip(),
            text,
            text,
        )
    assert mem._store.count_rows() == 2 + 2 * len(INJECTIONS)
    # Labels, descriptions and settings are stored verbatim and read back equal.
    cats = mem.set_categories("g9", [Category(t[:200], t) for t in INJECTIONS[:5]])
    assert [(c.label, c.description) for c in mem.categories("g9")] == [
        (c.label, c.description) for c in cats
    ]
    mem.configure_server("g9", tool_description_override=INJECTIONS[0])
    assert mem._store.get_server_settings("g9").tool_description_override == INJECTIONS[0]  # type: ignore[union-attr]
    # Deletions by hostile ids delete exactly their own rows.
    # clear_user deletes the user's own row and clears the distilled memory of the
    # server row they wrote (their provenance): two rows, and no row of anyone else.
    assert mem.clear_user("*") == 2
    assert mem.clear_channel("*#6") == 1  # the "*" scope's server row
    assert mem.clear_user("%' OR '%'='") == 2
    assert mem._store.count_rows() == 2 + 2 * len(INJECTIONS) - 3
    live = mem.get(bystander)
    assert live is not None and live.summary == "must survive"
    assert [c.label for c in mem.categories("g1")] == ["Plot"]
    assert_cache_matches_sql(mem)


# -- brace placeholders -------------------------------------------------------------------

BRACES = [
    ("{user} met {{char}} and {BOT}", "{user} met {{char}} and {BOT}"),
    ("{secret} and {{macro}}", "secret and macro"),
    ("{foo bar} {1} {} {__class__}", "{foo bar} {1} {} {__class__}"),
    ("{0.__class__.__mro__} {x.y}", "{0.__class__.__mro__} {x.y}"),
    ("{{{deep}}} {unbalanced", "deep {unbalanced"),
    ("%(key)s %s {!r}", "%(key)s %s {!r}"),
]


def test_brace_placeholders_are_neutralised_not_expanded(deployment: Deployment) -> None:
    mem = deployment.open()
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    mem.configure_server(
        "g1",
        refresh_cadence=1,
        update_nudge_override="{category_labels} {0} {__class__} {missing}",
        tool_description_override="{0} {user} {{evil}}",
    )
    for given, stored in BRACES:
        assert turn(mem, scope, {"summary": given})["status"] == "completed"
        live = mem.get(scope)
        assert live is not None and live.summary == stored
    assert_cache_matches_sql(mem)
    turn(mem, scope)  # one turn since the refresh: the nudge is due (cadence 1)
    ctx = mem.begin_turn(scope, provider="openai", user_message="hi")
    tool = mem.tool(ctx)
    assert tool is not None and tool.description == "{0} {user} evil"
    context = mem.build_context(ctx)  # a str.format on these would raise
    assert context.nudge is not None and "{missing}" not in context.nudge


# -- size -----------------------------------------------------------------------------------

MB = 1024 * 1024


def test_a_megabyte_tool_value_is_truncated(deployment: Deployment) -> None:
    mem = deployment.open()
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    cut = turn(mem, scope, {"summary": "😀" * MB})
    assert cut["status"] == "completed" and "cut to 1500" in cut["note"]
    live = mem.get(scope)
    assert live is not None and live.summary == "😀" * 1500
    mem.set_categories("g1", [Category("Plot"), Category("Mood")])
    cut = turn(mem, scope, {"plot": "p" * MB, "mood": " calm "})
    assert cut["status"] == "completed" and "'plot'" in cut["note"]
    live = mem.get(scope)
    assert live is not None and dict(live.categories) == {"plot": "p" * 1500, "mood": "calm"}
    assert_cache_matches_sql(mem)


def test_megabyte_messages_are_kept_but_rendered_bounded(deployment: Deployment) -> None:
    mem = deployment.open()
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="big")
    messages = [{"role": "user", "content": "m" * MB, "name": "n" * 1000}] * 12
    live = mem.capture(scope, messages)
    assert live is not None and len(live.messages) == 10
    assert mem.get(scope) == live  # a 10 MB entry round-trips through the cache
    ctx = mem.begin_turn(
        Scope(channel_id="c2", user_id="u1", server_id="g1"), user_message="x" * MB
    )
    content = mem.build_context(ctx).content
    assert content is not None and "mmm" in content
    assert len(content) < 10_000


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda m: m.set_categories("g1", [Category("L" * 10_000)]), ConfigurationError),
        (lambda m: m.set_categories("g1", [Category("L", "D" * 10_000)]), ConfigurationError),
        (lambda m: m.set_categories("g1", [Category("L" * MB)]), ConfigurationError),
        (lambda m: m.clear_channel("c" * MB), ValidationError),
        (lambda m: m.clear_user("u" * 10_000), ValidationError),
        (lambda m: m.configure_server("g" * 10_000, refresh_cadence=2), ValidationError),
        (lambda m: m.begin_turn(Scope(channel_id="c" * MB, user_id="u")), ValidationError),
    ],
)
def test_oversized_developer_input_is_refused(
    deployment: Deployment, call: Callable[[ShortTermMemory], Any], error: type[Exception]
) -> None:
    mem = deployment.open()
    refresh(mem, Scope(channel_id="c1", user_id="u1", server_id="g1"), "untouched")
    with pytest.raises(error):
        call(mem)
    assert mem._store.count_rows() == 2
    assert mem._store.get_categories("g1") == []


# -- invalid Unicode and NUL ---------------------------------------------------------------

BAD_TEXT = {"NUL": "a\x00b", "lone surrogate": "a\ud800b"}


@pytest.mark.parametrize("text", ["a\x00b", "a\ud800b", "\udfffz"])
@pytest.mark.parametrize(
    "field", ["channel_id", "user_id", "server_id", "persona_id", "parent_channel_id"]
)
def test_bad_text_in_ids_is_a_validation_error(field: str, text: str) -> None:
    fields = {"channel_id": "c1", "user_id": "u1"} | {field: text}
    with pytest.raises(ValidationError, match=field):
        Scope(**fields)


@pytest.mark.parametrize("bad", list(BAD_TEXT))
def test_bad_text_from_the_model_is_stored_safely(deployment: Deployment, bad: str) -> None:
    mem = deployment.open()
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    text = BAD_TEXT[bad]
    assert turn(mem, scope, {"summary": f"summary {text}"})["status"] == "completed"
    mem.capture(scope, [{"role": "user", "content": text, "name": text}])
    live = mem.get(scope)
    assert live is not None and live.summary is not None
    assert "\x00" not in live.summary and "\ufffd" in live.summary
    live.summary.encode("utf-8")
    assert "\ufffd" in live.messages[0].content and "\ufffd" in (live.messages[0].name or "")
    assert_cache_matches_sql(mem)
    # An unknown key with bad text is named back safely, as a failed result.
    result = mem.update(mem.begin_turn(scope), {"summary": "ok", text: "x"})
    assert result["status"] == FAILED and "Unknown field" in result["reason"]
    json.dumps(result, ensure_ascii=False).encode("utf-8")
    # Non-string values are refused, whatever they contain.
    for value in ({"$ne": 1}, [text], 7, None, b"bytes"):
        result = mem.update(mem.begin_turn(scope), {"summary": value})
        assert result["status"] == FAILED


ADMIN_TEXT: dict[str, Callable[[ShortTermMemory, str], Any]] = {
    "category label": lambda m, t: m.set_categories("g1", [Category(f"Plot {t}")]),
    "category description": lambda m, t: m.set_categories("g1", [Category("Plot", t)]),
    "tool description override": lambda m, t: m.configure_server("g1", tool_description_override=t),
    "nudge override": lambda m, t: m.configure_server("g1", update_nudge_override=t),
}


def refused_or_stored(mem: ShortTermMemory, where: str, text: str) -> None:
    """Either a ConfigurationError, or the text is stored and reads back as written."""
    try:
        ADMIN_TEXT[where](mem, text)
    except ConfigurationError:
        return
    settings = mem._store.get_server_settings("g1")
    cats = mem._store.get_categories("g1")
    stored: list[str | None] = [
        *(c.label for c in cats),
        *(c.description for c in cats),
        settings.tool_description_override if settings else None,
        settings.update_nudge_override if settings else None,
    ]
    assert any(s is not None and text in s for s in stored), where


@pytest.mark.parametrize("bad", list(BAD_TEXT))
def test_bad_text_in_administration_is_refused_or_stored(deployment: Deployment, bad: str) -> None:
    """Labels, descriptions and override texts (each of ``ADMIN_TEXT``)."""
    mem = deployment.open()
    for where in ADMIN_TEXT:
        refused_or_stored(mem, where, BAD_TEXT[bad])


def named_scope_round_trip(mem: ShortTermMemory, **names: str) -> None:
    """Either Scope refuses the names (ValidationError), or a turn stores both rows."""
    try:
        scope = Scope(channel_id="c1", user_id="u1", server_id="g1", **names)
    except ValidationError:
        return
    assert turn(mem, scope, {"summary": "named"})["status"] == "completed"
    mem.capture(scope, [{"role": "user", "content": "hi"}])
    rows = raw_rows(mem, "channel_id = 'c1'")
    assert sorted(r["summary"] for r in rows) == ["named", "named"], names
    assert len(mem._outbox) == 0
    assert_cache_matches_sql(mem)


@pytest.mark.parametrize("bad", list(BAD_TEXT))
def test_bad_text_in_persisted_display_names_is_refused_or_stored(
    deployment: Deployment, bad: str
) -> None:
    """``channel_name`` and ``server_name`` (both are SQL columns)."""
    mem = deployment.open()
    named_scope_round_trip(mem, channel_name=BAD_TEXT[bad])
    named_scope_round_trip(mem, server_name=BAD_TEXT[bad])


def test_bad_text_in_the_user_name_is_harmless(deployment: Deployment) -> None:
    mem = deployment.open()  # user_name is never persisted
    for text in BAD_TEXT.values():
        named_scope_round_trip(mem, user_name=text)
