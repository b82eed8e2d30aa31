"""Case "cost" — what each approach costs as the providers bill it, prompt caching included.

Providers bill a prompt prefix they served recently at about a tenth of the input price.
Our memory rewrites the prompt (a memory block + the dialogue since the memory was last
written, instead of the whole history), so its cost is measured here as billed: every
request body is replayed, at its turn's time, through the one prompt-cache model
(:class:`stm_memory.testing.prompt_cache.PromptCache`), one cache per approach ×
regime × profile (each approach is a separate customer).

The conversation is the ``tokens`` case's (3 channels round-robin, a turn every 3
minutes on a ``FrozenClock``, **every approach given the whole history**), behind a
realistic agent prefix: a system prompt of about 2,500 tokens and three caller tools
(``search_lore``, ``roll_dice``, ``get_weather``; the model never calls them).
Approaches (the runners are :mod:`benchmarks.token_growth`'s):

- **ours, loop**: ``OpenAIChatLoop`` (its bodies, with ``prompt_cache_key``) and, for
  Anthropic, ``AnthropicLoop`` (its bodies, with our ``cache_control`` breakpoints), on
  the offline SDK clients, fed ``result.messages``. In the warm regime the caller marks
  its system block with a 1-hour breakpoint (our breakpoints take the caller's TTL).
- **ours, middleware**: ``create_agent`` + ``ShortTermMemoryMiddleware``.
- **SummarizationMiddleware** (``trigger=("tokens", 4000)``, ``keep=("messages", 20)``;
  its summarizer's calls are billed too, input as billed + output) and **full history**.
- **OpenAI Agents SDK**: ``ShortTermMemorySession`` against ``SQLiteSession`` (OpenAI only).
- **ours, loop, toolless model** (OpenAI, information beside its target): the "ours, loop"
  run (same texts, system prompt, tools and clock) with a model that never calls
  ``update_short_term_memory``, nudged or not (what many small or open models do;
  :func:`benchmarks.token_growth.toolless_model`), against full history in the same
  regime: ``cost_<regime>_toolless_ours_vs_full_openai`` (warm ≤ 1.05).

"With the caching a careful user would turn on": OpenAI caches automatically; on
Anthropic the approaches without breakpoints of their own (the peers and the
middleware) send a top-level automatic ``cache_control`` (a breakpoint at the end),
with ``"ttl": "1h"`` when warm. Their recorded Chat requests are converted to Messages
bodies (:func:`anthropic_body`); the summarizer's own calls get no breakpoint.

Regimes: **warm** = ``openai-gpt-5-24h`` / ``anthropic-sonnet-1h``; **cold** =
``openai-gpt-5`` (5-minute in-memory retention) / ``anthropic-sonnet-5m``: each channel
comes back after 9 minutes, after its own prefix lapsed (the shared tools + system
prefix stays warm: another channel reads it every 3 minutes).

The **busy server** (:func:`benchmarks.token_growth.busy_server`: six channels of uneven
activity, two users, short and long messages, as many turns) runs ours (loop, middleware,
Agents session) and the peers priced on the OpenAI profiles, and ours (the loop, with the
same Anthropic setup as above) against full history and SummarizationMiddleware on the
Anthropic ones: ``cost_<regime>_busy_*`` (information).

**Briefing share** (``briefing_share_warm_openai``, ``briefing_share_busy_warm_openai``,
≤ 0.1): how much of our (the loop's) uncached input, warm, OpenAI, is other channels'
briefings. Each request's uncached tokens are attributed to its parts as
``../shared/tools/cache_probe.py`` does: the cache serves the first
``CacheUsage.cached_tokens`` of the prompt (tools, then messages, canonical JSON), the
rest is billed uncached, and each part gets the tokens of it in that tail
(:func:`uncached_by_part`). Parts: the tools, the leading system message, the dialogue,
and our injected blocks split at each ``CONTENT_HEADER`` — a block headed
``Other channels:`` is a briefing, the others are this channel's memory or the nudge
(the probe labels whole messages; the loop puts this channel's memory and the briefings
in one system message, so blocks are split here).
The share's denominator is the sum over the parts (four characters a token); the split
is in ``details`` (``uncached_split`` of the ``ours`` bills).

Cost, in input-token units: input as billed (uncached 1×, cached at the profile's read
multiplier, cache writes at its write multiplier) + memory output at 4× (ours: the
``update_short_term_memory`` arguments; SummarizationMiddleware: the summaries). The
answers' own output is the same for everyone and left out. Tokens are the cache
model's (``ceil(len(json) / 4)`` of each part).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stm_memory.model.messages import message_text
from stm_memory.prompt.render import CONTENT_HEADER, OTHER_CHANNELS, THIS_CHANNEL
from stm_memory.testing.prompt_cache import (
    CACHE_PROFILES,
    CacheProfile,
    CacheUsage,
    PromptCache,
    count_text_tokens,
    request_parts,
)
from stm_memory.wire.anthropic import anthropic_breakpoints

from ._fixtures import sentence
from ._harness import CaseResult, Config, Metric
from .token_growth import (
    MODEL,
    STEP,
    Turn,
    busy_server,
    run_agents_sessions,
    run_full,
    run_ours_loop,
    run_ours_middleware,
    run_summarization,
    user_messages,
)

NAME = "cost"

#: Regime → provider → prompt-cache profile.
REGIMES: dict[str, dict[str, str]] = {
    "warm": {"openai": "openai-gpt-5-24h", "anthropic": "anthropic-sonnet-1h"},
    "cold": {"openai": "openai-gpt-5", "anthropic": "anthropic-sonnet-5m"},
}
#: The TTL a careful Anthropic user asks for in each regime (None: the default 5m).
ANTHROPIC_TTL: dict[str, str | None] = {"warm": "1h", "cold": None}
#: What a careful OpenAI user asks for in each regime: the extended retention the warm
#: regime prices (our turns read it: a prefix kept a day has not lapsed between turns).
OPENAI_OPTIONS: dict[str, dict[str, Any]] = {
    "warm": {"prompt_cache_retention": "24h"},
    "cold": {},
}
#: GPT-5.6 and later (writes billed 1.25x, a prefix matched only at a breakpoint, a
#: 30-minute TTL): ours runs as that model (its swaps priced so, its requests marked),
#: the peers' requests are billed by the same rules. Warm: the bench's 3-minute steps;
#: cold: 18-minute steps, so a channel's own prefix (its turns 54 minutes apart) lapses
#: while the prompt every channel shares stays warm, as in the older profiles' cold
#: regime (a 5-minute cache, a channel's turns 9 minutes apart).
OPENAI56 = "openai-gpt-5.6"
OPENAI56_MODEL = "gpt-5.6"
OPENAI56_STEPS: dict[str, int] = {"warm": 1, "cold": 6}
SYSTEM_TOKENS = 2500
MOVING_AVERAGE = 10
#: The approaches that send the whole history every turn (their cost grows without bound).
REPLAY_ALL = frozenset({"full", "sqlite_session"})
#: Approaches: key → plot label.
LABELS: dict[str, str] = {
    "full": "full history",
    "summarization_mw": "SummarizationMiddleware",
    "sqlite_session": "Agents SDK, SQLiteSession",
    "agents_session": "stm-memory, Agents SDK session",
    "middleware": "stm-memory, create_agent middleware",
    "ours": "stm-memory, loop",
}
STYLES: dict[str, dict[str, Any]] = {
    "full": {"color": "#999999", "linewidth": 1.4},
    "summarization_mw": {"color": "#d9822b", "linewidth": 1.4},
    "sqlite_session": {"color": "#b794f4", "linewidth": 1.2, "linestyle": "--"},
    "agents_session": {"color": "#6b46c1", "linewidth": 1.4, "linestyle": "--"},
    "middleware": {"color": "#38a169", "linewidth": 1.6},
    "ours": {"color": "#2b6cb0", "linewidth": 2.0},
}

_INTRO = """\
You are Mira, the resident assistant of the Heist Club, a Discord server where people \
plan tabletop heist campaigns, swap lore and chat about their week. You talk to many \
members in many channels; each message tells you who is speaking and where.

Style:
- Be warm, direct and brief: two short paragraphs at most unless asked for detail.
- Match the channel: planning channels want concrete steps, lore channels want \
in-world flavour, the random channel wants light conversation.
- Never invent server rules, member facts or past events; say when you do not know.
- Use the member's name sparingly; never reveal another member's private messages.
- Do not use headings in short answers; use lists only for steps or options.

Tools:
- search_lore(query): the server's lore wiki. Use it before stating canon facts about \
places, factions or characters; quote at most two sentences from it.
- roll_dice(sides, count): rolls for game moments. Never fake a roll.
- get_weather(city): real-world weather, only when a member asks about it.
- Call a tool only when its answer changes yours; do not announce tool calls.

Safety and moderation:
- Heists here are fiction. Refuse real-world instructions for breaking into places, \
bypassing alarms or stealing, and steer back to the game.
- If someone seems distressed, answer with care and point to the #support channel.
- Do not take part in harassment; if a conversation turns hostile, de-escalate.

Campaign notes (canon, in no particular order):
"""


def agent_system_prompt(tokens: int = SYSTEM_TOKENS) -> str:
    """A deterministic system prompt of about ``tokens`` tokens: persona, style, tool and
    safety rules, then numbered campaign notes."""
    rng = random.Random(11)
    text = _INTRO
    n = 0
    while count_text_tokens(text) < tokens:
        n += 1
        text += f"{n}. {sentence(rng, rng.randint(14, 26))}\n"
    return text


# -- the caller's tools ----------------------------------------------------------------


def langchain_tools() -> list[Any]:
    """The three caller tools as LangChain tools (create_agent)."""
    from langchain_core.tools import tool

    @tool
    def search_lore(query: str, limit: int = 3) -> str:
        """Search the Heist Club lore wiki and return the best matching passages.

        Args:
            query: What to look for: a place, faction, character or event.
            limit: How many passages to return (1-5).
        """
        return "no result"

    @tool
    def roll_dice(sides: int, count: int = 1, modifier: int = 0) -> str:
        """Roll dice for a game moment and return each die and the total.

        Args:
            sides: Sides per die (4, 6, 8, 10, 12, 20 or 100).
            count: How many dice to roll (1-10).
            modifier: Added to the total (may be negative).
        """
        return "no result"

    @tool
    def get_weather(city: str, units: str = "metric") -> str:
        """Current real-world weather for a city.

        Args:
            city: City name, optionally with its country ("Lyon, France").
            units: "metric" or "imperial".
        """
        return "no result"

    return [search_lore, roll_dice, get_weather]


def chat_tools() -> list[dict[str, Any]]:
    """The caller tools as Chat Completions schemas (what ``bind_tools`` sends too)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return [convert_to_openai_tool(t) for t in langchain_tools()]


def anthropic_tool(chat_tool: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool schema as a Messages API tool."""
    function = chat_tool["function"]
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }


def agents_tools() -> list[Any]:
    """The caller tools as OpenAI Agents SDK ``FunctionTool``s (never called here)."""
    from agents import FunctionTool

    async def invoke(ctx: Any, args: str) -> str:
        return "no result"

    return [
        FunctionTool(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            params_json_schema=t["function"]["parameters"],
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )
        for t in chat_tools()
    ]


# -- Chat Completions → Messages --------------------------------------------------------


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    text = message_text(content)
    return [{"type": "text", "text": text}] if text else []


def anthropic_body(
    body: Mapping[str, Any], *, cache_ttl: str | None = None, automatic: bool = True
) -> dict[str, Any]:
    """A recorded Chat Completions body as the Messages body a careful user would send.

    Leading system messages → ``system`` blocks; a later system message (our briefings
    and nudge) → a text block prepended to the next user turn (appended to the last
    one when none follows), as the library places them for Anthropic; tool calls →
    ``tool_use`` blocks, tool results → ``tool_result`` blocks in a user turn;
    consecutive turns of one role merged, so roles alternate. ``automatic`` adds the
    top-level ``cache_control`` (with ``ttl`` when given).
    """
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += blocks
        else:
            messages.append({"role": role, "content": blocks})

    for m in body.get("messages") or ():
        role = m.get("role")
        if role in ("system", "developer"):
            (pending if messages else system).extend(_text_blocks(m.get("content")))
        elif role == "user":
            add("user", [*pending, *_text_blocks(m.get("content"))])
            pending = []
        elif role == "assistant":
            blocks = _text_blocks(m.get("content"))
            for call in m.get("tool_calls") or ():
                fn = call["function"]
                args = json.loads(fn.get("arguments") or "{}")
                blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"]})
                blocks[-1]["input"] = args
            add("assistant", blocks)
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"]}
            add("user", [{**result, "content": message_text(m.get("content"))}])
    if pending:
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"] += pending
        else:
            add("user", pending)
    out: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": messages}
    if system:
        out["system"] = system
    if body.get("tools"):
        out["tools"] = [anthropic_tool(t) for t in body["tools"]]
    if automatic:
        marker = {"type": "ephemeral"}
        out["cache_control"] = {**marker, "ttl": cache_ttl} if cache_ttl else marker
    return out


# -- where the uncached input falls ----------------------------------------------------

#: The parts of a request, as ``../shared/tools/cache_probe.py`` splits "where our uncached
#: input falls".
PARTS = ("tools", "system prompt", "dialogue", "memory block/nudge", "briefings")
_NEWLINE = json.dumps("\n")[1:-1]  # a newline as it reads in a part's canonical JSON


def _block_kind(block: str) -> str:
    """An injected block (JSON text from a ``CONTENT_HEADER`` on): a briefing when it is
    headed ``Other channels:``, else this channel's memory or the nudge."""
    lines = block.split(_NEWLINE)
    if OTHER_CHANNELS in lines and THIS_CHANNEL not in lines:
        return "briefings"
    return "memory block/nudge"


def _spans(body: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(part kind, characters of canonical JSON) of an OpenAI Chat body in prompt order:
    the tools; the leading system message (the caller's prompt); every other message is
    dialogue, except the blocks our memory writes (each opens with ``CONTENT_HEADER``),
    which are split off one by one (the message's JSON around them goes with its first
    block when nothing else is in it)."""
    parts = request_parts(body, provider="openai_chat")
    messages = body.get("messages") or []
    offset = 1 if body.get("tools") else 0
    out: list[tuple[str, int]] = [("tools", len(parts[0].text))] if offset else []
    for i, part in enumerate(parts[offset:]):
        text = part.text
        cuts = [m.start() for m in re.finditer(re.escape(CONTENT_HEADER), text)]
        first = "dialogue"
        if i == 0 and messages[0].get("role") in ("system", "developer") and not cuts:
            first = "system prompt"
        if not cuts:
            out.append((first, len(text)))
            continue
        head = text[: cuts[0]]
        blocks = [text[a:b] for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True)]
        kinds = [_block_kind(b) for b in blocks]
        only_json = head == '{"content": "'  # the message is our blocks alone
        out.append((kinds[0] if only_json else first, len(head)))
        out += [(k, len(b)) for k, b in zip(kinds, blocks, strict=True)]
    return out


def uncached_by_part(body: Mapping[str, Any], cached_tokens: int) -> dict[str, float]:
    """The uncached tokens of an OpenAI Chat request by part (:data:`PARTS`), as
    ``cache_probe.py`` attributes them: the cache serves the first ``cached_tokens`` of the
    prompt, so what is billed uncached is the tail after it; each part gets the tokens of
    it that lie in that tail (four characters a token, as the cache model counts)."""
    where = dict.fromkeys(PARTS, 0.0)
    start = cached_tokens * 4
    pos = 0
    for kind, size in _spans(body):
        end = pos + size
        where[kind] += max(0, end - max(pos, start)) / 4
        pos = end
    return where


# -- billing ---------------------------------------------------------------------------

#: (body, side call?) → (body as sent to the provider, api for PromptCache).
Shape = Callable[[Mapping[str, Any], bool], tuple[Mapping[str, Any], str]]


def as_is(api: str) -> Shape:
    return lambda body, side: (body, api)


def as_anthropic(cache_ttl: str | None) -> Shape:
    """Peers on Anthropic: automatic caching on the agent's calls, none on the
    summarizer's own calls."""
    return lambda body, side: (
        anthropic_body(body, cache_ttl=cache_ttl, automatic=not side),
        "anthropic",
    )


def as_anthropic_middleware(cache_ttl: str | None) -> Shape:
    """Our middleware on Anthropic, as ``ChatAnthropic`` beside
    ``AnthropicPromptCachingMiddleware`` sends it: the careful user's automatic
    breakpoint and system breakpoint, and ours on the user's own words ahead of the
    briefings (the offline chat model the runner records is not ``ChatAnthropic``, so
    the middleware's Anthropic hints are added here, from the one kit function)."""

    def shape(body: Mapping[str, Any], side: bool) -> tuple[Mapping[str, Any], str]:
        out = anthropic_body(body, cache_ttl=cache_ttl)
        # What the middleware hands the hints as this turn's own (context.transient):
        # the system messages after the current user message (briefings new this turn,
        # the nudge); the memory block and the stable briefings above stay put.
        messages = list(body.get("messages") or ())
        current = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        injected = [
            m["content"]
            for m in messages[current + 1 :]
            if m.get("role") == "system" and isinstance(m.get("content"), str)
        ]
        return anthropic_breakpoints(out, injected=injected), "anthropic"

    return shape


@dataclass
class Bill:
    """One approach in one regime and profile: per-turn usage and cost."""

    profile: CacheProfile
    usage: list[CacheUsage] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    memory_output: list[int] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    #: Per turn, the uncached tokens by part (:func:`uncached_by_part`; ``attribute=True``).
    uncached_parts: list[dict[str, float]] = field(default_factory=list)

    def total(self, turns: int | None = None) -> float:
        return sum(self.cost[:turns])

    def summed(self, turns: int | None = None) -> CacheUsage:
        total = CacheUsage(0)
        for u in self.usage[:turns]:
            total = total + u
        return total

    def cache_share(self, turns: int | None = None) -> float:
        u = self.summed(turns)
        return u.cached_tokens / u.input_tokens if u.input_tokens else 0.0

    def uncached_split(self, turns: int | None = None) -> dict[str, float]:
        """The share of the uncached tokens (over ``turns``) in each part."""
        sums = dict.fromkeys(PARTS, 0.0)
        for where in self.uncached_parts[:turns]:
            for kind, n in where.items():
                sums[kind] += n
        total = sum(sums.values())
        return {k: n / total if total else 0.0 for k, n in sums.items()}

    def to_dict(self, turns: int | None = None) -> dict[str, Any]:
        u = self.summed(turns)
        out = {
            "profile": self.profile.name,
            "turns": len(self.cost[:turns]),
            "cost": round(self.total(turns), 1),
            "input_tokens": u.input_tokens,
            "cached_tokens": u.cached_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "uncached_tokens": u.uncached_tokens,
            "cache_share": round(self.cache_share(turns), 4),
            "memory_output_tokens": sum(self.memory_output[:turns]),
            "requests": sum(self.requests[:turns]),
        }
        if self.uncached_parts:
            split = self.uncached_split(turns)
            out["uncached_split"] = {k: round(v, 4) for k, v in split.items()}
        return out


def bill(
    log: Sequence[Turn],
    profile_name: str,
    shape: Shape,
    partition: Callable[[Mapping[str, Any]], Any] | None = None,
    *,
    attribute: bool = False,
) -> Bill:
    """Replay ``log`` through a fresh prompt cache of ``profile_name`` (one cache per
    ``partition(body)`` value when given: requests that never share a machine);
    ``attribute`` also splits each turn's uncached tokens by part (OpenAI Chat bodies)."""
    profile = CACHE_PROFILES[profile_name]
    caches: dict[Any, PromptCache] = {}
    out = Bill(profile)
    for turn in log:
        usage = CacheUsage(0)
        where = dict.fromkeys(PARTS, 0.0)
        calls = [(b, True) for b in turn.side_bodies] + [(b, False) for b in turn.bodies]
        for body, side in calls:
            sent, api = shape(body, side)
            shard = partition(sent) if partition is not None else None
            cache = caches.get(shard)
            if cache is None:
                cache = caches[shard] = PromptCache(profile)
            seen = cache.observe(sent, at=turn.at, api=api)
            usage = usage + seen
            if attribute:
                if api != "openai_chat":
                    raise ValueError(f"attribute: OpenAI Chat bodies only, not {api}")
                for kind, n in uncached_by_part(sent, seen.cached_tokens).items():
                    where[kind] += n
        if attribute:
            out.uncached_parts.append(where)
        out.usage.append(usage)
        out.memory_output.append(turn.memory_output)
        out.requests.append(len(calls))
        out.cost.append(usage.cost(profile, output_tokens=turn.memory_output))
    return out


# -- plot ------------------------------------------------------------------------------


def moving_average(values: Sequence[float], window: int = MOVING_AVERAGE) -> list[float]:
    """Trailing mean over the last ``window`` values (fewer at the start)."""
    out: list[float] = []
    running = 0.0
    for i, v in enumerate(values):
        running += v
        if i >= window:
            running -= values[i - window]
        out.append(running / min(i + 1, window))
    return out


def plot(path: Path, bills: Mapping[tuple[str, str, str], Bill]) -> None:
    """Effective cost per turn (moving average), OpenAI and Anthropic × warm and cold.
    Replaying the whole history grows without bound: a panel's y axis stops at twice the
    highest other curve, and a line that leaves it says where it ends in its label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), dpi=100)
    for row, provider in enumerate(("openai", "anthropic")):
        for col, regime in enumerate(("warm", "cold")):
            ax = axes[row][col]
            curves = {
                approach: moving_average(found.cost)
                for approach in LABELS
                if (found := bills.get((approach, regime, provider))) is not None
            }
            bounded = [max(c) for a, c in curves.items() if a not in REPLAY_ALL]
            top = 2 * max(bounded) if bounded else None
            for approach, curve in curves.items():
                label = LABELS[approach]
                if top is not None and max(curve) > top:
                    label += f" (ends at {curve[-1]:,.0f}, turn {len(curve)})"
                ax.plot(range(1, len(curve) + 1), curve, label=label, **STYLES[approach])
            ax.set_title(f"{regime}: {REGIMES[regime][provider]}", fontsize=10)
            ax.set_ylim(0, top)
            ax.set_xlim(left=1)
            ax.grid(alpha=0.3)
            ax.legend(loc="upper left", fontsize=7)
            if col == 0:
                ax.set_ylabel("cost per turn (uncached input tokens)")
            if row == 1:
                ax.set_xlabel("turn (3 channels, round-robin, one every 3 minutes)")
    fig.suptitle(
        f"Effective cost per turn as billed ({MOVING_AVERAGE}-turn moving average): "
        "input with prompt caching + memory output × 4",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


# -- the case --------------------------------------------------------------------------


def caller_system(system: str, ttl: str | None) -> Any:
    """The system prompt as a careful Anthropic caller sends it: with a TTL of its own, a
    text block carrying its breakpoint (ours then use that TTL); else the plain text."""
    if ttl is None:
        return system
    marker = {"type": "ephemeral", "ttl": ttl}
    return [{"type": "text", "text": system, "cache_control": marker}]


def _busy_bills(
    root: Path, conversation: Sequence[Any], *, system: str, tools: Sequence[Any]
) -> dict[tuple[str, str, str], Bill]:
    """The busy server's conversation (:func:`benchmarks.token_growth.busy_server`: six
    channels, two users, short and long messages) through ours (loop, middleware, Agents
    session) and the peers, priced as OpenAI bills it, and ours (the loop) against full
    history and SummarizationMiddleware as Anthropic bills them (the 3-channel
    conversation's Anthropic setup): ``(approach, regime, provider) → Bill``."""
    loops = {
        regime: run_ours_loop(
            root / f"loop-{regime}",
            conversation,
            system=system,
            tools=tools,
            request_options=options,
        )["log"]
        for regime, options in OPENAI_OPTIONS.items()
    }
    anthropic_loops = {
        regime: run_ours_loop(
            root / f"anthropic-{regime}",
            conversation,
            system=caller_system(system, ttl),
            tools=[anthropic_tool(t) for t in tools],
            provider="anthropic",
        )["log"]
        for regime, ttl in ANTHROPIC_TTL.items()
    }
    mws = {
        regime: run_ours_middleware(
            root / f"middleware-{regime}",
            conversation,
            system=system,
            tools=langchain_tools(),
            model_kwargs=options,
        )["log"]
        for regime, options in OPENAI_OPTIONS.items()
    }
    sm = run_summarization(conversation, system=system, tools=langchain_tools())
    full: list[Turn] = []
    run_full(conversation, system=system, tools=tools, log=full, count=False)
    agents_sdk = run_agents_sessions(
        root / "agents", conversation, system=system, tools=agents_tools()
    )
    logs = {
        "summarization_mw": sm["log"],
        "full": full,
        "agents_session": agents_sdk["ours_log"],
        "sqlite_session": agents_sdk["sqlite_log"],
    }
    out = {
        (approach, regime, "openai"): bill(
            log,
            profiles["openai"],
            as_is("openai_responses" if approach.endswith("session") else "openai_chat"),
            attribute=approach == "ours",
        )
        for regime, profiles in REGIMES.items()
        for approach, log in {"ours": loops[regime], "middleware": mws[regime], **logs}.items()
    }
    for regime, profiles in REGIMES.items():
        anthropic, ttl = profiles["anthropic"], ANTHROPIC_TTL[regime]
        out["ours", regime, "anthropic"] = bill(
            anthropic_loops[regime], anthropic, as_is("anthropic")
        )
        for approach in ("summarization_mw", "full"):
            out[approach, regime, "anthropic"] = bill(logs[approach], anthropic, as_anthropic(ttl))
    return out


def _busy_metrics(busy: Mapping[tuple[str, str, str], Bill], turns: int) -> list[Metric]:
    """Ours against the best peer, warm and cold, how much of our warm bill is served
    from the cache and how much of its uncached part the briefings are, on the busy
    server (OpenAI profile; ours, loop, on Anthropic too)."""

    def best(regime: str, provider: str = "openai") -> float:
        return min(
            busy["full", regime, provider].total(turns),
            busy["summarization_mw", regime, provider].total(turns),
        )

    out: list[Metric] = []
    for approach, peer in (
        ("ours", None),
        ("middleware", None),
        ("agents_session", "sqlite_session"),
    ):
        for regime in ("warm", "cold"):
            base = busy[peer, regime, "openai"].total(turns) if peer else best(regime)
            against = peer or "best_peer"
            key = f"cost_{regime}_busy_{approach}_vs_{against}_openai"
            out.append(Metric(key, busy[approach, regime, "openai"].total(turns) / base))
        out.append(
            Metric(
                f"cache_share_busy_{approach}_warm_openai",
                busy[approach, "warm", "openai"].cache_share(turns),
            )
        )
    for regime in ("warm", "cold"):
        ratio = busy["ours", regime, "anthropic"].total(turns) / best(regime, "anthropic")
        out.append(Metric(f"cost_{regime}_busy_ours_vs_best_peer_anthropic", ratio))
    out.append(
        Metric(
            "briefing_share_busy_warm_openai",
            busy["ours", "warm", "openai"].uncached_split(turns)["briefings"],
            "<=",
            0.1,
            note="other channels' briefings / all uncached input of ours (loop)",
        )
    )
    return out


def _input_cost(bill_: Bill, turns: int | None = None) -> float:
    """A bill's input cost alone (the receipt leaves output out on both sides)."""
    return sum(u.cost(bill_.profile) for u in bill_.usage[:turns])


def _receipt_metrics(
    receipts: Sequence[Any], bills: Mapping[tuple[str, str, str], Bill], turns: int
) -> list[Metric]:
    """The turns' own receipts (``TurnResult.bill``: the usage the offline provider
    reported, the full history priced beside it) against the bench's bills of the same
    requests and of the full-history peer, warm OpenAI."""
    ours = sum(b.cost for b in receipts if b is not None)
    full = sum(b.full_cost for b in receipts[:turns] if b is not None)
    return [
        Metric(
            "receipt_vs_bill_ours_warm_openai",
            ours / _input_cost(bills["ours", "warm", "openai"]),
            "<=",
            1.01,
            note="the receipt's ours against the provider's bill of the same requests",
        ),
        Metric(
            "receipt_full_vs_bill_full_warm_openai",
            full / _input_cost(bills["full", "warm", "openai"], turns),
            note="the receipt's full-history estimate against the full-history peer's bill",
        ),
    ]


def _stretched(log: Sequence[Turn], factor: int) -> list[Turn]:
    """``log`` with the time between its turns multiplied by ``factor`` (the peers'
    requests do not depend on the clock; ours do, and run at that pace)."""
    if not log or factor == 1:
        return list(log)
    start = log[0].at
    return [replace(turn, at=start + (turn.at - start) * factor) for turn in log]


def _openai56_metrics(
    root: Path,
    texts: Sequence[str],
    *,
    system: str,
    tools: Sequence[Any],
    peers: Sequence[Sequence[Turn]],
) -> list[Metric]:
    """Ours against the best peer billed as GPT-5.6 and later bill (see
    :data:`OPENAI56_STEPS` for the two regimes)."""
    out: list[Metric] = []
    for regime, factor in OPENAI56_STEPS.items():
        ours = run_ours_loop(
            root / f"openai56-{regime}",
            texts,
            system=system,
            tools=tools,
            model_name=OPENAI56_MODEL,
            step=STEP * factor,
        )["log"]
        best = min(
            bill(_stretched(log, factor), OPENAI56, as_is("openai_chat")).total() for log in peers
        )
        ratio = bill(ours, OPENAI56, as_is("openai_chat")).total() / best
        target = 1.0 if regime == "warm" else 0.5
        out.append(Metric(f"cost_{regime}_ours_vs_best_peer_openai56", ratio, "<=", target))
    return out


def run(cfg: Config) -> CaseResult:
    turns = cfg.pick(200, 30)
    long = cfg.pick(1000, 60)
    texts = user_messages(long)
    root = cfg.workdir / NAME
    system = agent_system_prompt()
    tools = chat_tools()
    anthropic_tools = [anthropic_tool(t) for t in tools]

    # Ours loop, SummarizationMiddleware and full history run the long conversation; its
    # first `turns` turns are exactly the short one (same texts, same clock).
    loops = {
        regime: run_ours_loop(
            root / f"loop-{regime}", texts, system=system, tools=tools, request_options=options
        )
        for regime, options in OPENAI_OPTIONS.items()
    }
    loop = loops["warm"]
    anthropic_logs: dict[str, list[Turn]] = {}
    for regime, ttl in ANTHROPIC_TTL.items():
        anthropic_logs[regime] = run_ours_loop(
            root / f"anthropic-{regime}",
            texts[:turns],
            system=caller_system(system, ttl),
            tools=anthropic_tools,
            provider="anthropic",
        )["log"]
    # The portable form (memory_role="inline", for open models' chat templates): the
    # same short conversation, priced as the default one.
    portable = run_ours_loop(
        root / "portable",
        texts[:turns],
        system=system,
        tools=tools,
        memory_role="inline",
        request_options=OPENAI_OPTIONS["warm"],
    )
    # A model that never calls update_short_term_memory, nudged or not.
    toolless = {
        regime: run_ours_loop(
            root / f"toolless-{regime}",
            texts[:turns],
            system=system,
            tools=tools,
            toolless=True,
            request_options=options,
        )
        for regime, options in OPENAI_OPTIONS.items()
    }
    # The middleware's chat model asks for the retention each regime prices, as the
    # loops' callers do (model_kwargs, as ChatOpenAI takes it).
    mws = {
        regime: run_ours_middleware(
            root / f"middleware-{regime}",
            texts[:turns],
            system=system,
            tools=langchain_tools(),
            model_kwargs=options,
        )
        for regime, options in OPENAI_OPTIONS.items()
    }
    mw = mws["warm"]
    sm = run_summarization(texts, system=system, tools=langchain_tools())
    full_log: list[Turn] = []
    run_full(texts, system=system, tools=tools, log=full_log, count=False)
    agents_sdk = run_agents_sessions(
        root / "agents", texts[:turns], system=system, tools=agents_tools()
    )

    logs: dict[str, list[Turn]] = {
        "portable": portable["log"],
        "summarization_mw": sm["log"],
        "full": full_log,
        "agents_session": agents_sdk["ours_log"],
        "sqlite_session": agents_sdk["sqlite_log"],
    }
    bills: dict[tuple[str, str, str], Bill] = {}
    for regime, profiles in REGIMES.items():
        # Ours runs once per regime (the retention the caller asks for is part of it).
        regime_logs = {
            "ours": loops[regime]["log"],
            "toolless": toolless[regime]["log"],
            "middleware": mws[regime]["log"],
            **logs,
        }
        for approach, log in regime_logs.items():
            api = "openai_responses" if approach.endswith("session") else "openai_chat"
            bills[approach, regime, "openai"] = bill(
                log, profiles["openai"], as_is(api), attribute=approach == "ours"
            )
        anthropic = profiles["anthropic"]
        ttl = ANTHROPIC_TTL[regime]
        bills["ours", regime, "anthropic"] = bill(
            anthropic_logs[regime], anthropic, as_is("anthropic")
        )
        bills["middleware", regime, "anthropic"] = bill(
            mws[regime]["log"][:turns], anthropic, as_anthropic_middleware(ttl)
        )
        for approach in ("summarization_mw", "full"):
            bills[approach, regime, "anthropic"] = bill(
                logs[approach][:turns], anthropic, as_anthropic(ttl)
            )
    # The model shares one cache among a customer's requests. OpenAI routes a request by
    # a hash of its prefix combined with its prompt_cache_key: keys that differ may put
    # requests on machines of their own, where the shared tools + system prefix is not
    # warmed by the others. The worst case: one cache per key (ours is per server since
    # 2026-12-02, so a server's channels share one; per channel this cost 1.39x cold).
    keyed = {
        regime: bill(
            loops[regime]["log"][:turns],
            profiles["openai"],
            as_is("openai_chat"),
            partition=lambda body: body.get("prompt_cache_key"),
        )
        for regime, profiles in REGIMES.items()
    }
    plot(cfg.png_path.with_name(cfg.png_path.name.replace("tokens", "cost")), bills)
    busy = _busy_bills(root / "busy", busy_server(turns), system=system, tools=tools)

    def cost(approach: str, regime: str, provider: str, n: int | None = turns) -> float:
        return bills[approach, regime, provider].total(n)

    def best_peer(regime: str, provider: str, n: int | None = turns) -> float:
        return min(cost("full", regime, provider, n), cost("summarization_mw", regime, provider, n))

    metrics: list[Metric] = []
    for regime, target in (("warm", 1.0), ("cold", 0.5)):
        for provider in ("openai", "anthropic"):
            ratio = cost("ours", regime, provider) / best_peer(regime, provider)
            metrics.append(
                Metric(f"cost_{regime}_ours_vs_best_peer_{provider}", ratio, "<=", target)
            )
    metrics += _receipt_metrics(loops["warm"]["bills"], bills, turns)
    metrics += _openai56_metrics(
        root,
        texts[:turns],
        system=system,
        tools=tools,
        peers=(full_log[:turns], sm["log"][:turns]),
    )
    portable_ratio = cost("portable", "warm", "openai") / best_peer("warm", "openai")
    metrics += [
        Metric(
            "cost_warm_portable_vs_best_peer_openai",
            portable_ratio,
            note='memory_role="inline", the form open-model chat templates render',
        ),
        Metric(
            "cost_warm_portable_minus_ours_openai",
            abs(portable_ratio - cost("ours", "warm", "openai") / best_peer("warm", "openai")),
            "<=",
            0.05,
        ),
        Metric(
            "cost_warm_1000_ours_vs_full_openai",
            cost("ours", "warm", "openai", long) / cost("full", "warm", "openai", long),
            "<=",
            0.4,
            note=f"{long} turns",
        ),
        Metric(
            "cost_warm_1000_ours_vs_best_peer_openai",
            cost("ours", "warm", "openai", long) / best_peer("warm", "openai", long),
        ),
        Metric(
            "cost_cold_1000_ours_vs_best_peer_openai",
            cost("ours", "cold", "openai", long) / best_peer("cold", "openai", long),
        ),
        Metric(
            "cache_share_ours_warm_openai",
            bills["ours", "warm", "openai"].cache_share(turns),
            ">=",
            0.8,
        ),
    ]
    for regime, target in (("warm", 1.05), ("cold", None)):
        ratio = cost("toolless", regime, "openai") / cost("full", regime, "openai")
        metrics.append(
            Metric(
                f"cost_{regime}_toolless_ours_vs_full_openai",
                ratio,
                "<=" if target is not None else None,
                target,
                note="a model that never calls update_short_term_memory",
            )
        )
    metrics.append(
        Metric(
            "briefing_share_warm_openai",
            bills["ours", "warm", "openai"].uncached_split(turns)["briefings"],
            "<=",
            0.1,
            note="other channels' briefings / all uncached input of ours (loop)",
        )
    )
    for regime in ("warm", "cold"):
        ratio = keyed[regime].total(turns) / best_peer(regime, "openai")
        metrics.append(
            Metric(
                f"cost_{regime}_ours_vs_best_peer_openai_cache_per_key",
                ratio,
                note="one cache per prompt_cache_key (worst-case routing)",
            )
        )
    for regime in ("warm", "cold"):
        for provider in ("openai", "anthropic"):
            ratio = cost("middleware", regime, provider) / best_peer(regime, provider)
            metrics.append(Metric(f"cost_{regime}_middleware_vs_best_peer_{provider}", ratio))
    metrics.append(
        Metric(
            "cache_share_middleware_warm_openai",
            bills["middleware", "warm", "openai"].cache_share(turns),
        )
    )
    for regime in ("warm", "cold"):
        ratio = cost("agents_session", regime, "openai") / cost("sqlite_session", regime, "openai")
        metrics.append(Metric(f"cost_{regime}_agents_session_vs_sqlite_session_openai", ratio))
    for regime in ("warm", "cold"):
        for provider in ("openai", "anthropic"):
            for approach in LABELS:
                if (approach, regime, provider) in bills:
                    value = round(cost(approach, regime, provider))
                    key = f"cost_{regime}_{provider}_{approach}"
                    metrics.append(Metric(key, value))
    # Model calls beyond one per turn: the loops (both APIs) and the middleware.
    ours_logs = [loop["log"][:turns], portable["log"], mw["log"], *anthropic_logs.values()]
    extra = sum(len(t.bodies) - 1 for log in ours_logs for t in log)
    metrics.append(Metric("extra_llm_calls_ours", extra, "==", 0))
    metrics += _busy_metrics(busy, turns)

    details: dict[str, Any] = {
        "caller_history": "full",
        "turns": turns,
        "long_turns": long,
        "channels": 3,
        "minutes_between_turns": 3,
        "system_prompt_tokens": count_text_tokens(system),
        "caller_tools": [t["function"]["name"] for t in tools],
        "regimes": REGIMES,
        "anthropic_ttl": ANTHROPIC_TTL,
        "output_multiplier": 4,
        "units": "input-token prices (1.0 = one uncached input token)",
        "summarizer_calls": sum(len(t.side_bodies) for t in sm["log"][:turns]),
        "summarizer_calls_long": sum(len(t.side_bodies) for t in sm["log"]),
        "stm_updates_ours": loop["updates"],
        "stm_updates_toolless": toolless["warm"]["updates"],
        "plot": cfg.png_path.name.replace("tokens", "cost"),
        "bills": {
            f"{approach}/{regime}/{provider}": b.to_dict(turns)
            for (approach, regime, provider), b in bills.items()
        },
        "bills_ours_cache_per_key": {
            f"ours/{regime}/openai": b.to_dict(turns) for regime, b in keyed.items()
        },
        "busy_server": {
            "channels": 6,
            "users": 2,
            "bills": {f"{a}/{r}/{p}": b.to_dict(turns) for (a, r, p), b in busy.items()},
        },
        "bills_long": {
            f"{approach}/{regime}/{provider}": b.to_dict(long)
            for (approach, regime, provider), b in bills.items()
            if len(b.cost) >= long
        },
    }
    return CaseResult(NAME, metrics, details)
