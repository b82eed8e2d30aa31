"""ShortTermMemoryBuffer (classic ``BaseMemory``) in chain flows with a fake LLM (offline)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.chains import LLMChain
from langchain_classic.memory import CombinedMemory, ConversationBufferWindowMemory
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage
from langchain_core.prompts import PromptTemplate
from pydantic import Field

from stm_memory import ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory_langchain import ShortTermMemoryBuffer

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", user_name="Ann")
OTHER = Scope(channel_id="c2", user_id="u1", server_id="g1", channel_name="planning")


class RecordingLLM(FakeListLLM):
    prompts: list[str] = Field(default_factory=list)

    def _call(self, prompt: str, stop: Any = None, run_manager: Any = None, **kw: Any) -> str:
        self.prompts.append(prompt)
        return super()._call(prompt, stop=stop, run_manager=run_manager, **kw)

    async def _acall(
        self, prompt: str, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> str:
        self.prompts.append(prompt)
        return await super()._acall(prompt, stop=stop, run_manager=run_manager, **kw)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache")
    yield memory
    memory.close()


def summarize(mem: ShortTermMemory, scope: Scope, summary: str) -> None:
    """What an agent with the memory tool would have done in that channel."""
    turn = mem.begin_turn(scope)
    assert mem.update(turn, {"summary": summary}) == {"status": "completed"}
    mem.end_turn(turn)


def chain_for(mem: ShortTermMemory, llm: RecordingLLM, **kw: Any) -> LLMChain:
    prompt = PromptTemplate.from_template("{stm_memory}\nHuman: {input}\nAI:")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LLMChain is deprecated in langchain-classic
        return LLMChain(llm=llm, prompt=prompt, memory=ShortTermMemoryBuffer(memory=mem, **kw))


def test_chain_sees_memory_and_saves_the_exchange(mem: ShortTermMemory) -> None:
    summarize(mem, SCOPE, "We planned a heist for Friday.")
    summarize(mem, OTHER, "Ann bought rope.")
    llm = RecordingLLM(responses=["See you Friday.", "Rope, yes."])
    chain = chain_for(mem, llm, scope=SCOPE)

    out = chain.invoke({"input": "Is it still on?"})
    assert out["text"] == "See you Friday."
    assert out["stm_memory"].startswith("[Short-term memory]")
    assert "We planned a heist for Friday." in llm.prompts[0]
    assert "Ann bought rope." in llm.prompts[0]  # another channel of the same server
    assert "call update_short_term_memory" not in llm.prompts[0]  # no nudge: no tools

    entry = mem.get(SCOPE)
    assert entry is not None
    assert [(m.role, m.content, m.name) for m in entry.messages] == [
        ("user", "Is it still on?", "Ann"),
        ("assistant", "See you Friday.", None),
    ]
    assert entry.turns_since_refresh == 1

    chain.invoke({"input": "What did Ann buy?"})
    entry = mem.get(SCOPE)
    assert entry is not None
    assert [m.content for m in entry.messages] == [
        "Is it still on?",
        "See you Friday.",
        "What did Ann buy?",
        "Rope, yes.",
    ]
    assert entry.turns_since_refresh == 2
    assert entry.summary == "We planned a heist for Friday."


async def test_async_chain(mem: ShortTermMemory) -> None:
    summarize(mem, SCOPE, "Tea, not coffee.")
    llm = RecordingLLM(responses=["Tea it is."])
    out = await chain_for(mem, llm, scope=SCOPE).ainvoke({"input": "Drink?"})
    assert out["text"] == "Tea it is."
    assert "Tea, not coffee." in llm.prompts[0]
    entry = await mem.aget(SCOPE)
    assert entry is not None
    assert entry.turns_since_refresh == 1


def test_empty_memory_gives_empty_text(mem: ShortTermMemory) -> None:
    buffer = ShortTermMemoryBuffer(memory=mem, scope=SCOPE, memory_key="history")
    assert buffer.memory_variables == ["history"]
    assert buffer.load_memory_variables({"input": "hi"}) == {"history": ""}


def test_combined_with_a_window_memory(mem: ShortTermMemory) -> None:
    summarize(mem, SCOPE, "Planning a picnic.")
    llm = RecordingLLM(responses=["Sunday.", "Sandwiches."])
    prompt = PromptTemplate.from_template("{stm_memory}\n{history}\nHuman: {input}\nAI:")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the classic memories are deprecated
        window = ConversationBufferWindowMemory(k=2, memory_key="history", input_key="input")
        stm = ShortTermMemoryBuffer(memory=mem, scope=SCOPE, input_key="input")
        chain = LLMChain(llm=llm, prompt=prompt, memory=CombinedMemory(memories=[window, stm]))
    chain.invoke({"input": "When?"})
    chain.invoke({"input": "Food?"})
    assert "Planning a picnic." in llm.prompts[1]
    assert "Human: When?\nAI: Sunday." in llm.prompts[1]
    assert mem.get(SCOPE).turns_since_refresh == 2  # type: ignore[union-attr]


def test_save_without_load_still_counts_a_turn(mem: ShortTermMemory) -> None:
    buffer = ShortTermMemoryBuffer(memory=mem, scope=SCOPE)
    buffer.save_context({"input": "hi"}, {"text": "hello"})
    entry = mem.get(SCOPE)
    assert entry is not None
    assert entry.turns_since_refresh == 1


def test_load_without_save_is_counted_on_the_next_load(mem: ShortTermMemory) -> None:
    buffer = ShortTermMemoryBuffer(memory=mem, scope=SCOPE)
    buffer.load_memory_variables({"input": "hi"})  # the chain failed after this
    buffer.load_memory_variables({"input": "hi again"})
    buffer.save_context({"input": "hi again"}, {"text": "hello"})
    assert mem.get(SCOPE).turns_since_refresh == 2  # type: ignore[union-attr]


def test_output_and_input_keys(mem: ShortTermMemory) -> None:
    buffer = ShortTermMemoryBuffer(memory=mem, scope=SCOPE, output_key="answer")
    buffer.load_memory_variables({"question": "why?"})
    buffer.save_context({"question": "why?"}, {"answer": AIMessage("because"), "extra": 1})
    entry = mem.get(SCOPE)
    assert entry is not None
    assert [m.content for m in entry.messages] == ["why?", "because"]
    with pytest.raises(ValidationError, match="input_key"):
        buffer.load_memory_variables({"a": "1", "b": "2"})
    with pytest.raises(ValidationError, match="output_key"):
        ShortTermMemoryBuffer(memory=mem, scope=SCOPE).save_context(
            {"input": "x"}, {"a": "1", "b": "2"}
        )


def test_a_later_speakers_save_keeps_earlier_speakers_words_theirs(mem: ShortTermMemory) -> None:
    # Two people in one channel, each with a buffer on their own scope. Bob's save
    # captures the stored messages again in front of his exchange: Alice's words must
    # stay hers, or they would outlive her erasure as Bob's.
    alice = Scope(channel_id="c1", user_id="alice", server_id="g1", user_name="Alice")
    bob = Scope(channel_id="c1", user_id="bob", server_id="g1", user_name="Bob")
    ShortTermMemoryBuffer(memory=mem, scope=alice).save_context(
        {"input": "My flat is at 12 Elm Street."}, {"text": "Noted."}
    )
    ShortTermMemoryBuffer(memory=mem, scope=bob).save_context(
        {"input": "What's the plan for Friday?"}, {"text": "Picnic."}
    )
    stored = mem.get(bob)
    assert stored is not None
    assert [(m.content, m.user_id) for m in stored.messages if m.role == "user"] == [
        ("My flat is at 12 Elm Street.", "alice"),
        ("What's the plan for Friday?", "bob"),
    ]

    mem.clear_user("alice")
    after = mem.get(bob)
    assert after is not None
    assert all("Elm Street" not in m.content for m in after.messages)
    assert [m.content for m in after.messages if m.role == "user"] == [
        "What's the plan for Friday?"
    ]


def test_clear_forgets_the_channel(mem: ShortTermMemory) -> None:
    summarize(mem, SCOPE, "Something.")
    buffer = ShortTermMemoryBuffer(memory=mem, scope=SCOPE)
    buffer.clear()
    assert mem.get(SCOPE) is None
    assert buffer.load_memory_variables({"input": "hi"}) == {"stm_memory": ""}


def test_validates_its_fields(mem: ShortTermMemory) -> None:
    with pytest.raises(ValueError):
        ShortTermMemoryBuffer(memory=object(), scope=SCOPE)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ShortTermMemoryBuffer(memory=mem, scope="c1")  # type: ignore[arg-type]
    # The options every entry point shares are checked alike, as ConfigurationError.
    with pytest.raises(ConfigurationError, match="provider"):
        ShortTermMemoryBuffer(memory=mem, scope=SCOPE, provider="  ")
