"""The SQL row must end with the write that is live in the cache, however the SQL
writes of concurrent workers (or a late outbox replay) are ordered.

The write path mutates the cache atomically, then writes SQL. Two workers refreshing one
scope can therefore reach SQL in the opposite order from the cache; these tests force
that order deterministically (a worker paused between its cache write and its SQL write)
instead of hoping a race shows it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.deployment import OpenMem
from helpers.host import Host, HostFactory
from helpers.inspection import assert_cache_matches_sql
from helpers.memory import COMPLETED, dialogue, refresh, row
from helpers.proxy import Proxied

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


@pytest.fixture
def paused_first(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[ShortTermMemory, Callable[[], object]], Callable[[], None]]]:
    """``start(mem, action)`` runs ``action`` in a thread that stops after its cache write,
    before its SQL write; the returned ``finish()`` lets it go on and joins it."""
    threads: list[threading.Thread] = []

    def start(mem: ShortTermMemory, action: Callable[[], object]) -> Callable[[], None]:
        cached = threading.Event()
        go_on = threading.Event()
        original = mem._persister.write
        errors: list[BaseException] = []

        def write(*args: Any, **kwargs: Any) -> bool:
            if threading.current_thread().name == "paused-first":
                cached.set()
                assert go_on.wait(10)
            return original(*args, **kwargs)

        monkeypatch.setattr(mem._persister, "write", write)

        def run() -> None:
            try:
                action()
            except BaseException as exc:  # re-raised by finish()
                errors.append(exc)

        thread = threading.Thread(target=run, name="paused-first")
        threads.append(thread)
        thread.start()
        assert cached.wait(10), "the first writer never reached its SQL write"

        def finish() -> None:
            go_on.set()
            thread.join(10)
            if errors:
                raise errors[0]

        return finish

    yield start
    for thread in threads:
        thread.join(10)


def test_two_first_refreshes_of_a_new_scope_count_twice(
    mem: ShortTermMemory,
    paused_first: Callable[[ShortTermMemory, Callable[[], object]], Callable[[], None]],
) -> None:
    """Regression (found by test_scale_out.py): a new row's counters are the writer's
    delta, not the cache's total, or the first two refreshes would count three."""
    finish = paused_first(mem, lambda: refresh(mem, SCOPE, "first"))
    refresh(mem, SCOPE, "second")  # cache lrt 2; this SQL write inserts the row
    finish()  # the first writer's SQL write now lands on the existing row
    live = mem.get(SCOPE)
    stored = row(mem, SCOPE.server_key)
    assert live is not None and stored is not None
    assert live.last_refreshed_turn == 2
    assert stored.last_refreshed_turn == 2


def test_sql_keeps_the_refresh_that_is_live_in_the_cache(
    mem: ShortTermMemory,
    paused_first: Callable[[ShortTermMemory, Callable[[], object]], Callable[[], None]],
) -> None:
    mem.capture(SCOPE, dialogue(2))  # rows exist: only the order is at stake
    finish = paused_first(mem, lambda: refresh(mem, SCOPE, "first"))
    refresh(mem, SCOPE, "second")
    finish()
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "second"
    assert_cache_matches_sql(mem, list(SCOPE.keys))


def test_a_late_replay_does_not_overwrite_a_newer_write_of_another_host(
    open_mem: OpenMem,
    hosts: HostFactory,
    pg_proxy: Proxied,
    postgres_url: str,
    redis_url: str,
    tmp_path: Any,
    fake_clock: FrozenClock,
) -> None:
    # Host A (a child process) reaches PostgreSQL through the proxy; host B does not.
    a: Host = hosts(
        database_url=pg_proxy.url, redis_url=redis_url, outbox_path=tmp_path / "a", timeout=1
    )
    b = open_mem(postgres_url, redis_url=redis_url)
    refresh(b, SCOPE, "before")
    assert a.turn(SCOPE) is None  # A has read the server's settings (memoised 5 s)
    pg_proxy.proxy.stop()
    assert a.turn(SCOPE, {"summary": "A, during its outage"}) == COMPLETED
    assert a.call("outbox") > 0
    fake_clock.advance(minutes=1)
    refresh(b, SCOPE, "B, a minute later")
    pg_proxy.proxy.start()
    assert a.call("flush") > 0
    live = b.get(SCOPE)
    assert live is not None and live.summary == "B, a minute later"
    assert live.last_refreshed_turn == 3
    assert_cache_matches_sql(b, list(SCOPE.keys))
