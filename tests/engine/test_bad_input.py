"""Developer mistakes raise typed, clear exceptions and write nothing."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers.factory import MemFactory
from helpers.memory import SERVER, refresh, row

from stm_memory import (
    Category,
    ConfigurationError,
    ServerSettings,
    ShortTermMemory,
    StmError,
    ValidationError,
)
from stm_memory import engine as engine_module
from stm_memory.model import Scope
from stm_memory.wiring import Backends, open_backends


@pytest.fixture
def memory(make_mem: MemFactory) -> ShortTermMemory:
    return make_mem()


def stored_state(memory: ShortTermMemory) -> tuple[Any, ...]:
    """Everything administration can change, read straight from the store."""
    return (
        memory._store.count_rows(),
        memory._store.get_server_settings("g1"),
        memory._store.get_categories("g1"),
        memory._store.get_user_settings("u1"),
        len(memory._outbox),
    )


def test_error_classes_share_the_root() -> None:
    assert issubclass(ConfigurationError, StmError)
    assert issubclass(ValidationError, StmError)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"channel_id": "", "user_id": "u1"}, "channel_id must be a non-empty string"),
        ({"channel_id": "   ", "user_id": "u1"}, "channel_id must be a non-empty string"),
        ({"channel_id": "c1", "user_id": ""}, "user_id must be a non-empty string"),
        ({"channel_id": 42, "user_id": "u1"}, "channel_id must be a string, got int"),
        ({"channel_id": "c1", "user_id": None}, "user_id must be a string, got NoneType"),
        ({"channel_id": "c1", "user_id": "u1", "server_id": ""}, "server_id must be a non-empty"),
        ({"channel_id": "c1", "user_id": "u1", "server_id": 7}, "server_id must be a string"),
        ({"channel_id": "c1", "user_id": "u1", "persona_id": ""}, "persona_id must be a non-empty"),
        ({"channel_id": "c\x00", "user_id": "u1"}, "channel_id must not contain NUL"),
        ({"channel_id": "c" * 513, "user_id": "u1"}, "channel_id is longer than 512"),
    ],
)
def test_bad_ids_raise_validation_error(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Scope(**fields)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "  ",
        5,
        None,
    ],
)
def test_administrative_calls_validate_ids(memory: ShortTermMemory, bad: Any) -> None:
    refresh(memory, SERVER, "keep me")
    before = stored_state(memory)
    calls: list[Callable[[], object]] = [
        lambda: memory.clear_channel(bad),
        lambda: memory.clear_user(bad),
        lambda: memory.configure_server(bad, refresh_cadence=3),
        lambda: memory.configure_user(bad, full_privacy=True),
        lambda: memory.set_categories(bad, [Category("Plot")]),
        lambda: memory.server_settings(bad),
        lambda: memory.categories(bad),
    ]
    for call in calls:
        with pytest.raises(ValidationError):
            call()
    assert stored_state(memory) == before
    assert memory.get(SERVER) is not None


def test_six_categories_are_refused(memory: ShortTermMemory) -> None:
    memory.set_categories("g1", [Category("Plot")])
    before = stored_state(memory)
    six = [Category(f"Category {i}") for i in range(6)]
    with pytest.raises(ConfigurationError, match="at most 5 categories per server, got 6"):
        memory.set_categories("g1", six)
    assert stored_state(memory) == before
    assert [c.label for c in memory.categories("g1")] == ["Plot"]


@pytest.mark.parametrize("label", ["", "   ", "\n\t"])
def test_blank_category_labels_are_refused(memory: ShortTermMemory, label: str) -> None:
    before = stored_state(memory)
    with pytest.raises(ConfigurationError, match="category 1 needs a non-empty label"):
        memory.set_categories("g1", [Category("Plot"), Category(label, "desc")])
    assert stored_state(memory) == before


@pytest.mark.parametrize(
    ("categories", "message"),
    [
        ("Plot", "categories must be a list of Category"),
        ([42], "category 0 must be a Category"),
        ([Category("Plot", 5)], "category 0 description must be a string"),  # type: ignore[arg-type]
        ([Category("x" * 201)], "label ≤ 200"),
    ],
)
def test_malformed_category_lists_are_refused(
    memory: ShortTermMemory, categories: Any, message: str
) -> None:
    before = stored_state(memory)
    with pytest.raises(ConfigurationError, match=message):
        memory.set_categories("g1", categories)
    assert stored_state(memory) == before


def test_unknown_server_settings_are_named(memory: ShortTermMemory) -> None:
    memory.configure_server("g1", refresh_cadence=3)
    before = stored_state(memory)
    with pytest.raises(ConfigurationError, match=r"unknown server setting.*refresh_cadance"):
        memory.configure_server("g1", refresh_cadance=4, render_mode="supersede")
    assert stored_state(memory) == before
    assert memory.server_settings("g1").refresh_cadence == 3


def test_unknown_user_settings_are_named(memory: ShortTermMemory) -> None:
    with pytest.raises(ConfigurationError, match=r"unknown user setting.*privacy"):
        memory.configure_user("u1", privacy=True)
    assert memory._store.get_user_settings("u1") is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"render_mode": "verbose"}, "render_mode: must be 'crude_summary' or 'supersede'"),
        ({"render_mode": None}, "render_mode"),
        ({"refresh_cadence": 0}, "refresh_cadence: must be an integer >= 1"),
        ({"refresh_cadence": "5"}, "refresh_cadence"),
        ({"short_term_memory_enabled": "no"}, "short_term_memory_enabled: must be true or false"),
        ({"content_injection_depth": -2}, "content_injection_depth"),
        ({"private_channel_ids": "c1"}, "private_channel_ids must be a collection"),
    ],
)
def test_invalid_server_setting_values_are_refused(
    memory: ShortTermMemory, changes: dict[str, Any], message: str
) -> None:
    before = stored_state(memory)
    with pytest.raises(ConfigurationError, match=message):
        memory.configure_server("g1", **changes)
    assert stored_state(memory) == before
    assert memory.server_settings("g1") == ServerSettings()


def test_invalid_user_setting_values_are_refused(memory: ShortTermMemory) -> None:
    with pytest.raises(ConfigurationError, match="full_privacy: must be true or false"):
        memory.configure_user("u1", full_privacy="yes")
    assert memory._store.get_user_settings("u1") is None


def test_bad_turn_and_capture_arguments(memory: ShortTermMemory) -> None:
    with pytest.raises(ValidationError, match="scope must be a Scope"):
        memory.begin_turn({"channel_id": "c1", "user_id": "u1"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="user_message must be a string"):
        memory.begin_turn(SERVER, user_message=42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="scope must be a Scope"):
        memory.capture("c1", [])  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="messages must be a list"):
        memory.capture(SERVER, "hello")
    with pytest.raises(ValidationError, match="a message must be a dict"):
        memory.capture(SERVER, [42])
    assert memory.get(SERVER) is None
    assert memory._store.count_rows() == 0
    assert row(memory, SERVER.server_key) is None


def test_bad_constructor_options(make_mem: MemFactory) -> None:
    with pytest.raises(ConfigurationError, match=r"unknown option.*summary_tll"):
        make_mem(summary_tll=5)
    with pytest.raises(ConfigurationError, match="bare_ttl must be positive"):
        make_mem(bare_ttl=0)
    with pytest.raises(ConfigurationError, match="messages_kept must be a positive integer"):
        make_mem(messages_kept=0)


def test_bad_environment_values(make_mem: MemFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STM_SUMMARY_TTL_SECONDS", "a day")
    with pytest.raises(ConfigurationError, match="STM_SUMMARY_TTL_SECONDS='a day'"):
        make_mem()


def test_a_naive_clock_is_refused(make_mem: MemFactory) -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):  # at construction
        make_mem(clock=lambda: datetime(2026, 1, 5, 12, 0))


def _open_files_under(root: Path) -> list[str]:
    """Files under ``root`` this process holds open (Linux: /proc/self/fd)."""
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith(str(root)):
            held.append(target)
    return sorted(held)


def test_a_failed_construction_leaves_nothing_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rows database, the cache directory and the outbox are open when the engine
    # refuses a naive clock: every one of them must be closed again, the outbox too
    # (its file handle would keep the queued writes' file busy).
    opened: list[Backends] = []

    def recording(*args: Any, **kwargs: Any) -> Backends:
        backends = open_backends(*args, **kwargs)
        opened.append(backends)
        return backends

    monkeypatch.setattr(engine_module, "open_backends", recording)
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        ShortTermMemory.from_url(
            f"sqlite:///{tmp_path / 'stm.db'}",
            cache_dir=tmp_path / "cache",
            outbox_path=tmp_path / "outbox.sqlite3",
            clock=lambda: datetime(2026, 1, 5, 12, 0),
        )
    [backends] = opened
    assert backends.outbox.closed
    if Path("/proc/self/fd").is_dir():
        assert _open_files_under(tmp_path) == []
    # The outbox file can be taken exclusively at once (nothing holds it).
    taken = sqlite3.connect(tmp_path / "outbox.sqlite3", timeout=0)
    try:
        taken.execute("BEGIN EXCLUSIVE")
        taken.execute("ROLLBACK")
    finally:
        taken.close()


def test_closing_the_backends_closes_the_outbox(tmp_path: Path) -> None:
    backends = open_backends(
        f"sqlite:///{tmp_path / 'stm.db'}",
        cache_dir=tmp_path / "cache",
        redis_url=None,
        outbox_path=tmp_path / "outbox.sqlite3",
        clock=None,
        timeout=5.0,
    )
    assert not backends.outbox.closed
    backends.close()
    assert backends.outbox.closed
