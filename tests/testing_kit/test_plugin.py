"""The pytest plugin: its fixtures in a throwaway project (loaded through the ``pytest11``
entry point, no conftest), and in this test suite."""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from helpers.pytest_runs import pytest_args

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock, assert_memory_contains
from stm_memory.testing.plugin import MemoryFactory

pytest_plugins = ["pytester"]

MakeScope = Callable[..., Scope]

USER_PROJECT = """
from datetime import timedelta

import pytest

from stm_memory import ShortTermMemory
from stm_memory.testing import FrozenClock, StmAssertions

opened = []


def test_fixtures_work_together(stm_clock, stm_memory, stm_scope, stm_assert):
    assert isinstance(stm_clock, FrozenClock)
    assert isinstance(stm_memory, ShortTermMemory)
    assert isinstance(stm_assert, StmAssertions)
    assert stm_memory.now() == stm_clock()
    scope = stm_scope("plot")
    turn = stm_memory.begin_turn(scope, user_message="hi")
    stm_assert.tool_offered(turn)
    assert stm_memory.update(turn, {"summary": "The heist is on Friday."}) == {
        "status": "completed"
    }
    stm_assert.memory_contains(scope, "Friday")
    stm_clock.advance(hours=25)
    assert stm_memory.get(scope) is None
    opened.append(stm_memory)


def test_each_test_gets_a_fresh_memory_and_the_last_one_was_closed(stm_memory, stm_scope):
    assert opened and opened[0] is not stm_memory
    assert opened[0]._closed
    assert stm_memory.get(stm_scope("plot")) is None


@pytest.mark.stm_memory(summary_ttl=timedelta(hours=1), messages_kept=2)
def test_the_marker_passes_options(stm_memory, stm_scope, stm_clock):
    assert stm_memory.limits.messages_kept == 2
    scope = stm_scope()
    stm_memory.update(stm_memory.begin_turn(scope), {"summary": "short-lived"})
    stm_clock.advance(minutes=61)
    assert stm_memory.get(scope) is None


@pytest.mark.stm_memory(clock=None)
def test_the_marker_refuses_what_the_fixture_sets(stm_memory):
    pass


def test_a_failing_helper_explains_itself(stm_memory, stm_scope, stm_assert):
    stm_assert.memory_contains(stm_scope(), "Friday")
"""


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    points = importlib.metadata.entry_points(group="pytest11")
    assert [p.value for p in points if p.name == "stm_memory"] == ["stm_memory.testing.plugin"]


def test_fixtures_in_a_throwaway_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_project=USER_PROJECT)
    assert not list(pytester.path.rglob("conftest.py"))
    # A subprocess: only the installed package's entry point can provide the fixtures.
    result = pytester.runpytest_subprocess(*pytest_args("--strict-markers"))
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_the_marker_refuses_what_the_fixture_sets*",
            "*@pytest.mark.stm_memory: the fixture sets clock itself*",
            "*_ test_a_failing_helper_explains_itself _*",
            "E * AssertionError: expected the short-term memory of "
            "shortterm:server:test-server:general to contain 'Friday', but there is none: "
            "nothing was stored for this scope",
        ]
    )
    # __tracebackhide__: the failure points at the test, not into the helper.
    result.stdout.no_fnmatch_line("*stm_memory/testing/assertions.py*")


# -- the fixtures in this suite ------------------------------------------------------------


def test_stm_clock_is_frozen_and_advances(stm_clock: FrozenClock) -> None:
    start = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    assert stm_clock() == stm_clock() == start
    assert stm_clock.advance(hours=25) == start + timedelta(hours=25)
    assert stm_clock() == start + timedelta(hours=25)


def test_advancing_the_clock_past_24_hours_expires_a_summary(
    stm_memory: ShortTermMemory, stm_scope: MakeScope, stm_clock: FrozenClock
) -> None:
    scope = stm_scope("plot")
    turn = stm_memory.begin_turn(scope)
    assert stm_memory.update(turn, {"summary": "The heist is on Friday."}) == {
        "status": "completed"
    }
    stm_clock.advance(hours=23, minutes=59)
    assert_memory_contains(stm_memory, scope, "Friday")
    stm_clock.advance(hours=1)  # 24 h 59 min after the update
    assert stm_memory.get(scope) is None
    with pytest.raises(AssertionError, match="it expired"):
        assert_memory_contains(stm_memory, scope, "Friday")


def test_stm_memory_uses_the_clock_and_temporary_files(
    stm_memory: ShortTermMemory,
    stm_memory_factory: MemoryFactory,
    stm_clock: FrozenClock,
    tmp_path: object,
) -> None:
    assert stm_memory_factory.opened == [stm_memory]
    assert stm_memory.now() == stm_clock()
    stm_clock.advance(minutes=5)
    assert stm_memory.now() == stm_clock()
    assert (stm_memory_factory.directory / "stm.db").exists()
    assert (stm_memory_factory.directory / "stm-cache").is_dir()
    # The test's own tmp_path stays the user's.
    assert stm_memory_factory.directory != tmp_path


def test_the_factory_restarts_and_shares(
    stm_memory: ShortTermMemory,
    stm_memory_factory: MemoryFactory,
    stm_scope: MakeScope,
) -> None:
    scope = stm_scope()
    stm_memory.update(stm_memory.begin_turn(scope), {"summary": "Survives restarts."})
    restarted = stm_memory_factory()  # fresh cache: hydrates from SQL
    assert restarted._cache is not stm_memory._cache
    assert_memory_contains(restarted, scope, "Survives")
    worker = stm_memory_factory(fresh_cache=False)
    assert_memory_contains(worker, scope, "Survives")
    assert len(stm_memory_factory.opened) == 3
    with pytest.raises(TypeError, match="sets clock itself"):
        stm_memory_factory(clock=datetime.now)


def test_settings_changed_through_one_memory_reach_the_others_at_once(
    stm_memory: ShortTermMemory, stm_memory_factory: MemoryFactory, stm_scope: MakeScope
) -> None:
    worker = stm_memory_factory(fresh_cache=False)
    assert worker.server_settings("test-server").refresh_cadence == 5  # the default
    stm_memory.configure_server("test-server", refresh_cadence=2)
    assert worker.begin_turn(stm_scope()).settings.refresh_cadence == 2


def test_the_fixture_ignores_stm_environment_variables(
    stm_memory_factory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STM_SUMMARY_TTL_SECONDS", "60")
    monkeypatch.setenv("STM_MESSAGES_KEPT", "2")
    memory = stm_memory_factory()
    assert memory.limits.summary_ttl == timedelta(hours=24)
    assert memory.limits.messages_kept == 10
    assert stm_memory_factory(messages_kept=4).limits.messages_kept == 4


@pytest.mark.stm_memory(other_channels_shown=1, excluded_providers=("acme",))
def test_the_marker_configures_the_memory(stm_memory: ShortTermMemory) -> None:
    assert stm_memory.limits.other_channels_shown == 1
    assert stm_memory.excluded_providers == frozenset({"acme"})


def test_stm_scope_has_readable_defaults(stm_scope: MakeScope) -> None:
    assert stm_scope() == Scope(
        channel_id="general",
        user_id="alice",
        server_id="test-server",
        channel_name="general",
        user_name="Alice",
    )
    plot = stm_scope("plot", user_id="bob")
    assert (plot.channel_id, plot.channel_name, plot.user_name) == ("plot", "plot", "Bob")
    assert stm_scope(dm=True).server_id is None
    assert stm_scope(server_id=None).is_dm
    thread = stm_scope("t1", parent_channel_id="general", channel_name="Heist thread")
    assert (thread.parent_channel_id, thread.channel_name) == ("general", "Heist thread")
    with pytest.raises(TypeError, match="dm=True contradicts"):
        stm_scope(dm=True, server_id="g1")


def test_the_plugin_module_documents_every_fixture() -> None:
    from stm_memory.testing import plugin

    doc = textwrap.dedent(plugin.__doc__ or "")
    for name in ("stm_clock", "stm_memory", "stm_memory_factory", "stm_scope", "stm_assert"):
        assert f"``{name}``" in doc
