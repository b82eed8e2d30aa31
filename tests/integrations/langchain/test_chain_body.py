"""``with_short_term_memory`` runs one body for ``invoke``, ``ainvoke``, ``stream`` and
``astream``: the same model calls, memory calls, record and turn ending in every mode,
a stream whose consumer stops early ending its turn as any failure does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.utils.function_calling import convert_to_openai_tool

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.testing.chat_model import stream_chunk
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
MODES = ["invoke", "ainvoke", "stream", "astream"]


class Scripted(GenericFakeChatModel):
    """Scripted replies that bind tools and stream with their tool calls intact."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        result = self._generate(messages, stop=stop, run_manager=run_manager, **kw)
        message = result.generations[0].message
        assert isinstance(message, AIMessage)
        yield stream_chunk(message, run_manager)


class Prompts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: UUID, **kw: Any
    ) -> None:
        self.sent += [list(m) for m in messages]


def memory_only() -> AIMessage:
    call = {"name": TOOL_NAME, "args": {"summary": "Heist: Friday."}, "id": "m1"}
    return AIMessage("", tool_calls=[call], id="r1")


async def run(runnable: Any, value: Any, config: Any, mode: str) -> AIMessage:
    if mode == "invoke":
        return runnable.invoke(value, config)  # type: ignore[no-any-return]
    if mode == "ainvoke":
        return await runnable.ainvoke(value, config)  # type: ignore[no-any-return]
    if mode == "stream":
        chunks = list(runnable.stream(value, config))
    else:
        chunks = [c async for c in runnable.astream(value, config)]
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return AIMessage(total.content, tool_calls=total.tool_calls)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache")
    yield memory
    memory.close()


@pytest.mark.parametrize("mode", MODES)
async def test_every_mode_runs_the_same_steps(mem: ShortTermMemory, mode: str) -> None:
    model = Scripted(messages=iter([memory_only(), AIMessage("Friday it is.", id="r2")]))
    chain = with_short_term_memory(model, mem, scope=SCOPE)
    prompts = Prompts()
    question = HumanMessage("The heist is on Friday.")

    output = await run(chain, [question], {"callbacks": [prompts]}, mode)

    assert output.text == "Friday it is." and output.tool_calls == []
    # Two model calls, the second extending the first with the call and its result.
    first, second = prompts.sent
    assert second[: len(first)] == first
    assert [m.type for m in second[len(first) :]] == ["ai", "tool"]
    assert second[len(first)].tool_calls[0]["name"] == TOOL_NAME
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Heist: Friday."
    assert entry.turns_since_refresh == 0  # the turn ended (and refreshed)
    assert [m.content for m in entry.messages] == [question.content, "Friday it is."]


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_a_stream_stopped_early_ends_its_turn(mem: ShortTermMemory, mode: str) -> None:
    history = ShortTermMemoryHistory(mem, SCOPE, raw=True)
    chain = with_short_term_memory(Scripted(messages=iter(["Hello", "Again"])))
    # What RunnableWithMessageHistory puts in the wrapper's config.
    config: Any = {"configurable": {"message_history": history}}
    for i, text in enumerate(["Hi.", "Hi again."]):
        await history.aget_messages()
        assert history.turn is not None
        if mode == "stream":
            stream = chain.stream([HumanMessage(text)], config)
            next(stream)
            stream.close()
        else:
            astream = chain.astream([HumanMessage(text)], config)
            await anext(astream)
            await astream.aclose()
        # Ended at once, counted, as a failed call is; the next input is a turn of its own.
        assert history.turn is None
        entry = mem.get(SCOPE)
        assert entry is not None and entry.turns_since_refresh == i + 1
