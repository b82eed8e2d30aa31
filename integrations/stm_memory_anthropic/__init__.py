"""Short-term memory for Anthropic Messages API tool loops.

    import anthropic
    from stm_memory import ShortTermMemory, Scope
    from stm_memory_anthropic import AnthropicLoop

    memory = ShortTermMemory.from_url("sqlite:///stm.db")
    loop = AnthropicLoop(anthropic.Anthropic(), memory, model="claude-sonnet-4-6")
    result = loop.run_turn(Scope(channel_id="c1", user_id="u1", server_id="g1"),
                           [{"role": "user", "content": "hi"}], system="You are helpful.")
    result.text, result.messages, result.stm_updated

Each loop is a thin adapter over :func:`stm_memory.kit.run_turn_steps`: ``_messages``
shapes requests and tool results, ``_wire`` reads the SDK's replies, ``_loop`` holds
the settings. Needs the optional extra: ``pip install "stm-memory[anthropic]"``.
"""

from __future__ import annotations

from stm_memory.kit import TurnResult

from ._loop import AnthropicLoop, AsyncAnthropicLoop
from ._messages import AnthropicMessagesAdapter
from ._wire import parse_message

__all__ = [
    "AnthropicLoop",
    "AnthropicMessagesAdapter",
    "AsyncAnthropicLoop",
    "TurnResult",
    "parse_message",
]
