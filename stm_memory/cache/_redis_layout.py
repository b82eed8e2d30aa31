"""Where the Redis live cache keeps a key: the same layout on a single server and on a
cluster::

    <prefix>{<tag>}<key>            a value
    <prefix>~rank{<tag>}<index>     an ordered index

``{<tag>}`` is a Redis Cluster hash tag: only the tag decides the key's slot. An entry
key (:func:`~stm_memory.model.key_for`) is tagged by its channel, so the user key and
the server key of one scope, which the engine updates together, share a slot; an index
key (:func:`~stm_memory.model.index_key`) is tagged by itself; every other key (probe,
writer registry, a caller's own) by one common tag, so any atomic update of them works
on a cluster too. A tag is a short digest, so ids holding braces can neither end it
early nor make two groups share it by design. After the prefix a value has ``{`` and an
index ``~``: the two namespaces never collide and a value scan never matches an index.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from stm_memory.errors import ValidationError
from stm_memory.model import parse_index_key, parse_key

__all__ = ["logical_key", "rank_key", "redis_key", "scan_pattern"]

_GLOB_SPECIALS = frozenset("*?[]\\")
# The tag of every key outside the entry and index schemes; a digest is hex, so it can
# never be this.
_COMMON_TAG = "other"


def _slot_group(name: str) -> str | None:
    """What ``name`` must share a hash slot with: its channel (an entry key), itself
    (an index key), or None (any other key)."""
    try:
        return "channel:" + parse_key(name)[2]
    except ValidationError:
        pass
    try:
        parse_index_key(name)
    except ValidationError:
        return None
    return "owner:" + name


@lru_cache(maxsize=8192)  # every turn derives the physical keys of its scope several times
def _tag(name: str) -> str:
    group = _slot_group(name)
    if group is None:
        return _COMMON_TAG
    return hashlib.blake2b(group.encode("utf-8"), digest_size=6).hexdigest()


def _escape_glob(text: str) -> str:
    return "".join(f"\\{ch}" if ch in _GLOB_SPECIALS else ch for ch in text)


def redis_key(key: str, prefix: str = "") -> str:
    """The Redis key holding the value of ``key`` (for tools and tests that look at
    Redis directly): ``prefix``, the hash tag, then ``key`` itself."""
    return f"{prefix}{{{_tag(key)}}}{key}"


def rank_key(index: str, prefix: str = "") -> str:
    """The Redis key of the sorted set holding the ordered index ``index``."""
    return f"{prefix}~rank{{{_tag(index)}}}{index}"


def logical_key(physical: str, prefix: str = "") -> str:
    """Inverse of :func:`redis_key`."""
    tagged = physical[len(prefix) :]
    # A tag never holds "}", so the first one ends it.
    return tagged[tagged.index("}") + 1 :]


def scan_pattern(key_prefix: str, prefix: str = "") -> str:
    """A ``SCAN MATCH`` glob for the values whose key starts with ``key_prefix``. The
    tag sits between the two prefixes, and the glob's ``*`` could also swallow a ``}``
    of the key itself: check each key found against ``key_prefix`` too."""
    return f"{_escape_glob(prefix)}{{*}}{_escape_glob(key_prefix)}*"
