"""The live-cache seam: one base class of sync methods.

There are no async twins here: the engine's ``a*`` methods run its sync path in a
thread, so a backend implements each operation once and has one behaviour to test.

Values are JSON-able dicts (an entry's ``to_dict()`` or an index). The one write
primitive is :meth:`LiveCache.atomic`: read a set of keys, let a pure function
decide the new values, write them back, all-or-nothing and isolated from other
writers (threads, processes, hosts). Counters, merges and the two-key write of an
update are all expressed through it, so a backend only has to get one thing right.

Ordered indexes sit beside the values: named sets of members with a score, read
newest first with :meth:`LiveCache.ranked`. They answer "the newest entries of this
server" in O(entries read), however many channels the server has. An index lives in
its own namespace (an index and a value may share a name; :meth:`LiveCache.iter_keys`
never lists indexes). A :class:`Write` can move its key in an index in the same
transaction as the value, without reading the index, so writers of different
members never conflict on it.

Expiry that *matters* (what is rendered) is decided by the engine from its
injectable clock; the ``ttl`` given here is a native TTL for cleanup only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["AtomicFn", "CacheValue", "LiveCache", "Rank", "Write"]

CacheValue: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Rank:
    """The written key's place in the ordered index ``index``: ``score`` sets it
    (replacing any earlier score), ``None`` removes the key from the index."""

    index: str
    score: float | None


@dataclass(frozen=True, slots=True)
class Write:
    """A new value for a key (``None`` deletes it), its native TTL in seconds, and
    optionally the key's new place in an ordered index, applied atomically with it."""

    value: CacheValue | None
    ttl: float | None = None
    rank: Rank | None = None


AtomicFn: TypeAlias = Callable[[Mapping[str, CacheValue | None]], Mapping[str, Write]]


class LiveCache(ABC):
    """Base class of live-cache backends."""

    @abstractmethod
    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        """Values of the keys that exist; missing keys are left out."""

    def read_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        """:meth:`get_many` for a reader that never changes the values it is given (the
        engine's own reads): a backend may hand one value object to every such read
        while the stored value is unchanged, instead of decoding it again (diskcache
        does: a turn reads the same few entries several times, and unpickling them
        was most of a read). The default is :meth:`get_many`."""
        return self.get_many(keys)

    @abstractmethod
    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        """Read ``keys``, apply ``fn`` to their values and write what it returns.

        ``fn`` may be called more than once (optimistic backends retry on conflict), so
        it must be pure: it never changes the values it is given, which a backend may
        share as :meth:`read_many` does. Returns the value of every key after the write.
        """

    @abstractmethod
    def add_many(self, items: Mapping[str, Write]) -> int:
        """Set each key that does not exist yet; never overwrite. Returns how many were added."""

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> int:
        """Delete the keys; returns how many existed."""

    @abstractmethod
    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        """Every live key starting with ``prefix`` (administrative use; may be slow).
        Ordered indexes are not keys and are never listed."""

    @abstractmethod
    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        """Up to ``count`` members of ``index`` from position ``offset``: the highest
        score first, equal scores by member ascending (a total order, so pages never
        overlap or skip). An index that does not exist is empty. Members are listed
        whatever became of their values (callers read and check them)."""

    @abstractmethod
    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        """Place members in ``index``, atomically as a whole: a score is kept only if
        it is higher than the member's current one (so a bulk load from an older
        source never moves a member back); ``None`` removes the member."""

    def expire(self) -> int:
        """Drop natively expired values now; returns how many. Backends with native
        expiry (Redis) need not do anything."""
        return 0

    def record_deletion(self, kind: str, target: str) -> None:  # noqa: B027 - optional hook
        """A channel (``kind="channel"``) or user (``"user"``) was just deleted by a scan
        of this cache. A cache that may be missing copies held elsewhere (a fallback)
        keeps the fact, so the deletion reaches those copies too."""

    def compact(self) -> None:  # noqa: B027 - optional hook: most backends keep no log
        """Make deleted values leave the backend's files (after an erasure): an
        embedded backend checkpoints and truncates its write-ahead log."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections and file handles."""

    # -- shared conveniences -------------------------------------------------------

    def get(self, key: str) -> CacheValue | None:
        return self.get_many((key,)).get(key)

    def count(self, prefix: str = "") -> int:
        return sum(1 for _ in self.iter_keys(prefix))
