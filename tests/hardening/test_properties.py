"""Property-based (issue 8): random sequences of operations against a simple model of
the expected state — per key: does the row exist, its summary and both counters, and
the captured messages of the live entry. After every step the live entries must match
the model, and so must the SQL rows whenever nothing waits in the outbox.

Operations: update, turn (end_turn), capture, clear_summary, clear_channel, clear_user,
clock advance, janitor (after a 91-day jump), restart (close + reopen with a fresh cache
directory; the database and the outbox stay), a database outage (SQLite write lock held)
and flush.

The clock may jump past either TTL (an expired entry shows nothing; its next mutation
starts from an empty entry that keeps the counters), and a restart may come while the
database is down, with writes waiting in the outbox.

Kept out on purpose: operating again on a scope whose rows the janitor deleted while
its stale entry stayed cached; the janitor jump therefore moves on to fresh channel ids
(tests/engine/test_janitor.py).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest
import redis
from helpers.services import PostgresSchemas, base_postgres_url
from helpers.sqlite_lock import SqliteWriteLock
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from stm_memory import Scope, ShortTermMemory
from stm_memory.model import parse_key
from stm_memory.testing import FrozenClock

SERVERS = ("g1", "g2")
USERS = ("u1", "u2")
SUMMARIES = st.text(alphabet="abc xyz", min_size=1, max_size=12).filter(lambda s: s.strip())


def scope_pool(generation: int) -> list[Scope]:
    """Channel ids are unique per server (as on every chat platform) and carry the
    janitor generation."""
    pool = [
        Scope(channel_id=f"{g}-c{c}-{generation}", user_id=u, server_id=g)
        for g in SERVERS
        for c in (1, 2)
        for u in USERS
    ]
    pool += [Scope(channel_id=f"dm-{u}-{generation}", user_id=u) for u in USERS]
    pool += [
        Scope(channel_id=f"g1-c1-{generation}", user_id=u, server_id="g1", persona_id="p")
        for u in USERS
    ]
    return pool


POOL_SIZE = len(scope_pool(0))
PICK = st.integers(min_value=0, max_value=POOL_SIZE - 1)


SUMMARY_TTL, BARE_TTL = timedelta(hours=24), timedelta(hours=12)
EPOCH = datetime.fromtimestamp(0).astimezone()


@dataclass(frozen=True)
class Row:
    summary: str | None = None
    turns_since_refresh: int = 0
    last_refreshed_turn: int = 0
    last_updated: datetime = EPOCH
    # The users whose words may be in the entry (what clear_user goes by).
    provenance: frozenset[str] = frozenset()

    def live(self, now: datetime) -> bool:
        return now - self.last_updated < (SUMMARY_TTL if self.summary else BARE_TTL)

    def counters(self) -> tuple[str | None, int, int]:
        return (self.summary, self.turns_since_refresh, self.last_refreshed_turn)


class MemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="stm-props-"))
        self.clock = FrozenClock()
        self.restarts = 0
        self.generation = 0
        self.lock: SqliteWriteLock | None = None
        self.rows: dict[str, Row] = {}
        # (speaker, content) of each key's captured turns.
        self.messages: dict[str, tuple[tuple[str, str], ...]] = {}
        # Numbers each capture's turns: every capture says something new, so none is
        # a stored turn said again (which keeps its stored speaker; tests/engine).
        self.captures = 0
        self.universe: set[str] = set()
        self.mem = self.open()

    def open(self) -> ShortTermMemory:
        return ShortTermMemory.from_url(
            f"sqlite:///{self.dir / 'stm.db'}",
            cache_dir=self.dir / f"cache-{self.restarts}",
            outbox_path=self.dir / "outbox.sqlite3",
            clock=self.clock,
            timeout=0.05,
        )

    def teardown(self) -> None:
        if self.lock is not None:
            self.lock.release()
        self.mem.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def scope(self, i: int) -> Scope:
        scope = scope_pool(self.generation)[i]
        self.universe.update(scope.keys)
        return scope

    @property
    def down(self) -> bool:
        return self.lock is not None

    def mutated(self, key: str) -> Row:
        """The row as a cache mutation starts from: a new or expired entry is empty
        (dated now), and an expired one keeps only its counters."""
        now = self.clock()
        row = self.rows.get(key)
        if row is None:
            return Row(last_updated=now)
        if not row.live(now):
            self.messages.pop(key, None)
            return replace(row, summary=None, last_updated=now, provenance=frozenset())
        return row

    # -- conversation ----------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        assert self.mem._store.count_rows() == 0

    @rule(i=PICK, text=SUMMARIES)
    def update(self, i: int, text: str) -> None:
        scope = self.scope(i)
        ctx = self.mem.begin_turn(scope, provider="openai", user_message="hi")
        assert self.mem.update(ctx, {"summary": text})["status"] == "completed"
        self.mem.end_turn(ctx)
        for key in scope.keys:
            row = self.mutated(key)
            row = replace(
                row,
                summary=text.strip(),
                last_updated=self.clock(),
                provenance=row.provenance | {scope.user_id},
            )
            if key == scope.live_key:
                row = replace(
                    row, turns_since_refresh=0, last_refreshed_turn=row.last_refreshed_turn + 1
                )
            self.rows[key] = row

    @rule(i=PICK)
    def turn(self, i: int) -> None:
        scope = self.scope(i)
        self.mem.end_turn(self.mem.begin_turn(scope))
        row = self.mutated(scope.live_key)
        self.rows[scope.live_key] = replace(row, turns_since_refresh=row.turns_since_refresh + 1)

    @rule(i=PICK, n=st.integers(min_value=1, max_value=12))
    def capture(self, i: int, n: int) -> None:
        scope = self.scope(i)
        self.captures += 1
        said = [f"m{self.clock().timestamp():.0f}-{self.captures}-{k}" for k in range(n)]
        self.mem.capture(scope, [{"role": "user", "content": c} for c in said])
        for key in scope.keys:
            row = self.mutated(key)
            self.rows[key] = replace(
                row, last_updated=self.clock(), provenance=row.provenance | {scope.user_id}
            )
            self.messages[key] = tuple((scope.user_id, c) for c in said[-10:])

    @rule(i=PICK)
    def clear_summary(self, i: int) -> None:
        scope = self.scope(i)
        self.mem.clear_summary(scope)
        for key in scope.keys:
            if key in self.rows:
                self.rows[key] = replace(self.mutated(key), summary=None, last_updated=self.clock())

    @rule(i=PICK)
    def clear_channel(self, i: int) -> None:
        channel = self.scope(i).channel_id
        self.mem.clear_channel(channel)
        self._forget(lambda kind, owner, ch: ch == channel)

    @rule(user=st.sampled_from(USERS))
    def clear_user(self, user: str) -> None:
        self.mem.clear_user(user)
        self._forget(lambda kind, owner, ch: kind == "user" and owner == user)
        # Erasure: the user's turns leave every entry; the distilled memory of an entry
        # whose provenance names them is cleared (its life is not extended).
        for key, row in list(self.rows.items()):
            if user not in row.provenance:
                continue
            kept = tuple(m for m in self.messages.get(key, ()) if m[0] != user)
            if key in self.messages:
                self.messages[key] = kept
            self.rows[key] = replace(row, summary=None, provenance=frozenset(u for u, _ in kept))

    def _forget(self, match: object) -> None:
        for key in list(self.rows):
            kind, owner, channel, _ = parse_key(key)
            if match(kind, owner, channel):  # type: ignore[operator]
                del self.rows[key]
                self.messages.pop(key, None)

    # -- time, maintenance, restarts, outages ------------------------------------------------

    @rule(minutes=st.integers(min_value=1, max_value=10))
    def advance(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)  # far below every TTL

    @rule(hours=st.sampled_from([11, 13, 23, 25]))
    def advance_hours(self, hours: int) -> None:
        self.clock.advance(hours=hours)  # around both TTLs

    @precondition(lambda self: not self.down)
    @rule()
    def janitor(self) -> None:
        self.clock.advance(days=91)
        assert self.mem.run_janitor() == len(self.rows)
        self.rows.clear()
        self.messages.clear()
        self.generation += 1

    @rule()
    def restart(self) -> None:
        self.mem.close()
        self.restarts += 1
        self.mem = self.open()
        self.messages.clear()

    @precondition(lambda self: not self.down)
    @rule()
    def database_goes_down(self) -> None:
        self.lock = SqliteWriteLock(self.dir / "stm.db").acquire()

    @precondition(lambda self: self.down)
    @rule()
    def database_comes_back(self) -> None:
        assert self.lock is not None
        self.lock.release()
        self.lock = None

    @precondition(lambda self: not self.down)
    @rule()
    def flush(self) -> None:
        self.mem.flush()
        assert len(self.mem._outbox) == 0

    # -- what must hold after every step -----------------------------------------------------

    @invariant()
    def live_entries_match_the_model(self) -> None:
        for key in sorted(self.universe):
            entry = self.mem.get_key(key)
            expected = self.rows.get(key)
            if expected is None or not expected.live(self.clock()):
                assert entry is None, (key, entry)
                continue
            assert entry is not None, key
            got = (entry.summary, entry.turns_since_refresh, entry.last_refreshed_turn)
            assert got == expected.counters(), key
            assert entry.last_updated == expected.last_updated, key
            messages = tuple((m.user_id, m.content) for m in entry.messages)
            assert messages == self.messages.get(key, ()), key

    @invariant()
    def sql_rows_match_the_model_when_nothing_is_queued(self) -> None:
        if len(self.mem._outbox):
            return
        stored = self.mem._store.load_many(sorted(self.universe))
        got = {
            k: (e.summary, e.turns_since_refresh, e.last_refreshed_turn) for k, e in stored.items()
        }
        assert got == {k: row.counters() for k, row in self.rows.items()}


class PostgresRedisMachine(MemoryMachine):
    """The same model on PostgreSQL + Redis: a schema per example, and a restart
    empties Redis. No outage rule: the SQLite lock is the embedded layout's outage
    (PostgreSQL outages are test_postgres_outage.py's subject)."""

    redis_url: ClassVar[str] = ""

    def open(self) -> ShortTermMemory:
        if not hasattr(self, "schemas"):
            self.schemas = PostgresSchemas(base_postgres_url())
            self.url = self.schemas.new_url()
        client = redis.Redis.from_url(self.redis_url)
        client.flushdb()
        client.close()
        return ShortTermMemory.from_url(
            self.url,
            redis_url=self.redis_url,
            outbox_path=self.dir / "outbox.sqlite3",
            clock=self.clock,
        )

    def teardown(self) -> None:
        super().teardown()
        self.schemas.drop_all()

    @precondition(lambda self: False)
    @rule()
    def database_goes_down(self) -> None:
        raise AssertionError("not on this layout")


def machine_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def test_random_operation_sequences_match_the_model() -> None:
    run_state_machine_as_test(MemoryMachine, settings=machine_settings(12))


@pytest.mark.postgres
@pytest.mark.redis
def test_random_operation_sequences_on_postgres_and_redis(
    postgres_url: str, redis_url: str
) -> None:
    # The fixtures check the servers (skip, or fail under STM_REQUIRE_SERVICES=1) and
    # give this test its own Redis database; each example makes its own schema.
    PostgresRedisMachine.redis_url = redis_url
    run_state_machine_as_test(PostgresRedisMachine, settings=machine_settings(8))
