"""Prompt assembly on a real engine (SQLite + diskcache, fake clock): golden content,
other-channel selection and privacy, freshness, the nudge, and error containment."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from stm_memory import Category, Scope, ShortTermMemory
from stm_memory.prompt.cut import HistoryWindow
from stm_memory.prompt.placement import MemoryContext
from stm_memory.prompt.render import CONTENT_HEADER, FRAMING
from stm_memory.testing import FrozenClock

# How every memory block opens: the header and the framing line.
HEAD = f"{CONTENT_HEADER}\n{FRAMING}\n"


@pytest.fixture
def clock(fake_clock: FrozenClock) -> FrozenClock:
    """The suite's fake clock under a short name: ``clock.advance(hours=2)``."""
    return fake_clock


def open_mem(path: Path, clock: FrozenClock) -> ShortTermMemory:
    return ShortTermMemory.from_url(
        f"sqlite:///{path}/stm.db", cache_dir=path / "cache", clock=clock
    )


@pytest.fixture
def mem(tmp_path: Path, clock: FrozenClock) -> Iterator[ShortTermMemory]:
    m = open_mem(tmp_path, clock)
    yield m
    m.close()


def here(channel: str = "c1", **kw: Any) -> Scope:
    base: dict[str, Any] = {"channel_id": channel, "user_id": "u1", "server_id": "g1"}
    base.update(kw)
    return Scope(**base)


def remember(
    mem: ShortTermMemory,
    scope: Scope,
    args: dict[str, str] | None = None,
    messages: Sequence[dict[str, str]] = (),
) -> None:
    """One turn in ``scope``: capture the dialogue, optionally update the memory."""
    turn = mem.begin_turn(scope, provider="openai")
    if messages:
        mem.capture(scope, list(messages))
    if args is not None:
        assert mem.update(turn, args)["status"] == "completed"
    mem.end_turn(turn)


def context(mem: ShortTermMemory, scope: Scope, **kw: Any) -> MemoryContext:
    return mem.build_context(mem.begin_turn(scope, provider="openai", **kw))


CHAT = [
    {"role": "user", "content": "Shall we plan the heist?", "name": "Ann"},
    {"role": "assistant", "content": "That works."},
    {"role": "user", "content": "Bring the map.", "name": "Ann"},
]

# -- same channel ----------------------------------------------------------------------


def test_same_channel_summary(mem: ShortTermMemory, clock: FrozenClock) -> None:
    remember(mem, here(), {"summary": "Ann and the bot planned a heist."}, CHAT)
    clock.advance(hours=2)
    ctx = context(mem, here())
    assert ctx == MemoryContext(
        content=HEAD + "This channel:\n  Ann and the bot planned a heist.",
        nudge=None,
        content_depth=-1,
        nudge_depth=2,
        # The refresh turn is the one covered turn still sent (the overlap).
        history=HistoryWindow(keep_turns=1, token_budget=64_000),
        # Assembly orders the request for provider prompt caches (the nudge after the
        # current user message); a context built by hand keeps the nudge_depth rule.
        cache_ordered=True,
    )
    # Without tools there is no same-channel memory (and nothing else here), so the
    # memory replaces no turn: nothing known covers the dialogue.
    bare = context(mem, here(), tools_available=False)
    assert bare.content is None
    assert bare.history == HistoryWindow(keep_turns=None, token_budget=64_000)


def test_same_channel_categories_in_server_order_with_humanised_leftovers(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.set_categories("g1", [Category("Plot points", "What happened"), Category("Mood", "Tone")])
    remember(mem, here(), {"mood": "Tense", "plot_points": "Heist on Friday"})
    clock.advance(hours=2)
    assert context(mem, here()).content == (
        HEAD + "This channel:\n  Plot points: Heist on Friday\n  Mood: Tense"
    )
    # An admin drops "Plot points" and adds "Setting": the stored value keeps showing,
    # under a label made from its slug, after the current categories.
    mem.set_categories("g1", [Category("Setting", "Where"), Category("Mood", "Tone")])
    assert context(mem, here()).content == (
        HEAD + "This channel:\n  Mood: Tense\n  Plot points: Heist on Friday"
    )


def test_same_channel_never_shows_raw_messages(mem: ShortTermMemory) -> None:
    remember(mem, here(), None, CHAT)
    assert context(mem, here()).content is None


def test_disabled_server_has_no_memory(mem: ShortTermMemory, clock: FrozenClock) -> None:
    remember(mem, here(), {"summary": "S"}, CHAT)
    remember(mem, here("c2"), {"summary": "T"}, CHAT)
    mem.configure_server("g1", short_term_memory_enabled=False)
    assert context(mem, here()).is_empty


# -- other channels ----------------------------------------------------------------------


def test_crude_only_other_channel(mem: ShortTermMemory, clock: FrozenClock) -> None:
    mem.configure_server("g1", crude_message_count=2)
    # The first two turns are captured at 12:00, the third at 12:40; then 3 hours pass.
    remember(mem, here("c2", channel_name="random"), None, CHAT[:2])
    clock.advance(minutes=40)
    remember(mem, here("c2", channel_name="random"), None, CHAT)
    clock.advance(hours=3)
    # Raw turns: the header names the newest quoted turn's time (12:40), not "now".
    assert context(mem, here()).content == (
        HEAD + "Other channels:\n"
        "- #random, 2026-01-05 12:40 UTC:\n"
        '  Assistant: "That works."\n'
        '  Ann: "Bring the map."'
    )


def test_crude_summary_versus_supersede(mem: ShortTermMemory, clock: FrozenClock) -> None:
    assert mem.server_settings("g1").render_mode == "supersede"  # the default
    mem.configure_server("g1", render_mode="crude_summary")
    remember(mem, here("c2"), {"summary": "Heist planned for Friday."}, CHAT)  # 12:00
    clock.advance(minutes=30)
    # Turns after the summary was written are the "recent" ones it does not cover yet.
    later = [*CHAT, {"role": "user", "content": "Who drives?", "name": "Bo"}]
    remember(mem, here("c2"), None, later)  # Bo's turn captured at 12:30
    clock.advance(minutes=60)
    # The briefing shows Bo's turn: its time is that turn's (12:30).
    assert context(mem, here()).content == (
        HEAD + "Other channels:\n"
        "- #c2, 2026-01-05 12:30 UTC:\n"
        "  Heist planned for Friday.\n"
        "  Recent messages:\n"
        '  Bo: "Who drives?"'
    )
    mem.configure_server("g1", render_mode="supersede")
    # Superseded, the briefing shows only the summary: its time is the summary's
    # writing (12:00), although the entry was last updated at 12:30.
    assert context(mem, here()).content == (
        HEAD + "Other channels:\n- #c2, 2026-01-05 12:00 UTC:\n  Heist planned for Friday."
    )


def test_crude_summary_shows_nothing_recent_right_after_a_refresh(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.configure_server("g1", render_mode="crude_summary")
    remember(mem, here("c2"), {"summary": "Heist planned for Friday."}, CHAT)  # 12:00
    clock.advance(minutes=90)
    assert context(mem, here()).content == (
        HEAD + "Other channels:\n- #c2, 2026-01-05 12:00 UTC:\n  Heist planned for Friday."
    )


def test_other_channel_categories_and_both_parts(mem: ShortTermMemory, clock: FrozenClock) -> None:
    mem.set_categories("g1", [Category("Plot"), Category("Mood")])
    mem.configure_server("g1", render_mode="supersede")
    remember(mem, here("c2", channel_name="heists"), {"plot": "Vault", "mood": "Calm"})  # 12:00
    clock.advance(hours=5)
    remember(mem, here(), {"mood": "Cheerful"})
    clock.advance(hours=2)
    built = context(mem, here())
    assert built.memory == HEAD + "This channel:\n  Mood: Cheerful"
    assert built.content == (
        HEAD + "This channel:\n"
        "  Mood: Cheerful\n\n" + HEAD + "Other channels:\n"
        "- #heists, 2026-01-05 12:00 UTC:\n"
        "  Plot: Vault\n"
        "  Mood: Calm"
    )


def test_newest_first_at_most_three_skipping_empty_and_expired(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.configure_server("g1", render_mode="supersede")
    remember(mem, here("old"), None, CHAT)  # raw only: expires after 12 h
    clock.advance(hours=13)  # 2026-01-06 01:00
    for name in ("c2", "c3", "c4", "c5"):  # written at 01:00, 02:10, 03:20, 04:30
        remember(mem, here(name), {"summary": f"About {name}."})
        clock.advance(minutes=70)
    remember(mem, here("empty"))  # counted a turn, nothing to show
    assert context(mem, here()).content == (
        HEAD + "Other channels:\n"
        "- #c5, 2026-01-06 04:30 UTC:\n  About c5.\n"
        "- #c4, 2026-01-06 03:20 UTC:\n  About c4.\n"
        "- #c3, 2026-01-06 02:10 UTC:\n  About c3."
    )


def test_ties_are_broken_by_key(mem: ShortTermMemory, clock: FrozenClock) -> None:
    for name in ("c9", "c4", "c7", "c2"):
        remember(mem, here(name), {"summary": name})
    clock.advance(hours=20)
    content = context(mem, here()).content or ""
    assert [line for line in content.splitlines() if line.startswith("- ")] == [
        "- #c2, 2026-01-05 12:00 UTC:",
        "- #c4, 2026-01-05 12:00 UTC:",
        "- #c7, 2026-01-05 12:00 UTC:",
    ]


def test_privacy_filter_on_a_thread_of_a_private_channel(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.configure_server("g1", private_channel_ids=["secret"], render_mode="supersede")
    remember(mem, here("t1", parent_channel_id="secret"), {"summary": "Thread talk."})
    remember(mem, here("pub"), {"summary": "Public talk."})
    clock.advance(hours=2)
    public = "- #pub, 2026-01-05 12:00 UTC:\n  Public talk."
    thread = "- #t1, 2026-01-05 12:00 UTC:\n  Thread talk."
    assert context(mem, here()).content == f"{HEAD}Other channels:\n{public}"
    # In the private channel itself, or in another of its threads, it is shown.
    for scope in (here("secret"), here("t2", parent_channel_id="secret")):
        content = context(mem, scope).content
        assert content == f"{HEAD}Other channels:\n{public}\n{thread}"
    mem.configure_server("g1", stm_privacy_bypass=True)
    assert context(mem, here()).content == (f"{HEAD}Other channels:\n{public}\n{thread}")


def test_cross_server_opt_in(mem: ShortTermMemory, clock: FrozenClock) -> None:
    mem.set_categories("g2", [Category("Topic")])
    mem.configure_server("g2", private_channel_ids=["vault"], render_mode="supersede")
    mem.configure_server("g1", render_mode="supersede", stm_privacy_bypass=True)
    away = here("lounge", server_id="g2", server_name="Other Guild", channel_name="lounge")
    remember(mem, away, {"topic": "Board games"})
    remember(mem, here("vault", server_id="g2"), {"topic": "Private plans"})
    remember(mem, Scope(channel_id="dm1", user_id="u1"), {"summary": "A DM chat."})
    remember(mem, here("lounge2", server_id="g2", user_id="u2"), {"topic": "Someone else"})
    clock.advance(minutes=5)
    assert context(mem, here()).content is None
    mem.configure_user("u1", cross_server_opt_in=True)
    # Another server's entry, labels from that server; its private channel stays hidden
    # (this server's bypass does not unlock it), DMs never show in a server, and other
    # users' entries never show.
    assert context(mem, here()).content == (
        HEAD
        + "Other channels:\n- #lounge in Other Guild, 2026-01-05 12:00 UTC:\n  Topic: Board games"
    )


def test_dm_shows_other_dms_and_servers_only_when_opted_in(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.configure_server("g1", private_channel_ids=["secret"])
    remember(mem, Scope(channel_id="dm2", user_id="u1"), {"summary": "Earlier DM."})
    remember(mem, here("c2"), {"summary": "Server talk."})
    remember(mem, here("secret"), {"summary": "Secret talk."})
    remember(mem, Scope(channel_id="dm3", user_id="u2"), {"summary": "Not u1's."})
    clock.advance(hours=20)
    dm = Scope(channel_id="dm1", user_id="u1")
    assert context(mem, dm).content == (
        HEAD + "Other channels:\n- DM, 2026-01-05 12:00 UTC:\n  Earlier DM."
    )
    mem.configure_user("u1", cross_server_opt_in=True)
    # Ties on time are broken by key: "shortterm:user:u1:c2" < "shortterm:user:u1:dm2".
    # The private channel of g1 stays hidden: a DM has no bypass of its own.
    assert context(mem, dm).content == (
        HEAD + "Other channels:\n"
        "- #c2 in server g1, 2026-01-05 12:00 UTC:\n  Server talk.\n"
        "- DM, 2026-01-05 12:00 UTC:\n  Earlier DM."
    )
    clock.advance(hours=5)  # past the 24 h summary TTL: nothing left
    assert context(mem, dm).content is None


def test_persona_lineage(mem: ShortTermMemory, clock: FrozenClock) -> None:
    mem.configure_server("g1", render_mode="supersede")
    remember(mem, here("c2", persona_id="p1"), {"summary": "Persona one."})
    remember(mem, here("c3", persona_id="p2"), {"summary": "Persona two."})
    remember(mem, here("c4"), {"summary": "No persona."})
    clock.advance(hours=2)
    assert context(mem, here(persona_id="p1")).content == (
        HEAD + "Other channels:\n- #c2, 2026-01-05 12:00 UTC:\n  Persona one."
    )
    # Without a persona there is no lineage to filter on.
    assert (context(mem, here()).content or "").count("\n- #") == 3


# -- placement: this channel's memory stays put, briefings are billed once per change --

HISTORY = [
    {"role": "system", "content": "base"},
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
]


@pytest.mark.parametrize(
    ("configured", "order"),
    [
        (-1, ["base", "STABLE+MEMORY", "u1", "a1", "u2"]),
        (0, ["base", "STABLE", "u1", "a1", "u2", "MEMORY"]),
        (1, ["base", "STABLE", "u1", "a1", "MEMORY", "u2"]),
        (2, ["base", "STABLE", "u1", "MEMORY", "a1", "u2"]),
        (5, ["base", "STABLE", "MEMORY", "u1", "a1", "u2"]),
    ],
)
def test_this_channel_memory_keeps_its_configured_depth_even_when_fresh(
    mem: ShortTermMemory, clock: FrozenClock, configured: int, order: list[str]
) -> None:
    # A fresh memory no longer moves down the prompt: above the dialogue it is a
    # prefix the provider's cache serves until the memory is rewritten.
    mem.configure_server("g1", content_injection_depth=configured)
    remember(mem, here(), {"summary": "Here."})
    remember(mem, here("c2"), {"summary": "Recent."})  # 12:00
    clock.advance(minutes=10)
    built = context(mem, here())
    assert built.content_depth == configured
    assert built.memory == HEAD + "This channel:\n  Here."
    # The memory was just rewritten: the briefings shown form the stable group
    # (turns back -1), which changes only at the next rewrite; none is new this turn.
    stable = HEAD + "Other channels:\n- #c2, 2026-01-05 12:00 UTC:\n  Recent."
    assert built.briefings == ((-1, stable),)
    assert built.briefing is None
    assert built.content == f"{built.memory}\n\n{stable}"
    # The stable group goes at the top whatever the memory's depth (joined to the
    # memory when that is at the top too, ahead of it: what changes least first).
    names = {
        built.memory: "MEMORY",
        stable: "STABLE",
        f"{stable}\n\n{built.memory}": "STABLE+MEMORY",
    }
    placed = built.apply(HISTORY, trim=False)
    assert [names.get(m["content"], m["content"]) for m in placed] == order
    assert context(mem, here(), tools_available=False).memory is None


def test_briefings_stable_after_a_rewrite_then_new_ones_after_the_current_user_message(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    remember(mem, here(), {"summary": "Here."})
    remember(mem, here("c2"), {"summary": "Elsewhere."})  # 12:00
    # The first turn after this channel's rewrite: the briefing goes in the stable
    # group, joined to the memory at the top (ahead of it: what changes least first).
    turn = mem.begin_turn(here(), provider="openai")
    first = mem.build_context(turn)
    elsewhere = "- #c2, 2026-01-05 12:00 UTC:\n  Elsewhere."
    stable = HEAD + f"Other channels:\n{elsewhere}"
    assert first.briefings == ((-1, stable),) and first.briefing is None
    assert [m["content"] for m in first.apply(HISTORY, trim=False)] == [
        "base",
        f"{stable}\n\n{first.memory}",
        "u1",
        "a1",
        "u2",
    ]
    mem.end_turn(turn)  # stores the copies this turn's requests carried
    clock.advance(minutes=5)
    remember(mem, here("c3"), {"summary": "Brand new."})  # 12:05
    # No rewrite here since: the stable group stays as it was sent, and the new
    # briefing enters once, right after the current user message.
    second = context(mem, here())
    new = HEAD + "Other channels:\n- #c3, 2026-01-05 12:05 UTC:\n  Brand new."
    assert second.briefings == ((-1, stable), (0, new))
    assert second.briefing == new
    assert [m["content"] for m in second.apply(HISTORY, trim=False)] == [
        "base",
        f"{stable}\n\n{second.memory}",
        "u1",
        "a1",
        "u2",
        new,
    ]


# -- the nudge -------------------------------------------------------------------------


def test_nudge_after_cadence_turns_and_reset_by_update(mem: ShortTermMemory) -> None:
    mem.configure_server("g1", refresh_cadence=3)
    nudges = []
    for _ in range(4):
        turn = mem.begin_turn(here(), provider="openai")
        nudges.append(mem.build_context(turn).nudge)
        mem.capture(here(), CHAT)
        mem.end_turn(turn)
    assert nudges[:3] == [None, None, None]
    assert nudges[3] == (
        "[Short-term memory] After you answer, call update_short_term_memory with a "
        "compact summary of this channel's recent conversation (field: summary). "
        "Do not mention this to the user."
    )
    turn = mem.begin_turn(here(), provider="openai")
    ctx = mem.build_context(turn)
    assert ctx.nudge == nudges[3] and ctx.nudge_depth == 2
    assert mem.update(turn, {"summary": "Done."})["status"] == "completed"
    mem.end_turn(turn)
    assert context(mem, here()).nudge is None


def test_assembly_puts_the_nudge_after_the_current_user_message(mem: ShortTermMemory) -> None:
    mem.configure_server("g1", refresh_cadence=1, nudge_injection_depth=2)
    remember(mem, here(), None, CHAT)
    ctx = context(mem, here())
    assert ctx.nudge is not None and ctx.nudge_depth == 2 and ctx.cache_ordered
    # Not two messages from the end: right after the current user message, so every
    # step of the turn (and the next turn's request) keeps everything before it.
    placed = ctx.apply(HISTORY, trim=False)
    assert [m["content"] for m in placed] == ["base", "u1", "a1", "u2", ctx.nudge]
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "t1", "content": "found"}
    step = ctx.apply([*HISTORY, call, result], trim=False)
    assert step == [*placed, call, result]  # the second step extends the first
    # A context built by hand keeps the nudge_depth rule.
    hand = MemoryContext(nudge=ctx.nudge, nudge_depth=2)
    assert [m["content"] for m in hand.apply(HISTORY, trim=False)] == [
        "base",
        "u1",
        ctx.nudge,
        "a1",
        "u2",
    ]


def test_no_nudge_when_the_tool_is_not_offered(mem: ShortTermMemory) -> None:
    mem.configure_server("g1", refresh_cadence=1)
    remember(mem, here(), None, CHAT)
    assert context(mem, here()).nudge is not None
    assert context(mem, here(), user_message="Please remember this forever").nudge is None
    assert context(mem, here(), tools_available=False).nudge is None
    assert mem.build_context(mem.begin_turn(here(), provider="novelai")).nudge is None
    # A scope never seen has no entry, so no counter and no nudge.
    assert context(mem, here("new")).nudge is None


def test_nudge_names_categories_and_override_macros(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", [Category("Plot"), Category("Mood")])
    mem.configure_server("g1", refresh_cadence=1, nudge_injection_depth=1)
    remember(mem, here(), None, CHAT)
    ctx = context(mem, here())
    assert ctx.nudge == (
        "[Short-term memory] After you answer, call update_short_term_memory with updated "
        "values for: Plot (plot), Mood (mood). Do not mention this to the user."
    )
    assert ctx.nudge_depth == 1
    mem.configure_server(
        "g1", update_nudge_override="Refresh {category_labels} via {{tool_name}}, {{user}}. {x}"
    )
    assert context(mem, here()).nudge == (
        "Refresh Plot, Mood via update_short_term_memory, {{user}}. x"
    )


# -- robustness ----------------------------------------------------------------------


def test_assembly_error_yields_empty_memory_and_a_log_record(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    remember(mem, here(), {"summary": "S"}, CHAT)

    def boom(keys: Sequence[str]) -> dict[str, Any]:
        raise RuntimeError("cache on fire")

    monkeypatch.setattr(mem._cache, "read_many", boom)
    with caplog.at_level(logging.ERROR, logger="stm_memory"):
        ctx = context(mem, here())
    assert ctx.is_empty and ctx.content is None and ctx.nudge is None
    (record,) = [r for r in caplog.records if r.name == "stm_memory"]
    assert here().live_key in record.getMessage()
    assert record.exc_info is not None and "cache on fire" in str(record.exc_info[1])


def _scenario(path: Path) -> tuple[str | None, str | None]:
    clock = FrozenClock()
    with open_mem(path, clock) as m:
        m.set_categories("g1", [Category("Plot"), Category("Mood")])
        m.configure_server("g1", refresh_cadence=1)
        for i, name in enumerate(("c5", "c2", "c9", "c3")):
            scope = here(name, channel_name=f"room-{i}")
            remember(m, scope, {"plot": f"P{i}", "mood": "M"}, CHAT)
        remember(m, here(), {"plot": "Here"}, CHAT)
        remember(m, here(), None, CHAT)
        clock.advance(hours=1, minutes=1)
        ctx = context(m, here())
        return ctx.content, ctx.nudge


def test_identical_runs_render_identical_bytes(tmp_path: Path) -> None:
    first = _scenario(tmp_path / "a")
    second = _scenario(tmp_path / "b")
    assert first == second
    assert first[0] is not None and first[1] is not None
    assert first[0].startswith(HEAD + "This channel:\n  Plot: Here\n")
