"""``stm-memory demo``: a scripted multi-channel conversation through a real loop.

Offline by default: the OpenAI Chat Completions loop runs against a real ``openai``
client whose transport is answered in-process by the deterministic offline model, a
stand-in that calls ``update_short_term_memory`` when the memory nudge asks it to.

It shows first what the memory is for: questions asked after the conversation about a
detail settled in another channel (one after a restart), answered from the request the
full history sends and from the one stm-memory sends; then what it costs, priced in the
regimes that decide it (warm, lapsed, a long conversation).

Everything the demo prints is computed from the run it describes: :func:`run_demo`
returns a :class:`DemoReport` with every request body, and each sentence is chosen by
the numbers (``tests/product/test_demo.py`` recomputes them from the bodies and fails
when a printed claim disagrees). Tokens are the prompt-cache model's
(:func:`stm_memory.testing.prompt_cache.request_parts`: the tool schemas count too), so a
request's tokens and its price are measured the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from statistics import fmean
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from stm_memory.engine import ShortTermMemory
from stm_memory.errors import ConfigurationError
from stm_memory.model import Scope
from stm_memory.model.messages import message_text
from stm_memory.prompt.render import CONTENT_HEADER, OTHER_CHANNELS, THIS_CHANNEL
from stm_memory.testing.clock import FrozenClock
from stm_memory.testing.offline import OfflineModel, OfflineReply
from stm_memory.testing.prompt_cache import (
    CACHE_PROFILES,
    CacheUsage,
    PromptCache,
    count_text_tokens,
    request_parts,
)
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "AGENT_SYSTEM",
    "LONG_TURNS",
    "QUESTIONS",
    "Answer",
    "Bill",
    "Conversation",
    "DemoReport",
    "DemoTurn",
    "Figures",
    "Question",
    "Regime",
    "ask",
    "bills",
    "cost_story",
    "measure",
    "recall_story",
    "regimes",
    "request_tokens",
    "run_conversation",
    "run_demo",
    "script",
]

SERVER = "demo-guild"
CHANNELS = ("plot-planning", "worldbuilding", "off-topic")
SYSTEM = "You are Quill, a helpful co-writer in a Discord server for a fantasy novel."
#: The OpenAI profiles the cost panel prices with: a 24-hour retention (warm: the cache
#: outlives every gap of the conversation) and the default 5-minute one (it lapses while
#: the other two channels talk, 30 minutes between a channel's blocks of turns).
WARM, FIVE_MINUTES = "openai-gpt-5-24h", "openai-gpt-5"
#: No cache hit at all (every prefix lapsed, or a provider without caching): the raw
#: input tokens, priced with the 5-minute profile's multipliers and no read.
COLD = "cold"

#: An agent-sized system prompt (about 2,000 tokens) for the cost panel: behind a prompt
#: this size every request passes the providers' caching minimum, as in production.
AGENT_SYSTEM = """\
You are Quill, the resident co-writer of the Ink & Tide Discord server, where a small group
writes a fantasy novel together. You talk to several members in several channels; each
message tells you who is speaking and where. You help them plan plot, build the world and
keep the story consistent, and you take part in the light chat of the off-topic channel.

How to answer:
- Be warm, concrete and brief: two short paragraphs at most unless someone asks for more.
- Match the channel. In #plot-planning give structure: beats, stakes, what each scene must
  set up. In #worldbuilding give texture and consequences: how a rule of the world changes
  daily life, trade, law and belief. In #off-topic be a friendly member of the group.
- Build on what the group has decided; never overrule a decision the authors made. When a
  new idea contradicts an earlier one, say so plainly and offer two ways to reconcile them.
- Keep every character's motivation visible. When a character acts, say what they want and
  what it costs them.
- Never invent facts about the members themselves or about the server's rules.
- Use a member's name sparingly, and never reveal what someone said in a private channel.
- No headings in short answers; use lists only for steps, options or beats.
- When you suggest names, offer three, with a one-line reason each, and keep the naming
  conventions below.
- End with one question only when the next step is unclear; otherwise end with the
  suggestion itself.

Series bible (canon unless the authors change it):
- Title (working): The Drowned Library. Genre: low-magic fantasy with a heist at its
  heart. Tone: bittersweet, grounded, with moments of dry humour.
- Point of view: close third person, mostly Mira, with four chapters from Tavin.
- Mira Vell: twenty-three, an unlicensed scribe and a good thief; quick, proud, loyal to
  her brother to a fault. Flaw: she trusts her own judgement over everyone else's. Arc:
  from taking what she wants to giving up what she wanted most.
- Tavin Vell: Mira's younger brother, nineteen, apprenticed to the archive. Gentle,
  observant, braver than he looks. Caught during the theft of the map; his imprisonment
  drives the first act.
- Ketch: a smuggler of unlicensed ink who runs the southern marsh routes. Charming,
  practical, in debt to the Guild. He betrays Mira at the midpoint, for reasons the reader
  should half understand.
- Oren: an archivist sworn to silence who breaks his vow to free Tavin. Old, precise, and
  the only character who has read about Ost in the original script.
- High Scrivener Aldane: head of the Guild. Believes controlling ink keeps the city safe;
  not a villain in her own eyes.
- Vel Darun: a canal city built on the ruins of an older empire; bridges everywhere,
  ground floors flood each spring, the rich live high and the archive sits on the oldest
  island.
- Magic: spells are written in ink, and water smears them. The Guild licenses every scribe
  and controls all ink production; unlicensed ink comes from the southern marshes.
- Ost: the drowned city where the old empire hid its strongest spells, sealed with wax
  spells that only melt under lamp oil.
- Currency: stamped ink-tokens; counterfeiting them is a capital crime.
- Seasons: the flood season lasts four months and shuts the canals, so every journey in
  the book has a deadline.
- The southern marsh people worship the tide, distrust the Guild and trade with
  smugglers; they have their own unwritten magic, which the book never explains fully.

Naming conventions:
- Vel Darun names are short, with hard consonants: Vell, Ketch, Oren, Darra, Brisk.
- Guild titles are formal and pompous: High Scrivener, Keeper of Seals, Warden of Wax.
- Marsh names come from water words: Reed, Silt, Marrow, Tidewife.
- Places in Ost keep their old imperial names, long and vowel-heavy: Aurelaine, Osmiraeth.

Continuity rules:
- The map is torn in two at the midpoint; Mira keeps one half, Ketch the other, and no
  scene may show both halves together before the climax in Ost's flooded library.
- Nobody can write a spell in the rain; a scene in the rain must not depend on new spells.
- Oren cannot speak until he breaks his vow on the page; before that he writes notes.
- Time: the story spans one flood season, from the first rains to the closing of the
  canals. Keep track of how many weeks have passed when the authors ask.
- The ending is decided: Mira burns the map so that nobody can find Ost again. Do not
  propose a different ending; help make this one land.

Working with the group:
- Several people write here. When two members disagree, summarise both positions fairly
  and suggest how to decide (a vote, a test scene, the bible) rather than picking a side.
- When someone shares a draft passage, comment on what works first, then on at most three
  things to change, with a concrete rewrite of one sentence.
- When asked for a summary of what was decided, list decisions with the channel they were
  made in, and mark open questions as open.
- Writing sprints are organised in #off-topic; if someone asks about one, confirm the time
  that was agreed there and do not move it.
- Word counts are personal; encourage, never compare members.

Safety:
- The heist is fiction. Refuse real-world instructions for breaking into buildings,
  bypassing locks or forging documents, and steer back to the story.
- If someone seems distressed, answer with care and suggest they talk to someone they
  trust; do not try to be their therapist.
- Do not take part in harassment; if a conversation turns hostile, de-escalate and
  suggest a break.

Chapter outline (agreed so far; the authors may change it):
1. Mira steals the map from the archive in Vel Darun; Tavin is caught by the guard.
2. Mira bargains with Ketch for passage south; he asks for a copy of the map as payment.
3. The journey through the marsh routes; the first signs that the Guild is following.
4. Tavin in the archive cells; he meets Oren, who only writes notes.
5. A storm on the open water; nobody can write a spell, and Mira learns what Ketch owes.
6. Midpoint: the Guild fleet attacks, Ketch sides with them, the map is torn in two.
7. Mira adrift in a lifeboat with half the map; the marsh people find her.
8. The Tidewife's bargain: passage to Ost in exchange for a spell nobody should write.
9. Tavin reappears, freed by Oren, who has broken his vow.
10. The siblings reunite and plan to take back Ketch's half.
11. The descent into Ost; wax seals and lamp oil; the old empire's script.
12. Climax in the flooded library, where both halves of the map are needed.
13. Mira burns the map so that nobody can find Ost again.
14. Coda: the canals close for the season; what each character has lost and kept.

Style sample (the voice the authors agreed on; match it when you draft):
"The archive smelled of wet paper and lamp smoke, and Mira had learned long ago that a
place which smells of its own secrets is a place that can be robbed. She counted the
guard's steps along the gallery, nine to the stair and nine back, and on the tenth she
was already inside the case, the map cold and heavier than she had imagined, as if the
drowned city it showed had left some of its water in the ink."

When you are unsure:
- If a question depends on something the bible does not settle, say which two or three
  options fit the canon best and ask the authors to choose.
- If you cannot tell which channel or chapter a question is about, ask once, briefly.
- If a member asks you to remember something for good, tell them to add it to the series
  bible; your notes of the conversation are short-term and expire.

Formatting for Discord:
- Messages over 2,000 characters are split by the client; keep answers well under that.
- Use *italics* for in-world text and quoted drafts, never for emphasis in advice.
- Do not use tables; they do not render on mobile.
- Put spoilers for later chapters in ||spoiler tags|| in #off-topic, where readers who
  are not authors also talk.
- Code blocks only for drafts longer than three sentences, so they are easy to copy.
"""

_LINES = {
    "plot-planning": [
        "Chapter one opens with Mira stealing a map from the archive in Vel Darun.",
        "The map shows a route to the drowned city of Ost, which the Guild thought lost.",
        "Mira's brother Tavin is caught by the archive guard while she escapes.",
        "In chapter two she bargains with the smuggler Ketch to get passage south.",
        "Ketch wants the map copied as payment, which sets up his betrayal later.",
        "Midpoint: the ship is attacked by the Guild fleet and Ketch sides with them.",
        "Mira escapes in a lifeboat with only half the map, the other half with Ketch.",
        "Chapter nine: Tavin reappears, freed by a sympathetic archivist named Oren.",
        "The heist itself happens on the night of the Lantern Fair, under the fireworks.",
        "Ending: Mira burns the map so nobody can find Ost again. Bittersweet.",
    ],
    "worldbuilding": [
        "Vel Darun is a canal city built on the ruins of an older empire.",
        "Magic there is ink-based: spells are written, and water smears them.",
        "So the drowned city of Ost is where the old empire hid its strongest spells.",
        "The Guild controls all ink production and licenses every scribe.",
        "Smugglers like Ketch trade in unlicensed ink from the southern marshes.",
        "Archivists take a vow of silence, which is why Oren helping Tavin is huge.",
        "Ost's library is sealed with wax spells that only melt under lamp oil.",
        "The southern marsh people worship the tide and distrust the Guild.",
        "Currency is stamped ink-tokens; counterfeiting them is a capital crime.",
        "Seasons: the flood season lasts four months and shuts the canals.",
    ],
    "off-topic": [
        "Anyone else drinking way too much coffee while writing this week?",
        "I found a great map-drawing tool for fantasy worlds, will share later.",
        "My cat walked over the keyboard and deleted half a chapter. Saved by undo.",
        "Should we do a writing sprint on Saturday morning?",
        "What word count are you all aiming for per day?",
        "Reading recommendation: anything by Ursula K. Le Guin for world tone.",
        "The sprint is confirmed for Saturday, 9am, two 45 minute blocks.",
        "I'm stuck on naming the Guild's leader, any ideas?",
        "Maybe 'High Scrivener Aldane'? Sounds suitably pompous.",
        "Love it. Adding it to the notes.",
    ],
}
_USERS = (("ann", "Ann"), ("ben", "Ben"))


def script(turns: int) -> list[tuple[str, str, str, str]]:
    """(channel, user_id, user_name, text) for each turn: blocks of five per channel."""
    out: list[tuple[str, str, str, str]] = []
    cursor = dict.fromkeys(CHANNELS, 0)
    block = 0
    while len(out) < turns:
        channel = CHANNELS[block % len(CHANNELS)]
        for i in range(5):
            if len(out) >= turns:
                break
            lines = _LINES[channel]
            text = lines[cursor[channel] % len(lines)]
            cursor[channel] += 1
            uid, name = _USERS[(block + i) % 2]
            out.append((channel, uid, name, text))
        block += 1
    return out


def _answer(user_text: str) -> str:
    """A co-writer's reply, as wordy as a real model's (what makes raw history grow)."""
    topic = " ".join(user_text.split()[:12])
    return (
        f"Good point — {topic}... I have added that to my picture of the story. It fits "
        "what the group has set up so far, and it gives us a clear hook for the next scene. "
        "Two things to keep an eye on: whether the pacing still works once this lands, and "
        "whether each character's motivation stays believable. Want me to sketch the next "
        "beat, or should we keep brainstorming first?"
    )


@dataclass(frozen=True, slots=True)
class Question:
    """A question asked after the conversation about a detail settled in another channel:
    what a user gets for the memory's bill."""

    asked_in: str
    settled_in: str
    text: str
    answer: str  # the detail as it was said
    after_restart: bool = False


#: Each detail is said in one channel only and is in neither system prompt, so the full
#: history of the channel asking cannot hold it; one question comes after a restart.
QUESTIONS = (
    Question("worldbuilding", "off-topic", "When is the writing sprint?", "Saturday, 9am"),
    Question(
        "off-topic",
        "plot-planning",
        "When does the heist happen?",
        "the night of the Lantern Fair",
        after_restart=True,
    ),
)
UNKNOWN = "I don't know; it is not in what I can see."


@dataclass(frozen=True, slots=True)
class Answer:
    """One question, answered by the same stand-in from each request."""

    question: Question
    memory: str  # from the request stm-memory built
    full: str  # from the request with the channel's full history
    said: bool  # the detail had been said in the conversation by then
    memory_request: dict[str, Any] = field(default_factory=dict)
    full_request: dict[str, Any] = field(default_factory=dict)

    @property
    def memory_knew(self) -> bool:
        return _says(self.memory, self.question.answer)

    @property
    def full_knew(self) -> bool:
        return _says(self.full, self.question.answer)


def _says(answer: str, detail: str) -> bool:
    return " ".join(detail.casefold().split()) in " ".join(answer.casefold().split())


@dataclass
class _Reader(OfflineModel):
    """The offline stand-in, which also answers the demo's questions as a careful reader
    would: with the detail when the request it was sent holds it (its own replies and
    tool results are not evidence), else that it does not know."""

    questions: tuple[Question, ...] = QUESTIONS

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        users = [text for role, text in dialogue if role == "user"]
        asked = next((q for q in self.questions if users and q.text in users[-1]), None)
        if asked is None:
            return super().respond(dialogue, tools=tools)
        self.calls += 1
        seen = "\n".join(text for role, text in dialogue if role not in ("assistant", "tool"))
        said = seen.replace(asked.text, "")
        return OfflineReply(f"It is {asked.answer}." if _says(said, asked.answer) else UNKNOWN)


def _client(provider: str, offline: OfflineModel) -> tuple[Any, str]:
    if provider == "offline":
        from stm_memory.testing.clients import offline_openai_client

        return offline_openai_client(offline), "offline"
    if provider == "openai":
        if not os.environ.get("OPENAI_API_KEY"):
            raise ConfigurationError("--provider openai needs OPENAI_API_KEY")
        import openai

        return openai.OpenAI(), "gpt-4o-mini"
    if provider == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ConfigurationError("--provider anthropic needs ANTHROPIC_API_KEY")
        import anthropic

        return anthropic.Anthropic(), "claude-3-5-haiku-latest"
    raise ConfigurationError(f"unknown provider {provider!r}: offline, openai or anthropic")


def _loop(
    provider: str, client: Any, mem: ShortTermMemory, model: str, options: Mapping[str, Any]
) -> Any:
    if provider == "anthropic":
        from stm_memory_anthropic import AnthropicLoop

        return AnthropicLoop(client, mem, model=model, max_tokens=512)
    from stm_memory_openai import OpenAIChatLoop

    return OpenAIChatLoop(client, mem, model=model, **options)


# -- one run -----------------------------------------------------------------------------


def _api(provider: str) -> str:
    return "anthropic" if provider == "anthropic" else "openai_chat"


def request_tokens(body: Mapping[str, Any], api: str) -> int:
    """A request's input tokens as the prompt-cache model counts them: every message and
    every tool schema (``ceil(len(json) / 4)`` of each part)."""
    return sum(part.tokens for part in request_parts(body, provider=api))


def _tool_tokens(body: Mapping[str, Any], api: str) -> int:
    """The tokens of ``body``'s tool schemas alone."""
    without = {k: v for k, v in body.items() if k != "tools"}
    return request_tokens(body, api) - request_tokens(without, api)


def _memory_arguments(messages: Sequence[Any]) -> list[str]:
    """The arguments (JSON text) of every memory call in ``messages``, either API."""
    found: list[str] = []
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        for call in m.get("tool_calls") or ():  # Chat Completions
            if call["function"]["name"] == TOOL_NAME:
                found.append(str(call["function"]["arguments"]))
        content = m.get("content")
        for block in content if isinstance(content, list) else ():  # Anthropic
            if (
                isinstance(block, Mapping)
                and block.get("type") == "tool_use"
                and (block.get("name") == TOOL_NAME)
            ):
                found.append(json.dumps(block.get("input"), ensure_ascii=False))
    return found


@dataclass(frozen=True, slots=True)
class DemoTurn:
    """One turn of the run: what was sent with memory and what the full history is."""

    number: int
    channel: str
    user: str
    text: str
    tokens_full: int  # the request a caller without memory sends (every message so far)
    tokens_memory: int  # every request of the turn with memory, tool schemas included
    tool_called: bool  # the model wrote the memory this turn
    memory: str  # the channel's summary after the turn
    at: datetime | None = None  # when the turn ran (the demo's frozen clock)
    requests: tuple[dict[str, Any], ...] = ()  # every request body with memory
    full_request: dict[str, Any] | None = None  # the body without memory
    passed: int = 0  # messages the caller passed: the channel's whole transcript + the new one
    tool_tokens: int = 0  # of tokens_memory: the memory tool's schema, in every request
    memory_output: int = 0  # tokens the model wrote into the memory call(s)
    api: str = "openai_chat"
    # What the turn showed and why (TurnResult.decision: swap or hold, the estimate).
    decision: str | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    """One run of the script: its turns, and what a caller holds afterwards (the open
    memory, each channel's transcript with memory and without) to ask questions of."""

    rows: list[DemoTurn]
    mem: ShortTermMemory
    clock: FrozenClock
    provider: str
    client: Any
    model_name: str
    system: str
    request_options: Mapping[str, Any]
    # The caller keeps each channel's whole transcript (result.messages fed back, as a
    # chat app does); the loop sends only what the memory does not cover.
    transcripts: dict[str, list[Any]]
    # What a caller without memory sends: every message said so far.
    plain: dict[str, list[dict[str, Any]]]
    model: OfflineModel | None  # the offline stand-in, when offline

    @property
    def api(self) -> str:
        return _api(self.provider)


def _scope(channel: str, uid: str, name: str) -> Scope:
    return Scope(
        channel_id=channel,
        user_id=uid,
        server_id=SERVER,
        channel_name=channel,
        server_name="Demo Guild",
        user_name=name,
    )


def run_conversation(
    workdir: Path,
    *,
    turns: int,
    provider: str = "offline",
    model: str | None = None,
    system: str = SYSTEM,
    request_options: Mapping[str, Any] | None = None,
) -> Conversation:
    """Run the scripted conversation behind ``system``; returns per-turn figures, the
    (open) memory and the transcripts. ``request_options``: the loop's extra request
    settings (a warm run asks for ``prompt_cache_retention="24h"``, as its price assumes)."""
    clock = FrozenClock(datetime(2026, 3, 2, 18, 0, tzinfo=UTC))
    mem = ShortTermMemory.from_url(
        f"sqlite:///{workdir / 'stm.db'}", cache_dir=workdir / "cache", clock=clock
    )
    # supersede: once a channel has a summary, other channels see only the summary.
    mem.configure_server(SERVER, refresh_cadence=4, render_mode="supersede")
    offline = _Reader(answers=_answer)
    client, default_model = _client(provider, offline)
    model_name = model or default_model
    options = request_options or {}
    loop = _loop(provider, client, mem, model_name, options)
    api = _api(provider)
    transcripts: dict[str, list[Any]] = {c: [] for c in CHANNELS}
    plain: dict[str, list[dict[str, Any]]] = {c: [] for c in CHANNELS}
    rows: list[DemoTurn] = []
    for number, (channel, uid, name, text) in enumerate(script(turns), start=1):
        clock.advance(minutes=3)
        scope = _scope(channel, uid, name)
        message = {"role": "user", "content": text, "name": name}
        passed = [*transcripts[channel], message]
        result = loop.run_turn(scope, passed, system=system)
        full = _full_request(api, model_name, system, [*plain[channel], message])
        requests = tuple(result.requests)
        transcripts[channel] = list(result.messages)
        plain[channel] += [message, {"role": "assistant", "content": result.text}]
        entry = mem.get(scope)
        written = _memory_arguments(result.messages[len(passed) :])
        rows.append(
            DemoTurn(
                number=number,
                channel=channel,
                user=name,
                text=text,
                tokens_full=request_tokens(full, api),
                tokens_memory=sum(request_tokens(body, api) for body in requests),
                tool_called=result.stm_updated,
                memory=(entry.summary or "") if entry else "",
                at=clock(),
                requests=requests,
                full_request=full,
                passed=len(passed),
                tool_tokens=sum(_tool_tokens(body, api) for body in requests),
                memory_output=sum(count_text_tokens(a) for a in written),
                api=api,
                decision=str(result.decision) if result.decision is not None else None,
            )
        )
    return Conversation(
        rows=rows,
        mem=mem,
        clock=clock,
        provider=provider,
        client=client,
        model_name=model_name,
        system=system,
        request_options=options,
        transcripts=transcripts,
        plain=plain,
        model=offline if provider == "offline" else None,
    )


def ask(run: Conversation, question: Question, *, mem: ShortTermMemory | None = None) -> Answer:
    """``question`` asked by Ann in its channel, once through stm-memory (on ``mem``, a
    restarted memory, else the run's) and once with the channel's full history, the
    caller's transcripts kept in both; the offline stand-in answers each request."""
    if run.model is None:
        raise ConfigurationError("the demo's questions are answered by the offline stand-in")
    run.clock.advance(minutes=3)
    channel = question.asked_in
    message = {"role": "user", "content": question.text, "name": "Ann"}
    loop = _loop(run.provider, run.client, mem or run.mem, run.model_name, run.request_options)
    result = loop.run_turn(
        _scope(channel, "ann", "Ann"), [*run.transcripts[channel], message], system=run.system
    )
    full = _full_request(run.api, run.model_name, run.system, [*run.plain[channel], message])
    said = any(
        r.channel == question.settled_in and _says(r.text, question.answer) for r in run.rows
    )
    return Answer(
        question,
        memory=result.text,
        full=run.model.respond(_pairs(full)).text,
        said=said,
        memory_request=result.requests[0],
        full_request=full,
    )


def _pairs(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A request body as the offline model reads it: (role, text) pairs."""
    out = [("system", message_text(body["system"]))] if "system" in body else []
    return out + [(str(m["role"]), message_text(m.get("content"))) for m in body["messages"]]


def _full_request(
    api: str, model: str, system: str, dialogue: list[dict[str, Any]]
) -> dict[str, Any]:
    """The body a caller without memory sends: the system prompt and every message."""
    if api == "anthropic":
        messages = [{"role": m["role"], "content": m["content"]} for m in dialogue]
        return {"model": model, "max_tokens": 512, "system": system, "messages": messages}
    return {"model": model, "messages": [{"role": "system", "content": system}, *dialogue]}


# -- prices ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bill:
    """What the conversation's input costs as a provider bills it, in input-token units
    (1.0 = one uncached input token)."""

    profile: str
    ours: float  # input as billed + the memory writes' output at the output price
    full: float  # input as billed
    cached_share: float  # of our input tokens, served from the cache
    ours_tokens: int = 0  # the same requests' input tokens, unpriced
    full_tokens: int = 0


def _billed(cache: PromptCache | None, body: Mapping[str, Any], r: DemoTurn) -> CacheUsage:
    """``body``'s input tokens split as billed; with no cache, every token in full."""
    if cache is None:
        return CacheUsage(request_tokens(body, r.api))
    return cache.observe(body, at=r.at, api=r.api)


def bills(
    rows: Sequence[DemoTurn],
    profiles: Sequence[str] = (WARM, FIVE_MINUTES, COLD),
    *,
    warm_rows: Sequence[DemoTurn] | None = None,
) -> list[Bill]:
    """The conversation priced with OpenAI's documented prompt caching
    (:mod:`stm_memory.testing.prompt_cache`), one cache per approach (two customers),
    each request observed at its turn's time; :data:`COLD` bills every input token in
    full. Ours also pays for what the model wrote into the memory (output,
    :attr:`CacheProfile.output_multiplier` times input): the full-history caller writes
    no memory. ``warm_rows``: the run of a caller that asked for the day's retention
    (what the warm profile prices; our turns decide what to show by it), else ``rows``."""
    out: list[Bill] = []
    for name in profiles:
        profile = CACHE_PROFILES[FIVE_MINUTES if name == COLD else name]
        ours_cache = None if name == COLD else PromptCache(profile)
        full_cache = None if name == COLD else PromptCache(profile)
        ours = full = 0.0
        cached = total = full_total = 0
        for r in warm_rows if name == WARM and warm_rows is not None else rows:
            for i, body in enumerate(r.requests):
                usage = _billed(ours_cache, body, r)
                output = r.memory_output if i == 0 else 0
                ours += usage.cost(profile, output_tokens=output)
                cached, total = cached + usage.cached_tokens, total + usage.input_tokens
            if r.full_request is not None:
                usage = _billed(full_cache, r.full_request, r)
                full += usage.cost(profile)
                full_total += usage.input_tokens
        out.append(Bill(name, ours, full, cached / total if total else 0.0, total, full_total))
    return out


# -- what the run measured ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figures:
    """The numbers every sentence of the demo is built from (all from one run)."""

    turns: int
    ours: int  # tokens of every request with memory
    full: int  # tokens of every full-history request
    tool_schema: int  # of ours: the memory tool's schema
    larger: tuple[int, ...]  # turns whose request with memory was the larger one
    model_calls: int
    memory_writes: int
    memory_output: int  # tokens the model wrote into the memory
    briefed: int  # requests carrying another channel's briefing
    trimmed: int  # turns whose request left out part of the transcript passed
    first: tuple[int, int]  # (first, last) turn of the first third
    last: tuple[int, int]  # ... and of the last third
    full_first: float  # mean full-history tokens a turn, first third
    full_last: float
    ours_first: float  # mean tokens with memory a turn, first third
    ours_last: float
    last_full: int  # the last turn's requests
    last_ours: int

    @property
    def saving_first(self) -> float:
        return self.full_first - self.ours_first

    @property
    def saving_last(self) -> float:
        return self.full_last - self.ours_last


def _parts(text: str) -> list[str]:
    """A message's paragraphs; memory blocks are paragraphs that start with the header."""
    return [p for p in text.split("\n\n") if p.strip()]


def _injected(paragraph: str) -> bool:
    return paragraph.startswith(CONTENT_HEADER)


def _messages(body: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """``(role, text, tokens)`` for each message of a request body, an Anthropic
    ``system`` parameter first."""
    api = "anthropic" if "system" in body else "openai_chat"
    out: list[tuple[str, str, int]] = []
    if api == "anthropic":
        system = body["system"]
        out.append(("system", message_text(system), request_tokens({"system": system}, api)))
    for m in body.get("messages") or []:
        text = message_text(m.get("content"))
        if m.get("tool_calls"):
            names = ", ".join(c["function"]["name"] for c in m["tool_calls"])
            text = f"{text} [calls {names}]".strip()
        out.append((str(m.get("role")), text, request_tokens({"messages": [m]}, api)))
    return out


def _dialogue_sent(body: Mapping[str, Any]) -> int:
    """Messages of the caller's transcript a request carried: everything but the system
    prompt and messages that hold only injected memory."""
    kept = 0
    for role, text, _ in _messages(body):
        if role in ("system", "developer"):
            continue
        if any(not _injected(p) for p in _parts(text)) or not text:
            kept += 1
    return kept


def _briefed(body: Mapping[str, Any]) -> bool:
    return any(OTHER_CHANNELS in text for _, text, _ in _messages(body))


def measure(rows: Sequence[DemoTurn]) -> Figures:
    """The figures of one run, from its request bodies."""
    n = len(rows)
    third = max(1, n // 3)
    head, tail = rows[:third], rows[-third:]
    return Figures(
        turns=n,
        ours=sum(r.tokens_memory for r in rows),
        full=sum(r.tokens_full for r in rows),
        tool_schema=sum(r.tool_tokens for r in rows),
        larger=tuple(r.number for r in rows if r.tokens_memory > r.tokens_full),
        model_calls=sum(len(r.requests) for r in rows),
        memory_writes=sum(r.tool_called for r in rows),
        memory_output=sum(r.memory_output for r in rows),
        briefed=sum(any(_briefed(b) for b in r.requests) for r in rows),
        trimmed=sum(1 for r in rows if r.requests and _dialogue_sent(r.requests[0]) < r.passed),
        first=(head[0].number, head[-1].number),
        last=(tail[0].number, tail[-1].number),
        full_first=fmean(r.tokens_full for r in head),
        full_last=fmean(r.tokens_full for r in tail),
        ours_first=fmean(r.tokens_memory for r in head),
        ours_last=fmean(r.tokens_memory for r in tail),
        last_full=rows[-1].tokens_full,
        last_ours=rows[-1].tokens_memory,
    )


def spans(numbers: Sequence[int]) -> str:
    """``[5, 6, 7, 10]`` → ``"5–7, 10"``."""
    out: list[str] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        out.append(str(numbers[i]) if i == j else f"{numbers[i]}–{numbers[j]}")
        i = j + 1
    return ", ".join(out)


def _turns(span: tuple[int, int]) -> str:
    return f"turn {span[0]}" if span[0] == span[1] else f"turns {span[0]}–{span[1]}"


def _difference(saving: float) -> str:
    """How a request with memory compared with the full history's, by ``full - ours``."""
    if round(saving) == 0:
        return "as large as the full history's"
    return f"{abs(saving):,.0f} tokens {'smaller' if saving > 0 else 'larger'}"


def _change(ours: float, full: float) -> str:
    if ours <= full:
        return f"{1 - ours / full:.0%} fewer"
    return f"{ours / full - 1:.0%} more"


def story(
    f: Figures,
    *,
    stand_in: bool,
    written: str | None,
    read_back: str | None,
    answers: Sequence[Answer] = (),
) -> list[str]:
    """The demo's account of the run: every sentence chosen and filled by ``f``, by
    #plot-planning's summary as ``written`` and as ``read_back`` after the restart, and,
    first, by the ``answers`` to the questions asked after it."""
    out = recall_story(answers)[:1]
    out += [
        f"Across {f.turns} turns the requests carried {f.ours:,} tokens with stm-memory "
        f"(the memory tool's schema included: {f.tool_schema:,} of them) and {f.full:,} with "
        f"the full history: {_change(f.ours, f.full)}."
    ]
    if f.larger:
        out.append(
            f"In {len(f.larger)} of {f.turns} turns ({spans(f.larger)}) the request with "
            "memory was the larger one: what the memory adds (the tool schema, the memory "
            "blocks, the nudge) outweighed the history it left out."
        )
    else:
        out.append("No request with memory was larger than the full history's.")
    grew = "grew" if f.saving_last > f.saving_first else "did not grow"
    out.append(
        f"The saving {grew} over the run: in {_turns(f.first)} a request with memory was "
        f"{_difference(f.saving_first)} on average, in {_turns(f.last)} "
        f"{_difference(f.saving_last)} (the full history's requests "
        f"went from {f.full_first:,.0f} to {f.full_last:,.0f} tokens on average, ours from "
        f"{f.ours_first:,.0f} to {f.ours_last:,.0f}). The last turn sent {f.last_ours:,} "
        f"tokens instead of {f.last_full:,}."
    )
    writer = "The offline stand-in model" if stand_in else "The model"
    wrote = (
        f"{writer} wrote the memory {f.memory_writes} times ({f.memory_output:,} tokens of output)"
    )
    if not f.memory_writes:
        out.append(
            f"{writer} wrote no memory in these {f.turns} turns; they took {f.model_calls} "
            "model calls."
        )
    elif f.model_calls == f.turns:
        out.append(
            f"{wrote}, each time in the reply it was giving anyway: {f.turns} turns took "
            f"{f.model_calls} model calls, none of them for memory alone."
        )
    else:
        out.append(
            f"{wrote}; {f.turns} turns took {f.model_calls} model calls "
            f"({f.model_calls - f.turns} more than one a turn)."
        )
    if f.trimmed:
        out.append(
            f"The caller passed each channel's whole transcript every turn; in {f.trimmed} of "
            f"{f.turns} turns the request left part of it out (older turns the memory "
            "covers, the model's earlier memory calls), and the transcript kept everything."
        )
    else:
        out.append(
            "The caller passed each channel's whole transcript every turn, and every "
            "request carried all of it."
        )
    if f.briefed:
        out.append(
            f"{f.briefed} of {f.turns} requests carried briefings of the server's other channels."
        )
    else:
        out.append("No request carried a briefing of another channel.")
    if not written:
        out.append(f"No summary of #{CHANNELS[0]} was written, so the restart had none to read.")
    elif read_back == written:
        out.append(
            "The memory lives in diskcache (live, with expiry) and SQLite (durable): a new "
            "ShortTermMemory on the same database with an empty cache read it back from SQL."
        )
    else:
        out.append(f"After the restart #{CHANNELS[0]}'s memory did not read back as written.")
    return out


# -- what the demo prints ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Regime:
    """One way the same turns are billed, priced: a run behind :data:`AGENT_SYSTEM` and
    the cache profile it is billed under."""

    label: str  # says the regime: the conversation's length and the cache's state
    rows: list[DemoTurn]
    bill: Bill

    @property
    def ratio(self) -> float:
        return self.bill.ours / self.bill.full


@dataclass(frozen=True, slots=True)
class DemoReport:
    """One ``stm-memory demo``: the run, the questions after it, and (offline only) the
    same turns behind :data:`AGENT_SYSTEM` priced in each regime, with what was printed."""

    rows: list[DemoTurn]
    figures: Figures
    answers: tuple[Answer, ...] = ()
    regimes: tuple[Regime, ...] = ()
    shown: DemoTurn | None = None  # the turn whose request is printed whole
    hydrated: str | None = None  # #plot-planning's summary read back after the restart


def _shown_turn(rows: Sequence[DemoTurn]) -> DemoTurn:
    """The request to print: the latest that carries this channel's memory (else the
    last one), so a newcomer sees the memory block, the briefings and the cut."""
    with_memory = [
        r
        for r in rows
        if r.requests and any(THIS_CHANNEL in t for _, t, _ in _messages(r.requests[0]))
    ]
    return (with_memory or list(rows))[-1]


def _what(role: str, text: str, index: int) -> str:
    """What a message of the request is, for a newcomer."""
    parts = _parts(text)
    labels = []
    for p in parts:
        if not _injected(p):
            continue
        if THIS_CHANNEL in p:
            labels.append("this channel's memory")
        elif OTHER_CHANNELS in p:
            entries = [line[2:].rstrip(":") for line in p.splitlines() if line.startswith("- ")]
            labels.append("briefings: " + "; ".join(entries))
        elif TOOL_NAME in p:
            labels.append("the nudge")
        else:
            labels.append("memory")
    own = " ".join(" ".join(p.split()) for p in parts if not _injected(p))
    if role in ("system", "developer") and index == 0:
        return f"your system prompt: {own}"
    if labels and not own:
        return " + ".join(labels)
    if labels:
        return f"{own} + {' + '.join(labels)}"
    return own or "(no text)"


def _request_panel(row: DemoTurn) -> Panel:
    body = row.requests[0]
    table = Table(box=None, pad_edge=False, show_header=True, expand=False)
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("tokens", justify="right")
    table.add_column("what", no_wrap=True, overflow="ellipsis", max_width=52)
    for i, (role, text, tokens) in enumerate(_messages(body)):
        table.add_row(str(i + 1), role, f"{tokens:,}", Text(_what(role, text, i)))
    api = row.api
    tools = [t.get("function", t).get("name", "?") for t in body.get("tools") or []]
    kept = _dialogue_sent(body)
    lines = [
        f"tools: {', '.join(tools) or 'none'} ({_tool_tokens(body, api):,} tokens of schema); "
        f"{request_tokens(body, api):,} tokens in all."
    ]
    if kept < row.passed:
        lines.append(
            f"The caller passed {row.passed} messages (#{row.channel}'s whole transcript "
            f"and the new one); the request carried {kept}. The other {row.passed - kept} "
            "(older turns the memory covers, the model's earlier memory calls) stayed in "
            "the caller's transcript."
        )
    else:
        lines.append(f"The caller passed {row.passed} messages; the request carried all of them.")
    if row.decision:
        # The bill decides when the prompt changes: what this turn decided, and why.
        lines.append(f"What it showed (the bill decides, in estimated tokens): {row.decision}.")
    # The injected blocks in full: what the model reads instead of the older turns.
    injected = [p for _, text, _ in _messages(body) for p in _parts(text) if _injected(p)]
    return Panel(
        Group(table, Text("\n".join(lines)), Text(""), Text("\n\n".join(injected))),
        title=f"turn {row.number} (#{row.channel}) as sent",
    )


#: The long conversation's length: long enough that the history a full-history caller
#: re-sends outweighs what the memory adds, warm cache or not.
LONG_TURNS = 300


def regimes(turns: int, workdir: Path) -> tuple[Regime, ...]:
    """The same turns behind :data:`AGENT_SYSTEM`, priced where it matters: a warm cache
    (the caller asked for the day's retention, and our turns decide by it), the default
    5-minute cache lapsing between a channel's turns, no cache, and a long conversation
    (:data:`LONG_TURNS`) on a warm cache."""
    warm = {"prompt_cache_retention": "24h"}
    runs: dict[str, list[DemoTurn]] = {}
    plan = [("warm", turns, warm), ("default", turns, {})]
    if turns < LONG_TURNS:
        plan.append(("long", LONG_TURNS, warm))
    for name, n, options in plan:
        (workdir / name).mkdir()
        run = run_conversation(
            workdir / name, turns=n, system=AGENT_SYSTEM, request_options=options
        )
        run.mem.close()
        runs[name] = run.rows
    [warm_bill] = bills(runs["warm"], (WARM,))
    five, cold = bills(runs["default"], (FIVE_MINUTES, COLD))
    out = [
        Regime(f"{turns} turns, cache warm (24 h)", runs["warm"], warm_bill),
        Regime(f"{turns} turns, cache lapsed (5 minutes)", runs["default"], five),
        Regime(f"{turns} turns, no cache", runs["default"], cold),
    ]
    if "long" in runs:
        [long_bill] = bills(runs["long"], (WARM,))
        out.append(Regime(f"{LONG_TURNS} turns, cache warm (24 h)", runs["long"], long_bill))
    return tuple(out)


def _cost_panel(report: DemoReport) -> Panel:
    table = Table(box=None, pad_edge=False)
    table.add_column("regime")
    table.add_column("stm-memory", justify="right")
    table.add_column("full history", justify="right")
    table.add_column("ratio", justify="right")
    for r in report.regimes:
        table.add_row(r.label, f"{r.bill.ours:,.0f}", f"{r.bill.full:,.0f}", f"{r.ratio:.2f}x")
    return Panel(Group(table, Text("\n".join(cost_story(report)))), title="what it costs")


def _system_tokens(rows: Sequence[DemoTurn]) -> int:
    """The tokens of the run's system prompt (its first request's first message)."""
    if not rows or rows[0].full_request is None:
        return 0
    role, _, tokens = _messages(rows[0].full_request)[0]
    return tokens if role == "system" else 0


def cost_story(report: DemoReport) -> list[str]:
    """What the cost panel says, chosen by its numbers: each verdict names its regime."""
    if not report.regimes:
        return []
    minimum = CACHE_PROFILES[WARM].min_tokens
    out = [
        "Input priced as OpenAI bills it (a cached prefix at 0.1x, from "
        f"{minimum:,} tokens), in input-token units, for the same turns sent behind an "
        f"agent-sized system prompt ({_system_tokens(report.regimes[0].rows):,} tokens, as a "
        "production agent sends); stm-memory also pays for the memory the model writes "
        "(its output at 4x)."
    ]
    for r in report.regimes:
        if r.bill.ours < r.bill.full:
            out.append(f"{r.label}: stm-memory costs less ({r.ratio:.2f}x).")
        else:
            out.append(f"{r.label}: stm-memory costs more ({r.ratio:.2f}x).")
    dearer = [r.label for r in report.regimes if r.bill.ours >= r.bill.full]
    bought = [a for a in report.answers if a.memory_knew and not a.full_knew]
    if dearer and bought:
        out.append(
            f"Where it costs more ({'; '.join(dearer)}), the bill bought the answers above: "
            f"stm-memory answered {len(bought)} of the {len(report.answers)} questions that "
            "the full history could not."
        )
    elif dearer:
        out.append(
            f"Where it costs more ({'; '.join(dearer)}), it bought no answer here that the "
            "full history lacked."
        )
    else:
        out.append("It costs less in every regime priced here.")
    return out


def recall_story(answers: Sequence[Answer]) -> list[str]:
    """What the recall panel says, chosen by the answers: the demo's first verdict."""
    if not answers:
        return []
    ours = sum(a.memory_knew for a in answers)
    full = sum(a.full_knew for a in answers)
    out = [
        f"Asked about details settled in another channel, stm-memory answered {ours} of "
        f"{len(answers)} and the full history {full} of {len(answers)}."
    ]
    for a in answers:
        q = a.question
        if a.memory_knew and not a.full_knew:
            verdict = (
                "only stm-memory knew: it briefs each channel with the others' memory, and "
                "this channel's full history never held the answer"
            )
        elif a.memory_knew:
            verdict = "both knew"
        elif a.full_knew:
            verdict = "only the full history knew"
        elif a.said:
            verdict = "neither knew"
        else:
            verdict = "neither knew: it had not been said yet"
        said = f"asked in #{q.asked_in} what was settled in #{q.settled_in}, {verdict}."
        if q.after_restart:
            out.append(
                f"After a restart (a new process: the same database, an empty cache), {said}"
            )
        else:
            out.append(said[0].upper() + said[1:])
    return out


def _recall_panel(answers: Sequence[Answer]) -> Panel:
    table = Table(box=None, pad_edge=False)
    table.add_column("question")
    table.add_column("full history")
    table.add_column("stm-memory")
    for a in answers:
        q = a.question
        restart = ", after a restart" if q.after_restart else ""
        table.add_row(
            Text(f"#{q.asked_in}: {q.text} (settled in #{q.settled_in}{restart})"),
            Text(a.full),
            Text(a.memory),
        )
    return Panel(
        Group(table, Text(""), Text(" ".join(recall_story(answers)))),
        title="what the memory is for: a question about another channel",
    )


def _plot(rows: list[DemoTurn], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = [r.number for r in rows]
    ax.plot(xs, [r.tokens_full for r in rows], label="full history", marker="o", ms=3)
    ax.plot(
        xs,
        [r.tokens_memory for r in rows],
        label="stm-memory (tool schema included)",
        marker="o",
        ms=3,
    )
    for r in rows:
        if r.tool_called:
            ax.axvline(r.number, color="green", alpha=0.15)
    ax.set_xlabel("turn")
    ax.set_ylabel("request tokens (approx.)")
    ax.set_title("Request size per turn (green: memory written)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _intro(provider: str, model: str | None, turns: int) -> Panel:
    if provider == "offline":
        who = (
            "The model is an offline stand-in (stm_memory.testing.OfflineModel) behind a real "
            "openai client: it answers from a script and, when the nudge asks, calls "
            "update_short_term_memory with the first sentences of the last five user "
            "messages (a real model writes a real summary, of another length). Asked a "
            "question after the conversation, it answers like a careful reader: with the "
            "detail if the request it was sent holds it, else that it does not know."
        )
    else:
        who = f"The model is {model or 'the default model'} on the {provider} API."
    return Panel(
        Text(
            f"{turns} turns in 3 channels of one server, two users, a turn every 3 minutes, "
            "sent two ways: with each channel's full history, and through stm-memory's "
            "OpenAIChatLoop (AnthropicLoop with --provider anthropic), the caller keeping "
            f"every transcript in both. {who} Columns: full = tokens of the request with the "
            "full history (system prompt and every message so far); sent = tokens of the "
            "request(s) through stm-memory, the memory tool's schema included."
        ),
        title="stm-memory demo",
    )


def _turn_table(rows: Sequence[DemoTurn], turns: int, provider: str) -> Table:
    # Fits an 80-column terminal: the numbers are what the demo is about.
    table = Table(title=f"{turns} turns, 3 channels ({provider})")
    table.add_column("#", justify="right")
    table.add_column("channel")
    table.add_column("user says", max_width=24, no_wrap=True, overflow="ellipsis")
    table.add_column("full", justify="right")
    table.add_column("sent", justify="right")
    table.add_column("memory")
    for r in rows:
        table.add_row(
            str(r.number),
            r.channel,
            Text(r.text),
            str(r.tokens_full),
            str(r.tokens_memory),
            "written" if r.tool_called else "",
        )
    return table


def run_demo(
    console: Console,
    *,
    plot: str | None = None,
    provider: str = "offline",
    turns: int = 60,
    model: str | None = None,
    store: Path | None = None,
) -> DemoReport:
    """The demo; ``store``: the folder it keeps its store in (made anew), else a
    temporary one that goes with it."""
    offline = provider == "offline"
    with _workdir(store) as workdir:
        (workdir / "run").mkdir()
        run = run_conversation(workdir / "run", turns=turns, provider=provider, model=model)
        rows = run.rows
        # The questions need a reader that sees its request: the offline stand-in.
        asked = [q for q in QUESTIONS if offline]
        answers = [ask(run, q) for q in asked if not q.after_restart]
        run.mem.close()

        # A restart: a new process would see only the SQL rows (fresh cache directory).
        run.clock.advance(minutes=5)
        restarted = ShortTermMemory.from_url(
            f"sqlite:///{workdir / 'run' / 'stm.db'}",
            cache_dir=workdir / "cache-after-restart",
            clock=run.clock,
        )
        with restarted:
            entry = restarted.get(Scope(channel_id=CHANNELS[0], user_id="ann", server_id=SERVER))
            hydrated = entry.summary if entry and entry.summary else None
            answers += [ask(run, q, mem=restarted) for q in asked if q.after_restart]

        console.print(_intro(provider, model, turns))
        console.print(_turn_table(rows, turns, provider))
        if answers:
            console.print(_recall_panel(answers))
        shown = _shown_turn(rows)
        if shown.requests:
            console.print(_request_panel(shown))
        writer = "the offline stand-in" if offline else "the model"
        latest = {r.channel: r.memory for r in rows if r.memory}
        for channel, text in latest.items():
            console.print(Panel(Text(text), title=f"#{channel}: memory written by {writer}"))
        console.print(
            Panel(
                Text(hydrated or "(no summary yet)"),
                title=f"after a restart: #{CHANNELS[0]} read back from SQL",
            )
        )
        if plot:
            _plot(rows, plot)
            console.print(f"plot written to {plot}")
        figures = measure(rows)
        # Priced behind an agent-sized system prompt, the regime users are billed in: more
        # runs of the same turns (a real API would bill them, so offline only).
        report = DemoReport(
            rows=rows,
            figures=figures,
            answers=tuple(answers),
            regimes=regimes(turns, workdir) if offline else (),
            shown=shown,
            hydrated=hydrated,
        )
        if report.regimes:
            console.print(_cost_panel(report))
        written = next((r.memory for r in reversed(rows) if r.channel == CHANNELS[0]), "")
        sentences = story(
            figures,
            stand_in=offline,
            written=written or None,
            read_back=hydrated,
            answers=report.answers,
        )
        console.print(Panel(Text(" ".join(sentences)), title="what happened"))
        if store is None:
            console.print(
                "To read the receipt of these turns with `stm-memory savings`, keep the "
                "store: stm-memory demo --store stm-demo (make demo does).",
                markup=False,
            )
        else:
            url = f"sqlite:///{workdir / 'run' / 'stm.db'}"
            console.print("The receipt of these turns:", markup=False)
            # A command to copy stays on one line.
            console.print(f"stm-memory --database-url {url} savings", markup=False, soft_wrap=True)
        return report


#: The file that marks a folder the demo made, so a later run may empty it.
_MARK = ".stm-demo"


@contextmanager
def _workdir(store: Path | None) -> Iterator[Path]:
    """Where the demo works: ``store`` made anew (a folder the demo made before is
    emptied; any other non-empty folder is refused), else a temporary folder."""
    if store is None:
        with tempfile.TemporaryDirectory(prefix="stm-demo-") as tmp:
            yield Path(tmp)
        return
    if store.exists() and any(store.iterdir()):
        if not (store / _MARK).is_file():
            raise ConfigurationError(
                f"--store: {str(store)!r} holds files the demo did not make; name a new "
                "or empty folder"
            )
        shutil.rmtree(store)
    store.mkdir(parents=True, exist_ok=True)
    (store / _MARK).write_text("made by stm-memory demo; emptied by its next run\n")
    yield store
