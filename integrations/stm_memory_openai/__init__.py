"""OpenAI tool loops with short-term memory: Chat Completions and Responses, sync and async.

    from openai import OpenAI
    from stm_memory import ShortTermMemory, Scope
    from stm_memory_openai import OpenAIChatLoop

    loop = OpenAIChatLoop(OpenAI(), ShortTermMemory.from_url("sqlite:///stm.db"), model="gpt-4.1")
    result = loop.run_turn(Scope(channel_id="c1", user_id="u1", server_id="g1"),
                           [{"role": "user", "content": "hi"}], system="You are helpful.")
    result.text, result.messages, result.stm_updated

Each loop is a thin adapter over :func:`stm_memory.kit.run_turn_steps`: it only shapes
requests, parses replies and formats tool results for its API. Needs the optional
extra: ``pip install "stm-memory[openai]"``.
"""

from __future__ import annotations

from stm_memory.kit import TurnResult, Usage

from ._chat import AsyncOpenAIChatLoop, OpenAIChatLoop
from ._responses import AsyncOpenAIResponsesLoop, OpenAIResponsesLoop

__all__ = [
    "AsyncOpenAIChatLoop",
    "AsyncOpenAIResponsesLoop",
    "OpenAIChatLoop",
    "OpenAIResponsesLoop",
    "TurnResult",
    "Usage",
]
