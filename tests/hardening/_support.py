"""Shared verbs of the hardening suite: child-process hosts, scope dicts and the
cache-versus-SQL comparisons every concern checks at its end."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pytest
import sqlalchemy as sa

from stm_memory import DatabaseError, MemoryEntry, Scope, ShortTermMemory
from stm_memory.store.sql import SqlStore

HOST_SCRIPT = Path(__file__).resolve().parent / "_host.py"
COMPLETED = {"status": "completed"}

__all__ = [
    "COMPLETED",
    "Host",
    "HostCrashed",
    "assert_cache_matches_sql",
    "cache_entry_keys",
    "raw_rows",
    "scope_dict",
    "store_writes_fail",
    "with_query",
]


def scope_dict(scope: Scope) -> dict[str, Any]:
    """A Scope as JSON-able keyword arguments (for a host's commands)."""
    return {k: v for k, v in asdict(scope).items() if v is not None}


def with_query(url: str, **params: str) -> str:
    parsed = sa.make_url(url)
    return parsed.update_query_dict(params).render_as_string(hide_password=False)


class HostCrashed(Exception):
    def __init__(self, returncode: int | None, stderr: str) -> None:
        super().__init__(f"host exited with {returncode}:\n{stderr[-3000:]}")
        self.returncode = returncode
        self.stderr = stderr


class Host:
    """One ShortTermMemory in a child process (see ``_host.py``): a second worker or a
    second machine. ``call(op, **kwargs)`` runs one command and returns its result."""

    def __init__(self, *, reply_timeout: float = 60.0, **config: Any) -> None:
        env = dict(os.environ)
        env.pop("PYTEST_CURRENT_TEST", None)
        self.timeout = reply_timeout
        self.stderr = ""  # what the host logged, once it is closed
        self.proc = subprocess.Popen(
            [sys.executable, str(HOST_SCRIPT), json.dumps(config, default=str)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._read()  # {"ready": true}: construction (and start-up replay) finished

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.wait(timeout=self.timeout)
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise HostCrashed(self.proc.returncode, stderr)
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"host command failed: {reply['error']}\n{reply['trace']}")
        return reply.get("ok", reply)

    def send(self, op: str, **kwargs: Any) -> None:
        """Start a command without waiting for it (several hosts then run at once)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kwargs}, default=str) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> Any:
        """The reply to the command sent last."""
        return self._read()

    def call(self, op: str, **kwargs: Any) -> Any:
        self.send(op, **kwargs)
        return self._read()

    def turn(self, scope: Scope, args: dict[str, Any] | None = None) -> Any:
        return self.call("turn", scope=scope_dict(scope), args=args)

    def get(self, key: str | None) -> MemoryEntry | None:
        assert key is not None
        data = self.call("get", key=key)
        return None if data is None else MemoryEntry.from_dict(data)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=self.timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- faults ---------------------------------------------------------------------------

STORE_WRITES = (
    "put_rows",
    "advance_rows",
    "delete_channel",
    "delete_user",
    "clear_summary",
)


@contextmanager
def store_writes_fail(mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every SQL write of ``mem`` raises DatabaseError (reads still work), as during an
    outage that spares reads: the writes go to the outbox."""

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise DatabaseError("simulated outage")

    with monkeypatch.context() as patch:
        for name in STORE_WRITES:
            patch.setattr(mem._store, name, fail)
        yield


# -- inspection ---------------------------------------------------------------------------


def cache_entry_keys(mem: ShortTermMemory) -> set[str]:
    """Every entry key the live cache holds (indexes excluded)."""
    return {k for k in mem._cache.iter_keys("shortterm:") if not k.startswith("shortterm:index:")}


def raw_rows(mem: ShortTermMemory, where: str = "", **params: Any) -> list[dict[str, Any]]:
    """Rows of ``short_term_memories`` read with plain SQL, bypassing the store's code."""
    assert isinstance(mem._store, SqlStore)
    sql = "SELECT * FROM short_term_memories" + (f" WHERE {where}" if where else "")
    with mem._store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def distilled(entry: MemoryEntry) -> tuple[Any, ...]:
    """What must agree between a live entry and its row (messages live only in the cache)."""
    return (
        entry.summary,
        dict(entry.categories),
        entry.turns_since_refresh,
        entry.last_refreshed_turn,
    )


def assert_cache_matches_sql(mem: ShortTermMemory, keys: list[str] | None = None) -> None:
    """Every cached entry (or each of ``keys``) equals its SQL row in summary,
    categories and both counters."""
    keys = sorted(cache_entry_keys(mem)) if keys is None else keys
    raw = mem._cache.get_many(keys)
    stored = mem._store.load_many(keys)
    mismatches = []
    for key in keys:
        if key not in raw:
            continue
        live = MemoryEntry.from_dict(raw[key])
        row = stored.get(key)
        if row is None or distilled(row) != distilled(live):
            mismatches.append((key, distilled(live), None if row is None else distilled(row)))
    assert not mismatches, f"cache and SQL disagree (key, cache, sql): {mismatches}"
