"""The published integration contract (:mod:`stm_memory.testing.contract.integration`) on
every entry point stm-memory ships, sync and async: the provider loops, the
``create_agent`` middleware, the LCEL history, the Agents SDK session, the classic
buffer and the core API by hand (:func:`~stm_memory.testing.contract.shipped_drivers`).

A step an entry point fails on is listed in ``KNOWN_BUGS`` (strict xfail: the entry
fails the day the bug is fixed, so the list cannot go stale)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stm_memory.engine import ShortTermMemory
from stm_memory.testing.clock import FrozenClock
from stm_memory.testing.contract import (
    IntegrationContract,
    IntegrationDriver,
    ScriptedModel,
    shipped_drivers,
)
from stm_memory.testing.contract.integration import (
    ALICE,
    ALICE_1,
    ALICE_2,
    ALICE_3,
    ALICE_AT_MARKET,
    ALICE_MARKET,
    BOB,
    BOB_1,
    BOB_2,
    BOB_AT_MARKET,
    BOB_MARKET,
    CADENCE,
    SERVER,
    SUMMARY,
    Dialogue,
    SentRequest,
    _first_difference,
    hermetic_memory,
)

pytest_plugins = ["pytester"]

SHIPPED = shipped_drivers()

#: (driver id, test name) → why it fails today.
KNOWN_BUGS: dict[tuple[str, str], str] = {}


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
    # its caller places the memory itself: the fallback step skips; no turn decides
    # what it shows: the three steps of the hold skip; it runs no tool loop: the long
    # turn skips.
    result.assert_outcomes(passed=steps - 6, skipped=6)


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


# -- one wire: every OpenAI-style entry point sends what the Chat Completions loop sends --

#: The OpenAI-style entry points (their requests are OpenAI Chat or Responses bodies).
OPENAI_STYLE = (
    "chat-loop-async",
    "responses-loop",
    "responses-loop-async",
    "middleware",
    "middleware-async",
    "lcel-history",
    "lcel-history-async",
    "agents-session",
)


def _wire(name: str, tmp_path: Path, **options: str) -> list[list[SentRequest]]:
    """What the model received in each lobby turn of one dialogue of two channels (a
    refresh, a briefing that changes, the clock moving), through ``name``."""
    memory = hermetic_memory(tmp_path / name)
    memory.configure_server(SERVER, refresh_cadence=CADENCE)
    model = ScriptedModel()
    clock = memory._clock  # the suite's FrozenClock
    assert isinstance(clock, FrozenClock)
    turns: list[list[SentRequest]] = []
    with asyncio.Runner() as runner:
        talk = Dialogue(SHIPPED[name](memory, model, **options), memory, model, runner)
        try:
            for who, text, script in (
                (ALICE_MARKET, ALICE_AT_MARKET, None),
                (ALICE, ALICE_1, None),
                (BOB_MARKET, BOB_AT_MARKET, None),  # the market's briefing changes
                (BOB, BOB_1, None),
                (ALICE, ALICE_2, {"summary": SUMMARY}),  # at the cadence: a rewrite
                (BOB, BOB_2, None),
                (ALICE, ALICE_3, None),
            ):
                sent = talk.say(who, text, script=script, quiet=script is not None).sent
                if who.channel_id == ALICE.channel_id:
                    turns.append([_without_call_messages(r) for r in sent])
                clock.advance(minutes=20)
        finally:
            talk.close()
            memory.close()
    return turns


def _without_call_messages(request: SentRequest) -> SentRequest:
    # Chat carries a reply's tool calls in an assistant message without text; Responses
    # in call items, which carry no text: the one format difference, left out.
    kept = tuple(m for m in request.messages if m != ("assistant", ""))
    return SentRequest(kept, request.tools)


def _assert_same_wire(
    name: str, got: list[list[SentRequest]], expected: list[list[SentRequest]]
) -> None:
    assert [len(t) for t in got] == [len(t) for t in expected], name
    for turn, (theirs, ours) in enumerate(zip(got, expected, strict=True)):
        for step, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            assert a == b, f"{name}, lobby turn {turn}, step {step}:\n{_first_difference(b, a)}"


@pytest.mark.parametrize("name", OPENAI_STYLE)
def test_every_openai_style_entry_point_sends_the_chat_loops_requests(
    name: str, tmp_path: Path
) -> None:
    expected = _wire("chat-loop", tmp_path)
    assert len(expected) == 5 and len(expected[2]) == 2  # the refresh turn took two steps
    _assert_same_wire(name, _wire(name, tmp_path), expected)


@pytest.mark.parametrize("name", [n for n in OPENAI_STYLE if n != "agents-session"])
def test_in_the_portable_form_too(name: str, tmp_path: Path) -> None:
    # (The Agents session joins the memory to the first user message: the SDK sends
    # the agent's instructions itself, so its first message differs by design.)
    expected = _wire("chat-loop", tmp_path, memory_role="inline")
    _assert_same_wire(name, _wire(name, tmp_path, memory_role="inline"), expected)
