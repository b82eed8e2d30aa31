"""Where a conversation happens (:class:`Scope`), the ids it is made of, and the cache
keys derived from it. Every id that enters storage is checked here, once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, TypeAlias

from stm_memory.errors import ValidationError
from stm_memory.model.text import storable_text_problem

__all__ = [
    "ENTRY_PREFIX",
    "INDEX_PREFIX",
    "KEY_PREFIX",
    "RESULTS_PREFIX",
    "Scope",
    "ScopeKind",
    "check_owner_id",
    "index_key",
    "key_for",
    "parse_index_key",
    "parse_key",
    "parse_results_key",
    "results_key",
]

ScopeKind: TypeAlias = Literal["server", "user"]

KEY_PREFIX = "shortterm"
#: Every cache key of this package starts so; a scan for entries starts here.
ENTRY_PREFIX = f"{KEY_PREFIX}:"
#: The ordered indexes' keys (:func:`index_key`) start so; entry scans skip them.
INDEX_PREFIX = f"{KEY_PREFIX}:index:"
#: A long turn's cleared tool results (:func:`results_key`) start so; entry scans skip
#: them. Under :data:`KEY_PREFIX` like every key of ours, so a wipe of the package's
#: keys (the resilient cache's, after an outage) reaches them.
RESULTS_PREFIX = f"{KEY_PREFIX}:results:"


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
    return f"{INDEX_PREFIX}{kind}:{_escape(owner_id)}"


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


def results_key(user_key: str) -> str:
    """The cache key of the cleared tool results kept beside the user-scope entry
    ``user_key`` (the turn's user's: erasing the user or the channel reaches them)."""
    return RESULTS_PREFIX + user_key.removeprefix(ENTRY_PREFIX)


def parse_results_key(key: str) -> tuple[str, str]:
    """Inverse of :func:`results_key`: ``(owner_id, channel_id)`` of the user entry."""
    if not key.startswith(RESULTS_PREFIX):
        raise ValidationError(f"not a tool-results key: {key!r}")
    kind, owner, channel, _persona = parse_key(ENTRY_PREFIX + key.removeprefix(RESULTS_PREFIX))
    if kind != "user":
        raise ValidationError(f"not a tool-results key: {key!r}")
    return owner, channel


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


def check_owner_id(name: str, value: Any) -> str:
    """A server or user id given on its own (settings, deletion), held to Scope's rules."""
    if value is None:
        raise ValidationError(f"{name} must be a non-empty string, got None")
    if name == "user_id":
        Scope(channel_id="_", user_id=value)
    else:
        Scope(channel_id="_", user_id="_", server_id=value)
    return str(value)
