"""``ShortTermMemorySession.session_settings`` as the Agents SDK's own sessions have it
(``SQLiteSession`` is the reference, asserted side by side): never ``None``, a dict
converted, an unknown key a ``TypeError`` at construction, the limit applied to a read
that names none — and, with a wrapped record that has settings of its own, one answer
to which wins (ours over the record's, as a ``RunConfig``'s over a session's)."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, TResponseInputItem
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message

from stm_memory import Scope, ShortTermMemory
from stm_memory_openai_agents import ShortTermMemorySession

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
RUN_CONFIG = RunConfig(tracing_disabled=True)

ITEMS: list[TResponseInputItem] = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "two"},
    {"role": "user", "content": "three"},
    {"role": "assistant", "content": "four"},
]


def text(item: Any) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, list):  # an output message: its text parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def texts(items: list[Any]) -> list[str]:
    return [text(i) for i in items]


def test_the_default_is_session_settings_never_none(stm_memory: ShortTermMemory) -> None:
    ours = ShortTermMemorySession(stm_memory, SCOPE)
    theirs = SQLiteSession("s")
    assert isinstance(ours.session_settings, SessionSettings)
    assert ours.session_settings == theirs.session_settings == SessionSettings()
    assert ours.session_settings.limit is None  # user code reads it


@pytest.mark.parametrize("given", [{"limit": 0}, {"limit": 3}, SessionSettings(limit=3)])
def test_a_dict_is_converted_as_the_sdk_converts_it(
    stm_memory: ShortTermMemory, given: Any
) -> None:
    ours = ShortTermMemorySession(stm_memory, SCOPE, session_settings=given)
    theirs = SQLiteSession("s", session_settings=given)
    assert isinstance(ours.session_settings, SessionSettings)
    assert ours.session_settings == theirs.session_settings


@pytest.mark.parametrize("given", [{"limitt": 1}, {"limit": 1, "other": 2}, 5])
def test_a_bad_setting_is_a_type_error_at_construction(
    stm_memory: ShortTermMemory, given: Any
) -> None:
    with pytest.raises(TypeError) as theirs:
        SQLiteSession("s", session_settings=given)
    with pytest.raises(TypeError) as ours:
        ShortTermMemorySession(stm_memory, SCOPE, session_settings=given)
    assert str(ours.value) == str(theirs.value)  # the SDK's own message, naming the key


async def test_get_items_without_a_limit_applies_the_settings(
    stm_memory: ShortTermMemory,
) -> None:
    ours = ShortTermMemorySession(stm_memory, SCOPE, session_settings={"limit": 2})
    theirs = SQLiteSession("s", session_settings={"limit": 2})
    await ours.add_items(list(ITEMS))
    await theirs.add_items(list(ITEMS))
    assert texts(await ours.get_items()) == texts(await theirs.get_items()) == ["three", "four"]
    # An explicit limit still wins over the settings, as on the SDK's sessions.
    assert texts(await ours.get_items(3)) == texts(await theirs.get_items(3))
    assert texts(await ours.get_items(3)) == ["two", "three", "four"]


@pytest.mark.parametrize("limit", [0, 1])
async def test_runner_run_with_dict_settings(stm_memory: ShortTermMemory, limit: int) -> None:
    session = ShortTermMemorySession(stm_memory, SCOPE, session_settings={"limit": limit})
    model = ScriptedModel([[assistant_message("First.")], [assistant_message("Second.")]])
    agent = session.agent(Agent(name="test", model=model))
    await Runner.run(agent, "Hello", session=session, run_config=RUN_CONFIG)
    result = await Runner.run(agent, "Again", session=session, run_config=RUN_CONFIG)

    assert result.final_output == "Second."
    said = texts(model.calls[-1].input)
    # The record read before the cut holds `limit` items, then the new input.
    assert said[-1] == "Again"
    earlier = [t for t in said[:-1] if t in ("Hello", "First.")]
    assert len(earlier) == limit
    # The whole exchange is recorded, whatever the read limit.
    assert texts(await session.get_items(100))[-2:] == ["Again", "Second."]


async def test_run_config_settings_overlay_ours(stm_memory: ShortTermMemory) -> None:
    session = ShortTermMemorySession(stm_memory, SCOPE, session_settings={"limit": 0})
    await session.add_items(list(ITEMS))
    model = ScriptedModel([[assistant_message("Done.")]])
    agent = session.agent(Agent(name="test", model=model))
    run_config = RunConfig(tracing_disabled=True, session_settings={"limit": 2})
    await Runner.run(agent, "five", session=session, run_config=run_config)
    said = texts(model.calls[-1].input)
    assert [t for t in said if t in texts(ITEMS)] == ["three", "four"]


async def test_ours_win_over_the_wrapped_sessions_settings(
    stm_memory: ShortTermMemory,
) -> None:
    record = SQLiteSession("r", session_settings=SessionSettings(limit=1))
    session = ShortTermMemorySession(
        stm_memory, SCOPE, session=record, session_settings={"limit": 3}
    )
    await session.add_items(list(ITEMS))
    assert session.session_settings.limit == 3
    assert texts(await session.get_items()) == ["two", "three", "four"]
    # The record keeps its own settings for its own callers.
    assert texts(await record.get_items()) == ["four"]


async def test_the_wrapped_sessions_settings_apply_where_ours_leave_them_unset(
    stm_memory: ShortTermMemory,
) -> None:
    record = SQLiteSession("r", session_settings=SessionSettings(limit=2))
    adopted = ShortTermMemorySession(stm_memory, SCOPE, session=record)
    unset = ShortTermMemorySession(
        stm_memory, SCOPE, session=record, session_settings=SessionSettings(limit=None)
    )
    await record.add_items(list(ITEMS))
    for session in (adopted, unset):
        # What a Runner reads from the session is what applies: no silent second limit.
        assert session.session_settings.limit == 2
        assert texts(await session.get_items()) == ["three", "four"]
