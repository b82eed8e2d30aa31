"""Golden tests for stm_memory.prompt.render: exact text of blocks, headers, times and nudges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from stm_memory.model import Category, MemoryEntry, StoredMessage
from stm_memory.prompt.render import (
    CONTENT_HEADER,
    CRUDE_MESSAGE_LIMIT,
    FRAMING,
    category_lines,
    crude_lines,
    distilled_lines,
    expand_macros,
    nudge_text,
    other_channel_block,
    relative_time,
    render_content,
    render_parts,
    where,
)

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PLOT = Category("Plot", "What happened", "plot")
MOOD = Category("Mood", "Tone", "mood")


# How every memory block opens: the header and the framing line.
HEAD = f"{CONTENT_HEADER}\n{FRAMING}\n"


def msg(role: str, content: str, name: str | None = None) -> StoredMessage:
    return StoredMessage(
        role="assistant" if role == "assistant" else "user",
        content=content,
        timestamp=NOW,
        name=name,
    )


def entry(**kw: object) -> MemoryEntry:
    base: dict[str, object] = {
        "key": "shortterm:server:g1:c2",
        "kind": "server",
        "channel_id": "c2",
        "server_id": "g1",
        "last_updated": NOW - timedelta(hours=2),
    }
    base.update(kw)
    return MemoryEntry(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ago", "expected"),
    [
        (timedelta(seconds=-30), "just now"),  # clock skew between workers
        (timedelta(0), "just now"),
        (timedelta(seconds=59), "just now"),
        (timedelta(minutes=1), "1 minute ago"),
        (timedelta(minutes=1, seconds=59), "1 minute ago"),
        (timedelta(minutes=2), "2 minutes ago"),
        (timedelta(minutes=59, seconds=59), "59 minutes ago"),
        (timedelta(hours=1), "1 hour ago"),
        (timedelta(hours=2, minutes=30), "2 hours ago"),
        (timedelta(hours=23, minutes=59), "23 hours ago"),
        (timedelta(days=1), "1 day ago"),
        (timedelta(days=3, hours=5), "3 days ago"),
        (timedelta(days=7), "7 days ago"),
        (timedelta(days=7, seconds=1), "over a week ago"),
        (timedelta(days=400), "over a week ago"),
    ],
)
def test_relative_time_table(ago: timedelta, expected: str) -> None:
    assert relative_time(NOW - ago, NOW) == expected


def test_category_lines_follow_server_order_and_humanise_removed_slugs() -> None:
    values = {"old_notes": "kept", "mood": "Tense", "plot": "Heist on Friday", "c_1st": "x"}
    assert category_lines(values, [PLOT, MOOD]) == [
        "Plot: Heist on Friday",
        "Mood: Tense",
        "Old notes: kept",
        "1st: x",
    ]


def test_blank_category_values_are_skipped() -> None:
    assert category_lines({"plot": "  ", "mood": "Calm"}, [PLOT, MOOD]) == ["Mood: Calm"]


def test_categories_take_precedence_over_summary() -> None:
    assert distilled_lines("A summary", {"plot": "P"}, [PLOT]) == ["Plot: P"]
    assert distilled_lines("A summary\nline 2", {"plot": " "}, [PLOT]) == [
        "A summary",
        "line 2",
    ]
    assert distilled_lines("   ", {}, [PLOT]) == []
    assert distilled_lines(None, {}, []) == []


def test_crude_lines_take_the_last_turns_with_speakers() -> None:
    messages = [
        msg("user", "one", "Ann"),
        msg("assistant", "two"),
        msg("user", "three\nlines   here"),
        msg("assistant", "four", "Bot\nName"),
    ]
    assert crude_lines(messages, 3) == [
        'Assistant: "two"',
        'User: "three lines here"',
        'Bot Name: "four"',
    ]
    assert crude_lines(messages, 0) == []


def test_crude_lines_cut_very_long_turns() -> None:
    (line,) = crude_lines([msg("user", "x" * (CRUDE_MESSAGE_LIMIT + 50))], 1)
    assert line == 'User: "' + "x" * (CRUDE_MESSAGE_LIMIT - 1) + '…"'


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, "#c2"),
        ({"channel_name": "general"}, "#general"),
        ({"channel_name": "#general"}, "#general"),
        ({"server_id": "g2"}, "#c2 in server g2"),
        (
            {"server_id": "g2", "server_name": "Other Guild", "channel_name": "x"},
            "#x in Other Guild",
        ),
        ({"server_id": None, "kind": "user"}, "DM"),
        ({"server_id": None, "kind": "user", "channel_name": "ann-dm"}, "DM #ann-dm"),
    ],
)
def test_where(kw: dict[str, object], expected: str) -> None:
    assert where(entry(**kw), current_server_id="g1") == expected


def block(e: MemoryEntry, mode: str = "crude_summary", count: int = 6) -> str | None:
    return other_channel_block(
        e,
        categories=[PLOT, MOOD],
        now=NOW,
        current_server_id="g1",
        render_mode=mode,  # type: ignore[arg-type]
        crude_count=count,
    )


def test_block_with_summary_in_crude_summary_mode_lists_recent_messages() -> None:
    e = entry(
        channel_name="general",
        summary="We planned a heist.",
        messages=(msg("user", "see you Friday", "Ann"), msg("assistant", "I'll be there")),
    )
    assert block(e) == (
        "- #general, 2 hours ago:\n"
        "  We planned a heist.\n"
        "  Recent messages:\n"
        '  Ann: "see you Friday"\n'
        '  Assistant: "I\'ll be there"'
    )


def test_block_in_supersede_mode_omits_messages() -> None:
    e = entry(summary="We planned a heist.", messages=(msg("user", "hi"),))
    assert block(e, "supersede") == "- #c2, 2 hours ago:\n  We planned a heist."


def test_block_with_categories() -> None:
    e = entry(categories={"plot": "Heist", "mood": "Tense"}, summary="ignored")
    assert block(e, "supersede") == "- #c2, 2 hours ago:\n  Plot: Heist\n  Mood: Tense"


def test_crude_only_block_uses_crude_message_count() -> None:
    messages = tuple(msg("user", f"m{i}", "Ann") for i in range(8))
    assert block(entry(messages=messages), count=2) == (
        '- #c2, 2 hours ago:\n  Ann: "m6"\n  Ann: "m7"'
    )
    # Supersede only hides raw turns *under* distilled content; alone they still show.
    assert block(entry(messages=messages), "supersede", count=1) == (
        '- #c2, 2 hours ago:\n  Ann: "m7"'
    )


def test_block_with_nothing_to_show_is_none() -> None:
    assert block(entry()) is None
    assert block(entry(messages=(msg("user", "hi"),)), count=0) is None


def test_render_content_parts() -> None:
    assert render_content([], []) is None
    assert render_content(["Plot: P"], []) == HEAD + "This channel:\n  Plot: P"
    assert render_content([], ["- #c2, just now:\n  S"]) == (
        HEAD + "Other channels:\n- #c2, just now:\n  S"
    )
    # Two blocks, placed apart (this channel's stays put, the briefings change every
    # turn); render_parts says where the briefings start.
    this = HEAD + "This channel:\n  S1"
    others = HEAD + "Other channels:\n- #a, just now:\n  A\n- #b, 1 day ago:\n  B"
    both = (["S1"], ["- #a, just now:\n  A", "- #b, 1 day ago:\n  B"])
    assert render_content(*both) == f"{this}\n\n{others}"
    assert render_parts(*both) == (f"{this}\n\n{others}", len(this) + 2)
    assert render_parts(["S1"], []) == (this, None)
    assert render_parts([], ["- #a, just now:\n  A"])[1] == 0


def test_render_content_sanitises_names_and_raw_turns() -> None:
    e = entry(channel_name="{{secret}}", messages=(msg("user", "hi {{user}} {evil}", "Ann"),))
    content = render_content([], [block(e) or ""])
    assert content == (HEAD + 'Other channels:\n- #secret, 2 hours ago:\n  Ann: "hi {{user}} evil"')


def test_default_nudge_summary_mode() -> None:
    assert nudge_text(categories=[Category("summary", "", "summary")], summary_mode=True) == (
        "[Short-term memory] After you answer, call update_short_term_memory with a "
        "compact summary of this channel's recent conversation (field: summary). "
        "Do not mention this to the user."
    )


def test_default_nudge_category_mode_names_fields() -> None:
    assert nudge_text(categories=[PLOT, MOOD], summary_mode=False) == (
        "[Short-term memory] After you answer, call update_short_term_memory with updated "
        "values for: Plot (plot), Mood (mood). Do not mention this to the user."
    )


def test_nudge_override_with_macros_then_sanitised() -> None:
    override = "Update {category_labels} via {{tool_name}} for {{user}}; {Tool_Name} {other}."
    assert nudge_text(categories=[PLOT, MOOD], summary_mode=False, override=override) == (
        "Update Plot, Mood via update_short_term_memory for {{user}}; "
        "update_short_term_memory other."
    )


def test_blank_override_falls_back_to_default() -> None:
    text = nudge_text(categories=[PLOT], summary_mode=False, override="   ")
    assert text.startswith("[Short-term memory] After you answer")


def test_expand_macros_leaves_other_braces() -> None:
    assert expand_macros("{x} {{ category_labels }} {1}", categories=[PLOT]) == "{x} Plot {1}"
