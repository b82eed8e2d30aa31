"""The data everything else passes around: scopes and their keys, live entries and
their captured turns, categories and settings. Frozen dataclasses, validated when
built; no I/O."""

from stm_memory.model._codec import Messages
from stm_memory.model.dialogue import Role, StoredMessage
from stm_memory.model.entry import MemoryEntry, next_rev, turns_after
from stm_memory.model.scope import (
    ENTRY_PREFIX,
    INDEX_PREFIX,
    KEY_PREFIX,
    RESULTS_PREFIX,
    Scope,
    ScopeKind,
    check_owner_id,
    index_key,
    key_for,
    parse_index_key,
    parse_key,
    parse_results_key,
    results_key,
)
from stm_memory.model.settings import (
    DEFAULT_CATEGORY,
    MAX_CATEGORIES,
    Category,
    RenderMode,
    ServerSettings,
    UserSettings,
)
from stm_memory.model.text import storable_text_problem

__all__ = [
    "DEFAULT_CATEGORY",
    "ENTRY_PREFIX",
    "INDEX_PREFIX",
    "KEY_PREFIX",
    "MAX_CATEGORIES",
    "RESULTS_PREFIX",
    "Category",
    "MemoryEntry",
    "Messages",
    "RenderMode",
    "Role",
    "Scope",
    "ScopeKind",
    "ServerSettings",
    "StoredMessage",
    "UserSettings",
    "check_owner_id",
    "index_key",
    "key_for",
    "next_rev",
    "parse_index_key",
    "parse_key",
    "parse_results_key",
    "results_key",
    "storable_text_problem",
    "turns_after",
]
