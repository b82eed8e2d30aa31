"""A conversation set from a seed: :func:`generate_conversation`.

Several channels of one server and several users; facts planted in one channel and
asked about later in the same channel and in another one; a third of the facts
corrected later (the newer value is the answer); decoy facts of the same shape that are
never asked about; chat in between, so that every strategy's memory is rewritten several
times before the last question. Every value is unique in a set, so an answer names one
fact.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stm_memory.evaluation._conversation import (
    ConversationSet,
    Fact,
    Probe,
    ProbeKind,
    Speaker,
    Utterance,
    UtteranceKind,
)

__all__ = ["CHANNELS", "SPEAKERS", "SYSTEM_PROMPT", "generate_conversation"]

SERVER_ID = "g-community"
SERVER_NAME = "Riverside Community"
CHANNELS = ("events", "logistics", "volunteers", "random")
SPEAKERS = (Speaker("u-ann", "Ann"), Speaker("u-ben", "Ben"), Speaker("u-chloe", "Chloe"))
SYSTEM_PROMPT = (
    "You are Wren, the assistant of the Riverside Community server, where members plan "
    "local events. Answer briefly and helpfully. When someone asks for a detail that was "
    "settled earlier, give the value that holds now."
)
#: Facts are planted over this share of the conversation, so they age before the
#: questions about them come.
PLANT_SPAN = 0.55
#: A fact is asked about in another channel only once its own channel has had this many
#: more turns: the question is about what that channel settled, not its last messages.
MOVED_ON_TURNS = 4
DECOYS = 3

_SUBJECTS = (
    "the book club", "the spring fair", "the hackathon", "the choir rehearsal",
    "the chess night", "the beach cleanup", "the film evening", "the pottery class",
    "the charity run", "the board-game night", "the language café", "the garden day",
    "the jazz brunch", "the repair café",
)  # fmt: skip
_PLACES = (
    "Harrowgate", "Pemberton", "Quillon", "Marrowby", "Ashcombe", "Tilbury", "Wexford",
    "Larkspur", "Fennick", "Oakhurst", "Brackwater", "Dunmore", "Elmstead", "Kestrel",
    "Nettlebed", "Rookwood",
)  # fmt: skip
_SURNAMES = (
    "Okafor", "Lindqvist", "Moreau", "Takahashi", "Castellanos", "Nakamura", "Petrovic",
    "Abernathy", "Oyelaran", "Fitzgerald", "Haugland", "Delacroix", "Quintero", "Vasquez",
    "Kowalczyk", "Mbeki",
)  # fmt: skip
_WORDS = ("teal", "otter", "maple", "comet", "pebble", "ember", "fjord", "lumen", "quartz")

#: attribute → how one of its values is drawn.
_ATTRIBUTES: dict[str, Callable[[random.Random], str]] = {
    "door code": lambda rng: str(rng.randint(1000, 9999)),
    "venue": lambda rng: rng.choice(_PLACES),
    "start time": lambda rng: f"{rng.randint(8, 21):02d}:{rng.choice(range(0, 60, 5)):02d}",
    "host": lambda rng: rng.choice(_SURNAMES),
    "wifi password": lambda rng: f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{rng.randint(10, 99)}",
    "room": lambda rng: f"{rng.choice('ABCDEFGH')}{rng.randint(10, 99)}",
}
_STATE = (
    "Settled: the {attr} for {subject} is {value}.",
    "For the record, {subject} has {value} as its {attr}.",
    "Quick note: the {attr} for {subject} will be {value}.",
)
_CORRECT = (
    "Change of plan: the {attr} for {subject} is now {value}.",
    "Update, please use the new one: {subject} moved its {attr} to {value}.",
)
_ASK = "What is the {attr} for {subject}? Just the current value, please."
_CHAT = (
    "Has anyone seen the new posters in the hallway? They look great.",
    "I might be a few minutes late to everything this week, sorry in advance.",
    "Does the community garden still need people to water it on weekends?",
    "Thanks everyone for the help last month, it made a real difference.",
    "Can we keep the announcements short this time? People skim them.",
    "I think we should ask the library whether they want to co-host something.",
    "What was the name of that bakery that sponsored snacks last year?",
    "Reminder to myself: bring the extension cable and the spare chairs.",
    "Is there a sign-up sheet somewhere, or do we just show up?",
    "The weather forecast looks mixed, maybe we need a plan B indoors.",
    "Could someone share the photos from the last meetup in this channel?",
    "I'd love a short checklist for newcomers so they feel welcome.",
    "We should thank the volunteers publicly, maybe in the newsletter.",
    "My neighbour asked if kids are welcome; I said probably yes.",
    "Let's not schedule two things on the same evening again.",
    "Does anyone know if the parking lot behind the hall is free on Sundays?",
    "I can print flyers if someone sends me the final text.",
    "Please keep this channel for planning, the memes go in random.",
)


@dataclass
class _FactPlan:
    attr: str
    subject: str
    channel: str
    said_at: list[int]  # the planting turn, then each correction's
    values: list[str]

    @property
    def key(self) -> str:
        return f"{self.attr} for {self.subject}"


@dataclass
class _Builder:
    """The schedule being filled: what each turn is for (None: chat)."""

    rng: random.Random
    channel_of: list[str]
    slots: list[str | None] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.slots = [None] * len(self.channel_of)

    def value_for(self, attr: str) -> str:
        while True:
            value = _ATTRIBUTES[attr](self.rng)
            if value.casefold() not in self.used:
                self.used.add(value.casefold())
                return value

    def free_after(self, channels: Sequence[str], after: int) -> list[int]:
        return [
            t
            for t in range(after + 1, len(self.slots))
            if self.slots[t] is None and self.channel_of[t] in channels
        ]

    def plant(self, keys: Sequence[tuple[str, str]]) -> list[_FactPlan]:
        span = max(2, int(len(self.slots) * PLANT_SPAN))
        plans = []
        for i, (attr, subject) in enumerate(keys):
            free = [t for t in range(span) if self.slots[t] is None]
            at = free[len(free) * i // len(keys)]  # spread over the span
            self.slots[at] = f"fact:{i}"
            plans.append(
                _FactPlan(attr, subject, self.channel_of[at], [at], [self.value_for(attr)])
            )
        return plans

    def correct(self, plans: Sequence[_FactPlan]) -> None:
        for i, plan in enumerate(plans):
            if i % 3 != 2:
                continue
            free = self.free_after([plan.channel], plan.said_at[0] + 3)
            if free:
                at = free[min(len(free) - 1, self.rng.randint(0, 6))]
                self.slots[at] = f"correction:{i}"
                plan.said_at.append(at)
                plan.values.append(self.value_for(plan.attr))

    def ask(
        self, plans: Sequence[_FactPlan], channels: Sequence[str]
    ) -> list[tuple[int, int, ProbeKind]]:
        asked: list[tuple[int, int, ProbeKind]] = []
        turns = len(self.slots)
        for i, plan in enumerate(plans):
            last = plan.said_at[-1]
            # Short and long delays alternate: some questions come while the fact is in
            # the recent dialogue, some long after it.
            same = self.free_after([plan.channel], last + 1)
            if same:
                low, high = (0, 2) if i % 2 == 0 else (len(same) // 2, len(same) - 1)
                at = same[min(self.rng.randint(low, high), len(same) - 1)]
                self.slots[at] = f"probe:{i}"
                asked.append((at, i, "same_channel"))
            if i % 2 == 0 or len(plan.said_at) > 1:
                later = [t for t in range(last + 1, turns) if self.channel_of[t] == plan.channel]
                moved_on = later[MOVED_ON_TURNS - 1] if len(later) >= MOVED_ON_TURNS else turns
                others = [c for c in channels if c != plan.channel]
                cross = self.free_after(others, max(last + max(6, turns // 8), moved_on))
                if cross:
                    at = cross[self.rng.randint(len(cross) // 3, len(cross) - 1)]
                    self.slots[at] = f"probe:{i}"
                    asked.append((at, i, "cross_channel"))
        return sorted(asked)

    def place_decoys(self, count: int) -> None:
        for k in range(count):
            free = [t for t, slot in enumerate(self.slots) if slot is None]
            if free:
                self.slots[free[self.rng.randrange(len(free))]] = f"decoy:{k}"


def _probe_objects(
    asked: Sequence[tuple[int, int, ProbeKind]],
    plans: Sequence[_FactPlan],
    facts: Sequence[Fact],
    channel_of: Sequence[str],
) -> list[Probe]:
    probes = []
    for n, (at, i, kind) in enumerate(asked):
        fact, value = facts[i], facts[i].value_at(at)
        probes.append(
            Probe(
                id=f"p{n:02d}",
                fact_id=fact.id,
                turn=at,
                channel=channel_of[at],
                question=_ASK.format(attr=plans[i].attr, subject=plans[i].subject),
                expected=value,
                kind=kind,
                # Only values the fact had before: a later one cannot be stale yet.
                stale=fact.values[: fact.values.index(value)],
            )
        )
    return probes


def generate_conversation(
    *,
    seed: int = 7,
    turns: int = 120,
    channels: Sequence[str] = CHANNELS,
    speakers: Sequence[Speaker] = SPEAKERS,
    facts: int | None = None,
    system_prompt: str = SYSTEM_PROMPT,
) -> ConversationSet:
    """A deterministic conversation set for ``seed`` (see the module docstring).

    ``turns`` user messages over ``channels`` (at least 2) of one server, spoken by
    ``speakers`` (at least 2); about one turn in eight plants a fact (``facts``
    overrides). ``system_prompt`` is what every strategy sends first: pass your agent's
    own to price the run behind it (prompt caches serve only prefixes of 1,024 tokens
    and more).
    """
    if turns < 16:
        raise ValueError("turns must be at least 16 (room for facts, corrections, probes)")
    if len(channels) < 2 or len(speakers) < 2:
        raise ValueError("a conversation set needs at least two channels and two speakers")
    rng = random.Random(seed)
    builder = _Builder(rng, _turn_channels(rng, turns, channels))
    keys = [(attr, subject) for subject in _SUBJECTS for attr in _ATTRIBUTES]
    rng.shuffle(keys)
    n_facts = facts if facts is not None else max(3, turns // 8)
    if not 1 <= n_facts <= len(keys) - DECOYS:
        raise ValueError(f"facts must be between 1 and {len(keys) - DECOYS}")
    plans = builder.plant(keys[:n_facts])
    builder.correct(plans)
    asked = builder.ask(plans, channels)
    decoy_keys = keys[n_facts : n_facts + DECOYS]
    builder.place_decoys(len(decoy_keys))
    decoy_values = [builder.value_for(attr) for attr, _ in decoy_keys]
    fact_objects = tuple(
        Fact(f"f{i:02d}", p.key, p.channel, tuple(p.values), p.said_at[0], tuple(p.said_at[1:]))
        for i, p in enumerate(plans)
    )
    probes = _probe_objects(asked, plans, fact_objects, builder.channel_of)
    probe_at = {p.turn: p for p in probes}
    chat = list(_CHAT)
    rng.shuffle(chat)
    utterances = []
    for t, slot in enumerate(builder.slots):
        speaker = speakers[rng.randrange(len(speakers))]
        kind: UtteranceKind = "chat"
        text, fact_id, probe_id = chat[t % len(chat)], None, None
        what, _, index = (slot or "chat:").partition(":")
        if what == "decoy":
            attr, subject = decoy_keys[int(index)]
            text, kind = (
                _STATE[0].format(attr=attr, subject=subject, value=decoy_values[int(index)]),
                "decoy",
            )
        elif what == "probe":
            probe = probe_at[t]
            text, kind, fact_id, probe_id = probe.question, "probe", probe.fact_id, probe.id
        elif what in ("fact", "correction"):
            plan = plans[int(index)]
            n = plan.said_at.index(t)
            template = rng.choice(_STATE if n == 0 else _CORRECT)
            kind = "fact" if n == 0 else "correction"
            text = template.format(attr=plan.attr, subject=plan.subject, value=plan.values[n])
            text, fact_id = text[0].upper() + text[1:], fact_objects[int(index)].id
        utterances.append(
            Utterance(
                t,
                builder.channel_of[t],
                speaker.user_id,
                speaker.name,
                text,
                kind,
                fact_id,
                probe_id,
            )
        )
    return ConversationSet(
        name=f"generated-seed{seed}-{turns}turns",
        server_id=SERVER_ID,
        server_name=SERVER_NAME,
        channels=tuple(channels),
        speakers=tuple(speakers),
        system_prompt=system_prompt,
        turns=tuple(utterances),
        facts=fact_objects,
        probes=tuple(probes),
        seed=seed,
    )


def _turn_channels(rng: random.Random, turns: int, channels: Sequence[str]) -> list[str]:
    # Members talk in bursts: a few turns in one channel, then another channel.
    out: list[str] = []
    last = None
    while len(out) < turns:
        channel = rng.choice([c for c in channels if c != last])
        out.extend([channel] * rng.randint(2, 5))
        last = channel
    return out[:turns]
