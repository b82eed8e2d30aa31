"""Case 5 — token growth over a deterministic 200-turn conversation in 3 channels.

One user talks to the bot in three channels of one server, turn ``i`` in channel
``i % 3``; user messages and the bot's answers are generated from a fixed seed, so
every approach sees exactly the same dialogue. Three ways to build each turn's prompt:

- **ours**: ``stm_memory_openai.OpenAIChatLoop`` over the offline OpenAI client
  (``stm_memory.testing.clients.offline_openai_client``): a real tool loop on the real
  SDK whose offline model answers and calls ``update_short_term_memory`` when nudged.
  The caller sends the system prompt, only the last 6 raw messages of the channel and
  the new user message; the loop adds our memory (content + nudge) and the tool.
  Counted: every request the loop sent in the turn, messages **and** tool schemas.
- **LangChain ``SummarizationMiddleware``** inside ``create_agent`` (one
  ``InMemorySaver`` thread per channel), ``trigger=("tokens", 4000)``,
  ``keep=("messages", 20)``, with a fake summarizer that counts its calls. Counted:
  the prompts the agent's model received (the summarizer's own prompts are reported
  apart, as ``..._incl_summarizer``).
- **full history**: the system prompt and the channel's whole dialogue.

One tokenizer for all: ``langchain_core.messages.utils.count_tokens_approximately``.
Extra LLM calls are model calls beyond one per turn (ours) and summarizer calls (the
middleware). The plot of prompt tokens per turn goes to ``results/tokens.png``.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from stm_memory import Scope

from ._fixtures import open_memory, sentence
from ._harness import CaseResult, Config, Metric

NAME = "tokens"
SYSTEM = "You are Mira, a friendly assistant in the Heist Club server. Answer helpfully."
CHANNELS = ("c-plans", "c-lore", "c-random")
RAW_SENT = 6
USER_WORDS = (20, 40)
ANSWER_WORDS = (60, 110)


def user_messages(turns: int) -> list[str]:
    rng = random.Random(5)
    return [sentence(rng, rng.randint(*USER_WORDS)) for _ in range(turns)]


def answer_for(user_text: str) -> str:
    """The bot's deterministic answer to a user message (the same for every approach)."""
    seed = int.from_bytes(hashlib.sha256(user_text.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    parts = [sentence(rng, rng.randint(10, 20)) for _ in range(3)]
    words = " ".join(parts).split()[: rng.randint(*ANSWER_WORDS)]
    return " ".join(words).rstrip(".") + "."


@dataclass
class Series:
    """Prompt tokens per turn (and per-turn extras) for one approach."""

    per_turn: list[int] = field(default_factory=list)
    extra: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.per_turn)


# -- ours ----------------------------------------------------------------------------


def breakdown(request: dict[str, Any]) -> dict[str, int]:
    """Where the tokens of one of our requests go."""
    parts = {"system_prompt": 0, "dialogue": 0, "memory_content": 0, "nudge": 0, "tools": 0}
    for m in request["messages"]:
        n = count_tokens_approximately([m])
        content = str(m.get("content") or "")
        if m["role"] == "system" and content == SYSTEM:
            parts["system_prompt"] += n
        elif m["role"] == "system" and content.startswith("[Short-term memory]"):
            parts["memory_content"] += n
        elif m["role"] == "system":
            parts["nudge"] += n
        else:
            parts["dialogue"] += n
    parts["tools"] = count_tokens_approximately([], tools=request.get("tools"))
    return parts


def run_ours(root: Path, texts: Sequence[str], *, render_mode: str | None = None) -> dict[str, Any]:
    from stm_memory.testing.clients import offline_openai_client
    from stm_memory.testing.clock import FrozenClock
    from stm_memory.testing.offline import OfflineModel
    from stm_memory_openai import OpenAIChatLoop

    clock = FrozenClock()
    model = OfflineModel(answers=answer_for)
    client = offline_openai_client(model)
    series = Series()
    updates = 0
    last_request: dict[str, Any] = {}
    histories: dict[str, list[dict[str, Any]]] = {c: [] for c in CHANNELS}
    with open_memory(root, clock=clock) as mem:
        if render_mode is not None:
            mem.configure_server("g-heist", render_mode=render_mode)
        loop = OpenAIChatLoop(client, mem, model="offline")
        for i, text in enumerate(texts):
            channel = CHANNELS[i % len(CHANNELS)]
            scope = Scope(
                channel_id=channel,
                user_id="u-ann",
                server_id="g-heist",
                channel_name=channel.removeprefix("c-"),
                server_name="Heist Club",
                user_name="Ann",
            )
            history = histories[channel]
            sent = [*history[-RAW_SENT:], {"role": "user", "content": text}]
            calls_before = model.calls
            result = loop.run_turn(scope, sent, system=SYSTEM)
            series.per_turn.append(
                sum(
                    count_tokens_approximately(r["messages"], tools=r.get("tools"))
                    for r in result.requests
                )
            )
            series.extra.append(model.calls - calls_before - 1)
            last_request = result.requests[0]
            updates += int(result.stm_updated)
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": result.text},
            ]
            clock.advance(minutes=3)
    client.close()
    return {
        "series": series,
        "updates": updates,
        "model_calls": model.calls,
        "last_turn_breakdown": breakdown(last_request),
    }


# -- LangChain SummarizationMiddleware -------------------------------------------------


def _summarizer_class() -> type[Any]:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field

    class CountingSummarizer(BaseChatModel):
        """A fake summarizer: a deterministic summary, every call and prompt recorded."""

        prompts: list[list[BaseMessage]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "counting-summarizer"

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
        ) -> ChatResult:
            self.prompts.append(list(messages))
            text = "\n".join(str(m.content) for m in messages)
            points = [line.split(". ")[0][:90] for line in text.splitlines() if line.strip()]
            summary = "Summary of the conversation so far: " + " | ".join(points[-6:])
            message = AIMessage(content=summary[:1500])
            return ChatResult(generations=[ChatGeneration(message=message)])

    return CountingSummarizer


def run_summarization(texts: Sequence[str]) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    from stm_memory.testing.chat_model import OfflineChatModel
    from stm_memory.testing.offline import OfflineModel

    chat = OfflineChatModel(model=OfflineModel(answers=answer_for))
    summarizer = _summarizer_class()()
    agent: Any = create_agent(
        model=chat,
        tools=[],
        system_prompt=SYSTEM,
        middleware=[
            SummarizationMiddleware(
                model=summarizer, trigger=("tokens", 4000), keep=("messages", 20)
            )
        ],
        checkpointer=InMemorySaver(),
    )
    series = Series()
    with_summarizer = Series()
    for i, text in enumerate(texts):
        channel = CHANNELS[i % len(CHANNELS)]
        prompts_before = len(chat.prompts)
        summaries_before = len(summarizer.prompts)
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": channel}})
        main = sum(count_tokens_approximately(p) for p in chat.prompts[prompts_before:])
        side = sum(count_tokens_approximately(p) for p in summarizer.prompts[summaries_before:])
        series.per_turn.append(main)
        series.extra.append(len(summarizer.prompts) - summaries_before)
        with_summarizer.per_turn.append(main + side)
    return {
        "series": series,
        "with_summarizer": with_summarizer,
        "model_calls": len(chat.prompts),
        "summarizer_calls": len(summarizer.prompts),
    }


# -- full history ----------------------------------------------------------------------


def run_full(texts: Sequence[str]) -> Series:
    series = Series()
    histories: dict[str, list[dict[str, Any]]] = {c: [] for c in CHANNELS}
    for i, text in enumerate(texts):
        history = histories[CHANNELS[i % len(CHANNELS)]]
        history.append({"role": "user", "content": text})
        prompt = [{"role": "system", "content": SYSTEM}, *history]
        series.per_turn.append(count_tokens_approximately(prompt))
        history.append({"role": "assistant", "content": answer_for(text)})
    return series


# -- plot ------------------------------------------------------------------------------


def plot(path: Path, lines: dict[str, Series], marks: Sequence[int], turns: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    x = list(range(1, turns + 1))
    styles: dict[str, dict[str, Any]] = {
        "full history": {"color": "#999999", "linewidth": 1.4},
        "SummarizationMiddleware": {"color": "#d9822b", "linewidth": 1.4},
        "stm-memory (ours)": {"color": "#2b6cb0", "linewidth": 2.0},
    }
    for label, series in lines.items():
        ax.plot(x, series.per_turn, label=label, **styles.get(label, {}))
    for j, turn in enumerate(marks):
        ax.axvline(
            turn,
            color="#d9822b",
            alpha=0.25,
            linewidth=0.8,
            label="summarizer call (extra LLM call)" if j == 0 else None,
        )
    ax.set_xlabel("turn (3 channels, round-robin)")
    ax.set_ylabel("prompt tokens (count_tokens_approximately)")
    ax.set_title(f"Prompt tokens per turn over a {turns}-turn conversation")
    ax.set_xlim(1, turns)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def run(cfg: Config) -> CaseResult:
    turns = cfg.pick(200, 60)
    texts = user_messages(turns)
    root = cfg.workdir / NAME
    ours = run_ours(root / "ours", texts)
    supersede = run_ours(root / "supersede", texts, render_mode="supersede")
    mw = run_summarization(texts)
    full = run_full(texts)
    ours_s: Series = ours["series"]
    mw_s: Series = mw["series"]
    mw_all: Series = mw["with_summarizer"]
    sup_s: Series = supersede["series"]
    marks = [i + 1 for i, n in enumerate(mw_s.extra) if n]
    plot(
        cfg.png_path,
        {"full history": full, "SummarizationMiddleware": mw_s, "stm-memory (ours)": ours_s},
        marks,
        turns,
    )
    last: Callable[[Series], int] = lambda s: s.per_turn[-1]  # noqa: E731
    t = f"turn{turns}"
    return CaseResult(
        NAME,
        [
            Metric(f"tokens_{t}_ours_vs_full", last(ours_s) / last(full), "<=", 0.1),
            Metric("tokens_total_ours_vs_summarization_mw", ours_s.total / mw_s.total, "<=", 0.6),
            Metric("extra_llm_calls_ours", sum(ours_s.extra), "==", 0),
            Metric("extra_llm_calls_summarization_mw", sum(mw_s.extra)),
            Metric(
                "tokens_total_ours_vs_summarization_mw_incl_summarizer",
                ours_s.total / mw_all.total,
            ),
            Metric(f"tokens_{t}_ours_supersede_vs_full", last(sup_s) / last(full)),
            Metric("tokens_total_ours_supersede_vs_summarization_mw", sup_s.total / mw_s.total),
            Metric(f"tokens_{t}_ours", last(ours_s), unit="tokens"),
            Metric(f"tokens_{t}_summarization_mw", last(mw_s), unit="tokens"),
            Metric(f"tokens_{t}_full", last(full), unit="tokens"),
            Metric("stm_updates_ours", ours["updates"]),
        ],
        {
            "turns": turns,
            "channels": list(CHANNELS),
            "raw_messages_sent_by_caller": RAW_SENT,
            "totals": {
                "ours": ours_s.total,
                "ours_supersede": sup_s.total,
                "summarization_mw": mw_s.total,
                "summarization_mw_incl_summarizer": mw_all.total,
                "full": full.total,
            },
            "model_calls": {"ours": ours["model_calls"], "summarization_mw": mw["model_calls"]},
            "summarizer_calls_at_turns": marks,
            "ours_last_turn_breakdown": ours["last_turn_breakdown"],
            "ours_supersede_last_turn_breakdown": supersede["last_turn_breakdown"],
            "per_turn": {
                "ours": ours_s.per_turn,
                "ours_supersede": sup_s.per_turn,
                "summarization_mw": mw_s.per_turn,
                "full": full.per_turn,
            },
            "plot": str(cfg.png_path.name),
        },
    )
