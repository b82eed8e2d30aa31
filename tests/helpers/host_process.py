"""A second "host": a child process that runs one ShortTermMemory and answers commands.

Started by :class:`helpers.host.Host`, which runs this module's ``main``. It reads one
JSON command per line on stdin and writes one JSON reply per line on stdout, so a test
can interleave what two processes do (host A writes, host B reads at once) without
sleeps.

``crash`` arms a hook that kills the process with ``os._exit`` at a chosen point of
the write path, the way a power cut or an OOM kill would (no cleanup, no flush).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.resilient import ResilientCache
from stm_memory.durability.outbox import Outbox
from stm_memory.durability.persister import Persister
from stm_memory.testing import FrozenClock

__all__ = ["CRASH_EXIT_CODE", "main"]

CRASH_EXIT_CODE = 17


def _crash() -> None:
    sys.stdout.flush()
    os._exit(CRASH_EXIT_CODE)


class _Traced:
    """A sqlite3 connection that reports each statement after running it."""

    def __init__(self, conn: Any, note: Callable[[str], None]) -> None:
        self._conn = conn
        self._note = note

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._conn.execute(sql, *args)
        self._note(sql)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _crash_after_statements(prefix: str, count: int) -> None:
    """Exit once the ``count``-th statement starting with ``prefix`` has run (before its
    transaction commits), whichever executor runs it: a SQLAlchemy engine, or the
    store's raw sqlite3 write path."""
    seen = {"n": 0}

    def note(statement: str) -> None:
        if statement.lstrip().upper().startswith(prefix):
            seen["n"] += 1
            if seen["n"] == count:
                _crash()

    def after_execute(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        note(statement)

    event.listen(Engine, "after_cursor_execute", after_execute)
    try:
        from stm_memory._sqlite.raw import RawSqlite
    except ImportError:  # no raw path in this version: SQLAlchemy runs every write
        return
    original = RawSqlite._connection

    def connection(self: RawSqlite) -> Any:
        return _Traced(original(self), note)

    RawSqlite._connection = connection  # type: ignore[method-assign]


def _arm(point: str) -> None:
    """Kill this process at ``point`` the next time the write path gets there."""
    if point == "before_sql":
        # The live cache has been mutated; the SQL write has not started.
        def write(self: Persister, *args: Any, **kwargs: Any) -> bool:
            _crash()
            raise AssertionError("unreachable")

        Persister.write = write  # type: ignore[method-assign]
    elif point == "mid_transaction":
        # Inside the one transaction that upserts both rows: after the first row.
        _crash_after_statements("INSERT INTO SHORT_TERM_MEMORIES", 1)
    elif point == "after_replay_write":
        # A queued item has landed in SQL but is not yet removed from the outbox.
        def remove(self: Outbox, item_id: int) -> None:
            _crash()

        Outbox.remove = remove  # type: ignore[method-assign]
    else:
        raise ValueError(f"unknown crash point {point!r}")


def _open(config: dict[str, Any], clock: FrozenClock) -> ShortTermMemory:
    mem = ShortTermMemory.from_url(
        config["database_url"],
        cache_dir=config.get("cache_dir"),
        redis_url=config.get("redis_url"),
        outbox_path=config.get("outbox_path"),
        clock=clock,
        timeout=float(config.get("timeout", 2.0)),
        settings_ttl=float(config.get("settings_ttl", 5.0)),
    )
    if isinstance(mem._cache, ResilientCache):
        mem._cache.retry_after = float(config.get("retry_after", 0.0))
        mem._cache.check_every = float(config.get("check_every", 1.0))
    return mem


def _handlers(mem: ShortTermMemory, clock: FrozenClock) -> dict[str, Callable[..., Any]]:
    def turn(scope: dict[str, Any], args: dict[str, Any] | None = None) -> Any:
        ctx = mem.begin_turn(Scope(**scope), provider="openai", user_message="hi")
        result = mem.update(ctx, args) if args is not None else None
        mem.end_turn(ctx)
        return result

    def get(key: str) -> dict[str, Any] | None:
        entry = mem.get_key(key)
        return None if entry is None else entry.to_dict()

    def capture(scope: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
        return mem.capture(Scope(**scope), messages) is not None

    def workload(plan: list[dict[str, Any]], rounds: int, gate: str | None = None) -> Any:
        """``rounds`` passes over ``plan`` (items ``{"scope": {...}, "mode": "count" |
        "refresh" | "mixed"}``); returns turns counted and refreshes per live key."""
        if gate is not None:
            deadline = time.monotonic() + 30
            while not os.path.exists(gate):
                if time.monotonic() > deadline:
                    raise TimeoutError("no go signal")
                time.sleep(0.002)
        counted: dict[str, int] = {}
        refreshed: dict[str, int] = {}
        for i in range(rounds):
            for item in plan:
                scope = Scope(**item["scope"])
                mode = item["mode"]
                refresh = mode == "refresh" or (mode == "mixed" and i % 3 == 2)
                ctx = mem.begin_turn(scope)
                if refresh:
                    result = mem.update(ctx, {"summary": f"pid {os.getpid()} round {i}"})
                    assert result["status"] == "completed", result
                    refreshed[scope.live_key] = refreshed.get(scope.live_key, 0) + 1
                else:
                    counted[scope.live_key] = counted.get(scope.live_key, 0) + 1
                if mode == "mixed":
                    mem.capture(scope, [{"role": "user", "content": f"round {i}"}])
                mem.end_turn(ctx)
        return {"counted": counted, "refreshed": refreshed}

    def advance(seconds: float) -> str:
        return clock.advance(seconds=seconds).isoformat()

    return {
        "turn": turn,
        "get": get,
        "capture": capture,
        "advance": advance,
        "workload": workload,
        "clear_channel": mem.clear_channel,
        "clear_user": mem.clear_user,
        "clear_summary": lambda scope: mem.clear_summary(Scope(**scope)),
        "flush": mem.flush,
        "janitor": mem.run_janitor,
        "outbox": lambda: len(mem._outbox),
        "crash": _arm,
        "pid": os.getpid,
        "degraded": lambda: isinstance(mem._cache, ResilientCache) and mem._cache.degraded,
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(process)d %(levelname)s %(message)s")
    config = json.loads(sys.argv[1])
    clock = FrozenClock(datetime.fromisoformat(config["now"]).astimezone(UTC))
    mem = _open(config, clock)
    handlers = _handlers(mem, clock)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "exit":
            break
        try:
            reply: dict[str, Any] = {"ok": handlers[op](**command)}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        print(json.dumps(reply), flush=True)
    mem.close()


if __name__ == "__main__":
    main()
