"""The history window the engine computes (how many earlier turns a turn may send):
after refreshes, with no memory, after expiry, a cleared summary, a cleared channel
(also queued while the database is down), a restart in a new process, and two hosts."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.dialogues import render, say
from helpers.factory import MemFactory
from helpers.memory import DM, SERVER, refresh, scope_dict, turn
from helpers.sqlite_lock import SqliteWriteLock
from helpers.subproc import run_worker

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock


def keep(mem: ShortTermMemory, scope: Scope = SERVER) -> int | None:
    window = mem.build_context(mem.begin_turn(scope, provider="openai")).history
    assert window is not None
    return window.keep_turns


def sent(mem: ShortTermMemory, history: int, scope: Scope = SERVER) -> list[Any]:
    """What a request carries of ``history`` earlier turns plus a new message."""
    messages = render("openai", [*(say(f"q{i}", answer=f"a{i}") for i in range(history))])
    messages.append({"role": "user", "content": "now"})
    context = mem.build_context(mem.begin_turn(scope, provider="openai"))
    return [m for m in context.apply(messages) if m["role"] != "system"]


@pytest.mark.parametrize("scope", [SERVER, DM], ids=["server", "dm"])
def test_the_window_is_the_turns_since_the_refresh_plus_the_overlap(
    make_mem: MemFactory, scope: Scope
) -> None:
    mem = make_mem()
    for _ in range(3):
        turn(mem, scope)
    assert keep(mem, scope) is None  # no memory yet: only the safety cap
    refresh(mem, scope, "Ann and Bob planned the heist.")
    assert keep(mem, scope) == 1  # the refresh turn itself, as overlap
    turn(mem, scope)
    turn(mem, scope)
    assert keep(mem, scope) == 3
    contents = [m["content"] for m in sent(mem, 20, scope)]
    assert contents == ["q17", "a17", "q18", "a18", "q19", "a19", "now"]


def test_the_overlap_is_configurable(make_mem: MemFactory) -> None:
    mem = make_mem(history_overlap=0)
    refresh(mem, SERVER, "s")
    assert keep(mem) == 0
    assert [m["content"] for m in sent(mem, 5)] == ["now"]


def test_an_expired_memory_keeps_the_turns_it_covered_forgotten(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "A secret plan.")
    turn(mem, SERVER)
    fake_clock.advance(hours=25)
    context = mem.build_context(mem.begin_turn(SERVER, provider="openai"))
    assert context.content is None or "secret" not in context.content
    assert context.history is not None and context.history.keep_turns == 2


def test_a_cleared_summary_keeps_the_turns_it_covered_forgotten(make_mem: MemFactory) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "A secret plan.")
    turn(mem, SERVER)
    mem.clear_summary(SERVER)
    assert keep(mem) == 2


def test_a_cleared_channel_starts_afresh(make_mem: MemFactory) -> None:
    mem = make_mem(history_overlap=2)
    refresh(mem, SERVER, "before the reset")
    turn(mem, SERVER)
    mem.clear_channel("c1")
    assert keep(mem) == 0
    assert [m["content"] for m in sent(mem, 8)] == ["now"]
    turn(mem, SERVER)
    assert keep(mem) == 1
    turn(mem, SERVER)
    assert keep(mem) == 2
    # A refresh right after the reset: the overlap never reaches across it.
    mem.clear_channel("c1")
    refresh(mem, SERVER, "after the reset")
    assert keep(mem) == 1  # min(0 + overlap 2, 1 turn since the reset)


def test_a_reset_reaches_other_users_and_personas_of_the_channel(make_mem: MemFactory) -> None:
    mem = make_mem()
    other = Scope(channel_id="c1", user_id="u2", server_id="g1", persona_id="bard")
    turn(mem, other)
    mem.clear_channel("c1")
    assert keep(mem, other) == 0
    assert keep(mem, Scope(channel_id="c2", user_id="u2", server_id="g1")) is None


def test_a_reset_queued_while_the_database_is_down_still_starts_afresh(
    make_mem: MemFactory,
) -> None:
    mem = make_mem(timeout=0.2)
    refresh(mem, SERVER, "before")
    with SqliteWriteLock(make_mem.sqlite_path):
        assert mem.clear_channel("c1") == 0  # queued
        assert keep(mem) == 0
        turn(mem, SERVER)  # the new entry starts counting from the reset
        assert keep(mem) == 1
    assert mem.flush() >= 1
    assert keep(mem) == 1
    assert mem._store.channel_reset_at("c1") is not None


def test_the_window_survives_a_restart_in_a_new_process(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "We agreed to meet on Friday.")
    turn(mem, SERVER)
    turn(mem, SERVER)
    mem.clear_channel("c2")
    turn(mem, Scope(channel_id="c2", user_id="u1", server_id="g1"))
    mem.close()
    common: dict[str, Any] = {
        "database_url": make_mem.database_url("sqlite"),
        "outbox_path": str(make_mem.outbox_path),
        "now": fake_clock.advance(minutes=5).isoformat(),
    }
    for cache in ("same", "empty"):
        cache_dir = make_mem.cache_dir if cache == "same" else make_mem.tmp_path / "fresh"
        c1 = run_worker(
            "history_window", cache_dir=str(cache_dir), scope=scope_dict(SERVER), **common
        )
        assert c1["keep_turns"] == 3, cache
        c2_scope = scope_dict(Scope(channel_id="c2", user_id="u1", server_id="g1"))
        c2 = run_worker("history_window", cache_dir=str(cache_dir), scope=c2_scope, **common)
        assert c2["keep_turns"] == 1, cache


@pytest.mark.postgres
@pytest.mark.redis
def test_two_hosts_agree_on_the_window(make_mem: MemFactory) -> None:
    a = make_mem("postgres", "redis", outbox_path=make_mem.tmp_path / "a.sqlite3")
    b = make_mem("postgres", "redis", outbox_path=make_mem.tmp_path / "b.sqlite3")
    refresh(a, SERVER, "summary")
    for host in (a, b, a, b):
        turn(host, SERVER)
    assert keep(a) == keep(b) == 5
    b.clear_channel("c1")
    assert keep(a) == 0
    turn(a, SERVER)
    assert keep(b) == 1


@pytest.mark.postgres
def test_two_hosts_on_postgres_see_a_reset_without_a_shared_cache(make_mem: MemFactory) -> None:
    a = make_mem("postgres", cache_dir=make_mem.tmp_path / "cache-a")
    b = make_mem(
        "postgres",
        cache_dir=make_mem.tmp_path / "cache-b",
        outbox_path=make_mem.tmp_path / "b.sqlite3",
    )
    a.clear_channel("c1")
    assert keep(b) == 0


def test_a_forgotten_users_dm_starts_afresh(make_mem: MemFactory) -> None:
    mem = make_mem()
    refresh(mem, DM, "what the user said in the DM")
    turn(mem, DM)
    assert keep(mem, DM) == 2
    mem.clear_user(DM.user_id)
    # The caller's transcript of the DM is not sent to the model again.
    assert keep(mem, DM) == 0
    assert [m["content"] for m in sent(mem, 6, DM)] == ["now"]
