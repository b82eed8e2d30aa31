"""Decoded entries are reused, never stale: what a write stored is what the next read of
its keys returns without decoding it again (every turn reads the channel's entries its
last turn wrote), and a value another host wrote since is decoded, not shadowed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.factory import MemFactory

from stm_memory import MemoryEntry, Scope, ShortTermMemory
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
TURN = [
    {"role": "user", "content": "we meet at the mill"},
    {"role": "assistant", "content": "The mill it is."},
]


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the entries decoded from a cached value, in order."""
    seen: list[str] = []
    decode = MemoryEntry.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[MemoryEntry], data: Any) -> MemoryEntry:
        entry: MemoryEntry = decode(cls, data)
        seen.append(entry.key)
        return entry

    monkeypatch.setattr(MemoryEntry, "from_dict", classmethod(counting))
    return seen


def _raw(mem: ShortTermMemory, key: str) -> Any:
    return mem._live.cache.get_many([key])[key]


@pytest.mark.parametrize("cache", ["disk", "memory", "redis"])
def test_what_a_write_stored_is_read_back_without_decoding(
    request: pytest.FixtureRequest, make_mem: MemFactory, decodes: list[str], cache: str
) -> None:
    if cache == "redis":
        request.getfixturevalue("redis_url")
    mem = make_mem(cache=cache)
    turn = mem.begin_turn(SCOPE)
    mem.update(turn, {"summary": "The crew meets at the mill."})
    mem.capture(SCOPE, TURN)
    decodes.clear()

    live, user = mem.get(SCOPE), mem.get_key(SCOPE.user_key)

    assert decodes == []  # both were written by this engine: nothing decoded
    assert live is not None and user is not None
    # The reused entries are the stored values decoded, field for field.
    assert live == MemoryEntry.from_dict(_raw(mem, SCOPE.live_key))
    assert user == MemoryEntry.from_dict(_raw(mem, SCOPE.user_key))
    assert live.summary == "The crew meets at the mill."
    assert [m.content for m in live.messages] == [m["content"] for m in TURN]


@pytest.fixture
def hosts(tmp_path: Path, fake_clock: FrozenClock) -> Iterator[list[ShortTermMemory]]:
    engines = [
        ShortTermMemory.from_url(
            f"sqlite:///{tmp_path / 'stm.db'}", cache_dir=tmp_path / "cache", clock=fake_clock
        )
        for _ in range(2)
    ]
    yield engines
    for engine in engines:
        engine.close()


def test_a_value_another_host_wrote_since_is_decoded_not_shadowed(
    hosts: list[ShortTermMemory], decodes: list[str]
) -> None:
    a, b = hosts
    a.update(a.begin_turn(SCOPE), {"summary": "First plan: the mill."})
    assert b.get(SCOPE) is not None  # b has read (and keeps) a's value
    b.update(b.begin_turn(SCOPE), {"summary": "Second plan: the bridge."})
    decodes.clear()

    seen = a.get(SCOPE)

    assert seen is not None and seen.summary == "Second plan: the bridge."
    assert decodes == [SCOPE.live_key]
