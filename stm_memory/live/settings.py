"""Server settings, categories and user settings: validated, stored, briefly memoised.

``begin_turn`` reads them every turn, so they are memoised in-process for
``settings_ttl`` seconds; a change made through this process is seen at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from stm_memory.errors import ConfigurationError, StorageError
from stm_memory.model import (
    DEFAULT_CATEGORY,
    MAX_CATEGORIES,
    Category,
    ServerSettings,
    UserSettings,
    check_owner_id,
    storable_text_problem,
)
from stm_memory.model.text import unique_slugs
from stm_memory.store.base import MemoryStore

__all__ = ["SettingsBook"]

log = logging.getLogger("stm_memory")


# What a turn assumes when settings cannot be read and none were loaded before: fail
# closed (memory off; full privacy, so nothing is stored). Built once: they are frozen,
# and building them per call (they are arguments) validated every field on every turn.
_SERVER_UNAVAILABLE = ServerSettings(short_term_memory_enabled=False)
_USER_UNAVAILABLE = UserSettings(full_privacy=True)
_SERVER_DEFAULT = ServerSettings()
_USER_DEFAULT = UserSettings()


class SettingsBook:
    """The settings half of :class:`~stm_memory.ShortTermMemory`."""

    def __init__(self, store: MemoryStore, clock: Callable[[], datetime], *, ttl: float) -> None:
        self._store = store
        self._clock = clock
        self._settings_ttl = ttl
        self._memo: dict[tuple[str, str], tuple[float, Any]] = {}
        self._memo_lock = threading.Lock()

    def _memoised(self, kind: str, ident: str, load: Callable[[], Any], *, unavailable: Any) -> Any:
        """Settings from a short in-process memo (``settings_ttl`` seconds).

        When the database cannot be read, a turn must go on (a memory problem never
        fails the user's turn): the last value loaded is used, and with none,
        ``unavailable`` — chosen by each caller to fail closed (e.g. full privacy:
        nothing stored, no tool) — without memoising it.
        """
        if type(ident) is not str:  # unhashable or wrong type: a clear error first
            check_owner_id("user_id" if kind == "user" else "server_id", ident)
        now = time.monotonic()
        with self._memo_lock:
            hit = self._memo.get((kind, ident))
        if hit is not None and now - hit[0] < self._settings_ttl:
            return hit[1]
        # Ids are checked on a miss only: a memo hit proves the id was valid.
        check_owner_id("user_id" if kind == "user" else "server_id", ident)
        try:
            value = load()
        except StorageError as exc:
            log.warning("stm-memory: %s settings of %r unreadable (%s)", kind, ident, exc)
            return hit[1] if hit is not None else unavailable
        with self._memo_lock:
            self._memo[(kind, ident)] = (now, value)
        return value

    def _forget(self, kind: str, ident: str) -> None:
        with self._memo_lock:
            self._memo.pop((kind, ident), None)

    def server_settings(self, server_id: str) -> ServerSettings:
        return self._memoised(  # type: ignore[no-any-return]
            "server",
            server_id,
            lambda: self._store.get_server_settings(server_id) or _SERVER_DEFAULT,
            unavailable=_SERVER_UNAVAILABLE,
        )

    def configure_server(self, server_id: str, **settings: Any) -> ServerSettings:
        """Change server settings (the fields of :class:`ServerSettings`); unknown names
        or bad values raise
        :class:`ConfigurationError` and nothing is written."""
        check_owner_id("server_id", server_id)
        current = self._store.get_server_settings(server_id) or ServerSettings()
        new = current.with_changes(**settings)
        self._store.put_server_settings(server_id, new, self._clock())
        self._forget("server", server_id)
        return new

    def categories(self, server_id: str) -> list[Category]:
        cats = self._memoised(
            "categories", server_id, lambda: self._store.get_categories(server_id), unavailable=[]
        )
        return list(cats) or [DEFAULT_CATEGORY]

    def set_categories(
        self, server_id: str, categories: Sequence[Category | str]
    ) -> list[Category]:
        """Replace a server's categories (at most 5, non-empty labels). Each gets a slug
        from its label (:func:`~stm_memory.model.text.unique_slugs`), the name of its
        tool argument. An empty list restores the default summary mode."""
        check_owner_id("server_id", server_id)
        if isinstance(categories, str | bytes) or not isinstance(categories, Sequence):
            raise ConfigurationError("categories must be a list of Category")
        if len(categories) > MAX_CATEGORIES:
            raise ConfigurationError(
                f"at most {MAX_CATEGORIES} categories per server, got {len(categories)}"
            )
        cleaned: list[Category] = []
        for i, cat in enumerate(categories):
            if isinstance(cat, str):
                cat = Category(cat)
            if not isinstance(cat, Category):
                raise ConfigurationError(f"category {i} must be a Category, got {cat!r}")
            if not isinstance(cat.label, str) or not cat.label.strip():
                raise ConfigurationError(f"category {i} needs a non-empty label")
            if not isinstance(cat.description, str):
                raise ConfigurationError(f"category {i} description must be a string")
            for part in (cat.label, cat.description):
                problem = storable_text_problem(part)
                if problem:
                    raise ConfigurationError(f"category {i}: text {problem}")
            if len(cat.label) > 200 or len(cat.description) > 1000:
                raise ConfigurationError(
                    f"category {i}: label ≤ 200 and description ≤ 1000 characters"
                )
            cleaned.append(Category(cat.label.strip(), cat.description.strip()))
        slugs = unique_slugs([c.label for c in cleaned])
        final = [Category(c.label, c.description, s) for c, s in zip(cleaned, slugs, strict=True)]
        self._store.set_categories(server_id, final)
        self._forget("categories", server_id)
        return final or [DEFAULT_CATEGORY]

    def user_settings(self, user_id: str) -> UserSettings:
        return self._memoised(  # type: ignore[no-any-return]
            "user",
            user_id,
            lambda: self._store.get_user_settings(user_id) or _USER_DEFAULT,
            unavailable=_USER_UNAVAILABLE,
        )

    def configure_user(self, user_id: str, **settings: Any) -> UserSettings:
        check_owner_id("user_id", user_id)
        current = self._store.get_user_settings(user_id) or UserSettings()
        new = current.with_changes(**settings)
        self._store.put_user_settings(user_id, new, self._clock())
        self._forget("user", user_id)
        return new
