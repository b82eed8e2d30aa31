"""One conversation set and the scripted runs over it, computed once for this folder
(the runs are the slow part: every strategy, every turn)."""

from __future__ import annotations

import pytest

from stm_memory.evaluation import ConversationSet, EvalReport, generate_conversation, run_eval

SEED = 7
#: Enough for every channel's memory to be rewritten several times and for facts to
#: age past the window, small enough for the folder to stay fast.
TURNS = 64


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
def toolless(conversation: ConversationSet) -> EvalReport:
    return run_eval("scripted:toolless", conversation=conversation, strategies=["stm-loop"])
