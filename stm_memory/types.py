"""Immutable data: scopes and their keys, live entries, categories and settings."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, TypeAlias, overload

from .errors import ConfigurationError, ValidationError

__all__ = [
    "Category",
    "MemoryEntry",
    "RenderMode",
    "Role",
    "Scope",
    "ScopeKind",
    "ServerSettings",
    "StoredMessage",
    "UserSettings",
    "index_key",
    "key_for",
    "next_rev",
    "parse_index_key",
    "parse_key",
    "storable_text_problem",
]

ScopeKind: TypeAlias = Literal["server", "user"]
Role: TypeAlias = Literal["user", "assistant"]
RenderMode: TypeAlias = Literal["crude_summary", "supersede"]

KEY_PREFIX = "shortterm"


def _escape(part: str) -> str:
    # Ids may contain ":" (the key separator). Percent-escaping "%" first, then ":",
    # is reversible, so user "a:b" + channel "c" and user "a" + channel "b:c" can
    # never produce the same key.
    return part.replace("%", "%25").replace(":", "%3A")


def _unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%25", "%")


def _check_id(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{name} must be a non-empty string")
    if "\x00" in value:
        raise ValidationError(f"{name} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name} is not valid Unicode (lone surrogate)") from None
    if len(value) > 512:
        raise ValidationError(f"{name} is longer than 512 characters")


def storable_text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored everywhere (PostgreSQL rejects NUL; UTF-8 rejects
    lone surrogates), or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (lone surrogate)"
    return None


def _check_name(name: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string or None, got {type(value).__name__}")
    problem = storable_text_problem(value)
    if problem:
        raise ValidationError(f"{name} {problem}")
    if len(value) > 512:
        raise ValidationError(f"{name} is longer than 512 characters")


def key_for(kind: ScopeKind, owner_id: str, channel_id: str, persona_id: str | None = None) -> str:
    """``shortterm:{kind}:{owner}:{channel}[:{persona}]`` with every id escaped."""
    return _key_for(kind, owner_id, channel_id, persona_id)


# Memoised (behind key_for, which keeps its parameter types for callers): every turn
# derives its scope's keys several times (turn, context, write).
@lru_cache(maxsize=4096)
def _key_for(kind: ScopeKind, owner_id: str, channel_id: str, persona_id: str | None) -> str:
    key = f"{KEY_PREFIX}:{kind}:{_escape(owner_id)}:{_escape(channel_id)}"
    return f"{key}:{_escape(persona_id)}" if persona_id is not None else key


def index_key(kind: ScopeKind, owner_id: str) -> str:
    """The cache key listing the entry keys of one server (``server``) or user (``user``)."""
    return f"{KEY_PREFIX}:index:{kind}:{_escape(owner_id)}"


def parse_index_key(key: str) -> tuple[ScopeKind, str]:
    """Inverse of :func:`index_key`."""
    parts = key.split(":")
    if len(parts) != 4 or parts[:2] != [KEY_PREFIX, "index"] or parts[2] not in ("server", "user"):
        raise ValidationError(f"not a short-term memory index key: {key!r}")
    return ("server" if parts[2] == "server" else "user"), _unescape(parts[3])


def parse_key(key: str) -> tuple[ScopeKind, str, str, str | None]:
    """Inverse of :func:`key_for`: ``(kind, owner_id, channel_id, persona_id)``."""
    parts = key.split(":")
    if len(parts) not in (4, 5) or parts[0] != KEY_PREFIX or parts[1] not in ("server", "user"):
        raise ValidationError(f"not a short-term memory key: {key!r}")
    kind: ScopeKind = "server" if parts[1] == "server" else "user"
    persona = _unescape(parts[4]) if len(parts) == 5 else None
    return kind, _unescape(parts[2]), _unescape(parts[3]), persona


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """Where a conversation happens. ``server_id=None`` means a direct conversation (DM)."""

    channel_id: str
    user_id: str
    server_id: str | None = None
    persona_id: str | None = None
    parent_channel_id: str | None = None
    channel_name: str | None = None
    server_name: str | None = None
    user_name: str | None = None

    def __post_init__(self) -> None:
        _check_id("channel_id", self.channel_id)
        _check_id("user_id", self.user_id)
        _check_id("server_id", self.server_id, optional=True)
        _check_id("persona_id", self.persona_id, optional=True)
        _check_id("parent_channel_id", self.parent_channel_id, optional=True)
        _check_name("channel_name", self.channel_name)
        _check_name("server_name", self.server_name)
        _check_name("user_name", self.user_name)

    @property
    def is_dm(self) -> bool:
        return self.server_id is None

    @property
    def user_key(self) -> str:
        return key_for("user", self.user_id, self.channel_id, self.persona_id)

    @property
    def server_key(self) -> str | None:
        if self.server_id is None:
            return None
        return key_for("server", self.server_id, self.channel_id, self.persona_id)

    @property
    def live_key(self) -> str:
        """The key prompt memory reads: the server key in a server, the user key in a DM."""
        return self.server_key or self.user_key

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key a write touches: user key first, then the server key unless DM."""
        server_key = self.server_key
        return (self.user_key,) if server_key is None else (self.user_key, server_key)

    def kind_of(self, key: str) -> ScopeKind:
        return "user" if key == self.user_key else "server"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """One captured dialogue turn."""

    role: Role
    content: str
    timestamp: datetime
    # Display name, for rendering; two people may share one.
    name: str | None = None
    # Who said it (user messages): what erasure and full privacy go by.
    user_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "timestamp": self.timestamp.isoformat(),
            "name": self.name,
            "user_id": self.user_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredMessage:
        return cls(
            role="assistant" if data["role"] == "assistant" else "user",
            content=str(data["content"]),
            timestamp=datetime.fromisoformat(data["timestamp"]),
            name=data.get("name"),
            user_id=data.get("user_id"),
        )


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
        refresh, and decoding every captured turn of every channel showed in the
        context profile."""
        if since is None or self._decoded is not None:
            return turns_after(self._items(), since)
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


def turns_after(
    messages: Sequence[StoredMessage], since: datetime | None
) -> tuple[StoredMessage, ...]:
    """The turns captured after ``since`` (all when None), in order."""
    if isinstance(messages, Messages):
        return messages.after(since)
    return tuple(m for m in messages if since is None or m.timestamp > since)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """The live memory of one key (SPEC §2). Replace it with :func:`dataclasses.replace`."""

    key: str
    kind: ScopeKind
    channel_id: str
    server_id: str | None = None
    user_id: str | None = None
    persona_id: str | None = None
    parent_channel_id: str | None = None
    channel_name: str | None = None
    server_name: str | None = None
    # A tuple, or a lazily decoded Messages (entries read from the cache).
    messages: Sequence[StoredMessage] = ()
    summary: str | None = None
    # slug → value, in the server's category order (dicts keep insertion order).
    categories: Mapping[str, str] = field(default_factory=dict)
    turns_since_refresh: int = 0
    last_refreshed_turn: int = 0
    # Provenance: the users whose words are in this entry's dialogue or could have
    # reached its distilled memory (the speakers captured since the memory was last
    # cleared, and the provenance of the briefings shown when it was written), so
    # clear_user can erase what they said wherever it went.
    provenance: frozenset[str] = frozenset()
    # Turns counted since the channel was reset (clear_channel), or None when dialogue
    # from before this entry may exist: the history cut never sends turns from before
    # a reset (stm_memory.history).
    turns_since_reset: int | None = None
    last_updated: datetime = field(default_factory=lambda: datetime.fromtimestamp(0, UTC))
    # When the model last wrote distilled memory here: raw turns captured after it are
    # the "recent" ones that the summary does not cover yet.
    refreshed_at: datetime | None = None
    # Revision: raised by every cache mutation (a hybrid logical clock, see
    # _live.next_rev). SQL keeps a row's revision and refuses an older snapshot, so
    # writes that reach SQL out of order, twice, or late from an outbox replay can
    # never overwrite what the live cache holds.
    rev: int = 0

    @classmethod
    def empty(cls, scope: Scope, key: str, now: datetime) -> MemoryEntry:
        kind = scope.kind_of(key)
        return cls(
            key=key,
            kind=kind,
            channel_id=scope.channel_id,
            server_id=scope.server_id,
            user_id=scope.user_id if kind == "user" else None,
            persona_id=scope.persona_id,
            parent_channel_id=scope.parent_channel_id,
            channel_name=scope.channel_name,
            server_name=scope.server_name,
            last_updated=now,
        )

    @property
    def has_summary(self) -> bool:
        return bool(self.summary and self.summary.strip())

    @property
    def has_distilled(self) -> bool:
        return self.has_summary or any(v.strip() for v in self.categories.values())

    def expires_at(self, *, summary_ttl: timedelta, bare_ttl: timedelta) -> datetime:
        return self.last_updated + (summary_ttl if self.has_summary else bare_ttl)

    def with_scope_names(self, scope: Scope) -> MemoryEntry:
        """Refresh display names and the parent channel from the current scope."""
        if (
            (scope.parent_channel_id is None or scope.parent_channel_id == self.parent_channel_id)
            and (scope.channel_name is None or scope.channel_name == self.channel_name)
            and (scope.server_name is None or scope.server_name == self.server_name)
        ):
            return self  # nothing new: skip the copy on the write hot path
        return replace(
            self,
            parent_channel_id=scope.parent_channel_id or self.parent_channel_id,
            channel_name=scope.channel_name or self.channel_name,
            server_name=scope.server_name or self.server_name,
        )

    def evolve(self, changes: Mapping[str, Any]) -> MemoryEntry:
        """A copy with ``changes`` applied: :func:`dataclasses.replace` without its
        per-call field introspection (it ran twice per update, on the write hot path).
        MemoryEntry has no ``__post_init__``, so nothing is skipped."""
        if not changes.keys() <= _ENTRY_FIELD_SET:
            unknown = sorted(set(changes) - _ENTRY_FIELD_SET)
            raise TypeError(f"MemoryEntry has no field(s) {unknown}")
        new = _new_object(MemoryEntry)
        for name in _ENTRY_FIELDS:
            _set_attr(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    def value_after(
        self, source: Mapping[str, Any] | None, changes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """This entry's cached form (:meth:`to_dict`), where the entry is ``source``
        decoded as it is with ``changes`` applied: ``source`` patched with the encoded
        changes when it is a complete value, which spares re-encoding the unchanged
        fields (the raw turns above all) on every write; else encoded whole."""
        if source is None or len(source) != len(_ENTRY_FIELDS):
            return self.to_dict()
        return {**source, **_encode_changes(changes)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "channel_id": self.channel_id,
            "server_id": self.server_id,
            "user_id": self.user_id,
            "persona_id": self.persona_id,
            "parent_channel_id": self.parent_channel_id,
            "channel_name": self.channel_name,
            "server_name": self.server_name,
            "messages": _encode_messages(self.messages),
            "summary": self.summary,
            "categories": dict(self.categories),
            "turns_since_refresh": self.turns_since_refresh,
            "last_refreshed_turn": self.last_refreshed_turn,
            "turns_since_reset": self.turns_since_reset,
            "provenance": sorted(self.provenance),
            "last_updated": self.last_updated.isoformat(),
            "refreshed_at": self.refreshed_at.isoformat() if self.refreshed_at else None,
            "rev": self.rev,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryEntry:
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
            rev=int(data.get("rev") or 0),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


_ENTRY_FIELDS = tuple(f.name for f in fields(MemoryEntry))
_ENTRY_FIELD_SET = frozenset(_ENTRY_FIELDS)
_new_object = object.__new__
_set_attr = object.__setattr__  # frozen: the dataclass's own __init__ sets fields this way


_last_iso: tuple[datetime, str] = (datetime.fromtimestamp(0, UTC), "")


def _iso(value: datetime) -> str:
    # An update stamps one datetime object as last_updated and refreshed_at of both its
    # entries, and isoformat of an aware datetime showed in the write profile: the last
    # one is remembered. By identity, not equality: equal instants in other time zones
    # have other texts. (One tuple swapped whole, so threads never see half of one.)
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
    return out


def _encode_messages(messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    # A lazily decoded Messages hands back its cached form without decoding it.
    if isinstance(messages, Messages):
        return messages.raw()
    return [m.to_dict() for m in messages]


def next_rev(previous: int, now: datetime) -> int:
    """The revision after ``previous`` at ``now``: a hybrid logical clock (the wall
    clock in microseconds, or one more than before when that is not ahead), so
    revisions only grow per key, and an entry rebuilt from nothing while the database
    was unreachable still outranks the older row it could not read."""
    return max(previous + 1, int(now.timestamp() * 1_000_000))


@dataclass(frozen=True, slots=True)
class Category:
    """A per-server memory category. ``slug`` is assigned by ``set_categories``."""

    label: str
    description: str = ""
    slug: str = ""


def _validate_fields(obj: object, checks: Mapping[str, Any]) -> None:
    for name, check in checks.items():
        value = getattr(obj, name)
        problem = check(value)
        if problem:
            raise ConfigurationError(f"{name}: {problem} (got {value!r})")


def _bool(v: object) -> str | None:
    return None if isinstance(v, bool) else "must be true or false"


def _int_at_least(lo: int) -> Any:
    def check(v: object) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= lo
        return None if ok else f"must be an integer >= {lo}"

    return check


def _opt_text(v: object) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        return "must be a string or None"
    return storable_text_problem(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """Per-server settings (SPEC §2). Only an explicit ``False`` disables memory."""

    short_term_memory_enabled: bool = True
    refresh_cadence: int = 5
    render_mode: RenderMode = "crude_summary"
    crude_message_count: int = 6
    tool_description_override: str | None = None
    update_nudge_override: str | None = None
    nudge_injection_depth: int = 2
    content_injection_depth: int = -1
    private_channel_ids: frozenset[str] = frozenset()
    stm_privacy_bypass: bool = False

    def __post_init__(self) -> None:
        # Accept any iterable of ids for convenience, keep a frozenset.
        if not isinstance(self.private_channel_ids, frozenset):
            ids = self.private_channel_ids
            if isinstance(ids, str) or not hasattr(ids, "__iter__"):
                raise ConfigurationError("private_channel_ids must be a collection of ids")
            object.__setattr__(self, "private_channel_ids", frozenset(str(i) for i in ids))
        _validate_fields(
            self,
            {
                "short_term_memory_enabled": _bool,
                "refresh_cadence": _int_at_least(1),
                "render_mode": lambda v: (
                    None
                    if v in ("crude_summary", "supersede")
                    else "must be 'crude_summary' or 'supersede'"
                ),
                "crude_message_count": _int_at_least(0),
                "tool_description_override": _opt_text,
                "update_nudge_override": _opt_text,
                "nudge_injection_depth": _int_at_least(0),
                "content_injection_depth": _int_at_least(-1),
                "stm_privacy_bypass": _bool,
            },
        )

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    def with_changes(self, **changes: Any) -> ServerSettings:
        unknown = set(changes) - self.field_names()
        if unknown:
            known = ", ".join(sorted(self.field_names()))
            raise ConfigurationError(
                f"unknown server setting(s): {', '.join(sorted(unknown))}; known: {known}"
            )
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["private_channel_ids"] = sorted(self.private_channel_ids)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class UserSettings:
    """Per-user privacy settings."""

    cross_server_opt_in: bool = False
    full_privacy: bool = False

    def __post_init__(self) -> None:
        _validate_fields(self, {"cross_server_opt_in": _bool, "full_privacy": _bool})

    def with_changes(self, **changes: Any) -> UserSettings:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ConfigurationError(
                f"unknown user setting(s): {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(known))}"
            )
        return replace(self, **changes)
