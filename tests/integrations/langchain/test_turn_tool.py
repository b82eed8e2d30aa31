"""The LangChain tool of a memory turn (``stm_memory_langchain._tool``), built in the
LangChain integration (the kit's turn imports no framework): one object per turn, its
schema the turn's, and run directly it runs the turn's one memory call."""

from __future__ import annotations

import json

from stm_memory import TOOL_NAME, MemoryTurn, Scope, ShortTermMemory, TurnOptions
from stm_memory.kit import drive
from stm_memory_langchain._tool import KEY, turn_tool

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


def begin(mem: ShortTermMemory, said: str = "what next?") -> MemoryTurn:
    turn = drive(MemoryTurn.begin(mem, SCOPE, options=TurnOptions(), user_message=said))
    drive(turn.assemble())
    return turn


def test_the_tool_is_the_turns_and_runs_its_memory_call(stm_memory: ShortTermMemory) -> None:
    turn = begin(stm_memory)
    tool = turn_tool(turn, turn.status.offer)
    assert tool is not None and tool is turn_tool(turn, "offer")  # one object per turn, kept
    assert turn.kept[KEY] is tool  # with the turn (no registry to outlive it)
    assert tool.name == TOOL_NAME and tool.description == turn.tool_spec().description
    assert tool.args_schema == {"title": TOOL_NAME, **turn.tool_spec().parameters}
    assert json.loads(tool.invoke({"summary": "We planned the heist."})) == {"status": "completed"}
    again = json.loads(tool.invoke({"summary": "Twice."}))  # one update per turn
    assert again["status"] == "tool_execution_failed"
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "We planned the heist."


def test_a_guard_hides_it_and_a_call_made_anyway_gets_the_guards_answer(
    stm_memory: ShortTermMemory,
) -> None:
    turn = begin(stm_memory, "please remember that I like tea")  # long-term intent
    assert turn_tool(turn, turn.status.offer) is None
    hidden = turn_tool(turn, "describe")
    assert hidden is not None
    result = json.loads(hidden.invoke({"summary": "tea"}))
    assert result["status"] == "tool_execution_failed"
    assert stm_memory.get(SCOPE) is None or not stm_memory.get(SCOPE).summary  # type: ignore[union-attr]
