"""Case 3 — peers, same work.

Persist one scope's memory (user key + server key) and read it back for the next turn:

- **ours**: ``mem.update(turn, {"summary": …})`` on a warm server scope (turns created
  outside the timed region), and ``mem.get(scope)`` (the live entry, warm cache);
- **LangGraph ``SqliteStore``** as shipped (``from_conn_string``: rollback journal,
  synchronous=FULL): two ``put`` calls (one per key) and one ``get`` of the live key;
- **LangGraph ``SqliteStore`` tuned**: the connection set to WAL / synchronous=NORMAL,
  both puts in one ``batch``; the same ``get``;
- **OpenAI Agents SDK ``SQLiteSession``** as shipped (a file database): one session per
  key, one ``add_items`` on each, and ``get_items(20)`` of the live session (the SDK's
  way to read a conversation back; it is async, timed inside one event loop).

Every peer stores the same value our cache holds (the entry as a dict). Ratios are
peer time / our time, so ≥ 1 means we are at least as fast. Our async twins
(``aupdate``/``aget``) are also compared with the async Agents SDK, for information.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from stm_memory import Scope, ShortTermMemory

from ._fixtures import dialogue, open_memory, summary_text
from ._harness import Bench, CaseResult, Comparison, Config, Metric, compare, timed
from .update_latency import warm_scope

NAME = "peers"

SCOPE = Scope(channel_id="c-general", user_id="u-ann", server_id="g-guild")


def _async_bench(loop: asyncio.AbstractEventLoop, op: Callable[[], Awaitable[object]]) -> Bench:
    """Time ``n`` awaited operations inside one running event loop."""

    async def body(n: int) -> int:
        start = time.perf_counter_ns()
        for _ in range(n):
            await op()
        return time.perf_counter_ns() - start

    def bench(n: int) -> int:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return loop.run_until_complete(body(n))
        finally:
            if was_enabled:
                gc.enable()

    return bench


@contextmanager
def langgraph_store(path: Path, *, tuned: bool) -> Iterator[Any]:
    from langgraph.store.sqlite import SqliteStore

    if not tuned:
        with SqliteStore.from_conn_string(str(path)) as store:
            store.setup()
            yield store
        return
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    try:
        store = SqliteStore(conn)
        store.setup()
        yield store
    finally:
        conn.close()


def _namespaces(scope: Scope) -> tuple[tuple[str, ...], tuple[str, ...]]:
    user_ns = ("stm", "user", scope.user_id, scope.channel_id)
    server_ns = ("stm", "server", str(scope.server_id), scope.channel_id)
    return user_ns, server_ns


class Ours:
    """Our write and read benches on a warm scope."""

    def __init__(self, mem: ShortTermMemory, summary: str, loop: asyncio.AbstractEventLoop):
        self.mem = mem
        self.args = {"summary": summary}
        self.loop = loop

    def write(self, n: int) -> int:
        mem = self.mem
        turns = [mem.begin_turn(SCOPE) for _ in range(n)]
        return timed(lambda t: mem.update(t, self.args), turns)

    def read(self, n: int) -> int:
        mem = self.mem
        return timed(lambda _: mem.get(SCOPE), range(n))

    def awrite(self, n: int) -> int:
        mem = self.mem
        turns = iter([mem.begin_turn(SCOPE) for _ in range(n)])
        return _async_bench(self.loop, lambda: mem.aupdate(next(turns), self.args))(n)

    def aread(self, n: int) -> int:
        mem = self.mem
        return _async_bench(self.loop, lambda: mem.aget(SCOPE))(n)


def _ratio_metrics(
    name: str, write: Comparison, read: Comparison, *, write_target: bool, read_target: bool
) -> list[Metric]:
    return [
        Metric(
            f"peer_{name}_write_vs_ours",
            write.ratio,
            ">=" if write_target else None,
            1.0 if write_target else None,
        ),
        Metric(
            f"peer_{name}_read_vs_ours",
            read.ratio,
            ">=" if read_target else None,
            1.0 if read_target else None,
        ),
    ]


def _details(write: Comparison, read: Comparison) -> dict[str, Any]:
    # compare(peer, ours): its "ours" side is the peer, its "floor" side is us.
    return {
        "write": {
            "ratio_median": write.ratio,
            "peer_us": write.ours_ns / 1000,
            "ours_us": write.floor_ns / 1000,
        },
        "read": {
            "ratio_median": read.ratio,
            "peer_us": read.ours_ns / 1000,
            "ours_us": read.floor_ns / 1000,
        },
    }


PEER_PACKAGES = "langgraph-checkpoint-sqlite openai-agents"


def run(cfg: Config) -> CaseResult:
    try:
        import agents  # noqa: F401
        import langgraph.store.sqlite  # noqa: F401
        from langgraph.store.base import PutOp
    except ImportError as exc:
        return CaseResult(NAME, [], {"skipped": f"{exc}: pip install {PEER_PACKAGES}"})

    rng = random.Random(3)
    root = cfg.workdir / NAME
    summary = summary_text(rng, 600)
    rounds = {"warmup": cfg.pick(40, 10), "repeats": cfg.pick(15, 5), "inner": cfg.pick(100, 25)}
    # The as-shipped stores fsync on every commit (milliseconds): fewer ops per round.
    slow = rounds | {"warmup": cfg.pick(10, 3), "inner": cfg.pick(20, 6)}
    metrics: list[Metric] = []
    details: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    with ExitStack() as stack:
        stack.callback(loop.close)
        mem = stack.enter_context(open_memory(root))
        warm_scope(mem, SCOPE, rng)
        ours = Ours(mem, summary, loop)
        assert mem.update(mem.begin_turn(SCOPE), ours.args)["status"] == "completed"
        entries = mem._live.get_many(list(SCOPE.keys))
        user_value = entries[SCOPE.user_key].to_dict()
        server_value = entries[str(SCOPE.server_key)].to_dict()
        user_ns, server_ns = _namespaces(SCOPE)

        # -- LangGraph SqliteStore, as shipped and tuned -------------------------------
        for label, tuned in (("langgraph_sqlite", False), ("langgraph_sqlite_tuned", True)):
            store = stack.enter_context(langgraph_store(root / f"{label}.db", tuned=tuned))
            store.put(user_ns, "memory", user_value)
            store.put(server_ns, "memory", server_value)
            assert store.get(server_ns, "memory") is not None

            ops = [PutOp(user_ns, "memory", user_value), PutOp(server_ns, "memory", server_value)]

            def lg_write_op(
                _: int, store: Any = store, ops: list[Any] = ops, tuned: bool = tuned
            ) -> None:
                if tuned:  # both puts in one transaction
                    store.batch(ops)
                else:  # the natural call: one put per key
                    store.put(user_ns, "memory", user_value)
                    store.put(server_ns, "memory", server_value)

            def lg_write(n: int, op: Callable[[int], None] = lg_write_op) -> int:
                return timed(op, range(n))

            def lg_read(n: int, store: Any = store) -> int:
                return timed(lambda _: store.get(server_ns, "memory"), range(n))

            write = compare(lg_write, ours.write, **(rounds if tuned else slow))
            read = compare(lg_read, ours.read, **rounds)
            metrics += _ratio_metrics(label, write, read, write_target=not tuned, read_target=True)
            details[label] = _details(write, read)

        # -- OpenAI Agents SDK SQLiteSession, as shipped ------------------------------
        from agents import SQLiteSession

        db = root / "agents.db"
        server_session = SQLiteSession(f"server:{SCOPE.server_id}:{SCOPE.channel_id}", db)
        user_session = SQLiteSession(f"user:{SCOPE.user_id}:{SCOPE.channel_id}", db)
        stack.callback(server_session.close)
        stack.callback(user_session.close)
        server_item: Any = {"role": "assistant", "content": json.dumps(server_value)}
        user_item: Any = {"role": "assistant", "content": json.dumps(user_value)}
        history: Any = dialogue(rng, 15)
        loop.run_until_complete(server_session.add_items(history))
        loop.run_until_complete(user_session.add_items(history))

        async def agents_write() -> None:
            await user_session.add_items([user_item])
            await server_session.add_items([server_item])

        async def agents_read() -> None:
            items = await server_session.get_items(20)
            assert len(items) == 20

        a_write = _async_bench(loop, agents_write)
        a_read = _async_bench(loop, agents_read)
        write = compare(a_write, ours.write, **slow)
        read = compare(a_read, ours.read, **rounds)
        metrics += _ratio_metrics("openai_agents", write, read, write_target=True, read_target=True)
        details["openai_agents"] = _details(write, read)
        write_async = compare(a_write, ours.awrite, **slow)
        read_async = compare(a_read, ours.aread, **rounds)
        metrics += [
            Metric("peer_openai_agents_write_vs_ours_async", write_async.ratio),
            Metric("peer_openai_agents_read_vs_ours_async", read_async.ratio),
        ]
        details["openai_agents_vs_our_async"] = _details(write_async, read_async)
    return CaseResult(NAME, metrics, details)
