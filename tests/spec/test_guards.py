"""Guards of ``update_short_term_memory``: each hides the tool at offer time and is
re-checked when the call executes — except "already updated this turn", which blocks
a second execution only and leaves the tool offered (SPEC §3, amended 2026-12-01)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stm_memory import (
    TOOL_NAME,
    Category,
    Scope,
    ServerSettings,
    ShortTermMemory,
    TurnContext,
    UserSettings,
    ValidationError,
)
from stm_memory.tool.memory_tool import build_tool

SERVER = Scope(channel_id="c1", user_id="u1", server_id="g1")
OTHER_SERVER = Scope(channel_id="c2", user_id="u1", server_id="g2")
DM = Scope(channel_id="d1", user_id="u1")


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache")
    yield memory
    memory.close()


def begin(mem: ShortTermMemory, scope: Scope = SERVER, **kwargs: Any) -> TurnContext:
    kwargs.setdefault("provider", "openai")
    kwargs.setdefault("user_message", "what happens next?")
    return mem.begin_turn(scope, **kwargs)


def assert_failed(result: dict[str, Any], *fragments: str) -> str:
    assert set(result) == {"status", "reason", "tool_name"}, result
    assert result["status"] == "tool_execution_failed"
    assert result["tool_name"] == TOOL_NAME
    reason = result["reason"]
    assert isinstance(reason, str) and reason.strip()
    for fragment in fragments:
        assert fragment.lower() in reason.lower(), (fragment, reason)
    return reason


def nothing_stored(mem: ShortTermMemory, scope: Scope = SERVER) -> bool:
    entry = mem.get(scope)
    return entry is None or (entry.summary is None and not entry.categories)


def test_baseline_tool_is_offered(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    assert turn.tool_offered
    assert turn.guard_reason() is None
    assert mem.tool(turn) is not None


# --- server toggle -------------------------------------------------------------------------


def test_server_toggle_off_hides_and_blocks(mem: ShortTermMemory) -> None:
    mem.configure_server("g1", short_term_memory_enabled=False)
    turn = begin(mem)
    assert mem.tool(turn) is None
    assert_failed(mem.update(turn, {"summary": "x"}), "disabled")
    assert nothing_stored(mem)
    # Other servers and DMs are unaffected.
    assert mem.tool(begin(mem, OTHER_SERVER)) is not None
    assert mem.tool(begin(mem, DM)) is not None
    # Only an explicit False disables; switching back on offers it again.
    mem.configure_server("g1", short_term_memory_enabled=True)
    assert mem.tool(begin(mem)) is not None


# --- explicit long-term-memory intent -------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "Please remember that I'm allergic to nuts.",
        "Please remember that…",
        "don’t forget…",  # curly apostrophe
        "don’t forget my birthday is in May",
        "Don't forget: the code is 1234",
        "覚えておいて",
        "私の名前を覚えておいてください",
        "忘れないで",
        "note this: I work nights",
        "commit this to memory",
        "for future conversations, call me Sam",
    ],
)
def test_intent_hides_and_blocks(mem: ShortTermMemory, message: str) -> None:
    turn = begin(mem, user_message=message)
    assert turn.long_term_intent
    assert mem.tool(turn) is None
    assert_failed(mem.update(turn, {"summary": "x"}), "long-term memory")
    assert nothing_stored(mem)


def test_a_user_message_noted_after_begin_turn_applies_the_intent_guard(
    mem: ShortTermMemory,
) -> None:
    turn = begin(mem, user_message=None)  # a history or a session is read before the input
    assert mem.tool(turn) is not None
    mem.note_user_message(turn, "note this: I work nights")
    assert turn.long_term_intent and mem.tool(turn) is None
    assert_failed(mem.update(turn, {"summary": "x"}), "long-term memory")
    mem.note_user_message(turn, "a second message does not replace the first")
    assert turn.user_message == "note this: I work nights"
    with pytest.raises(ValidationError):
        mem.note_user_message(begin(mem, user_message=None), 42)  # type: ignore[arg-type]
    assert nothing_stored(mem)


@pytest.mark.parametrize(
    "message",
    [
        "I don't remember the plot",
        "I don’t remember the plot",
        "open my notebook",
        "Footnote please",
        "remembered that one?",
        "",
        None,
    ],
)
def test_no_intent_offers_the_tool(mem: ShortTermMemory, message: str | None) -> None:
    turn = begin(mem, user_message=message)
    assert not turn.long_term_intent
    assert mem.tool(turn) is not None


def test_intent_detector_is_replaceable(tmp_path: Path) -> None:
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/stm.db",
        cache_dir=tmp_path / "cache",
        intent_detector=lambda t: "xyzzy" in t,
    ) as custom:
        assert (
            custom.tool(begin(custom, user_message="Please remember that I like tea")) is not None
        )
        turn = begin(custom, user_message="say xyzzy")
        assert custom.tool(turn) is None
        assert_failed(custom.update(turn, {"summary": "x"}), "long-term memory")


def test_failing_detector_means_no_intent(tmp_path: Path) -> None:
    def broken(text: str) -> bool:
        raise RuntimeError("detector bug")

    with ShortTermMemory.from_url("sqlite://", intent_detector=broken) as custom:
        turn = begin(custom, user_message="Please remember this")
        assert not turn.long_term_intent
        assert custom.tool(turn) is not None


# --- already updated this turn ---------------------------------------------------------------


def test_already_updated_stays_offered_and_blocks(mem: ShortTermMemory) -> None:
    """SPEC §3 (amended 2026-12-01): this turn's update blocks a second *execution*
    only; the tool stays offered for the rest of the turn (the tool list heads every
    request's cached prefix)."""
    turn = begin(mem)
    tool = mem.tool(turn)
    assert tool is not None
    assert json.loads(tool.invoke({"summary": "first"})) == {"status": "completed"}
    assert turn.updated
    # Still offered, as the same tool schema the turn's first step sent.
    assert turn.tool_offered
    assert turn.guard_reason(executing=False) is None
    still = mem.tool(turn)
    assert still is not None
    assert (still.name, still.description) == (tool.name, tool.description)
    assert still.tool_call_schema == tool.tool_call_schema
    # ... but executing it again fails with the "already updated" reason.
    reason = turn.guard_reason()
    assert reason is not None and "already updated" in reason.lower()
    assert_failed(json.loads(still.invoke({"summary": "second"})), "already updated")
    assert_failed(json.loads(tool.invoke({"summary": "second"})), "already updated")
    assert_failed(mem.update(turn, {"summary": "third"}), "already updated")
    entry = mem.get(SERVER)
    assert entry is not None and entry.summary == "first"
    # A new turn may update again.
    assert mem.update(begin(mem), {"summary": "next turn"}) == {"status": "completed"}


# --- excluded providers --------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["novelai", "NovelAI", "NOVELAI"])
def test_default_excluded_provider(mem: ShortTermMemory, provider: str) -> None:
    turn = begin(mem, provider=provider)
    assert mem.tool(turn) is None
    assert_failed(mem.update(turn, {"summary": "x"}), "provider")
    assert nothing_stored(mem)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "novelai-proxy", None, ""])
def test_other_providers_are_offered(mem: ShortTermMemory, provider: str | None) -> None:
    assert mem.tool(begin(mem, provider=provider)) is not None


def test_excluded_providers_are_configurable(tmp_path: Path) -> None:
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/stm.db",
        cache_dir=tmp_path / "cache",
        excluded_providers=["Acme", "local-llm"],
    ) as custom:
        assert custom.tool(begin(custom, provider="novelai")) is not None
        for provider in ("acme", "ACME", "local-llm"):
            turn = begin(custom, provider=provider)
            assert custom.tool(turn) is None
            assert_failed(custom.update(turn, {"summary": "x"}), "provider")
    with ShortTermMemory.from_url("sqlite://", excluded_providers=()) as none_excluded:
        assert none_excluded.tool(begin(none_excluded, provider="novelai")) is not None


# --- full privacy ----------------------------------------------------------------------------


def test_full_privacy_hides_and_blocks(mem: ShortTermMemory) -> None:
    mem.configure_user("u1", full_privacy=True)
    for scope in (SERVER, DM):
        turn = begin(mem, scope)
        assert mem.tool(turn) is None
        assert_failed(mem.update(turn, {"summary": "x"}), "privacy")
        assert nothing_stored(mem, scope)
    # Another user in the same channel is unaffected.
    other = Scope(channel_id="c1", user_id="u2", server_id="g1")
    assert mem.tool(begin(mem, other)) is not None
    mem.configure_user("u1", full_privacy=False)
    assert mem.tool(begin(mem)) is not None


# --- tools not available -------------------------------------------------------------------


def test_tools_unavailable_hides_and_blocks(mem: ShortTermMemory) -> None:
    turn = begin(mem, tools_available=False)
    assert mem.tool(turn) is None
    assert_failed(mem.update(turn, {"summary": "x"}), "not available")
    assert nothing_stored(mem)


# --- execution-time re-checks: offered, then the state flips --------------------------------

FLIPS: dict[str, tuple[Callable[[TurnContext], TurnContext], str]] = {
    "server_disabled": (
        lambda t: replace(t, settings=replace(t.settings, short_term_memory_enabled=False)),
        "disabled",
    ),
    "intent": (lambda t: replace(t, long_term_intent=True), "long-term memory"),
    "updated": (lambda t: replace(t, updated=True), "already updated"),
    "provider_excluded": (
        lambda t: replace(t, provider="novelai", provider_excluded=True),
        "novelai",
    ),
    "full_privacy": (
        lambda t: replace(t, user_settings=UserSettings(full_privacy=True)),
        "privacy",
    ),
    "tools_unavailable": (lambda t: replace(t, tools_available=False), "not available"),
}


@pytest.mark.parametrize("flip", FLIPS.values(), ids=FLIPS.keys())
@pytest.mark.parametrize("category_mode", [False, True], ids=["summary", "categories"])
def test_guard_rechecked_at_execution(
    mem: ShortTermMemory,
    flip: tuple[Callable[[TurnContext], TurnContext], str],
    category_mode: bool,
) -> None:
    if category_mode:
        mem.set_categories("g1", [Category("Plot"), Category("Mood")])
    args = {"plot": "p", "mood": "m"} if category_mode else {"summary": "s"}
    change, fragment = flip
    turn = begin(mem)
    assert mem.tool(turn) is not None  # allowed when offered
    flipped = change(turn)
    if fragment == "already updated":
        # An update blocks a second execution only: the tool stays offered for the
        # rest of the turn (SPEC §3, amended 2026-12-01).
        assert flipped.tool_offered
        assert mem.tool(flipped) is not None
    else:
        assert not flipped.tool_offered
        assert mem.tool(flipped) is None
    # A tool built for the turn while allowed, now executing in the flipped state.
    tool = build_tool(mem, flipped)
    assert_failed(json.loads(tool.invoke(args)), fragment)
    message = tool.invoke({"name": TOOL_NAME, "args": args, "id": "call_1", "type": "tool_call"})
    assert_failed(json.loads(str(message.content)), fragment)
    assert_failed(mem.update(flipped, args), fragment)
    assert nothing_stored(mem)


async def test_guard_rechecked_at_async_execution(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    tool = mem.tool(turn)
    assert tool is not None
    turn.updated = True  # e.g. another call of this turn won the race
    assert_failed(json.loads(await tool.ainvoke({"summary": "x"})), "already updated")
    assert_failed(await mem.aupdate(turn, {"summary": "x"}), "already updated")
    assert nothing_stored(mem)


def test_in_place_flip_of_the_offered_tool(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    tool = mem.tool(turn)
    assert tool is not None
    assert mem.update(turn, {"summary": "won"}) == {"status": "completed"}
    assert_failed(json.loads(tool.invoke({"summary": "lost"})), "already updated")
    entry = mem.get(SERVER)
    assert entry is not None and entry.summary == "won"


# --- the order the checks run in ------------------------------------------------------------


def test_execution_order(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    bad_args: dict[str, Any] = {"summary": 1}
    everything = replace(
        turn,
        settings=ServerSettings(short_term_memory_enabled=False),
        long_term_intent=True,
        updated=True,
        provider_excluded=True,
        user_settings=UserSettings(full_privacy=True),
    )
    assert_failed(mem.update(everything, bad_args), "disabled")
    no_toggle = replace(everything, settings=ServerSettings())
    assert_failed(mem.update(no_toggle, bad_args), "long-term memory")
    no_intent = replace(no_toggle, long_term_intent=False)
    assert_failed(mem.update(no_intent, bad_args), "already updated")
    not_updated = replace(no_intent, updated=False)
    reason = assert_failed(mem.update(not_updated, bad_args))
    assert "must be a string" not in reason  # guards come before argument errors
    clean = replace(not_updated, provider_excluded=False, user_settings=UserSettings())
    assert_failed(mem.update(clean, bad_args), "must be a string")
    assert mem.update(clean, {"summary": "finally"}) == {"status": "completed"}


# --- live state changed mid-turn -----------------------------------------------------------


def test_full_privacy_enabled_mid_turn_blocks_the_write(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    tool = mem.tool(turn)
    assert tool is not None
    mem.configure_user("u1", full_privacy=True)
    assert_failed(json.loads(tool.invoke({"summary": "private"})), "privacy")
    assert nothing_stored(mem)


def test_server_disabled_mid_turn_blocks_the_write(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    tool = mem.tool(turn)
    assert tool is not None
    mem.configure_server("g1", short_term_memory_enabled=False)
    assert_failed(json.loads(tool.invoke({"summary": "x"})), "disabled")
    assert nothing_stored(mem)
