"""Drive ``create_agent`` + ``ShortTermMemoryMiddleware`` + ``InMemorySaver`` over one
thread, recording every message list the chat model was sent (a callback sees the
request after every middleware has changed it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import ShortTermMemory
from stm_memory_langchain import ShortTermMemoryMiddleware

__all__ = ["AgentThread", "RecordPrompts"]


class RecordPrompts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self.prompts.extend(list(m) for m in messages)


@dataclass
class AgentThread:
    """One checkpointed thread of an agent with the memory middleware."""

    model: BaseChatModel
    memory: ShortTermMemory
    thread_id: str = "c1"
    system_prompt: str | None = None
    middleware_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.recorder = RecordPrompts()
        self.agent = create_agent(
            self.model,
            tools=[],
            system_prompt=self.system_prompt,
            middleware=[ShortTermMemoryMiddleware(self.memory, **self.middleware_options)],
            checkpointer=InMemorySaver(),
        )
        self.config: Any = {
            "configurable": {"thread_id": self.thread_id, "user_id": "u1", "server_id": "g1"},
            "callbacks": [self.recorder],
        }

    def say(self, text: str) -> list[list[BaseMessage]]:
        """One user turn; returns the prompts the model was sent in it."""
        before = len(self.recorder.prompts)
        self.agent.invoke({"messages": [{"role": "user", "content": text}]}, self.config)
        return self.recorder.prompts[before:]

    def state_messages(self) -> list[BaseMessage]:
        return list(self.agent.get_state(self.config).values["messages"])

    def run(self, turns: int, text: Callable[[int], str]) -> list[list[list[BaseMessage]]]:
        return [self.say(text(i)) for i in range(turns)]


def check_long_thread(thread: AgentThread, *, turns: int, max_turns_sent: int) -> None:
    """Run ``turns`` turns on ``thread`` and assert the history promise: every model
    request is valid, carries no earlier memory call and at most ``max_turns_sent``
    turns, while the checkpoint keeps every message (only the request is cut)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors
    from stm_memory import TOOL_NAME

    def text(i: int) -> str:
        return f"Turn {i}: the heroine meets character {i} at the harbour and they argue."

    prompts_per_turn = thread.run(turns, text)
    for i, prompts in enumerate(prompts_per_turn):
        for prompt in prompts:
            assert validity_errors("langchain", prompt) == [], i
            assert earlier_memory_calls(prompt) == 0, i
            assert turn_count(prompt) <= max_turns_sent, i
    state = thread.state_messages()
    # The checkpoint holds every user message and every memory call the model made
    # (nothing deleted with RemoveMessage, as SummarizationMiddleware does).
    humans = [m.content for m in state if isinstance(m, HumanMessage)]
    assert humans == [text(i) for i in range(turns)]
    memory_calls = [
        c for m in state if isinstance(m, AIMessage) for c in m.tool_calls if c["name"] == TOOL_NAME
    ]
    assert len(memory_calls) >= turns // 6
    last = prompts_per_turn[-1][0]
    assert count_tokens_approximately(last) < count_tokens_approximately(state) / 3
