"""The entry codec: an entry's cached form (a JSON-ready dict) and back, fast.

Every update reads two entries from the cache and writes them back, so this is the
write hot path. The tricks live here, so :class:`~stm_memory.model.MemoryEntry` reads
as a plain dataclass: captured turns stay undecoded until read (:class:`Messages`),
a write patches the cached dict with its encoded changes instead of re-encoding the
entry, copies skip :func:`dataclasses.replace`'s introspection, and one timestamp's
ISO text is remembered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, overload

from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.dialogue import StoredMessage

if TYPE_CHECKING:
    from stm_memory.model.entry import MemoryEntry

__all__ = ["Messages", "decode", "encode", "evolve", "value_after"]

E = TypeVar("E")


class Messages(Sequence[StoredMessage]):
    """An immutable sequence of captured turns that decodes its cached form lazily.

    Why: every write (update, end_turn) reads an entry and writes it back, but only
    capture and rendering look at its raw turns. Keeping the cached dicts undecoded
    until someone reads them, and passing them back untouched, takes the turns out of
    the write hot path. Reads behave like a tuple (indexing, slicing, ``==``).
    """

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: Sequence[Mapping[str, Any]]) -> None:
        self._raw = raw
        self._decoded: tuple[StoredMessage, ...] | None = None

    def _items(self) -> tuple[StoredMessage, ...]:
        if self._decoded is None:
            self._decoded = tuple(StoredMessage.from_dict(m) for m in self._raw)
        return self._decoded

    def raw(self) -> list[dict[str, Any]]:
        # Shared, not copied: cached values are never mutated in place.
        if self._decoded is None:
            return [m if isinstance(m, dict) else dict(m) for m in self._raw]
        return [m.to_dict() for m in self._decoded]

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[StoredMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> StoredMessage | tuple[StoredMessage, ...]:
        if self._decoded is not None:
            return self._decoded[index]
        # Rendering shows the last few turns: decode only those.
        if isinstance(index, slice):
            return tuple(StoredMessage.from_dict(m) for m in self._raw[index])
        return StoredMessage.from_dict(self._raw[index])

    def __len__(self) -> int:
        return len(self._raw)

    def after(self, since: datetime | None) -> tuple[StoredMessage, ...]:
        """The turns captured after ``since`` (all when None), in order. Only their
        timestamps are read to choose: a briefing shows the few turns since the last
        refresh, so assembly decodes those and not every captured turn of every
        channel it looks at."""
        if since is None or self._decoded is not None:
            return tuple(m for m in self._items() if since is None or m.timestamp > since)
        return tuple(
            StoredMessage.from_dict(m)
            for m in self._raw
            if datetime.fromisoformat(m["timestamp"]) > since
        )

    def __iter__(self) -> Iterator[StoredMessage]:
        return iter(self._items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._items() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items())

    def __repr__(self) -> str:
        return repr(self._items())


_FIELDS: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


def _field_names(cls: type) -> tuple[tuple[str, ...], frozenset[str]]:
    # Read once per class: fields() introspects on every call.
    known = _FIELDS.get(cls)
    if known is None:
        names = tuple(f.name for f in fields(cls))
        known = _FIELDS[cls] = (names, frozenset(names))
    return known


_new_object = object.__new__
_set_attr = object.__setattr__  # frozen: the dataclass's own __init__ sets fields this way


def evolve(entry: E, changes: Mapping[str, Any]) -> E:
    """A copy with ``changes`` applied: :func:`dataclasses.replace` without its
    per-call field introspection, which every update would pay for both its entries.
    MemoryEntry has no ``__post_init__``, so nothing is skipped."""
    cls = type(entry)
    names, name_set = _field_names(cls)
    if not changes.keys() <= name_set:
        unknown = sorted(set(changes) - name_set)
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
    new = _new_object(cls)
    for name in names:
        _set_attr(new, name, changes[name] if name in changes else getattr(entry, name))
    return new


def value_after(
    entry: MemoryEntry, source: Mapping[str, Any] | None, changes: Mapping[str, Any]
) -> dict[str, Any]:
    """``entry``'s cached form, where ``entry`` is ``source`` decoded with ``changes``
    applied: ``source`` patched with the encoded changes when it is a complete value,
    which spares re-encoding the unchanged fields (the raw turns above all) on every
    write; else encoded whole."""
    if source is None or len(source) != len(_field_names(type(entry))[0]):
        return encode(entry)
    return {**source, **_encode_changes(changes)}


def encode(entry: MemoryEntry) -> dict[str, Any]:
    return {
        "key": entry.key,
        "kind": entry.kind,
        "channel_id": entry.channel_id,
        "server_id": entry.server_id,
        "user_id": entry.user_id,
        "persona_id": entry.persona_id,
        "parent_channel_id": entry.parent_channel_id,
        "channel_name": entry.channel_name,
        "server_name": entry.server_name,
        "messages": _encode_messages(entry.messages),
        "summary": entry.summary,
        "categories": dict(entry.categories),
        "turns_since_refresh": entry.turns_since_refresh,
        "last_refreshed_turn": entry.last_refreshed_turn,
        "turns_since_reset": entry.turns_since_reset,
        "provenance": sorted(entry.provenance),
        "last_updated": entry.last_updated.isoformat(),
        "refreshed_at": entry.refreshed_at.isoformat() if entry.refreshed_at else None,
        "briefings": [b.to_dict() for b in entry.briefings],
        "briefings_epoch": entry.briefings_epoch,
        "rev": entry.rev,
    }


def decode(cls: type[MemoryEntry], data: Mapping[str, Any]) -> MemoryEntry:
    return cls(
        key=data["key"],
        kind="server" if data["kind"] == "server" else "user",
        channel_id=data["channel_id"],
        server_id=data.get("server_id"),
        user_id=data.get("user_id"),
        persona_id=data.get("persona_id"),
        parent_channel_id=data.get("parent_channel_id"),
        channel_name=data.get("channel_name"),
        server_name=data.get("server_name"),
        messages=Messages(data.get("messages") or ()),
        summary=data.get("summary"),
        categories=dict(data.get("categories") or {}),
        turns_since_refresh=int(data.get("turns_since_refresh") or 0),
        last_refreshed_turn=int(data.get("last_refreshed_turn") or 0),
        turns_since_reset=_optional_int(data.get("turns_since_reset")),
        provenance=frozenset(data.get("provenance") or ()),
        last_updated=datetime.fromisoformat(data["last_updated"]),
        refreshed_at=(
            datetime.fromisoformat(data["refreshed_at"]) if data.get("refreshed_at") else None
        ),
        briefings=tuple(BriefingCopy.from_dict(b) for b in data.get("briefings") or ()),
        briefings_epoch=_optional_int(data.get("briefings_epoch")),
        rev=int(data.get("rev") or 0),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


_last_iso: tuple[datetime, str] = (datetime.fromtimestamp(0, UTC), "")


def _iso(value: datetime) -> str:
    # An update stamps one datetime object as last_updated and refreshed_at of both its
    # entries, and formatting an aware datetime is not free: the last one is
    # remembered. By identity, not equality: equal instants in other time zones have
    # other texts. (One tuple swapped whole, so threads never see half of one.)
    global _last_iso
    last = _last_iso
    if last[0] is value:
        return last[1]
    text = value.isoformat()
    _last_iso = (value, text)
    return text


def _encode_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    # to_dict's form of each changed field; the fields it copies as they are pass through.
    out = dict(changes)
    for name in ("last_updated", "refreshed_at"):
        if out.get(name) is not None:
            out[name] = _iso(out[name])
    if "categories" in out:
        out["categories"] = dict(out["categories"])
    if "messages" in out:
        out["messages"] = _encode_messages(out["messages"])
    if "provenance" in out:
        out["provenance"] = sorted(out["provenance"])
    if "briefings" in out:
        out["briefings"] = [b.to_dict() for b in out["briefings"]]
    return out


def _encode_messages(messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    # A lazily decoded Messages hands back its cached form without decoding it.
    if isinstance(messages, Messages):
        return messages.raw()
    return [m.to_dict() for m in messages]
