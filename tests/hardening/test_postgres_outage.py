"""PostgreSQL unreachable mid-conversation (issue 8): behind a closed port, and with the
server connection killed by ``pg_terminate_backend`` from a separate admin connection.
Tool results stay "completed", the outbox holds the writes and ``flush()`` lands each
of them exactly once after recovery; settings the database cannot give fail closed.
The live cache is Redis (the scale-out setup), but for the fail-closed test, which
needs only the database. The outbox's own rules are tests/engine/test_faults.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from helpers.deployment import OpenMem
from helpers.factory import MemFactory
from helpers.faults import store_writes_fail
from helpers.inspection import assert_cache_matches_sql
from helpers.memory import COMPLETED, SERVER, dialogue, refresh, row, turn
from helpers.proxy import Proxied, TcpProxy
from helpers.services import with_query
from sqlalchemy import event

from stm_memory import Scope, ShortTermMemory

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
DM = Scope(channel_id="dm1", user_id="u1")


def counters(entry: Any) -> tuple[int, int]:
    assert entry is not None
    return entry.turns_since_refresh, entry.last_refreshed_turn


def live_and_sql(mem: ShortTermMemory, scope: Scope = SCOPE) -> tuple[Any, Any]:
    return counters(mem.get(scope)), counters(row(mem, scope.live_key))


def before_the_outage(mem: ShortTermMemory) -> None:
    refresh(mem, SCOPE, "before")
    turn(mem, SCOPE)
    refresh(mem, DM, "dm before")
    assert live_and_sql(mem) == ((1, 1), (1, 1))


def during_the_outage(mem: ShortTermMemory) -> None:
    turn(mem, SCOPE)
    assert turn(mem, SCOPE, {"summary": "during"}) == COMPLETED
    mem.capture(SCOPE, dialogue(2))
    turn(mem, SCOPE)
    turn(mem, SCOPE)
    assert turn(mem, DM, {"summary": "dm during"}) == COMPLETED
    turn(mem, DM)
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "during"
    assert counters(live) == (2, 2)


def after_recovery(mem: ShortTermMemory) -> None:
    assert len(mem._outbox) == 0
    assert mem.flush() == 0
    assert live_and_sql(mem) == ((2, 2), (2, 2))
    assert live_and_sql(mem, DM) == ((1, 2), (1, 2))
    for key in SCOPE.keys:
        stored = row(mem, key)
        assert stored is not None and stored.summary == "during"
    assert_cache_matches_sql(mem)


# -- a closed port ------------------------------------------------------------------------


def test_postgres_behind_a_closed_port(
    open_mem: OpenMem, pg_proxy: Proxied, redis_url: str
) -> None:
    mem = open_mem(pg_proxy.url, redis_url=redis_url, timeout=1)
    before_the_outage(mem)
    pg_proxy.proxy.stop()
    during_the_outage(mem)
    queued = len(mem._outbox)
    kinds = {item.kind for item in mem._outbox.pending()}
    assert kinds == {"put_rows"}
    assert mem.flush() == 0 and len(mem._outbox) == queued  # still down: nothing lost
    pg_proxy.proxy.start()
    assert mem.flush() == queued
    after_recovery(mem)


def test_a_turn_that_starts_after_the_settings_memo_expired(
    open_mem: OpenMem, pg_proxy: Proxied, redis_url: str
) -> None:
    # settings_ttl=0 stands for "the outage has lasted longer than the 5 s memo".
    mem = open_mem(pg_proxy.url, redis_url=redis_url, timeout=1, settings_ttl=0)
    before_the_outage(mem)
    pg_proxy.proxy.stop()
    ctx = mem.begin_turn(SCOPE, provider="openai", user_message="hi")
    mem.build_context(ctx)
    assert mem.update(ctx, {"summary": "during"}) == COMPLETED
    mem.capture(SCOPE, dialogue(2))
    mem.end_turn(ctx)
    pg_proxy.proxy.start()
    assert mem.flush() > 0


@pytest.mark.postgres
def test_settings_the_database_cannot_give_fail_closed(make_mem: MemFactory) -> None:
    """Settings read before an outage carry on; settings never read mean memory off for
    the server and full privacy for the user until the database answers."""
    url = sa.make_url(make_mem.postgres_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432).start()
    new_server = replace(SERVER, server_id="g9")  # its user's settings are known
    new_user = replace(SERVER, user_id="u9")  # its server's settings are known
    try:
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        # settings_ttl=0: every turn asks the database, so the outage is what decides.
        memory = make_mem("postgres", database_url=proxied, timeout=1, settings_ttl=0)
        turn(memory, SERVER)

        proxy.stop()
        known = memory.begin_turn(SERVER, provider="openai", user_message="hello")
        assert known.tool_offered
        assert memory.update(known, {"summary": "during the outage"}) == COMPLETED

        off = memory.begin_turn(new_server, provider="openai", user_message="hello")
        assert not off.tool_offered
        assert "disabled" in memory.update(off, {"summary": "x"})["reason"]

        private = memory.begin_turn(new_user, provider="openai", user_message="hello")
        assert not private.tool_offered
        assert "privacy" in memory.update(private, {"summary": "x"})["reason"]
        assert memory.capture(new_user, dialogue(2)) is None
        assert memory.get_key(new_user.user_key) is None  # nothing stored for this user

        proxy.start()
        for scope in (new_server, new_user):
            assert memory.begin_turn(scope, provider="openai", user_message="hi").tool_offered
    finally:
        proxy.stop()


def test_a_users_next_turn_after_clear_user_during_the_outage(
    open_mem: OpenMem, pg_proxy: Proxied, redis_url: str
) -> None:
    mem = open_mem(pg_proxy.url, redis_url=redis_url, timeout=1)
    before_the_outage(mem)
    pg_proxy.proxy.stop()
    assert mem.clear_user("u1") == 0  # queued
    assert turn(mem, SCOPE, {"summary": "after the reset"}) == COMPLETED


# -- the server connection killed ---------------------------------------------------------


@pytest.fixture
def app_name() -> str:
    return f"stm_hardening_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def killable(
    open_mem: OpenMem, postgres_url: str, redis_url: str, app_name: str
) -> ShortTermMemory:
    """A memory whose PostgreSQL connections carry ``application_name=app_name``."""
    url = with_query(postgres_url, application_name=app_name)
    return open_mem(url, redis_url=redis_url, timeout=1)


def terminate(admin: sa.Engine, *, app_name: str | None = None, pid: int | None = None) -> int:
    """``pg_terminate_backend`` from the admin connection; returns backends killed."""
    with admin.begin() as conn:
        if pid is not None:
            return int(
                conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar_one()
            )
        return int(
            conn.execute(
                sa.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = :n"
                ),
                {"n": app_name},
            ).scalar_one()
        )


@pytest.fixture
def kill_on_statement(
    pg_admin: sa.Engine,
) -> Iterator[Callable[[ShortTermMemory, str, int], list[int]]]:
    """``arm(mem, prefix, nth)``: the ``nth`` statement of ``mem`` starting with ``prefix``
    runs on a connection the admin connection has just terminated. Returns the list the
    killed pids are appended to."""
    removers: list[Callable[[], None]] = []

    def arm(mem: ShortTermMemory, prefix: str, nth: int = 1) -> list[int]:
        engine: sa.Engine = mem._store.engine  # type: ignore[attr-defined]
        seen = {"n": 0}
        killed: list[int] = []

        def hook(conn: sa.Connection, *_args: Any) -> None:
            statement = _args[1]
            if not statement.lstrip().startswith(prefix) or killed:
                return
            seen["n"] += 1
            if seen["n"] == nth:
                pid = conn.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
                assert terminate(pg_admin, pid=pid) == 1
                killed.append(pid)

        event.listen(engine, "before_cursor_execute", hook)
        removers.append(lambda: event.remove(engine, "before_cursor_execute", hook))
        return killed

    yield arm
    for remove in removers:
        remove()


def test_backend_killed_between_turns(
    killable: ShortTermMemory, pg_admin: sa.Engine, app_name: str
) -> None:
    mem = killable
    before_the_outage(mem)
    assert terminate(pg_admin, app_name=app_name) >= 1
    # The pool notices the dead connection (pre-ping) and reconnects: nothing is queued.
    turn(mem, SCOPE)
    assert turn(mem, SCOPE, {"summary": "during"}) == COMPLETED
    assert len(mem._outbox) == 0
    assert live_and_sql(mem) == ((0, 2), (0, 2))
    assert_cache_matches_sql(mem)


def test_backend_killed_during_the_write(
    killable: ShortTermMemory,
    kill_on_statement: Callable[[ShortTermMemory, str, int], list[int]],
) -> None:
    mem = killable
    before_the_outage(mem)
    turn(mem, SCOPE)
    killed = kill_on_statement(mem, "INSERT INTO short_term_memories", 1)
    assert turn(mem, SCOPE, {"summary": "during"}) == COMPLETED
    assert killed
    # The transaction died with the connection: both rows are queued, neither landed.
    assert [i.kind for i in mem._outbox.pending()] == ["put_rows", "put_rows"]
    for key in SCOPE.keys:
        stored = row(mem, key)
        assert stored is not None and stored.summary == "before"
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "during"
    assert mem.flush() == 2
    assert mem.flush() == 0
    assert live_and_sql(mem) == ((0, 2), (0, 2))
    assert_cache_matches_sql(mem)


def test_backend_killed_during_the_replay(
    killable: ShortTermMemory,
    kill_on_statement: Callable[[ShortTermMemory, str, int], list[int]],
    pg_admin: sa.Engine,
    app_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mem = killable
    before_the_outage(mem)
    # Queue the outage conversation: every write fails while the database refuses us.
    with store_writes_fail(mem, monkeypatch):
        during_the_outage(mem)
    queued = len(mem._outbox)
    assert queued >= 6
    # The replay loses its connection in the middle (on the third row statement).
    killed = kill_on_statement(mem, "INSERT INTO short_term_memories", 3)
    first = mem.flush()
    assert killed and 0 < first < queued
    assert len(mem._outbox) == queued - first
    assert mem.flush() == queued - first
    after_recovery(mem)


def test_a_connection_lost_after_the_commit_is_applied_once(
    killable: ShortTermMemory, pg_admin: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = killable
    before_the_outage(mem)
    dialect = mem._store.engine.dialect  # type: ignore[attr-defined]
    original = dialect.do_commit
    armed = {"on": True}

    def do_commit(dbapi_connection: Any) -> None:
        original(dbapi_connection)  # the server has committed ...
        if armed["on"]:
            armed["on"] = False  # ... and the acknowledgement is lost with the connection
            terminate(pg_admin, pid=dbapi_connection.driver_connection.info.backend_pid)
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dialect, "do_commit", do_commit)
    turn(mem, SCOPE)
    assert len(mem._outbox) == 1  # the driver reported a failure: the write is queued
    assert mem.flush() == 1
    assert live_and_sql(mem) == ((2, 1), (2, 1))
