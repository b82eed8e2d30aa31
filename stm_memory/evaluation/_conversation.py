"""The conversation set: who says what, where and when, and which questions have answers.

A :class:`ConversationSet` is plain data (frozen dataclasses, JSON round trip), so a run
can be repeated from its file or from its seed. :func:`generate_conversation` builds one
from a seed: several channels of one server, several users, facts planted in one channel
and asked about later in the same channel and in another one, facts corrected later
(the newer value is the answer), decoy facts that are never asked about, and chat in
between, so that every strategy's memory is rewritten several times before the last
question.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "ConversationSet",
    "Fact",
    "Probe",
    "ProbeKind",
    "Speaker",
    "Utterance",
    "UtteranceKind",
    "generate_conversation",
]

UtteranceKind = Literal["chat", "fact", "correction", "decoy", "probe"]
ProbeKind = Literal["same_channel", "cross_channel"]
#: How an answer is matched: the whole value as a phrase, or every word of it.
MatchRule = Literal["phrase", "words"]


@dataclass(frozen=True, slots=True)
class Speaker:
    user_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Utterance:
    """One user message, the turn the assistant answers."""

    index: int
    channel: str
    user_id: str
    user_name: str
    text: str
    kind: UtteranceKind = "chat"
    fact_id: str | None = None
    probe_id: str | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    """A value stated in ``channel`` at turn ``planted_at``; ``values`` is its history
    (``values[-1]`` is the current one), ``corrected_at`` the turns that changed it."""

    id: str
    key: str
    channel: str
    values: tuple[str, ...]
    planted_at: int
    corrected_at: tuple[int, ...] = ()

    @property
    def current(self) -> str:
        return self.values[-1]

    def value_at(self, turn: int) -> str:
        """The value that holds when turn ``turn`` is asked."""
        changes = sum(1 for t in self.corrected_at if t < turn)
        return self.values[changes]


@dataclass(frozen=True, slots=True)
class Probe:
    """A question asked at turn ``turn`` in ``channel``; ``expected`` must appear in the
    answer and none of ``stale`` (values the fact had before a correction) may."""

    id: str
    fact_id: str
    turn: int
    channel: str
    question: str
    expected: str
    kind: ProbeKind
    stale: tuple[str, ...] = ()
    match: MatchRule = "phrase"

    @property
    def corrected(self) -> bool:
        return bool(self.stale)


@dataclass(frozen=True, slots=True)
class ConversationSet:
    """Everything a run needs: the turns in order, the facts and the probes."""

    name: str
    server_id: str
    server_name: str
    channels: tuple[str, ...]
    speakers: tuple[Speaker, ...]
    system_prompt: str
    turns: tuple[Utterance, ...]
    facts: tuple[Fact, ...]
    probes: tuple[Probe, ...]
    seed: int | None = None
    source: str = "generated"
    notes: tuple[str, ...] = field(default=())

    def fact(self, fact_id: str) -> Fact:
        for fact in self.facts:
            if fact.id == fact_id:
                return fact
        raise KeyError(fact_id)

    def probe(self, probe_id: str) -> Probe:
        for probe in self.probes:
            if probe.id == probe_id:
                return probe
        raise KeyError(probe_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversationSet:
        return cls(
            name=str(data["name"]),
            server_id=str(data["server_id"]),
            server_name=str(data["server_name"]),
            channels=tuple(data["channels"]),
            speakers=tuple(Speaker(**s) for s in data["speakers"]),
            system_prompt=str(data["system_prompt"]),
            turns=tuple(Utterance(**t) for t in data["turns"]),
            facts=tuple(
                Fact(
                    **{
                        **f,
                        "values": tuple(f["values"]),
                        "corrected_at": tuple(f["corrected_at"]),
                    }
                )
                for f in data["facts"]
            ),
            probes=tuple(Probe(**{**p, "stale": tuple(p["stale"])}) for p in data["probes"]),
            seed=data.get("seed"),
            source=str(data.get("source", "generated")),
            notes=tuple(data.get("notes", ())),
        )


# -- generation ------------------------------------------------------------------------

SERVER_ID = "g-community"
SERVER_NAME = "Riverside Community"
CHANNELS = ("events", "logistics", "volunteers", "random")
SPEAKERS = (Speaker("u-ann", "Ann"), Speaker("u-ben", "Ben"), Speaker("u-chloe", "Chloe"))
SYSTEM_PROMPT = (
    "You are Wren, the assistant of the Riverside Community server, where members plan "
    "local events. Answer briefly and helpfully. When someone asks for a detail that was "
    "settled earlier, give the value that holds now."
)

_SUBJECTS = (
    "the book club",
    "the spring fair",
    "the hackathon",
    "the choir rehearsal",
    "the chess night",
    "the beach cleanup",
    "the film evening",
    "the pottery class",
    "the charity run",
    "the board-game night",
    "the language café",
    "the garden day",
    "the jazz brunch",
    "the repair café",
)
_PLACES = (
    "Harrowgate",
    "Pemberton",
    "Quillon",
    "Marrowby",
    "Ashcombe",
    "Tilbury",
    "Wexford",
    "Larkspur",
    "Fennick",
    "Oakhurst",
    "Brackwater",
    "Dunmore",
    "Elmstead",
    "Kestrel",
    "Nettlebed",
    "Rookwood",
)
_SURNAMES = (
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Takahashi",
    "Castellanos",
    "Nakamura",
    "Petrovic",
    "Abernathy",
    "Oyelaran",
    "Fitzgerald",
    "Haugland",
    "Delacroix",
    "Quintero",
    "Vasquez",
    "Kowalczyk",
    "Mbeki",
)
_WORDS = ("teal", "otter", "maple", "comet", "pebble", "ember", "fjord", "lumen", "quartz")


def _code(rng: random.Random) -> str:
    return str(rng.randint(1000, 9999))


def _time(rng: random.Random) -> str:
    return f"{rng.randint(8, 21):02d}:{rng.choice((0, 10, 15, 20, 30, 40, 45, 50)):02d}"


def _password(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{rng.randint(10, 99)}"


def _room(rng: random.Random) -> str:
    return f"{rng.choice('ABCDEFGH')}{rng.randint(10, 99)}"


#: attribute → (how a value is drawn, what a value looks like to a reader).
_ATTRIBUTES: dict[str, Any] = {
    "door code": _code,
    "venue": lambda rng: rng.choice(_PLACES),
    "start time": _time,
    "host": lambda rng: rng.choice(_SURNAMES),
    "wifi password": _password,
    "room": _room,
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


def _turn_channels(rng: random.Random, turns: int, channels: Sequence[str]) -> list[str]:
    # Members talk in bursts: a few turns in one channel, then another channel.
    out: list[str] = []
    last = None
    while len(out) < turns:
        choices = [c for c in channels if c != last] or list(channels)
        channel = rng.choice(choices)
        out.extend([channel] * rng.randint(2, 5))
        last = channel
    return out[:turns]


def _free_after(
    slots: list[str | None], where: Sequence[str], channel_of: Sequence[str], after: int
) -> list[int]:
    return [t for t in range(after + 1, len(slots)) if slots[t] is None and channel_of[t] in where]


def generate_conversation(
    *,
    seed: int = 7,
    turns: int = 120,
    channels: Sequence[str] = CHANNELS,
    speakers: Sequence[Speaker] = SPEAKERS,
    facts: int | None = None,
    system_prompt: str = SYSTEM_PROMPT,
) -> ConversationSet:
    """A deterministic conversation set for ``seed``.

    ``turns`` user messages over ``channels`` (at least 2) of one server, spoken by
    ``speakers`` (at least 2). About one turn in eight plants a fact (``facts``
    overrides); a third of the facts are corrected later in their channel; each fact is
    asked about later in its channel, and every other fact also in another channel; a
    few decoy facts of the same shape are never asked about; the rest is chat.
    ``system_prompt`` is what every strategy sends first: pass your agent's own to
    price the run behind it (prompt caches only serve prefixes of 1,024 tokens or more).
    """
    if turns < 16:
        raise ValueError("turns must be at least 16 (room for facts, corrections, probes)")
    if len(channels) < 2 or len(speakers) < 2:
        raise ValueError("a conversation set needs at least two channels and two speakers")
    rng = random.Random(seed)
    channel_of = _turn_channels(rng, turns, channels)
    n_facts = facts if facts is not None else max(3, turns // 8)
    keys = [(attr, subject) for subject in _SUBJECTS for attr in _ATTRIBUTES]
    rng.shuffle(keys)
    if n_facts + 3 > len(keys):
        raise ValueError(f"at most {len(keys) - 3} facts")
    used: set[str] = set()

    def value_for(attr: str) -> str:
        while True:  # values are unique in a set, so an answer names one fact
            value = str(_ATTRIBUTES[attr](rng))
            if value.casefold() not in used:
                used.add(value.casefold())
                return value

    # slots[t]: what turn t is for ("fact:i", "correction:i", "probe:i:kind", "decoy:k").
    slots: list[str | None] = [None] * turns
    plans: list[dict[str, Any]] = []
    # Facts are planted over the first 55% of the conversation, so they age before the
    # questions about them come.
    plant_span = max(2, int(turns * 0.55))
    for i in range(n_facts):
        attr, subject = keys[i]
        candidates = [t for t in range(plant_span) if slots[t] is None]
        at = candidates[int(len(candidates) * i / n_facts)] if candidates else None
        if at is None:
            break
        slots[at] = f"fact:{i}"
        plan: dict[str, Any] = {
            "attr": attr,
            "subject": subject,
            "channel": channel_of[at],
            "planted": at,
            "values": [value_for(attr)],
            "corrections": [],
        }
        plans.append(plan)
    for i, plan in enumerate(plans):
        if i % 3 != 2:
            continue
        free = _free_after(slots, [plan["channel"]], channel_of, plan["planted"] + 3)
        if free:
            at = free[min(len(free) - 1, rng.randint(0, 6))]
            slots[at] = f"correction:{i}"
            plan["corrections"].append(at)
            plan["values"].append(value_for(plan["attr"]))
    probe_plans: list[tuple[int, int, ProbeKind]] = []
    for i, plan in enumerate(plans):
        last_change = max([plan["planted"], *plan["corrections"]])
        # Alternate short and long delays, so some questions come while the fact is
        # still in the recent dialogue and some long after it.
        same = _free_after(slots, [plan["channel"]], channel_of, last_change + 1)
        if same:
            pick = rng.randint(0, 2) if i % 2 == 0 else rng.randint(len(same) // 2, len(same) - 1)
            at = same[min(pick, len(same) - 1)]
            slots[at] = f"probe:{i}:same_channel"
            probe_plans.append((at, i, "same_channel"))
        if i % 2 == 0 or plan["corrections"]:
            others = [c for c in channels if c != plan["channel"]]
            # Asked elsewhere only once the fact's channel has moved on (four more
            # turns there): the question is about what that channel settled, not about
            # its last few messages.
            moved_on = [
                t for t in range(last_change + 1, turns) if channel_of[t] == plan["channel"]
            ]
            after = max(
                last_change + max(6, turns // 8), moved_on[3] if len(moved_on) > 3 else turns
            )
            cross = _free_after(slots, others, channel_of, after)
            if cross:
                at = cross[rng.randint(len(cross) // 3, len(cross) - 1)]
                slots[at] = f"probe:{i}:cross_channel"
                probe_plans.append((at, i, "cross_channel"))
    decoy_keys = keys[len(plans) : len(plans) + 3]
    for k, _ in enumerate(decoy_keys):
        free = [t for t in range(turns) if slots[t] is None]
        if free:
            slots[free[rng.randrange(len(free))]] = f"decoy:{k}"
    decoy_values = [value_for(attr) for attr, _ in decoy_keys]

    fact_objects = tuple(
        Fact(
            id=f"f{i:02d}",
            key=f"{plan['attr']} for {plan['subject']}",
            channel=plan["channel"],
            values=tuple(plan["values"]),
            planted_at=plan["planted"],
            corrected_at=tuple(plan["corrections"]),
        )
        for i, plan in enumerate(plans)
    )
    probes: list[Probe] = []
    for n, (at, i, probe_kind) in enumerate(sorted(probe_plans)):
        plan, fact = plans[i], fact_objects[i]
        value = fact.value_at(at)
        probes.append(
            Probe(
                id=f"p{n:02d}",
                fact_id=fact.id,
                turn=at,
                channel=channel_of[at],
                question=_ASK.format(attr=plan["attr"], subject=plan["subject"]),
                expected=value,
                kind=probe_kind,
                # Only values the fact had before: a later value cannot be stale yet.
                stale=fact.values[: fact.values.index(value)],
            )
        )
    probe_at = {p.turn: p for p in probes}
    chat = list(_CHAT)
    rng.shuffle(chat)
    utterances: list[Utterance] = []
    for t, slot in enumerate(slots):
        speaker = speakers[rng.randrange(len(speakers))]
        kind: UtteranceKind = "chat"
        fact_id: str | None = None
        probe_id: str | None = None
        if slot is None:
            text = chat[t % len(chat)]
        else:
            what, index, *_ = slot.split(":")
            if what == "decoy":
                attr, subject = decoy_keys[int(index)]
                text = _STATE[0].format(attr=attr, subject=subject, value=decoy_values[int(index)])
                kind = "decoy"
            elif what == "probe":
                probe = probe_at[t]
                text, kind, fact_id, probe_id = probe.question, "probe", probe.fact_id, probe.id
            else:
                plan = plans[int(index)]
                fact_id = fact_objects[int(index)].id
                if what == "fact":
                    template, value, kind = rng.choice(_STATE), plan["values"][0], "fact"
                else:
                    n = plan["corrections"].index(t) + 1
                    template, value, kind = rng.choice(_CORRECT), plan["values"][n], "correction"
                text = template.format(attr=plan["attr"], subject=plan["subject"], value=value)
                text = text[0].upper() + text[1:]
        utterances.append(
            Utterance(
                t, channel_of[t], speaker.user_id, speaker.name, text, kind, fact_id, probe_id
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
