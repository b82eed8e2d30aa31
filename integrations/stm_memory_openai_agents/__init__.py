"""Short-term memory for the OpenAI Agents SDK (``pip install "stm-memory[openai-agents]"``).

    from agents import Agent, Runner
    from stm_memory import ShortTermMemory, Scope
    from stm_memory_openai_agents import ShortTermMemorySession

    mem = ShortTermMemory.from_url("sqlite:///stm.db")
    # No server_id: an end user's own conversation (a server_id shares memory across
    # every channel of that server, other users' included).
    session = ShortTermMemorySession(mem, Scope(channel_id="c1", user_id="u1"),
                                     db_path="conversations.db")
    agent = session.agent(Agent(name="Mira", instructions="You are a co-writer."))
    result = await Runner.run(agent, "Let's plan chapter two.", session=session)

:class:`ShortTermMemorySession` implements the SDK's ``Session`` protocol over a wrapped
session that keeps the full record (default ``SQLiteSession``); each run is sent the
memory block and only the items the memory does not cover, and the model writes the
memory with ``session.memory_tool()`` during the run.

Use ``session.agent(agent)``: with it a reply that answers *and* calls the memory tool
ends the run there, so writing the memory costs no extra model call. A plain
``Agent(tools=[session.memory_tool()])`` works too, but the SDK calls the model once
more after every tool call, the memory call included. One run at a time per session
(:class:`SessionBusyError` otherwise).
"""

from __future__ import annotations

from ._session import SessionBusyError, ShortTermMemorySession

__all__ = ["SessionBusyError", "ShortTermMemorySession"]
