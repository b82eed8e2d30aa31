"""Recall as well as cost: an evaluation harness to run on your own model.

One conversation set with answers (:func:`generate_conversation`, seeded; or
:func:`load_locomo` for a file in the LoCoMo layout), one runner for every strategy
(:func:`run_eval`: ours through a provider loop and through ``create_agent`` with the
middleware, full history, whole-server history, LangChain ``SummarizationMiddleware``,
a window of the last N turns), each fed the same turns and asked the same probes with
the model you name, and one frozen :class:`EvalReport`: recall (overall, same channel,
cross-channel, corrected facts), tokens, cost as billed with the project's prompt-cache
model and as the API reported it, extra LLM calls, the details our memory kept beside
what the model wrote and their tokens; a table and a recall-vs-cost plot.

Offline, :func:`scripted` models of known quality stand in for a real one; a report of
such a run says it measures the harness, not a model. Command line: ``stm-memory eval``.
"""

from __future__ import annotations

from stm_memory.evaluation._conversation import (
    ConversationSet,
    Fact,
    Probe,
    Speaker,
    Utterance,
)
from stm_memory.evaluation._generator import generate_conversation
from stm_memory.evaluation._locomo import load_locomo
from stm_memory.evaluation._long_turn import (
    LONG_TURN_STRATEGIES,
    LongTurnOutcome,
    LongTurnReport,
    run_long_turn,
)
from stm_memory.evaluation._models import ScriptedSpec, resolve_model, scripted
from stm_memory.evaluation._plot import plot_recall_vs_cost
from stm_memory.evaluation._pricing import PRICES, Cost, Price, cache_profile_for, price_for
from stm_memory.evaluation._recording import RecordedRequest, RecordedTurn
from stm_memory.evaluation._report import (
    EvalReport,
    KeptDetails,
    ProbeResult,
    Recall,
    Score,
    StrategyResult,
)
from stm_memory.evaluation._runner import (
    BudgetExceeded,
    CostEstimate,
    Progress,
    estimate_cost,
    run_eval,
)
from stm_memory.evaluation._scoring import score_answer
from stm_memory.evaluation._scripted import (
    SCRIPTED_KINDS,
    ScriptedModel,
    dropped_facts,
    paraphrased,
)
from stm_memory.evaluation._strategies import DEFAULT_STRATEGIES, STRATEGIES, StrategyOptions

__all__ = [
    "DEFAULT_STRATEGIES",
    "LONG_TURN_STRATEGIES",
    "PRICES",
    "SCRIPTED_KINDS",
    "STRATEGIES",
    "BudgetExceeded",
    "ConversationSet",
    "Cost",
    "CostEstimate",
    "EvalReport",
    "Fact",
    "KeptDetails",
    "LongTurnOutcome",
    "LongTurnReport",
    "Price",
    "Probe",
    "ProbeResult",
    "Progress",
    "Recall",
    "RecordedRequest",
    "RecordedTurn",
    "Score",
    "ScriptedModel",
    "ScriptedSpec",
    "Speaker",
    "StrategyOptions",
    "StrategyResult",
    "Utterance",
    "cache_profile_for",
    "dropped_facts",
    "estimate_cost",
    "generate_conversation",
    "load_locomo",
    "paraphrased",
    "plot_recall_vs_cost",
    "price_for",
    "resolve_model",
    "run_eval",
    "run_long_turn",
    "score_answer",
    "scripted",
]
