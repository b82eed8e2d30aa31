"""The published integration contract (:mod:`stm_memory.testing.contract.integration`) on
every entry point stm-memory ships, sync and async: the provider loops, the
``create_agent`` middleware, the LCEL history, the Agents SDK session, the classic
buffer and the core API by hand (:func:`~stm_memory.testing.contract.shipped_drivers`).

A step an entry point fails on is listed in ``KNOWN_BUGS`` (strict xfail: the entry
fails the day the bug is fixed, so the list cannot go stale)."""

from __future__ import annotations

import pytest

from stm_memory.engine import ShortTermMemory
from stm_memory.testing.contract import (
    IntegrationContract,
    IntegrationDriver,
    ScriptedModel,
    shipped_drivers,
)

pytest_plugins = ["pytester"]

SHIPPED = shipped_drivers()

#: (driver id, test name) → why it fails today.
KNOWN_BUGS: dict[tuple[str, str], str] = {
    ("agents-session", "test_an_excluded_providers_memory_call_fails"): (
        "session.agent() hides the memory tool with is_enabled while a guard is on, so a "
        "memory call the model makes anyway never reaches the engine: the SDK raises "
        "ModelBehaviorError('Tool update_short_term_memory not found') and the run fails, "
        "where every other entry point answers the call with the guard's failed result"
    ),
}


def _driver(
    request: pytest.FixtureRequest, memory: ShortTermMemory, model: ScriptedModel, **options: str
) -> IntegrationDriver:
    """The shipped driver ``request.param``, its known bug (if any) marked."""
    reason = KNOWN_BUGS.get((request.param, request.function.__name__))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    return SHIPPED[request.param](memory, model, **options)


class TestShippedEntryPoints(IntegrationContract):
    @pytest.fixture(params=list(SHIPPED))
    def entry_point(
        self, request: pytest.FixtureRequest, memory: ShortTermMemory, offline_model: ScriptedModel
    ) -> IntegrationDriver:
        return _driver(request, memory, offline_model)


#: The entry points that write the portable form (memory_role="inline", for open models'
#: chat templates): the whole dialogue again, the prefix rules included.
PORTABLE = ("chat-loop", "responses-loop", "middleware", "lcel-history", "agents-session")


class TestThePortableForm(IntegrationContract):
    @pytest.fixture(params=PORTABLE)
    def entry_point(
        self, request: pytest.FixtureRequest, memory: ShortTermMemory, offline_model: ScriptedModel
    ) -> IntegrationDriver:
        return _driver(request, memory, offline_model, memory_role="inline")


# -- the suite as a third party binds it ----------------------------------------------------

# The inner runs need no cache, and no asyncio plugin: the suite runs its own event loop.
INNER_ARGS = ("-p", "no:cacheprovider", "-p", "no:asyncio")

THIRD_PARTY = """
import pytest
from stm_memory.testing.contract import IntegrationContract, shipped_drivers


class TestTheirEntryPoint(IntegrationContract):
    @pytest.fixture
    def entry_point(self, memory, offline_model):
        return shipped_drivers()["core-async"](memory, offline_model)
"""


def test_a_third_party_module_runs_the_whole_dialogue(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_their_entry_point=THIRD_PARTY)
    result = pytester.runpytest(*INNER_ARGS)
    steps = sum(1 for name in dir(IntegrationContract) if name.startswith("test_"))
    # The core API calls the model once a turn: the within-a-turn prefix step skips;
    # its caller places the memory itself: the fallback step skips.
    result.assert_outcomes(passed=steps - 2, skipped=2)


def test_a_subclass_without_the_fixture_is_told_what_to_add(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_incomplete="""
        from stm_memory.testing.contract import IntegrationContract

        class TestIncomplete(IntegrationContract):
            pass
        """
    )
    result = pytester.runpytest(*INNER_ARGS, "-k", "cadence")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*TestIncomplete must define an entry_point fixture*"])
