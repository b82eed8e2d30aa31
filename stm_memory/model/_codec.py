"""The entry codec: an entry's cached form (a JSON-ready dict) and back, fast.

Every update reads two entries from the cache and writes them back, so this is the
write hot path. The tricks live here, so :class:`~stm_memory.model.MemoryEntry` reads
as a plain dataclass: captured turns stay undecoded until read (:class:`Messages`),
a write patches the cached dict with its encoded changes instead of re-encoding the
entry, copies skip :func:`dataclasses.replace`'s introspection, and one timestamp's
ISO text is remembered. How each field is cached is declared once, in :data:`CACHED`,
and planned into the encoder and decoder once, at import (:class:`EntryCodec`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from operator import attrgetter, itemgetter
from typing import Any, Generic, NamedTuple, TypeVar, overload

from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.receipt import receipt_from_dict, receipt_to_dict
from stm_memory.model.scope import ScopeKind
from stm_memory.model.shown import ShownState

__all__ = ["CACHED", "Cached", "EntryCodec", "Messages", "check_fields", "evolve"]

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
        # Shared, not copied: cached values are never mutated in place (and this
        # sequence is immutable, so its cached form holds once it is decoded too).
        return [m if isinstance(m, dict) else dict(m) for m in self._raw]

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

    def after(self, since: datetime | None, *, at: bool = False) -> tuple[StoredMessage, ...]:
        """The turns captured after ``since`` (all when None; with ``at``, at it too), in
        order. Only their timestamps are read to choose: a briefing shows the few turns
        since the last refresh, and a write checks those, so neither decodes every
        captured turn."""
        if since is None or self._decoded is not None:
            return tuple(
                m
                for m in self._items()
                if since is None or m.timestamp > since or (at and m.timestamp == since)
            )
        out = []
        for m in self._raw:
            stamp = datetime.fromisoformat(m["timestamp"])
            if stamp > since or (at and stamp == since):
                out.append(StoredMessage.from_dict(m))
        return tuple(out)

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
    MemoryEntry has no ``__post_init__`` (EntryCodec refuses one), so nothing is skipped."""
    cls = type(entry)
    names, name_set = _field_names(cls)
    if not changes.keys() <= name_set:
        unknown = sorted(set(changes) - name_set)
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
    new = _new_object(cls)
    for name in names:
        _set_attr(new, name, changes[name] if name in changes else getattr(entry, name))
    return new


# -- the cached form, field by field ---------------------------------------------------
#
# Every MemoryEntry field is declared once in CACHED below, with how it is cached.
# The encoder and decoder are planned from that table in the dataclass's field order
# (the cached dict's key order) when the entry module is imported, and the plan
# refuses a field the table does not declare: a field added to MemoryEntry fails
# loudly at import, naming it, instead of being silently left out of the cache.


class Cached(NamedTuple):
    """How one MemoryEntry field is cached."""

    #: The cached value from the field's (None: the value as it is).
    encode: Callable[[Any], Any] | None = None
    #: The field's value from the cached one, which is None where an older cached
    #: value lacks the field (None: the cached value as it is).
    decode: Callable[[Any], Any] | None = None
    #: Every cached value has it: decoding one without it raises KeyError.
    required: bool = False


_last_iso: tuple[datetime, str] = (datetime.fromtimestamp(0, UTC), "")


def _iso(value: datetime | None) -> str | None:
    # An update stamps one datetime object as last_updated and refreshed_at of both its
    # entries, and formatting an aware datetime is not free: the last one is
    # remembered. By identity, not equality: equal instants in other time zones have
    # other texts. (One tuple swapped whole, so threads never see half of one.)
    global _last_iso
    if value is None:
        return None
    last = _last_iso
    if last[0] is value:
        return last[1]
    text = value.isoformat()
    _last_iso = (value, text)
    return text


def _encode_messages(messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    # A lazily decoded Messages hands back its cached form without decoding it.
    if isinstance(messages, Messages):
        return messages.raw()
    return [m.to_dict() for m in messages]


def _decode_messages(raw: Sequence[Mapping[str, Any]] | None) -> Messages:
    return Messages(raw or ())


def _encode_briefings(briefings: Sequence[BriefingCopy]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in briefings]


def _decode_briefings(raw: Sequence[Mapping[str, Any]] | None) -> tuple[BriefingCopy, ...]:
    return tuple(BriefingCopy.from_dict(b) for b in raw or ())


def _encode_shown(shown: ShownState | None) -> dict[str, Any] | None:
    return shown.to_dict() if shown is not None else None


def _decode_shown(raw: Mapping[str, Any] | None) -> ShownState | None:
    return ShownState.from_dict(raw) if raw else None


def _scope_kind(value: Any) -> ScopeKind:
    return "server" if value == "server" else "user"


def _dict(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


def _frozenset(value: Sequence[str] | None) -> frozenset[str]:
    return frozenset(value or ())


def _int(value: Any) -> int:
    return int(value or 0)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_datetime(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


_AS_IS = Cached()

#: How each MemoryEntry field is cached (see above). The fields of a value cached by an
#: older release that lacks them decode to their defaults.
CACHED: dict[str, Cached] = {
    "key": Cached(required=True),
    "kind": Cached(decode=_scope_kind, required=True),
    "channel_id": Cached(required=True),
    "server_id": _AS_IS,
    "user_id": _AS_IS,
    "persona_id": _AS_IS,
    "parent_channel_id": _AS_IS,
    "channel_name": _AS_IS,
    "server_name": _AS_IS,
    "messages": Cached(_encode_messages, _decode_messages),
    "summary": _AS_IS,
    # Insertion order is the server's category order: a copy keeps it.
    "categories": Cached(dict, _dict),
    "kept": Cached(_encode_messages, _decode_messages),
    "turns_since_refresh": Cached(decode=_int),
    "last_refreshed_turn": Cached(decode=_int),
    "turns_since_reset": Cached(decode=_optional_int),
    # Sorted: a set's iteration order varies between processes, cached bytes must not.
    "provenance": Cached(sorted, _frozenset),
    "last_updated": Cached(_iso, datetime.fromisoformat, required=True),
    "refreshed_at": Cached(_iso, _optional_datetime),
    "briefings": Cached(_encode_briefings, _decode_briefings),
    "briefings_epoch": Cached(decode=_optional_int),
    "shown": Cached(_encode_shown, _decode_shown),
    "rev": Cached(decode=_int),
    "receipt": Cached(receipt_to_dict, receipt_from_dict),
    "forgotten": Cached(sorted, _frozenset),
    "no_writer": Cached(decode=bool),
}

# The fields cached as another value, for a write's changes.
_ENCODERS = tuple((name, c.encode) for name, c in CACHED.items() if c.encode is not None)


def check_fields(cls: type, declared: Iterable[str], where: str) -> None:
    """Raise TypeError unless ``declared`` names each of ``cls``'s dataclass fields
    exactly once, and nothing else. ``where`` says where the declarations live, so the
    error says where a new field must be declared."""
    names = [f.name for f in fields(cls)]
    counts = Counter(name for name in declared)
    problems = [f"field {n!r} is not declared" for n in names if n not in counts]
    problems += [f"{n!r} is declared {c} times" for n, c in counts.items() if c > 1]
    problems += [f"{n!r} is declared but is no field" for n in counts if n not in names]
    if problems:
        raise TypeError(f"{cls.__name__} in {where}: {'; '.join(problems)}")


class EntryCodec(Generic[E]):
    """MemoryEntry's cached form and back, planned once from CACHED in the field order
    of ``cls``: every call is a loop over precomputed tuples, no introspection.

    Generic over the class it encodes, so this module never imports the entry: the
    entry module builds its codec (``EntryCodec(MemoryEntry)``), the dependency runs
    one way. The class is checked against CACHED here, whatever it is."""

    __slots__ = ("_decoders", "_encoders", "_get", "_names", "_require")

    def __init__(self, cls: type[E]) -> None:
        check_fields(cls, CACHED, "model/_codec.py CACHED")
        if hasattr(cls, "__post_init__"):
            # decode and evolve set the fields without calling __init__ (the hot path).
            raise TypeError(f"{cls.__name__}.__post_init__ would be skipped by the codec")
        names, _ = _field_names(cls)
        self._names = names
        self._get = attrgetter(*names)
        self._encoders = tuple((n, e) for n in names if (e := CACHED[n].encode) is not None)
        self._decoders = tuple((n, CACHED[n].decode) for n in names)
        # KeyError (naming the key) for a cached value without a required field.
        self._require = itemgetter(*(n for n in names if CACHED[n].required))

    def encode(self, entry: E) -> dict[str, Any]:
        # The fields as they are, then the converted ones replaced in place (a dict
        # keeps a key's place when its value is replaced: the key order is the fields').
        out = dict(zip(self._names, self._get(entry), strict=False))
        for name, encode in self._encoders:
            out[name] = encode(out[name])
        return out

    def value_after(
        self, entry: E, source: Mapping[str, Any] | None, changes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``entry``'s cached form, where ``entry`` is ``source`` decoded with ``changes``
        applied: ``source`` patched with the encoded changes when it is a complete value,
        which spares re-encoding the unchanged fields (the raw turns above all) on every
        write; else encoded whole."""
        if source is None or len(source) != len(self._names):
            return self.encode(entry)
        return {**source, **_encode_changes(changes)}

    def decode(self, cls: type[E], data: Mapping[str, Any]) -> E:
        # Every field is set, as evolve sets them: the frozen dataclass's __init__
        # would only add its keyword parsing.
        self._require(data)
        get = data.get
        entry = _new_object(cls)
        for name, decode in self._decoders:
            value = get(name)
            _set_attr(entry, name, value if decode is None else decode(value))
        return entry


def _encode_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    # The cached form of each changed field (what encode gives it): the fields cached
    # as they are pass through.
    out = dict(changes)
    for name, encode in _ENCODERS:
        if name in out:
            out[name] = encode(out[name])
    return out
