"""Erasure and deletion (SPEC §5, §7): per channel and per user, every stored copy (live
entries, rows, briefings, kept excerpts, the bytes on disk), nothing deleted comes back.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.factory import MemFactory
from helpers.inspection import files_holding
from helpers.memory import DM, SERVER, dialogue, refresh, row, rows, turn
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory import Scope, ShortTermMemory

# ------------------------------------------------------------------------------------
# ``clear_user`` is erasure: speaker ids on captured turns, full privacy
# in everyone's turns, provenance, shared entries of every kind, restarts, a database
# outage during the forget, PostgreSQL + Redis across hosts, the CLI, and the bytes the
# embedded stores leave on disk.

PHONE = "555-0134"
ANN = Scope(channel_id="c1", user_id="u-ann", server_id="g1", user_name="Ann", channel_name="c1")
BOB = Scope(channel_id="c1", user_id="u-bob", server_id="g1", user_name="Bob", channel_name="c1")
BOB_ELSEWHERE = Scope(channel_id="c2", user_id="u-bob", server_id="g1", channel_name="c2")


def ann_said() -> dict[str, Any]:
    return {"role": "user", "content": f"my phone is {PHONE}", "name": "Ann", "user_id": "u-ann"}


def bob_said(text: str = "I'll call you") -> dict[str, Any]:
    return {"role": "user", "content": text, "name": "Bob", "user_id": "u-bob"}


def run_turn(
    mem: ShortTermMemory,
    scope: Scope,
    dialogue: list[dict[str, Any]],
    summary: str | None = None,
) -> dict[str, Any] | None:
    """One responding turn: assemble (as a loop does), maybe write memory, capture, end."""
    turn = mem.begin_turn(scope, provider="openai")
    mem.build_context(turn)
    result = mem.update(turn, {"summary": summary}) if summary is not None else None
    mem.capture(scope, dialogue)
    mem.end_turn(turn)
    return result


def the_scenario(mem: ShortTermMemory) -> None:
    """Ann shares her phone in c1, the model distils it, then Bob speaks in c1."""
    history = [ann_said(), {"role": "assistant", "content": "Noted, Ann."}]
    assert run_turn(mem, ANN, history, f"Ann shared her phone {PHONE}.") == {"status": "completed"}
    history += [bob_said(), {"role": "assistant", "content": "Sounds good."}]
    run_turn(mem, BOB, history)


def context_text(mem: ShortTermMemory, scope: Scope) -> str:
    return str(mem.build_context(mem.begin_turn(scope, provider="openai")).content)


def test_the_measured_scenario(make_mem: MemFactory) -> None:
    mem = make_mem()
    the_scenario(mem)
    assert PHONE in context_text(mem, BOB_ELSEWHERE)  # Bob is briefed on it elsewhere
    shared = mem.get(ANN)
    # Each reply is credited to the user whose turn it answered.
    assert shared is not None and [m.user_id for m in shared.messages] == [
        "u-ann",
        "u-ann",
        "u-bob",
        "u-bob",
    ]
    assert shared.provenance == {"u-ann", "u-bob"}

    mem.clear_user("u-ann")

    shared = mem.get(BOB)
    assert shared is not None
    assert shared.summary is None
    assert [m.content for m in shared.messages if m.role == "user"] == ["I'll call you"]
    assert PHONE not in context_text(mem, BOB_ELSEWHERE)
    stored = row(mem, ANN.server_key)
    assert stored is not None and stored.summary is None
    assert mem.get(ANN) is not None and mem.get_key(ANN.user_key) is None


def test_other_users_memory_is_kept(make_mem: MemFactory) -> None:
    mem = make_mem()
    run_turn(mem, BOB_ELSEWHERE, [bob_said("plans for c2")], "Bob plans things in c2.")
    the_scenario(mem)
    mem.clear_user("u-ann")
    kept = mem.get(BOB_ELSEWHERE)
    assert kept is not None and kept.summary == "Bob plans things in c2."


def test_erasure_reaches_every_kind_of_entry(make_mem: MemFactory) -> None:
    mem = make_mem()
    scopes = [
        Scope(channel_id="c1", user_id="u-bob", server_id="g1"),
        Scope(channel_id="c7", user_id="u-bob", server_id="g2"),  # another server
        Scope(channel_id="t1", user_id="u-bob", server_id="g1", parent_channel_id="c1"),
        Scope(channel_id="c1", user_id="u-bob", server_id="g1", persona_id="bard"),
    ]
    for scope in scopes:
        run_turn(mem, scope, [ann_said(), bob_said()], f"Ann's phone {PHONE} ({scope.live_key})")
    dm = Scope(channel_id="dm-ann", user_id="u-ann")
    run_turn(mem, dm, [ann_said()], f"DM: {PHONE}")
    mem.clear_user("u-ann")
    for scope in scopes:
        entry = mem.get(scope)
        assert entry is not None and entry.summary is None, scope
        assert all(m.user_id != "u-ann" for m in entry.messages)
        assert [m.content for m in entry.messages] == ["I'll call you"]
    assert mem.get(dm) is None


def test_a_user_in_full_privacy_is_not_stored_in_anyones_turn(make_mem: MemFactory) -> None:
    mem = make_mem()
    mem.configure_user("u-cy", full_privacy=True)
    cy = {"role": "user", "content": "my secret address", "name": "Cy", "user_id": "u-cy"}
    run_turn(mem, BOB, [cy, bob_said(), {"role": "assistant", "content": "ok"}])
    entry = mem.get(BOB)
    assert entry is not None
    assert [m.content for m in entry.messages] == ["I'll call you", "ok"]
    # Their words were in front of the model: what it writes next can hold them.
    assert "u-cy" in entry.provenance


def said(text: str) -> dict[str, Any]:
    """A user message as many callers pass it: no speaker id (the turn's user's)."""
    return {"role": "user", "content": text}


def replied(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_a_transcript_captured_again_keeps_its_speakers(make_mem: MemFactory) -> None:
    # The caller passes the channel's transcript every turn without speaker ids. Ann's
    # words were stored as hers; Bob's turn captures them again: still hers, so her
    # erasure removes them and Bob's words stay.
    mem = make_mem()
    ann_turn = [{**said(f"my phone is {PHONE}"), "name": "Ann"}, replied("Noted, Ann.")]
    run_turn(mem, ANN, ann_turn)
    run_turn(
        mem, BOB, [said(f"my phone is {PHONE}"), *ann_turn[1:], said("call me"), replied("ok")]
    )
    entry = mem.get(BOB)
    assert entry is not None
    assert [(m.content, m.user_id, m.name) for m in entry.messages if m.role == "user"] == [
        (f"my phone is {PHONE}", "u-ann", "Ann"),
        ("call me", "u-bob", None),
    ]

    mem.clear_user("u-ann")
    after = mem.get(BOB)
    assert after is not None
    assert [m.content for m in after.messages if m.role == "user"] == ["call me"]
    assert PHONE not in str([m.content for m in after.messages])


def test_equal_words_keep_their_own_speakers(make_mem: MemFactory) -> None:
    # Ann and Bob both said "yes": matched by place in the stored sequence, not by
    # text, each "yes" stays its speaker's; Cy's new "yes" is Cy's.
    mem = make_mem()
    cy = Scope(channel_id="c1", user_id="u-cy", server_id="g1")
    history = [said("yes"), replied("Great.")]
    run_turn(mem, ANN, history)
    history += [said("yes"), replied("Great.")]
    run_turn(mem, BOB, history)
    history += [said("yes"), replied("Great.")]
    run_turn(mem, cy, history)
    entry = mem.get(cy)
    assert entry is not None
    assert [m.user_id for m in entry.messages if m.role == "user"] == ["u-ann", "u-bob", "u-cy"]

    mem.clear_user("u-bob")
    after = mem.get(cy)
    assert after is not None
    assert [m.user_id for m in after.messages if m.role == "user"] == ["u-ann", "u-cy"]


def test_a_window_of_the_transcript_keeps_its_speakers(make_mem: MemFactory) -> None:
    # A caller that passes only its last turns: the stored turns it repeats (a suffix
    # of the stored list) keep their speakers; a named speaker stays named.
    mem = make_mem()
    run_turn(mem, ANN, [said("first"), replied("1"), said(f"my phone is {PHONE}"), replied("2")])
    run_turn(mem, BOB, [said(f"my phone is {PHONE}"), replied("2"), bob_said("mine is 7")])
    entry = mem.get(BOB)
    assert entry is not None
    assert [(m.content, m.user_id) for m in entry.messages if m.role == "user"] == [
        (f"my phone is {PHONE}", "u-ann"),
        ("mine is 7", "u-bob"),
    ]


def test_a_stored_speaker_who_chose_full_privacy_is_not_stored_again(
    make_mem: MemFactory,
) -> None:
    mem = make_mem()
    run_turn(mem, ANN, [said(f"my phone is {PHONE}"), replied("Noted.")])
    mem.configure_user("u-ann", full_privacy=True)
    run_turn(mem, BOB, [said(f"my phone is {PHONE}"), replied("Noted."), said("hi all")])
    entry = mem.get(BOB)
    assert entry is not None
    # The reply to her turn is derived from her words: it goes with them.
    assert [m.content for m in entry.messages] == ["hi all"]


def test_two_users_with_one_display_name(make_mem: MemFactory) -> None:
    mem = make_mem()
    sam1 = {"role": "user", "content": "I am the first Sam", "name": "Sam", "user_id": "u-s1"}
    sam2 = {"role": "user", "content": "I am the second Sam", "name": "Sam", "user_id": "u-s2"}
    run_turn(mem, BOB, [sam1, sam2])
    mem.clear_user("u-s1")
    entry = mem.get(BOB)
    assert entry is not None
    assert [(m.name, m.content) for m in entry.messages] == [("Sam", "I am the second Sam")]


def test_a_restart_between_capture_and_forget(make_mem: MemFactory) -> None:
    first = make_mem()
    the_scenario(first)
    first.close()
    # A new process on an empty cache: the rows (no captured turns) carry provenance.
    second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache")
    assert second.clear_user("u-ann") >= 1
    entry = second.get(BOB)
    assert entry is None or entry.summary is None
    assert PHONE not in context_text(second, BOB_ELSEWHERE)


def test_a_forget_while_the_database_is_down_is_queued_and_holds(make_mem: MemFactory) -> None:
    mem = make_mem(timeout=0.2)
    the_scenario(mem)
    with SqliteWriteLock(make_mem.sqlite_path):
        assert mem.clear_user("u-ann") == 0  # queued
        assert PHONE not in context_text(mem, BOB_ELSEWHERE)
        mem.close()
        # A restart onto an empty cache during the outage: the rows still hold the
        # summary, but hydration shows what the queued erasure will leave.
        again = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache", timeout=0.2)
        entry = again.get(BOB)
        assert entry is None or entry.summary is None
        assert PHONE not in context_text(again, BOB_ELSEWHERE)
    assert again.flush() >= 1
    stored = row(again, ANN.server_key)
    assert stored is not None and stored.summary is None and "u-ann" not in stored.provenance
    third = make_mem(cache_dir=make_mem.tmp_path / "third-cache")
    assert PHONE not in context_text(third, BOB_ELSEWHERE)


def test_queued_writes_lose_the_users_words(make_mem: MemFactory) -> None:
    mem = make_mem(timeout=0.2)
    with SqliteWriteLock(make_mem.sqlite_path):
        the_scenario(mem)  # every row write queued
        assert any(PHONE in str(i.payload) for i in mem._outbox.pending())
        mem.clear_user("u-ann")
        assert not any(PHONE in str(i.payload) for i in mem._outbox.pending())
    mem.flush()
    stored = row(mem, ANN.server_key)
    assert stored is None or stored.summary is None


@pytest.mark.postgres
@pytest.mark.redis
def test_two_hosts_on_postgres_and_redis(make_mem: MemFactory) -> None:
    a = make_mem("postgres", "redis", outbox_path=make_mem.tmp_path / "a.sqlite3")
    b = make_mem("postgres", "redis", outbox_path=make_mem.tmp_path / "b.sqlite3")
    the_scenario(a)
    assert PHONE in context_text(b, BOB_ELSEWHERE)
    b.clear_user("u-ann")
    assert PHONE not in context_text(a, BOB_ELSEWHERE)
    entry = a.get(BOB)
    assert entry is not None and entry.summary is None
    stored = row(a, ANN.server_key)
    assert stored is not None and stored.summary is None


def test_the_cli_forgets_a_user(make_mem: MemFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from stm_memory.cli.commands import app

    mem = make_mem()
    the_scenario(mem)
    mem.close()
    monkeypatch.setenv("STM_DATABASE_URL", make_mem.database_url("sqlite"))
    monkeypatch.setenv("STM_CACHE_DIR", str(make_mem.cache_dir))
    result = CliRunner().invoke(app, ["forget-user", "u-ann"])
    assert result.exit_code == 0, result.output
    assert "erased user 'u-ann'" in result.output
    after = make_mem()
    entry = after.get(BOB)
    assert entry is not None and entry.summary is None
    assert PHONE not in context_text(after, BOB_ELSEWHERE)


def test_erasure_reaches_the_bytes_on_disk(make_mem: MemFactory) -> None:
    mem = make_mem()
    the_scenario(mem)
    mem.flush()
    assert files_holding(make_mem.tmp_path, PHONE.encode())  # it was written somewhere
    mem.clear_user("u-ann")
    mem.flush()
    # Already while the memory is open (a long-running process): the write-ahead logs
    # were checkpointed and truncated, and deleted pages zeroed.
    assert files_holding(make_mem.tmp_path, PHONE.encode()) == []
    mem.close()
    assert files_holding(make_mem.tmp_path, PHONE.encode()) == []


# ------------------------------------------------------------------------------------
# Deletion: cache, rows and queued writes go at once, and nothing comes back.

OTHER_CHANNEL = Scope(channel_id="c2", user_id="u1", server_id="g1")
OTHER_USER = Scope(channel_id="c1", user_id="u2", server_id="g1")
ELSEWHERE = Scope(channel_id="c9", user_id="u1", server_id="g2")


@pytest.fixture(params=["disk", "memory"])
def memory(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    return make_mem(cache=request.param, timeout=0.2)


def populate(memory: ShortTermMemory) -> None:
    # Each scope's user says something of their own: words the channel already holds
    # would stay their first speaker's (u2 repeating u1's turns in c1 captures u1's).
    for i, scope in enumerate((SERVER, OTHER_CHANNEL, OTHER_USER, ELSEWHERE, DM)):
        refresh(memory, scope, f"summary of {scope.live_key}")
        memory.capture(scope, dialogue(2, start=2 * i + 1, speaker=scope.user_id))


def all_keys() -> list[str]:
    return [k for s in (SERVER, OTHER_CHANNEL, OTHER_USER, ELSEWHERE, DM) for k in s.keys]


def test_clear_channel_removes_entries_rows_of_every_user(memory: ShortTermMemory) -> None:
    populate(memory)
    assert memory.clear_channel("c1") == 3  # server row + two user rows
    for scope in (SERVER, OTHER_USER):
        assert memory.get(scope) is None
        assert memory.get_key(scope.user_key) is None
        assert row(memory, scope.server_key) is None
        assert row(memory, scope.user_key) is None
    assert not [k for k in memory._cache.iter_keys("shortterm:") if ":c1" in k.split("index")[0]]
    for scope in (OTHER_CHANNEL, ELSEWHERE, DM):
        live = memory.get(scope)
        assert live is not None and live.summary == f"summary of {scope.live_key}"
    # A later turn starts from nothing, in the cache and in SQL.
    turn(memory, SERVER)
    fresh = memory.get(SERVER)
    assert fresh is not None
    assert (fresh.summary, fresh.turns_since_refresh, fresh.last_refreshed_turn) == (None, 1, 0)


def test_clear_user_removes_user_scope_entries_everywhere(memory: ShortTermMemory) -> None:
    populate(memory)
    # c1, c2, c9 and the DM deleted; the three server entries u1 wrote memory in cleared.
    assert memory.clear_user("u1") == 4 + 3
    for scope in (SERVER, OTHER_CHANNEL, ELSEWHERE, DM):
        assert memory.get_key(scope.user_key) is None
        assert row(memory, scope.user_key) is None
    # Server-scope entries stay (the channel's counters, other users' words), without
    # the distilled memory u1's words reached (erasure).
    for scope in (SERVER, OTHER_CHANNEL, ELSEWHERE):
        entry = memory.get(scope)
        assert entry is not None and entry.summary is None
        stored = row(memory, scope.server_key)
        assert stored is not None and stored.summary is None
    other = memory.get_key(OTHER_USER.user_key)
    assert other is not None and other.summary == f"summary of {OTHER_USER.live_key}"


def test_clear_summary_keeps_counters_and_messages(memory: ShortTermMemory) -> None:
    refresh(memory, SERVER, "to forget")
    turn(memory, SERVER)
    memory.capture(SERVER, dialogue(3))
    memory.clear_summary(SERVER)
    for key in SERVER.keys:
        entry = memory.get_key(key)
        assert entry is not None and entry.summary is None and not entry.categories
        stored = row(memory, key)
        assert stored is not None and stored.summary is None and not stored.categories
    live = memory.get(SERVER)
    assert live is not None
    assert (live.turns_since_refresh, live.last_refreshed_turn, len(live.messages)) == (1, 1, 3)


def test_deletes_purge_queued_writes(memory: ShortTermMemory, make_mem: MemFactory) -> None:
    refresh(memory, SERVER, "landed")
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, SERVER, {"summary": "queued while locked"})
        memory.capture(SERVER, dialogue(2))
        turn(memory, OTHER_CHANNEL, {"summary": "other channel, also queued"})
        queued = len(memory._outbox)
        assert queued >= 3
        assert memory.clear_channel("c1") == 0  # queued itself, behind nothing of c1
        assert memory.get(SERVER) is None
        # Only c2's writes and the delete itself remain.
        kinds = [(i.kind, i.channel_id) for i in memory._outbox.pending()]
        assert ("delete_channel", "c1") in kinds
        assert all(ch == "c2" for kind, ch in kinds if kind != "delete_channel")
    assert memory.flush() == len(kinds)
    assert len(memory._outbox) == 0
    assert rows(memory, *SERVER.keys) == {}
    assert memory.get(SERVER) is None
    other = row(memory, OTHER_CHANNEL.server_key)
    assert other is not None and other.summary == "other channel, also queued"


def test_clear_user_purges_only_that_users_queued_rows(
    memory: ShortTermMemory, make_mem: MemFactory
) -> None:
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, SERVER, {"summary": "u1 in c1"})
        turn(memory, OTHER_USER, {"summary": "u2 in c1"})
        memory.clear_user("u1")
    memory.flush()
    assert row(memory, SERVER.user_key) is None
    # The shared c1 row: its summary was written after u1's words were in c1, so the
    # erasure cleared it; u2's own row is u2's alone and stays.
    server_row = row(memory, SERVER.server_key)
    assert server_row is not None and server_row.summary is None
    u2 = row(memory, OTHER_USER.user_key)
    assert u2 is not None and u2.summary == "u2 in c1"


def test_a_delete_made_while_the_database_is_down_survives_a_restart(
    make_mem: MemFactory,
) -> None:
    first = make_mem(timeout=0.2)
    refresh(first, SERVER, "secret plans")
    refresh(first, DM, "dm secret")
    lock = SqliteWriteLock(make_mem.sqlite_path).acquire()
    try:
        assert first.clear_channel("c1") == 0
        assert first.clear_user("u1") == 0
        assert first.get(SERVER) is None
        first.close()

        # A restart with an empty cache while the delete is still queued: the rows
        # are readable (WAL) but must not be hydrated back.
        second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache", timeout=0.2)
        assert len(second._outbox) == 2
        assert second.get(SERVER) is None
        assert second.get(DM) is None
        assert second.get_key(SERVER.user_key) is None
        assert rows(second, SERVER.server_key or "", DM.user_key)  # still in SQL
    finally:
        lock.release()
    assert second.flush() == 2
    assert second._store.count_rows() == 0
    assert second.get(SERVER) is None and second.get(DM) is None
    second.close()
    third = make_mem(cache_dir=make_mem.tmp_path / "third-cache")
    assert third.get(SERVER) is None and third.get(DM) is None


def test_a_summary_cleared_while_the_database_is_down_is_not_hydrated_back(
    make_mem: MemFactory,
) -> None:
    first = make_mem(timeout=0.2)
    refresh(first, SERVER, "forget me")
    turn(first, SERVER)
    with SqliteWriteLock(make_mem.sqlite_path):
        first.clear_summary(SERVER)
        first.close()
        second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache", timeout=0.2)
        entry = second.get(SERVER)
        # The row (counters) may come back; its summary may not.
        assert entry is None or (entry.summary is None and not entry.categories)
        user_entry = second.get_key(SERVER.user_key)
        assert user_entry is None or user_entry.summary is None
    assert second.flush() == 1
    for key in SERVER.keys:
        stored = row(second, key)
        assert stored is not None and stored.summary is None
        entry = second.get_key(key)
        assert entry is None or entry.summary is None


def test_a_failed_delete_is_retried_by_the_next_write(
    memory: ShortTermMemory, make_mem: MemFactory
) -> None:
    refresh(memory, SERVER, "x")
    with SqliteWriteLock(make_mem.sqlite_path):
        assert memory.clear_channel("c1") == 0
    # No explicit flush: the next write replays the queue first, in order.
    turn(memory, OTHER_CHANNEL)
    assert len(memory._outbox) == 0
    assert rows(memory, *SERVER.keys) == {}


def test_async_deletes(memory: ShortTermMemory) -> None:
    import asyncio

    populate(memory)

    async def scenario() -> None:
        assert await memory.aclear_channel("c2") == 2
        # u2's own row deleted, and c1's shared row (u2 wrote its summary) cleared.
        assert await memory.aclear_user("u2") == 2
        await memory.aclear_summary(DM)

    asyncio.run(scenario())
    assert memory.get(OTHER_CHANNEL) is None
    assert memory.get_key(OTHER_USER.user_key) is None
    dm = memory.get(DM)
    assert dm is not None and dm.summary is None


def test_a_summary_clear_during_an_outage_keeps_queued_counters(
    memory: ShortTermMemory, make_mem: MemFactory
) -> None:
    refresh(memory, SERVER, "old summary")
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, SERVER)
        refresh(memory, SERVER, "written during the outage")
        turn(memory, SERVER)
        turn(memory, SERVER)
        memory.clear_summary(SERVER)
        # The queued writes no longer carry the cleared text.
        assert all("written during" not in str(i.payload) for i in memory._outbox.pending())
    memory.flush()
    live = memory.get(SERVER)
    stored = row(memory, SERVER.server_key)
    assert live is not None and stored is not None
    assert (stored.summary, live.summary) == (None, None)
    assert (live.turns_since_refresh, live.last_refreshed_turn) == (2, 2)
    assert (stored.turns_since_refresh, stored.last_refreshed_turn) == (2, 2)
    user_row = row(memory, SERVER.user_key)
    assert user_row is not None and user_row.summary is None


@pytest.mark.parametrize("backend", ["sqlite", "postgres-redis"])
def test_an_erasure_never_makes_an_expired_entry_anew(make_mem: MemFactory, backend: str) -> None:
    # Found by the property machine: Ann's memory (24 h) is erased 13 h after it was
    # written; left without a memory, the entry's life is the shorter one (12 h), over.
    # An erasure is not activity: the entry stays expired, and the marks of what it
    # removed outlive the expiry (the caller's history still holds her words).
    mem = make_mem("postgres", "redis") if backend == "postgres-redis" else make_mem()
    history = [ann_said(), {"role": "assistant", "content": "Noted, Ann."}]
    assert run_turn(mem, ANN, history, f"Ann shared her phone {PHONE}.") == {"status": "completed"}
    make_mem.clock.advance(hours=13)
    mem.clear_user("u-ann")
    assert mem.get(BOB) is None
    make_mem.clock.advance(hours=1)
    run_turn(mem, BOB, [*history, bob_said()])
    entry = mem.get(BOB)
    assert entry is not None and entry.forgotten
    assert all(PHONE not in m.content for m in entry.messages)
