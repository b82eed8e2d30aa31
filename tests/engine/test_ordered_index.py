"""Other-channel memory from the owners' ordered indexes (issue 17): prompt assembly
reads the newest entries page by page and shows exactly what a read of every entry
would show — ties, expiry, privacy skips, personas, cross-server entries — after a
restart and from a cache an older release filled too.

The reference is the pure selection over *every* entry of the owner
(:func:`stm_memory.prompt.assembly.build_memory_context` given the whole pool): the
index is a shortcut and must never change the answer.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.base import Write
from stm_memory.cache.memory import InMemoryLiveCache
from stm_memory.durability.outbox import Outbox
from stm_memory.model import index_key
from stm_memory.prompt.assembly import build_memory_context, history_window
from stm_memory.store.sql import SqlStore, create_sql_engine
from stm_memory.testing import FrozenClock

BACKENDS = ["disk", "memory"]


@pytest.fixture(params=BACKENDS)
def open_mem(request: pytest.FixtureRequest, tmp_path: Path, fake_clock: FrozenClock) -> Any:
    """``open_mem(cache_dir)``: one SQLite file; a diskcache directory of that name, or
    a new in-process cache (either way, a new name is an empty cache)."""
    opened: list[ShortTermMemory] = []
    db = f"sqlite:///{tmp_path / 'stm.db'}"

    def factory(cache_dir: str = "cache") -> ShortTermMemory:
        outbox = tmp_path / "outbox.sqlite3"
        if request.param == "disk":
            mem = ShortTermMemory.from_url(
                db, cache_dir=tmp_path / cache_dir, outbox_path=outbox, clock=fake_clock
            )
        else:
            mem = ShortTermMemory(
                store=SqlStore(create_sql_engine(db)),
                cache=InMemoryLiveCache(),
                outbox=Outbox(str(outbox)),
                clock=fake_clock,
            )
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        mem.close()


def server(channel: str, **kw: Any) -> Scope:
    return Scope(channel_id=channel, user_id="u1", server_id="g1", **kw)


def write(mem: ShortTermMemory, scope: Scope, summary: str | None) -> None:
    mem.capture(scope, [{"role": "user", "content": f"hello from {scope.channel_id}"}])
    if summary is not None:
        assert mem.update(mem.begin_turn(scope), {"summary": summary})["status"] == "completed"


def reference(mem: ShortTermMemory, scope: Scope) -> str | None:
    """What assembly shows when it reads every entry of the owners."""
    turn = mem.begin_turn(scope)
    keys = [
        k
        for k in mem._cache.iter_keys("shortterm:")
        if not k.startswith("shortterm:index:") and k != scope.live_key
    ]
    found = mem._live.get_many(keys)
    now = mem.now()
    sids = sorted({e.server_id for e in found.values() if e.server_id})
    live = mem._live.get_many([scope.live_key]).get(scope.live_key)
    ctx = build_memory_context(
        turn,
        live=live,
        shown_live=live if live is not None and mem._live.is_live(live, now) else None,
        others=found.values(),
        server_settings={s: mem.server_settings(s) for s in sids},
        categories={s: mem.categories(s) for s in sids},
        is_live=lambda e: mem._live.is_live(e, now),
        limit=mem.limits.other_channels_shown,
        history=history_window(turn, live, reset=False, overlap=1, max_raw_turns=30),
    )
    return ctx.content


def shown(mem: ShortTermMemory, scope: Scope) -> str | None:
    return mem.build_context(mem.begin_turn(scope)).content


def channels_in(content: str | None) -> list[str]:
    return [part.split(",")[0].split()[-1] for part in (content or "").split("\n- ")[1:]]


def test_private_channels_among_the_newest_are_skipped_and_the_next_shown(
    open_mem: Any, fake_clock: FrozenClock
) -> None:
    mem = open_mem()
    for i in range(20):
        write(mem, server(f"c{i:02d}"), f"summary {i}")
        fake_clock.advance(minutes=1)
    mem.configure_server("g1", private_channel_ids=[f"c{i:02d}" for i in range(12, 20)])
    here = server("main")
    content = shown(mem, here)
    assert channels_in(content) == ["#c11", "#c10", "#c09"]
    assert content == reference(mem, here)


def test_equal_times_are_broken_by_key_as_a_full_read_breaks_them(open_mem: Any) -> None:
    mem = open_mem()
    for i in range(12):  # the fake clock stands still: every entry has the same time
        write(mem, server(f"c{i:02d}"), f"summary {i}")
    here = server("main")
    content = shown(mem, here)
    assert channels_in(content) == ["#c00", "#c01", "#c02"]
    assert content == reference(mem, here)


def test_expired_entries_newer_than_live_ones_are_skipped(
    open_mem: Any, fake_clock: FrozenClock
) -> None:
    mem = open_mem()
    for i in range(3):  # live for 24 h: they hold a summary
        write(mem, server(f"kept{i}"), f"kept {i}")
        fake_clock.advance(minutes=1)
    fake_clock.advance(hours=1)
    for i in range(6):  # newer, but bare: expired after 12 h
        write(mem, server(f"bare{i}"), None)
        fake_clock.advance(minutes=1)
    fake_clock.advance(hours=13)
    here = server("main")
    content = shown(mem, here)
    assert channels_in(content) == ["#kept2", "#kept1", "#kept0"]
    assert content == reference(mem, here)


def test_only_the_same_persona_is_shown_however_many_others_are_newer(
    open_mem: Any, fake_clock: FrozenClock
) -> None:
    mem = open_mem()
    for i in range(2):
        write(mem, server(f"p1-{i}", persona_id="p1"), f"p1 summary {i}")
        fake_clock.advance(minutes=1)
    for i in range(15):
        write(mem, server(f"p2-{i}", persona_id="p2"), f"p2 summary {i}")
        fake_clock.advance(minutes=1)
    here = server("main", persona_id="p1")
    content = shown(mem, here)
    assert channels_in(content) == ["#p1-1", "#p1-0"]
    assert content == reference(mem, here)


def test_cross_server_entries_come_from_the_user_index_only_when_opted_in(
    open_mem: Any, fake_clock: FrozenClock
) -> None:
    mem = open_mem()
    for i in range(6):
        write(mem, Scope(channel_id=f"elsewhere{i}", user_id="u1", server_id=f"g{i + 2}"), "far")
        fake_clock.advance(minutes=1)
    write(mem, server("near"), "near")
    here = server("main")
    assert channels_in(shown(mem, here)) == ["#near"]
    mem.configure_user("u1", cross_server_opt_in=True)
    content = shown(mem, here)
    assert content == reference(mem, here)
    assert len(channels_in(content)) == 3 and "#near" in channels_in(content)


def test_a_restart_on_an_empty_cache_rebuilds_the_index_from_sql(
    open_mem: Any, fake_clock: FrozenClock
) -> None:
    mem = open_mem()
    for i in range(10):
        write(mem, server(f"c{i}"), f"summary {i}")
        fake_clock.advance(minutes=1)
    here = server("main")
    before = channels_in(shown(mem, here))
    mem.close()
    again = open_mem("another-cache")
    assert channels_in(shown(again, here)) == before == ["#c9", "#c8", "#c7"]
    # The rebuilt index goes on tracking writes.
    write(again, server("c0"), "now the newest")
    assert channels_in(shown(again, here))[0] == "#c0"


def test_an_index_written_by_an_older_release_is_replaced(
    open_mem: Any, fake_clock: FrozenClock
) -> None:
    mem = open_mem()
    for i in range(6):
        write(mem, server(f"c{i}"), f"summary {i}")
        fake_clock.advance(minutes=1)
    # The older index: a member list under the same key, no ordered index.
    members = {k: 1 for k in mem._cache.iter_keys("shortterm:server:")}
    ikey = index_key("server", "g1")
    mem._cache.atomic([ikey], lambda _cur: {ikey: Write({"members": members})})
    for key in members:
        mem._cache.rank_many(ikey, {key: None})
    assert mem._cache.ranked(ikey, count=10) == []
    here = server("main")
    assert channels_in(shown(mem, here)) == ["#c5", "#c4", "#c3"]
    assert mem._cache.get(ikey) == {"ranked": 1}


@pytest.mark.parametrize("seed", range(8))
def test_random_servers_show_what_a_full_read_shows(
    open_mem: Any, fake_clock: FrozenClock, seed: int
) -> None:
    rng = random.Random(seed)
    mem = open_mem()
    channels = [f"c{i:02d}" for i in range(rng.randint(1, 40))]
    for channel in channels:
        persona = rng.choice([None, None, "p1", "p2"])
        write(mem, server(channel, persona_id=persona), rng.choice([None, f"s {channel}"]))
        fake_clock.advance(minutes=rng.choice([0, 0, 1, 30, 300]))
    mem.configure_server("g1", private_channel_ids=rng.sample(channels, len(channels) // 3))
    for persona in (None, "p1"):
        here = server("main", persona_id=persona)
        assert shown(mem, here) == reference(mem, here), (seed, persona)
