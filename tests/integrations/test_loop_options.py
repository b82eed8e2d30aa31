"""Loop and middleware options: ``trim_history`` (on by default, one keyword turns it
off for callers that keep their own window; the safety cap warns once per turn),
``memory_role``, and speaker ids that never reach the provider. In-process offline
clients (no cassettes: nothing here is provider traffic)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.agents import AgentThread
from helpers.dialogues import turn_count

from stm_memory import ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory.testing import (
    FrozenClock,
    OfflineChatModel,
    offline_anthropic_client,
    offline_openai_client,
)
from stm_memory_anthropic import AnthropicLoop
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.integrations.conftest import at_counted_cadence


@pytest.fixture
def open_memory(open_memory: Callable[[], ShortTermMemory]) -> Callable[[], ShortTermMemory]:
    """The conftest's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return lambda: at_counted_cadence(open_memory())


SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
TURNS = 14


def loops(memory: ShortTermMemory, **kw: Any) -> dict[str, Any]:
    return {
        "chat": OpenAIChatLoop(offline_openai_client(), memory, model="m", **kw),
        "responses": OpenAIResponsesLoop(offline_openai_client(), memory, model="m", **kw),
        "anthropic": AnthropicLoop(offline_anthropic_client(), memory, model="m", **kw),
    }


def items_of(name: str, request: dict[str, Any]) -> list[Any]:
    return list(request["input"] if name == "responses" else request["messages"])


def converse(loop: Any, name: str, turns: int) -> list[int]:
    """Turns sent in each turn's first request, the whole history fed back. (An
    Anthropic request merges a user message into the tool results before it, so a
    turn after a memory call counts with the one before it there.)"""
    history: list[Any] = []
    sent = []
    for i in range(turns):
        message: dict[str, Any] = {"role": "user", "content": f"message {i}"}
        if name == "responses":
            message["type"] = "message"
        result = loop.run_turn(SCOPE, [*history, message])
        history = list(result.messages)
        sent.append(turn_count(items_of(name, result.requests[0])))
    return sent


@pytest.mark.parametrize("name", ["chat", "responses", "anthropic"])
def test_loops_trim_by_default_and_not_when_told(
    name: str, open_memory: Callable[[], ShortTermMemory]
) -> None:
    trimmed = converse(loops(open_memory())[name], name, TURNS)
    assert max(trimmed) <= 7 and trimmed[-1] < TURNS
    loop = loops(open_memory(), trim_history=False)[name]
    untrimmed = converse(loop, name, TURNS)
    assert untrimmed == sorted(untrimmed) and untrimmed[-1] >= TURNS - 3
    if name != "anthropic":
        assert untrimmed == list(range(1, TURNS + 1))


@pytest.mark.parametrize("trim", [True, False])
def test_the_middleware_trims_unless_told(
    trim: bool, open_memory: Callable[[], ShortTermMemory]
) -> None:
    thread = AgentThread(
        OfflineChatModel(), open_memory(), middleware_options={"trim_history": trim}
    )
    sent = [turn_count(prompts[0]) for prompts in thread.run(TURNS, lambda i: f"message {i}")]
    if trim:
        assert max(sent) <= 7
    else:
        assert sent == list(range(1, TURNS + 1))


def test_the_safety_cap_warns_once_per_turn(
    tmp_path: Path, stm_clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/cap.db", clock=stm_clock, max_raw_turns=4
    ) as memory:
        memory.configure_server("g1", refresh_cadence=1000)  # never nudged: no memory
        caplog.set_level(logging.WARNING, logger="stm_memory")
        sent = converse(loops(memory)["chat"], "chat", 8)
        warnings = [r for r in caplog.records if "history budget" in r.getMessage()]
        # Turns 5, 6 and 7 have more than 4 earlier turns; one warning each.
        assert len(warnings) == 3
        assert max(sent) <= 5
        # Two requests of one turn (the loops drop the nudge with replace()): one warning.
        caplog.clear()
        context = memory.build_context(memory.begin_turn(SCOPE))
        messages = [{"role": "user", "content": f"m{i}"} for i in range(0, 20, 2)]
        messages = [
            m
            for i, u in enumerate(messages)
            for m in (u, {"role": "assistant", "content": f"a{i}"})
        ]
        messages.append({"role": "user", "content": "now"})
        context.apply(messages)
        replace(context, nudge=None).apply(messages)
        assert len([r for r in caplog.records if "history budget" in r.getMessage()]) == 1


def last_request(loop: Any, name: str, clock: FrozenClock, turns: int = 8) -> dict[str, Any]:
    """The last request of a conversation whose last turn comes two hours later (the
    memory is no longer fresh: it goes to the top)."""
    history: list[Any] = []
    result = None
    for i in range(turns):
        if i == turns - 1:
            clock.advance(hours=2)
        message: dict[str, Any] = {"role": "user", "content": f"message {i}"}
        if name == "responses":
            message["type"] = "message"
        result = loop.run_turn(SCOPE, [*history, message], system="Be brief.")
        history = list(result.messages)
    assert result is not None
    return result.requests[0]


@pytest.mark.parametrize("name", ["chat", "responses", "anthropic"])
def test_memory_role_user_puts_the_block_in_user_turns(
    name: str, tmp_path: Path, stm_clock: FrozenClock
) -> None:
    from stm_memory.prompt.render import CONTENT_HEADER

    for role in ("system", "user"):
        with ShortTermMemory.from_url(f"sqlite:///{tmp_path}/{role}.db", clock=stm_clock) as memory:
            at_counted_cadence(memory)
            request = last_request(loops(memory, memory_role=role)[name], name, stm_clock)
        items = items_of(name, request)
        holders = [m for m in items if CONTENT_HEADER in str(m.get("content"))]
        in_system = CONTENT_HEADER in str(request.get("system", ""))
        if role == "user":
            assert not in_system and holders and all(m["role"] == "user" for m in holders)
        elif name == "anthropic":
            assert in_system and not holders  # the system parameter, after the caller's
        else:
            assert holders and all(m["role"] == "system" for m in holders)


@pytest.mark.parametrize(
    "make",
    [
        lambda memory: OpenAIChatLoop(offline_openai_client(), memory, model="m"),
        lambda memory: OpenAIResponsesLoop(offline_openai_client(), memory, model="m"),
        lambda memory: AnthropicLoop(offline_anthropic_client(), memory, model="m"),
    ],
    ids=["chat", "responses", "anthropic"],
)
@pytest.mark.parametrize("memory", ["not a memory", None, object()])
def test_a_loop_refuses_what_is_not_a_memory_when_built(
    make: Callable[[object], object], memory: object
) -> None:
    # Taken, it would fail only inside the first turn, after the model was called.
    with pytest.raises(ConfigurationError, match="ShortTermMemory"):
        make(memory)


@pytest.mark.parametrize("provider", ["", "  ", 3])
def test_a_loop_refuses_a_provider_that_is_not_a_name(
    provider: object, open_memory: Callable[[], ShortTermMemory]
) -> None:
    with pytest.raises(ConfigurationError, match="provider"):
        OpenAIChatLoop(offline_openai_client(), open_memory(), model="m", provider=provider)  # type: ignore[arg-type]


def test_memory_role_is_checked(open_memory: Callable[[], ShortTermMemory]) -> None:
    with pytest.raises(ConfigurationError, match="memory_role"):
        OpenAIChatLoop(offline_openai_client(), open_memory(), model="m", memory_role="developer")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["chat", "responses", "anthropic"])
def test_speaker_ids_are_stored_and_never_sent(
    name: str, open_memory: Callable[[], ShortTermMemory]
) -> None:
    memory = open_memory()
    message: dict[str, Any] = {"role": "user", "content": "hi", "user_id": "u-ann"}
    if name == "responses":
        message["type"] = "message"
    result = loops(memory)[name].run_turn(SCOPE, [message])
    assert "user_id" not in json.dumps(result.requests)
    entry = memory.get(SCOPE)
    assert entry is not None and entry.messages[0].user_id == "u-ann"


def test_langchain_messages_carry_the_speaker_in_additional_kwargs(
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    memory = open_memory()
    said = HumanMessage("hello", name="Sam", additional_kwargs={"user_id": "u-sam-2"})
    memory.capture(SCOPE, [said, HumanMessage("and me"), AIMessage("hi both")])
    entry = memory.get(SCOPE)
    assert entry is not None
    assert [(m.name, m.user_id) for m in entry.messages] == [
        ("Sam", "u-sam-2"),
        (None, SCOPE.user_id),  # no id: the turn's user
        (None, SCOPE.user_id),  # the reply: credited to the turn it answered
    ]


@pytest.mark.parametrize("name", ["chat", "responses", "anthropic"])
def test_a_scope_that_is_not_a_scope_is_refused_before_anything_is_sent(
    mem: ShortTermMemory, name: str
) -> None:
    # A missing scope is the caller's mistake: raised, typed, not a turn without memory.
    loop = loops(mem)[name]
    for wrong in (None, "c1"):
        with pytest.raises(ValidationError, match="scope must be a Scope"):
            loop.run_turn(wrong, "hi")
    assert mem.get(SCOPE) is None
