"""Case 11 — middleware overhead.

What ``ShortTermMemoryMiddleware`` adds to one ``invoke`` of a
``langchain.agents.create_agent`` agent, against the floor any middleware doing our job
stands on: what the framework charges for a middleware of our shape, plus the durable
work a turn needs.

- **Ours**: the time of one invoke of ``create_agent(model, middleware=[ours])`` minus
  the time of one invoke of the same ``create_agent(model)`` without it — same offline
  chat model, same system prompt, same new user message. The model answers in plain
  text (it never calls a tool), so every invoke is one model call; the memory scope
  comes from ``config["configurable"]`` (``thread_id`` → channel, ``user_id``,
  ``server_id``) as the docs show, and each invoke gets only the new user message
  (no checkpointer). Four channels of one server take turns, each warm (a summary and
  the last 10 captured messages, which capture keeps at that size), on the embedded
  default (SQLite file + diskcache directory).
- **Floor** = **no-op** + **raw durable work**:

  - *no-op*: the same agent with a middleware of our middleware's shape that does
    nothing — the same four hooks and one tool — minus the bare agent: what LangChain
    and LangGraph alone charge for such a middleware (graph nodes, the tool bound on
    every model call), which no middleware of that shape can go below;
  - *raw durable work*: one raw ``diskcache.Cache.set`` (a transaction of its own) of a
    value the size of the channel's live entry (that entry as a dict), then one raw
    sqlite3 (WAL/NORMAL) transaction upserting its row.

``middleware_overhead_vs_floor`` is ``(with − bare) / (no-op − bare + raw)``, target
≤ 2.0 (aim 1.5). ``middleware_beyond_noop_vs_floor`` (information) is the earlier
``(with − no-op) / raw``: our own code against the durable work alone.
``middleware_overhead_vs_turn_floor`` (information) takes for the raw durable work what
a captured turn writes by the SPEC (§5: a scope's two keys): per key a raw ``set`` and
its recency-index upsert, then one transaction upserting both rows — the update
benchmark's floor (``update_vs_floor``), which the key above counts one half of.

Per round the five sides (with, bare, no-op, raw, the turn's raw) run in an order that
rotates, and turns round every other cycle, so slow drift hits every side alike; the
agents run ``inner`` invokes each, the raw side ``FLOOR_OPS × inner`` writes (a write is
~20× shorter than an invoke; the turn's raw side, about twice as long, half as many).
Every ratio is the median of its per-round ratios.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, ConfigDict

from stm_memory import Scope, ShortTermMemory
from stm_memory.live.indexes import owner_index, score
from stm_memory.testing.chat_model import OfflineChatModel

from ._fixtures import (
    UPSERT_PLAIN,
    RawFloor,
    dialogue,
    open_memory,
    row_params,
    sentence,
    summary_text,
)
from ._harness import Bench, CaseResult, Config, Metric, timed

NAME = "middleware"

SERVER = "g-guild"
USER = "u-ann"
CHANNELS = ("c-general", "c-plans", "c-random", "c-lore")
#: Floor writes per round for each invoke of the agent sides.
FLOOR_OPS = 8
SYSTEM = "You are the crew's planning assistant on this server. Answer briefly."

Turn = tuple[dict[str, Any], dict[str, Any]]


class PlainChatModel(OfflineChatModel):
    """The offline chat model answering in plain text: the tools bound to it are not
    shown to the offline model, so it never calls one (one model call per invoke). It
    keeps no record of its prompts (the benchmark runs thousands of invokes) and reports
    no usage (its prompt-cache simulation would be timed as the middleware's)."""

    report_usage: bool = False

    def _reply(self, messages: list[BaseMessage], tools: Sequence[Any]) -> AIMessage:
        message = super()._reply(messages, ())
        self.prompts.clear()
        self.tools_seen.clear()
        return message


def scope_of(channel: str) -> Scope:
    return Scope(channel_id=channel, user_id=USER, server_id=SERVER)


def config_of(channel: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": channel, "user_id": USER, "server_id": SERVER}}


def populate(mem: ShortTermMemory, rng: random.Random) -> None:
    """Every channel as it is mid-conversation: captured dialogue and a summary."""
    for channel in CHANNELS:
        scope = scope_of(channel)
        mem.capture(scope, dialogue(rng, 5))
        result = mem.update(mem.begin_turn(scope), {"summary": summary_text(rng, 500)})
        assert result["status"] == "completed", result


def turns(rng: random.Random, n: int, start: int) -> list[Turn]:
    """``n`` invocations (input, config), the channels in rotation from ``start``."""
    out: list[Turn] = []
    for i in range(start, start + n):
        text = sentence(rng, 20)
        out.append(
            (
                {"messages": [{"role": "user", "content": text}]},
                config_of(CHANNELS[i % len(CHANNELS)]),
            )
        )
    return out


@dataclass(frozen=True)
class Overhead:
    """Medians over rounds, in ns per operation (an invoke, or one floor write)."""

    ratio: float
    added_ns: float
    #: The key's floor: no-op added + raw durable work.
    floor_ns: float
    #: The raw durable work alone (one diskcache set + one sqlite3 transaction).
    raw_ns: float
    bare_ns: float
    with_ns: float
    noop_added_ns: float
    beyond_noop_ratio: float
    ratios: tuple[float, ...]
    #: The ratio and raw work against the turn's own durable work (both keys).
    turn_ratio: float
    turn_raw_ns: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio_median": self.ratio,
            "added_us_median": self.added_ns / 1000,
            "floor_us_median": self.floor_ns / 1000,
            "raw_floor_us_median": self.raw_ns / 1000,
            "bare_us_median": self.bare_ns / 1000,
            "with_middleware_us_median": self.with_ns / 1000,
            "noop_middleware_added_us_median": self.noop_added_ns / 1000,
            "beyond_noop_vs_floor_median": self.beyond_noop_ratio,
            "vs_turn_floor_median": self.turn_ratio,
            "turn_raw_floor_us_median": self.turn_raw_ns / 1000,
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "rounds": len(self.ratios),
        }


def orders(sides: int, rounds: int) -> list[list[int]]:
    """The order of the sides in each round: every rotation, forwards then backwards,
    so each side runs in each position (and after each other side) equally often."""
    out: list[list[int]] = []
    for i in range(rounds):
        shift = i % sides
        order = [(shift + j) % sides for j in range(sides)]
        out.append(order[::-1] if (i // sides) % 2 else order)
    return out


def measure(sides: Sequence[tuple[Bench, int]], *, warmup: int, repeats: int) -> list[list[float]]:
    """``compare`` of ``_harness`` for more than two sides: warm-ups, one full collection
    and ``gc.freeze()``, then ``repeats`` rounds in which every side runs its number of
    operations (in the order of :func:`orders`); ns per operation, per side per round."""
    for bench, _ in sides:
        bench(warmup)
    gc.collect()
    gc.freeze()
    per_op: list[list[float]] = [[] for _ in sides]
    try:
        for order in orders(len(sides), repeats):
            for index in order:
                bench, ops = sides[index]
                per_op[index].append(bench(ops) / ops)
    finally:
        gc.unfreeze()
    return per_op


def overhead(per_op: Sequence[Sequence[float]]) -> Overhead:
    """Medians of the per-round values of (with, bare, no-op, raw, turn raw) timings.

    The key's floor is per round ``(no-op − bare) + raw``: the framework's charge for a
    middleware of our shape, measured in the same round, plus the durable work."""
    withs, bares, noops, raws, turn_raws = per_op
    rounds = list(zip(withs, bares, noops, raws, strict=True))
    floors = [n - b + r for _, b, n, r in rounds]
    ratios = [(w - b) / f for (w, b, _, _), f in zip(rounds, floors, strict=True)]
    turn_ratios = [(w - b) / (n - b + t) for (w, b, n, _), t in zip(rounds, turn_raws, strict=True)]
    return Overhead(
        ratio=statistics.median(ratios),
        added_ns=statistics.median(w - b for w, b, _, _ in rounds),
        floor_ns=statistics.median(floors),
        raw_ns=statistics.median(raws),
        bare_ns=statistics.median(bares),
        with_ns=statistics.median(withs),
        noop_added_ns=statistics.median(n - b for _, b, n, _ in rounds),
        beyond_noop_ratio=statistics.median((w - n) / r for w, _, n, r in rounds),
        ratios=tuple(ratios),
        turn_ratio=statistics.median(turn_ratios),
        turn_raw_ns=statistics.median(turn_raws),
    )


def _noop(**_: Any) -> str:
    return "{}"


class _AnyArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


def noop_middleware() -> Any:
    """A middleware of our middleware's shape that does nothing: the same four hooks
    (``before_agent``, ``before_model`` with a jump to the end, ``wrap_model_call``,
    ``after_agent``) and one tool. What LangChain and LangGraph charge for that shape."""
    from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
    from langchain_core.tools import StructuredTool

    class NoopMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
        def __init__(self) -> None:
            self.tools = [
                StructuredTool.from_function(
                    func=_noop,
                    name="noop_tool",
                    description="Does nothing (benchmark).",
                    args_schema=_AnyArguments,
                )
            ]

        def before_agent(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
            return None

        @hook_config(can_jump_to=["end"])
        def before_model(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
            return None

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return handler(request)

        def after_agent(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
            return None

    return NoopMiddleware()


@dataclass(frozen=True)
class Agents:
    """The same agent with our middleware, bare, and with the no-op middleware, on one
    offline model."""

    with_mw: Any
    bare: Any
    noop: Any
    chat: PlainChatModel


def build_agents(mem: ShortTermMemory) -> Agents:
    from langchain.agents import create_agent

    from stm_memory_langchain import ShortTermMemoryMiddleware

    chat = PlainChatModel()
    ours = ShortTermMemoryMiddleware(mem)
    return Agents(
        with_mw=create_agent(chat, tools=[], system_prompt=SYSTEM, middleware=[ours]),
        bare=create_agent(chat, tools=[], system_prompt=SYSTEM),
        noop=create_agent(chat, tools=[], system_prompt=SYSTEM, middleware=[noop_middleware()]),
        chat=chat,
    )


def check_agents(mem: ShortTermMemory, agents: Agents) -> None:
    """One turn each way: one model call, a text answer; ours captured the turn."""
    scope = scope_of(CHANNELS[0])
    before = mem.get(scope)
    assert before is not None
    chat = agents.chat
    for agent in (agents.with_mw, agents.bare, agents.noop):
        calls = chat.model.calls
        state = agent.invoke(
            {"messages": [{"role": "user", "content": "Who drives the van?"}]},
            config_of(CHANNELS[0]),
        )
        assert chat.model.calls == calls + 1, "one model call per invoke"
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and last.content and not last.tool_calls, last
    after = mem.get(scope)
    assert after is not None and after.messages[-2].content == "Who drives the van?", after
    assert after.turns_since_refresh == before.turns_since_refresh + 1, after


def run(cfg: Config) -> CaseResult:
    rng = random.Random(11)
    root = cfg.workdir / NAME
    floor = RawFloor(root / "floor")
    try:
        with open_memory(root) as mem:
            populate(mem, rng)
            agents = build_agents(mem)
            check_agents(mem, agents)

            # The floor writes what a turn leaves durable: the live entry and its row.
            entry = mem.get(scope_of(CHANNELS[0]))
            assert entry is not None
            value = entry.to_dict()
            values = [(entry.key, value)]
            rows = [(UPSERT_PLAIN, row_params(entry))]
            ttl = mem._live.native_ttl(entry)
            floor.write_pair(values, rows, ttl)  # the row exists: upserts take the update path
            # What a captured turn writes (SPEC §5): both keys of the scope, each with its
            # recency-index member, and both rows.
            scope = scope_of(CHANNELS[0])
            both = mem._live.get_many(list(scope.keys))
            turn_values = [(k, both[k].to_dict()) for k in scope.keys]
            turn_rows = [(UPSERT_PLAIN, row_params(both[k])) for k in scope.keys]
            turn_ranks = [(owner_index(k), k, score(both[k])) for k in scope.keys]
            floor.write_pair(turn_values, turn_rows, ttl, turn_ranks)
            made = [0]  # turns made so far: the channels keep their rotation

            def invoking(agent: Any) -> Bench:
                def bench(n: int) -> int:
                    batch = turns(rng, n, made[0])  # built outside the timed loop
                    made[0] += n
                    return timed(lambda t: agent.invoke(t[0], t[1]), batch)

                return bench

            def raw(n: int) -> int:
                return timed(lambda _: floor.write_pair(values, rows, ttl), range(n))

            def turn_raw(n: int) -> int:
                return timed(
                    lambda _: floor.write_pair(turn_values, turn_rows, ttl, turn_ranks), range(n)
                )

            inner = cfg.pick(40, 12)
            per_op = measure(
                [
                    (invoking(agents.with_mw), inner),
                    (invoking(agents.bare), inner),
                    (invoking(agents.noop), inner),
                    # A floor write is ~20x shorter than an invoke: more of them per round
                    # keep its timed window as long as the others'.
                    (raw, inner * FLOOR_OPS),
                    (turn_raw, inner * FLOOR_OPS // 2),
                ],
                warmup=cfg.pick(40, 12),
                repeats=cfg.pick(24, 8),
            )
            result = overhead(per_op)
            final = mem.get(scope_of(CHANNELS[0]))
    finally:
        floor.close()
    assert final is not None
    return CaseResult(
        NAME,
        [
            # Target 2.0, aim 1.5: what the middleware adds to an invoke, over what an
            # empty middleware of its shape adds plus the durable work of a turn.
            Metric("middleware_overhead_vs_floor", result.ratio, "<=", 2.0, note="aim 1.5"),
            Metric("middleware_added_us", result.added_ns / 1000, unit="µs"),
            Metric("middleware_floor_us", result.floor_ns / 1000, unit="µs"),
            Metric("middleware_raw_floor_us", result.raw_ns / 1000, unit="µs"),
            Metric("agent_invoke_us", result.bare_ns / 1000, unit="µs"),
            Metric("middleware_noop_added_us", result.noop_added_ns / 1000, unit="µs"),
            Metric("middleware_beyond_noop_vs_floor", result.beyond_noop_ratio),
            Metric("middleware_overhead_vs_turn_floor", result.turn_ratio),
            Metric("middleware_turn_raw_floor_us", result.turn_raw_ns / 1000, unit="µs"),
        ],
        {
            "middleware": result.to_dict(),
            "channels": len(CHANNELS),
            "entry_json_chars": len(json.dumps(value, default=str)),
            "entry_messages_at_end": len(final.messages),
            "floor_writes_per_invoke": FLOOR_OPS,
        },
    )
