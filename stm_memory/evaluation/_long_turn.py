"""The long-turn scenario of ``stm-memory eval`` (``--scenario long-turn``).

One turn in which the model reads ``reads`` reports of about 900 tokens each through a
tool of the application's (together more than the model's ``window``) before it
answers, then one turn per question about a report's code (the code is on a report's
last line only: a placeholder or an index, which quote the first, never give it away).
Each strategy runs it with the same scripted model, which enforces the window as a
provider does (a longer request gets its 400):

- ``stm-loop``: ``OpenAIChatLoop`` with our memory, told the window, ``result.messages``
  fed back;
- ``stm-middleware``: ``create_agent`` + ``ShortTermMemoryMiddleware`` told the window,
  one checkpointer thread;
- ``full-history``: the same tool loop sending everything (no memory);
- ``clear-tool-uses``: ``create_agent`` + LangChain's ``ContextEditingMiddleware(
  ClearToolUsesEdit(trigger=60 % of the window, keep=3))``.

The model reads the reports in order (every call of the turn stays in its requests,
whatever clears a result, so it counts its reads). Its writer kind decides its memory
write at the end of the reading turn: ``perfect`` notes every code it read,
``forgetful`` only that it read the reports, ``toolless`` writes nothing. Asked for a
code, it answers from what it is sent, else calls ``read_tool_result`` with the call
id a placeholder or the index of results names for that report, else says it does not
know. Per strategy: whether the reading turn completed (no request refused), the largest
request as a share of the window, the questions answered, and the requests' bill as a
warm cache prices it (the project's prompt-cache model as OpenAI bills it, held between
turns: a repeated prefix from 1,024 tokens in 128-token steps at 0.1x of an uncached
token, the rest at 1x).
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stm_memory.prompt.clearing import RECALL_TOOL
from stm_memory.prompt.tokens import PER_MESSAGE_TOKENS, text_tokens
from stm_memory.testing.offline import OfflineModel, OfflineReply, named_call, user_words
from stm_memory.testing.prompt_cache import CACHE_PROFILES, PromptCache
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "LONG_TURN_KINDS",
    "LONG_TURN_STRATEGIES",
    "LongTurnOutcome",
    "LongTurnReport",
    "run_long_turn",
]

#: key → label, in report order.
LONG_TURN_STRATEGIES: Mapping[str, str] = {
    "stm-loop": "stm-memory, provider loop",
    "stm-middleware": "stm-memory, create_agent middleware",
    "full-history": "the tool loop sending everything",
    "clear-tool-uses": "LangChain ClearToolUsesEdit(keep=3)",
}
#: The writer kinds the scenario scripts.
LONG_TURN_KINDS = ("perfect", "forgetful", "toolless")
REPORT_TOOL = "read_report"
MODEL_NAME = "offline-reader"
SYSTEM = "You are a research assistant. Read what you are asked to, then answer."
#: How the requests are billed: OpenAI's prompt cache, held between the turns (warm).
WARM = CACHE_PROFILES["openai-gpt-5-24h"]


def _codes(reads: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice('BCDFGHJKLMNPRSTVWZ')}{rng.randrange(1000, 10000)}" for _ in range(reads)]


def _report(k: int, code: str) -> str:
    lines = [f"Report {k}: minutes of meeting {k} of the harbour committee."]
    lines += [
        f"Item {i} of meeting {k}: the committee heard the pilots on berth {i % 7} and "
        "deferred it to the next sitting."
        for i in range(36)
    ]
    return "\n".join([*lines, f"The code of report {k} is {code}."])


def _tokens(dialogue: Sequence[tuple[str, str]], tools: Mapping[str, Any]) -> int:
    texts = sum(text_tokens(t) + PER_MESSAGE_TOKENS for _, t in dialogue)
    return texts + text_tokens(json.dumps(tools, sort_keys=True))


@dataclass
class _Reader(OfflineModel):
    """The scenario's scripted model (see the module docstring)."""

    codes: Sequence[str] = ()
    kind: str = "perfect"
    window: int = 16_384
    #: Each request: its tokens and its bill (input-token units, a warm cache's); and
    #: those refused.
    sent: list[tuple[int, float]] = field(default_factory=list)
    refused: int = 0
    cache: PromptCache = field(default_factory=lambda: PromptCache(WARM))
    _read: set[int] = field(default_factory=set)

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        tools = dict(tools or {})
        self.calls += 1
        size = _tokens(dialogue, tools)
        body = {
            "model": MODEL_NAME,
            "messages": [{"role": role, "content": text} for role, text in dialogue],
            "tools": [{"type": "function", "function": {"name": n, "parameters": p}}
                      for n, p in tools.items()],
        }  # fmt: skip
        self.sent.append((size, self.cache.observe(body, api="openai_chat").cost(WARM)))
        if size > self.window:
            self.refused += 1
            raise ValueError(  # as OpenAI words it: the loops read it as the window's
                f"This model's maximum context length is {self.window} tokens. However, "
                f"your messages resulted in {size} tokens. Please reduce the length of the "
                "messages."
            )
        last_user, asked = user_words(dialogue)
        after = dialogue[last_user + 1 :]
        if wanted := re.search(r"Read reports 0 to (\d+)", asked):
            return self._reading(int(wanted.group(1)) + 1, after, tools)
        if wanted := re.search(r"code of report (\d+)", asked):
            return self._code(int(wanted.group(1)), dialogue, after, tools)
        return OfflineReply("Noted.")

    def _reading(
        self, count: int, after: Sequence[tuple[str, str]], tools: Mapping[str, Any]
    ) -> OfflineReply:
        seen = [t for role, t in after if role == "tool"]
        for text in seen:  # read whole in this request: its code is in sight
            for k, code in enumerate(self.codes):
                if f"The code of report {k} is {code}." in text:
                    self._read.add(k)
        # It reads in order, and every call of the turn stays in its requests (a cleared
        # result leaves its call): the next report is the count of its reads so far.
        wrote = any('"status"' in t for t in seen)
        todo = len([t for t in seen if '"status"' not in t])
        if todo < count:
            return OfflineReply("", ((REPORT_TOOL, {"n": todo}),))
        answer = f"Read {count} reports."
        if TOOL_NAME not in tools or self.kind == "toolless" or wrote:
            return OfflineReply(answer)
        if self.kind == "perfect":
            noted = "; ".join(f"report {k}: {self.codes[k]}" for k in sorted(self._read))
            summary = f"Read the harbour committee's reports 0 to {count - 1}. Codes: {noted}."
        else:
            summary = f"Read the harbour committee's reports 0 to {count - 1}."
        return OfflineReply(answer, ((TOOL_NAME, {"summary": summary[:1500]}),))

    def _code(
        self,
        k: int,
        dialogue: Sequence[tuple[str, str]],
        after: Sequence[tuple[str, str]],
        tools: Mapping[str, Any],
    ) -> OfflineReply:
        text = "\n".join(t for _, t in dialogue)
        code = self.codes[k] if 0 <= k < len(self.codes) else None
        if code is not None and (f"report {k}: {code}" in text or f"report {k} is {code}" in text):
            return OfflineReply(f"The code of report {k} is {code}.")
        named = named_call(text, f"Report {k}:", REPORT_TOOL)
        if RECALL_TOOL in tools and named and not any(r == "tool" for r, _ in after):
            return OfflineReply("", ((RECALL_TOOL, {"call_id": named}),))
        return OfflineReply(f"I do not know the code of report {k}.")


@dataclass(frozen=True, slots=True)
class LongTurnOutcome:
    """One strategy's run of the scenario (see the module docstring)."""

    key: str
    label: str
    completed: bool
    largest_share: float
    answered: int
    asked: int
    units: float
    requests: int
    refused: int

    @property
    def recall(self) -> float:
        return self.answered / self.asked if self.asked else 0.0


@dataclass(frozen=True, slots=True)
class LongTurnReport:
    """The scenario's run: its parameters and each strategy's outcome."""

    model: str
    seed: int
    reads: int
    window: int
    outcomes: tuple[LongTurnOutcome, ...]

    def cheapest_peer(self) -> LongTurnOutcome | None:
        """The cheapest strategy not ours whose reading turn completed."""
        peers = [o for o in self.outcomes if not o.key.startswith("stm-") and o.completed]
        return min(peers, key=lambda o: o.units, default=None)


def _report_tool(codes: Sequence[str]) -> Callable[[Mapping[str, Any]], str]:
    def read(arguments: Mapping[str, Any]) -> str:
        k = int(arguments.get("n", -1))
        if not 0 <= k < len(codes):
            return f"No report {k}: the reports are numbered 0 to {len(codes) - 1}."
        return _report(k, codes[k])

    return read


_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
_DESCRIPTION = "Read one report of the harbour committee by its number."


class _Runner:
    """One strategy's conversation: ``turn(text)`` → the answer (raises when refused)."""

    def turn(self, text: str) -> str:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _LoopRunner(_Runner):
    def __init__(self, reader: _Reader, root: Path, *, memory: bool, system: str) -> None:
        from stm_memory import Scope, ShortTermMemory
        from stm_memory.testing.clients import offline_openai_client

        self.client = offline_openai_client(reader)
        self.reads = _report_tool(reader.codes)
        self.scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
        self.memory = (
            ShortTermMemory.from_url(f"sqlite:///{root}/stm.db", cache_dir=str(root / "cache"))
            if memory
            else None
        )
        self.loop: Any = None
        if self.memory is not None:
            from stm_memory_openai import OpenAIChatLoop

            self.loop = OpenAIChatLoop(
                self.client,
                self.memory,
                model=MODEL_NAME,
                context_window=reader.window,
                max_steps=4 * len(reader.codes) + 10,
            )
        self.history: list[Any] = []
        self.system = system
        self.tool = {"type": "function", "function": {
            "name": REPORT_TOOL, "description": _DESCRIPTION, "parameters": _SCHEMA}}  # fmt: skip

    def turn(self, text: str) -> str:
        message = {"role": "user", "content": text}
        if self.loop is not None:
            result = self.loop.run_turn(
                self.scope,
                [*self.history, message],
                system=self.system,
                tools=[self.tool],
                tool_handlers={REPORT_TOOL: self.reads},
            )
            self.history = list(result.messages)
            return str(result.text)
        # No memory: the same loop by hand, every message sent every step.
        self.history.append(message)
        while True:
            system = {"role": "system", "content": self.system}
            reply = (
                self.client.chat.completions.create(
                    model=MODEL_NAME, messages=[system, *self.history], tools=[self.tool]
                )
                .choices[0]
                .message
            )
            self.history.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return str(reply.content or "")
            for call in reply.tool_calls:
                arguments = json.loads(call.function.arguments or "{}")
                self.history.append(
                    {"role": "tool", "tool_call_id": call.id, "content": self.reads(arguments)}
                )

    def close(self) -> None:
        self.client.close()
        if self.memory is not None:
            self.memory.close()


class _AgentRunner(_Runner):
    def __init__(self, reader: _Reader, root: Path, *, ours: bool, system: str) -> None:
        from langchain.agents import create_agent
        from langchain_core.tools import StructuredTool
        from langgraph.checkpoint.memory import InMemorySaver

        from stm_memory.testing.chat_model import OfflineChatModel

        reads = _report_tool(reader.codes)

        def read_report(n: int) -> str:
            return reads({"n": n})

        tool = StructuredTool.from_function(
            func=read_report, name=REPORT_TOOL, description=_DESCRIPTION
        )
        self.memory: Any = None
        middleware: list[Any]
        if ours:
            from stm_memory import ShortTermMemory
            from stm_memory_langchain import ShortTermMemoryMiddleware

            self.memory = ShortTermMemory.from_url(
                f"sqlite:///{root}/stm.db", cache_dir=str(root / "cache")
            )
            middleware = [ShortTermMemoryMiddleware(self.memory, context_window=reader.window)]
        else:
            from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware

            edit = ClearToolUsesEdit(trigger=int(reader.window * 0.6), keep=3)
            middleware = [ContextEditingMiddleware(edits=[edit])]
        self.agent = create_agent(
            OfflineChatModel(model=reader),
            tools=[tool],
            system_prompt=system,
            middleware=middleware,
            checkpointer=InMemorySaver(),
        )
        ids = {"thread_id": "c1", "user_id": "u1", "server_id": "g1"}
        self.config: Any = {"configurable": ids, "recursion_limit": 4 * len(reader.codes) + 20}

    def turn(self, text: str) -> str:
        state = self.agent.invoke({"messages": [{"role": "user", "content": text}]}, self.config)
        content = state["messages"][-1].content
        return content if isinstance(content, str) else json.dumps(content)

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()


def _questions(reads: int, seed: int) -> list[int]:
    """The reports asked about: the first, the last, and three others (seeded)."""
    rng = random.Random(seed + 1)
    middle = rng.sample(range(1, reads - 1), k=min(3, max(0, reads - 2)))
    return [0, *sorted(middle), reads - 1]


def _run_one(
    key: str, kind: str, *, reads: int, window: int, seed: int, system: str
) -> LongTurnOutcome:
    codes = _codes(reads, seed)
    reader = _Reader(codes=codes, kind=kind, window=window)
    with tempfile.TemporaryDirectory(prefix="stm-eval-long-") as tmp:
        root = Path(tmp)
        runner: _Runner
        if key in ("stm-loop", "full-history"):
            runner = _LoopRunner(reader, root, memory=key == "stm-loop", system=system)
        else:
            runner = _AgentRunner(reader, root, ours=key == "stm-middleware", system=system)
        completed, answered = False, 0
        questions = _questions(reads, seed)
        try:
            try:
                completed = (
                    runner.turn(f"Read reports 0 to {reads - 1}.") == f"Read {reads} reports."
                )
            except Exception:  # the provider's 400, or an agent's recursion limit
                completed = False
            for k in questions:
                try:
                    answer = runner.turn(f"What is the code of report {k}?")
                except Exception:
                    continue
                answered += codes[k] in answer
        finally:
            runner.close()
    largest = max((size for size, _ in reader.sent), default=0)
    return LongTurnOutcome(
        key,
        LONG_TURN_STRATEGIES[key],
        completed and reader.refused == 0,
        largest / window,
        answered,
        len(questions),
        sum(units for _, units in reader.sent),
        len(reader.sent),
        reader.refused,
    )


def run_long_turn(
    kind: str,
    *,
    reads: int = 30,
    window: int = 16_384,
    seed: int = 7,
    strategies: Sequence[str] | None = None,
    system_prompt: str | None = None,
) -> LongTurnReport:
    """The long-turn scenario with the scripted model ``kind`` (``perfect``,
    ``forgetful`` or ``toolless``), for ``strategies`` (default: all, see
    :data:`LONG_TURN_STRATEGIES`); ``system_prompt``: the agent's own, sent first by
    every strategy (default: a one-line research assistant's)."""
    from stm_memory.errors import ConfigurationError

    if kind not in LONG_TURN_KINDS:
        known = ", ".join(f"scripted:{k}" for k in LONG_TURN_KINDS)
        raise ConfigurationError(f"the long-turn scenario runs {known}; got {kind!r}")
    keys = tuple(strategies or LONG_TURN_STRATEGIES)
    unknown = [k for k in keys if k not in LONG_TURN_STRATEGIES]
    if unknown:
        raise ConfigurationError(
            f"unknown strategy for the long-turn scenario: {', '.join(unknown)} "
            f"(one of {', '.join(LONG_TURN_STRATEGIES)})"
        )
    if reads < 4 or window < 2_048:
        raise ConfigurationError("the long-turn scenario needs reads >= 4 and window >= 2048")
    system = system_prompt or SYSTEM
    outcomes = tuple(
        _run_one(k, kind, reads=reads, window=window, seed=seed, system=system) for k in keys
    )
    return LongTurnReport(f"scripted:{kind}", seed, reads, window, outcomes)
