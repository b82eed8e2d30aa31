"""The conversation set: who says what, where and when, and which questions have answers.

A :class:`ConversationSet` is plain data (frozen dataclasses, JSON round trip), so a run
can be repeated from its file; :mod:`stm_memory.evaluation._generator` builds one from a
seed, :mod:`stm_memory.evaluation._locomo` from a LoCoMo-layout file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
