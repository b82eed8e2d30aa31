"""One conversation set and the scripted runs over it, computed once for this folder
(the runs are the slow part: every strategy, every turn)."""

from __future__ import annotations

import pytest

from stm_memory.evaluation import ConversationSet, EvalReport, generate_conversation, run_eval

SEED = 7
#: Enough for every channel's memory to be rewritten several times and for facts to
#: age past the window, small enough for the folder to stay fast.
TURNS = 64
#: Long enough for a model that never writes its memory to fall behind one that does:
#: other channels' facts then reach it only as raw turns, which a longer conversation
#: pushes out of what it is shown.
LONG_TURNS = 96


@pytest.fixture(scope="session")
def conversation() -> ConversationSet:
    return generate_conversation(seed=SEED, turns=TURNS)


@pytest.fixture(scope="session")
def perfect(conversation: ConversationSet) -> EvalReport:
    return run_eval("scripted:perfect", conversation=conversation)


@pytest.fixture(scope="session")
def forgetful(conversation: ConversationSet) -> EvalReport:
    return run_eval(
        "scripted:forgetful", conversation=conversation, strategies=["stm-loop", "summarization"]
    )


@pytest.fixture(scope="session")
def long_conversation() -> ConversationSet:
    return generate_conversation(seed=SEED, turns=LONG_TURNS)


@pytest.fixture(scope="session")
def long_perfect(long_conversation: ConversationSet) -> EvalReport:
    return run_eval("scripted:perfect", conversation=long_conversation, strategies=["stm-loop"])


@pytest.fixture(scope="session")
def toolless(long_conversation: ConversationSet) -> EvalReport:
    return run_eval("scripted:toolless", conversation=long_conversation, strategies=["stm-loop"])
