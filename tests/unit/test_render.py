"""Golden tests for stm_memory.prompt.render: exact text of blocks, headers, times and nudges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from stm_memory.model import Category, MemoryEntry, StoredMessage
from stm_memory.prompt.render import (
    CONTENT_HEADER,
    CRUDE_MESSAGE_LIMIT,
    FRAMING,
    absolute_time,
    briefing_block,
    category_lines,
    crude_lines,
    distilled_lines,
    expand_macros,
    nudge_text,
    other_channel_block,
    render_content,
    render_parts,
    where,
)

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PLOT = Category("Plot", "What happened", "plot")
MOOD = Category("Mood", "Tone", "mood")


# How every memory block opens: the header and the framing line.
HEAD = f"{CONTENT_HEADER}\n{FRAMING}\n"


def msg(
    role: str, content: str, name: str | None = None, *, at: datetime | None = None
) -> StoredMessage:
    # By default a turn captured before the entry's last update (NOW - 2 h, below).
    return StoredMessage(
        role="assistant" if role == "assistant" else "user",
        content=content,
        timestamp=at or NOW - timedelta(hours=3),
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
    # No clock: a briefing's header names an absolute time, so the same entry renders
    # the same bytes whenever it is rendered.
    return other_channel_block(
        e,
        categories=[PLOT, MOOD],
        current_server_id="g1",
        render_mode=mode,  # type: ignore[arg-type]
        crude_count=count,
    )


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (datetime(2026, 12, 1, 14, 3, tzinfo=UTC), "2026-12-01 14:03 UTC"),
        # Seconds are dropped, not rounded: the minute it happened in.
        (datetime(2026, 12, 1, 14, 3, 59, 999999, tzinfo=UTC), "2026-12-01 14:03 UTC"),
        # Another zone is shown in UTC (23:30 at +09:00 is 14:30 UTC the same day) ...
        (
            datetime(2026, 12, 1, 23, 30, tzinfo=timezone(timedelta(hours=9))),
            "2026-12-01 14:30 UTC",
        ),
        # ... also across a date line (01:15 at +02:00 is 23:15 UTC the day before).
        (datetime(2026, 1, 1, 1, 15, tzinfo=timezone(timedelta(hours=2))), "2025-12-31 23:15 UTC"),
    ],
)
def test_absolute_time(at: datetime, expected: str) -> None:
    assert absolute_time(at) == expected


def test_block_with_summary_in_crude_summary_mode_lists_recent_messages() -> None:
    # The summary was written at 10:00; two turns followed at 11:15 and 11:30 (an
    # older turn, covered by the summary, is not repeated). The header names when
    # what the briefing shows last changed: the newest quoted turn, 11:30.
    e = entry(
        channel_name="general",
        summary="We planned a heist.",
        refreshed_at=NOW - timedelta(hours=2),
        last_updated=NOW - timedelta(minutes=30),
        messages=(
            msg("user", "shall we?", "Ann", at=NOW - timedelta(hours=3)),
            msg("user", "see you Friday", "Ann", at=NOW - timedelta(minutes=45)),
            msg("assistant", "I'll be there", at=NOW - timedelta(minutes=30)),
        ),
    )
    assert block(e) == (
        "- #general, 2026-01-05 11:30 UTC:\n"
        "  We planned a heist.\n"
        "  Recent messages:\n"
        '  Ann: "see you Friday"\n'
        '  Assistant: "I\'ll be there"'
    )


def test_block_in_crude_summary_mode_with_nothing_recent_names_the_summary_time() -> None:
    e = entry(
        summary="We planned a heist.",
        refreshed_at=NOW - timedelta(hours=2),
        messages=(msg("user", "hi", at=NOW - timedelta(hours=3)),),
    )
    assert block(e) == "- #c2, 2026-01-05 10:00 UTC:\n  We planned a heist."


def test_block_in_supersede_mode_omits_messages() -> None:
    # A turn captured at 11:00 after the summary (10:00) moved last_updated, but the
    # briefing does not show it: its text, time included, stays as it was.
    e = entry(
        summary="We planned a heist.",
        refreshed_at=NOW - timedelta(hours=2),
        last_updated=NOW - timedelta(hours=1),
        messages=(msg("user", "hi", at=NOW - timedelta(hours=1)),),
    )
    assert block(e, "supersede") == "- #c2, 2026-01-05 10:00 UTC:\n  We planned a heist."


def test_block_of_a_summary_without_a_refresh_time_names_its_last_update() -> None:
    # An entry hydrated from SQL knows only when it was last updated (NOW - 2 h).
    e = entry(summary="We planned a heist.")
    assert e.refreshed_at is None
    assert block(e, "supersede") == "- #c2, 2026-01-05 10:00 UTC:\n  We planned a heist."


def test_block_with_categories() -> None:
    e = entry(
        categories={"plot": "Heist", "mood": "Tense"},
        summary="ignored",
        refreshed_at=NOW - timedelta(hours=4, minutes=7),
    )
    assert block(e, "supersede") == ("- #c2, 2026-01-05 07:53 UTC:\n  Plot: Heist\n  Mood: Tense")


def test_crude_only_block_uses_crude_message_count() -> None:
    # m0 … m7 captured at 09:40 … 09:47; the entry was last updated at 10:00.
    start = datetime(2026, 1, 5, 9, 40, tzinfo=UTC)
    messages = tuple(msg("user", f"m{i}", "Ann", at=start + timedelta(minutes=i)) for i in range(8))
    # The header names the newest quoted turn (m7, 09:47), not the entry's update.
    assert block(entry(messages=messages), count=2) == (
        '- #c2, 2026-01-05 09:47 UTC:\n  Ann: "m6"\n  Ann: "m7"'
    )
    # Supersede only hides raw turns *under* distilled content; alone they still show.
    assert block(entry(messages=messages), "supersede", count=1) == (
        '- #c2, 2026-01-05 09:47 UTC:\n  Ann: "m7"'
    )


def test_a_summary_line_like_recent_messages_does_not_move_the_time() -> None:
    # Supersede: the briefing shows the summary (10:00) and no raw turn; a turn
    # captured at 11:00 must not move its time (nor, with it, its bytes).
    e = entry(
        summary="Plan.\nRecent messages:\nnone",
        refreshed_at=NOW - timedelta(hours=2),
        last_updated=NOW - timedelta(hours=1),
        messages=(msg("user", "hi", at=NOW - timedelta(hours=1)),),
    )
    assert block(e, "supersede") == (
        "- #c2, 2026-01-05 10:00 UTC:\n  Plan.\n  Recent messages:\n  none"
    )


def test_block_bytes_do_not_depend_on_when_they_are_rendered() -> None:
    e = entry(summary="S", refreshed_at=NOW - timedelta(days=3))
    # No "N days ago": nothing in the text moves with the clock.
    assert block(e, "supersede") == "- #c2, 2026-01-02 12:00 UTC:\n  S"
    assert "ago" not in (block(e, "supersede") or "")


def test_block_with_nothing_to_show_is_none() -> None:
    assert block(entry()) is None
    assert block(entry(messages=(msg("user", "hi"),)), count=0) is None


def test_render_content_parts() -> None:
    assert render_content([], []) is None
    assert render_content(["Plot: P"], []) == HEAD + "This channel:\n  Plot: P"
    a = "- #a, 2026-01-05 12:00 UTC:\n  A"
    b = "- #b, 2026-01-04 12:00 UTC:\n  B"
    assert render_content([], [a]) == HEAD + f"Other channels:\n{a}"
    # Two blocks, placed apart (this channel's stays put, the briefings go elsewhere);
    # render_parts says where the briefings start.
    this = HEAD + "This channel:\n  S1"
    others = HEAD + f"Other channels:\n{a}\n{b}"
    both = (["S1"], [a, b])
    assert render_content(*both) == f"{this}\n\n{others}"
    assert render_parts(*both) == (f"{this}\n\n{others}", len(this) + 2)
    assert render_parts(["S1"], []) == (this, None)
    assert render_parts([], [a])[1] == 0


def test_briefing_block_is_one_group_of_its_own() -> None:
    a = "- #a, 2026-01-05 12:00 UTC:\n  A"
    b = "- #b, 2026-01-04 12:00 UTC:\n  B {{secret}}"
    # A group of briefings opens with the header and framing like every memory block,
    # is sanitised like the rest, and the same entries always give the same bytes.
    assert (
        briefing_block([a, b])
        == HEAD + f"Other channels:\n{a}\n- #b, 2026-01-04 12:00 UTC:\n  B secret"
    )
    assert briefing_block([a, b]) == briefing_block([a, b])
    assert briefing_block([a]) == render_content([], [a])


def test_render_content_sanitises_names_and_raw_turns() -> None:
    e = entry(channel_name="{{secret}}", messages=(msg("user", "hi {{user}} {evil}", "Ann"),))
    content = render_content([], [block(e) or ""])
    # The turn was captured at 09:00 (NOW - 3 h): the newest quoted turn's time.
    assert content == (
        HEAD + 'Other channels:\n- #secret, 2026-01-05 09:00 UTC:\n  Ann: "hi {{user}} evil"'
    )


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
