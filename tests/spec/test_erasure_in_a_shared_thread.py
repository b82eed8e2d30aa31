"""Erasure holds against the caller's own history (SPEC §5, §7, amended 2026-12-06).

A ``create_agent`` agent with a checkpointer, one channel's thread shared by two users
of a server, their messages naming no speaker (LangChain ``HumanMessage`` without
``name``): after ``clear_user``, the thread still holds her words. They are never
captured again (under anyone's id), never sent again, the replies of her turns go with
them, and what erasure keeps of them (marks) holds no text and survives a restart.
Every shipped driver runs the same rule in the integration contract
(``test_erasure_holds_against_the_callers_history``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from helpers.factory import MemFactory
from helpers.inspection import files_holding
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing.chat_model import OfflineChatModel
from stm_memory_langchain import ShortTermMemoryMiddleware

HERS = ("Zanzibarquill", "Plumtwizzle", "Quorxington")
LORE = [
    ("bob", "The Guild owns the mills."),
    ("alice", "Remember Zanzibarquill again."),
    ("bob", "Currency is ink-tokens."),
    ("alice", "My cat is Plumtwizzle."),
    ("bob", "The river is the Vey."),
    ("alice", "I live at Quorxington."),
]
BOB_LORE = Scope(channel_id="lore", user_id="bob", server_id="g1")
BOB_PLOT = Scope(channel_id="plot", user_id="bob", server_id="g1")


class RecordingModel(OfflineChatModel):
    """The offline chat model, keeping the text of every request it is sent."""

    sent: list[list[tuple[str, str]]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append([(m.type, str(m.content)) for m in messages])
        return super()._generate(messages, *args, **kwargs)


class Server:
    """One agent serving a server's channels, a checkpointer thread per channel."""

    def __init__(self, mem: ShortTermMemory) -> None:
        self.model = RecordingModel()
        self.agent = create_agent(
            self.model,
            middleware=[ShortTermMemoryMiddleware(mem)],
            checkpointer=InMemorySaver(),
        )

    def say(self, channel: str, user: str, text: str) -> list[list[tuple[str, str]]]:
        """One turn; the requests it sent."""
        before = len(self.model.sent)
        config = {"configurable": {"thread_id": channel, "user_id": user, "server_id": "g1"}}
        self.agent.invoke({"messages": [HumanMessage(text)]}, config)
        return self.model.sent[before:]


def hers_in(text: str) -> list[str]:
    return [w for w in HERS if w in text]


def shared_lore(mem: ShortTermMemory) -> Server:
    server = Server(mem)
    for user, text in LORE:
        server.say("lore", user, text)
    server.say("plot", "bob", "The plot starts in spring.")
    return server


def test_the_measured_scenario(make_mem: MemFactory) -> None:
    mem = make_mem()
    server = shared_lore(mem)
    entry = mem.get(BOB_LORE)
    assert entry is not None and hers_in(" ".join(m.content for m in entry.messages))

    mem.clear_user("alice")
    sent = [*server.say("lore", "bob", "What else?"), *server.say("plot", "bob", "Next scene?")]
    sent += server.say("lore", "bob", "And the bridges?")

    # Nothing of hers sent again, in either channel (briefings included).
    for request in sent:
        assert hers_in(" ".join(text for _, text in request)) == [], request
    # Nothing of hers stored again, under anyone's id; each stored reply is its
    # asker's, and bob's words are his.
    for scope in (BOB_LORE, BOB_PLOT):
        for key in scope.keys:
            held = mem.get_key(key)
            assert held is not None
            assert hers_in(" ".join(m.content for m in held.messages)) == []
            assert {m.user_id for m in held.messages} == {"bob"}
    lore = mem.get(BOB_LORE)
    assert lore is not None
    assert {"Currency is ink-tokens.", "What else?", "And the bridges?"} <= {
        m.content for m in lore.messages
    }
    # Not on disk either: what erasure keeps is a digest, not text.
    mem.flush()
    for word in HERS:
        assert files_holding(make_mem.tmp_path, word.encode()) == [], word


def test_the_requests_keep_bobs_turns_whole_and_in_order(make_mem: MemFactory) -> None:
    # Bob's turns before and after hers are sent as they were, each reply after its
    # question (no cache-driven cut: a model that never writes keeps every turn).
    mem = make_mem()
    server = shared_lore(mem)
    mem.clear_user("alice")
    (request, *_) = server.say("lore", "bob", "What else?")
    dialogue = [(kind, text) for kind, text in request if kind in ("human", "ai")]
    asked = [text for kind, text in dialogue if kind == "human"]
    assert asked[-1] == "What else?"
    assert hers_in(" ".join(asked)) == []
    # Questions and answers alternate: no reply of hers left without its question.
    assert [kind for kind, _ in dialogue] == ["human", "ai"] * (len(asked) - 1) + ["human"]


def test_the_marks_outlive_a_restart(make_mem: MemFactory) -> None:
    mem = make_mem()
    server = shared_lore(mem)
    mem.clear_user("alice")
    entry = mem.get(BOB_LORE)
    assert entry is not None and len(entry.forgotten) == 6  # her three turns, two each
    mem.close()
    # A new process on the same files, the live cache lost: the row carries the marks.
    again = make_mem()
    again.clear_channel("nothing")  # any write path: the store is opened and migrated
    for key in BOB_LORE.keys:
        again._live.evict([key])
    hydrated = again.get(BOB_LORE)
    assert hydrated is not None and hydrated.forgotten == entry.forgotten
    server.agent = create_agent(
        server.model,
        middleware=[ShortTermMemoryMiddleware(again)],
        checkpointer=server.agent.checkpointer,
    )
    for request in server.say("lore", "bob", "What else?"):
        assert hers_in(" ".join(text for _, text in request)) == [], request


def test_the_same_words_said_by_another_user_stay(make_mem: MemFactory) -> None:
    # Alice and bob both say "Yes." in the thread, in different turns: erasing her
    # takes hers, never his.
    mem = make_mem()
    server = Server(mem)
    for user, text in [
        ("alice", "Shall we meet at the mill?"),
        ("alice", "Yes."),
        ("bob", "Is the bridge open?"),
        ("bob", "Yes."),
    ]:
        server.say("lore", user, text)
    mem.clear_user("alice")
    (request, *_) = server.say("lore", "bob", "Good.")
    asked = [text for kind, text in request if kind == "human"]
    assert asked.count("Yes.") == 1 and "Is the bridge open?" in asked
    assert "Shall we meet at the mill?" not in asked
    entry = mem.get(BOB_LORE)
    assert entry is not None
    assert [m.content for m in entry.messages if m.role == "user"].count("Yes.") == 1


def test_clear_channel_takes_the_marks_with_it(make_mem: MemFactory) -> None:
    mem = make_mem()
    shared_lore(mem)
    mem.clear_user("alice")
    assert mem.get(BOB_LORE) is not None
    mem.clear_channel("lore")
    assert mem.get(BOB_LORE) is None
    rows = mem._store.load_many(list(BOB_LORE.keys))
    assert all(row.forgotten == frozenset() for row in rows.values())


def test_erasing_an_unknown_user_changes_nothing_and_says_so(
    make_mem: MemFactory, caplog: pytest.LogCaptureFixture
) -> None:
    mem = make_mem()
    shared_lore(mem)
    before = mem.get(BOB_LORE)
    with caplog.at_level(logging.INFO, logger="stm_memory"):
        assert mem.clear_user("alicee") == 0
    assert "nothing stored holds this user's words" in caplog.text
    after = mem.get(BOB_LORE)
    assert before is not None and after is not None
    assert after.messages == before.messages and after.forgotten == frozenset()
