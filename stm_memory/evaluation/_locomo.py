"""A conversation set from a file in the LoCoMo JSON layout, read from a path the user
gives (nothing is downloaded).

The layout (the ``locomo10.json`` of the LoCoMo benchmark): a list of samples, each with
``conversation`` (``speaker_a``, ``speaker_b``, ``session_<n>`` lists of turns with
``speaker``, ``dia_id`` and ``text``, ``session_<n>_date_time``) and ``qa`` (``question``,
``answer``, ``evidence`` as ``dia_id`` references, ``category``). Each speaker becomes a
user, each session goes to a channel (session ``n`` to channel ``(n - 1) % channels``),
and the questions are asked after the last session, in the last session's channel: a
question whose evidence lies in another channel is a cross-channel probe. Answers are
matched word by word (every content word of the reference answer must appear), which is
stricter than LoCoMo's own F1 score; category 5 (adversarial, no answer) is left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stm_memory.errors import ConfigurationError
from stm_memory.evaluation._conversation import (
    ConversationSet,
    Fact,
    Probe,
    ProbeKind,
    Speaker,
    Utterance,
)

__all__ = ["load_locomo"]

_SYSTEM = (
    "You are an assistant in a group chat. Members talk with each other and with you; "
    "answer briefly. When asked about something said earlier, answer from what you know."
)
_SESSION = re.compile(r"^session_(\d+)$")


def _slug(name: str) -> str:
    return "u-" + (re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-") or "speaker")


def load_locomo(
    path: str | Path,
    *,
    sample: int = 0,
    channels: int = 2,
    categories: Sequence[int] = (1, 2, 3, 4),
    max_questions: int | None = None,
) -> ConversationSet:
    """Sample number ``sample`` of the LoCoMo-layout file at ``path`` as a
    :class:`ConversationSet` (see the module docstring)."""
    if channels < 1:
        raise ConfigurationError("channels must be at least 1")
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read a LoCoMo file at {path}: {exc}") from exc
    samples = data if isinstance(data, list) else [data]
    if not 0 <= sample < len(samples):
        raise ConfigurationError(f"sample must be in 0..{len(samples) - 1}")
    record = samples[sample]
    talk = record.get("conversation") or {}
    sessions = sorted((int(m.group(1)), key) for key in talk if (m := _SESSION.match(key)))
    if not sessions:
        raise ConfigurationError(f"{path}: sample {sample} has no session_<n> lists")
    names = [n for n in (talk.get("speaker_a"), talk.get("speaker_b")) if n]
    channel_names = tuple(f"session-group-{k + 1}" for k in range(channels))
    speakers: dict[str, Speaker] = {n: Speaker(_slug(n), n) for n in names}
    turns: list[Utterance] = []
    where: dict[str, str] = {}  # dia_id → channel
    last_channel = channel_names[0]
    for number, key in sessions:
        channel = channel_names[(number - 1) % channels]
        last_channel = channel
        for item in talk[key] or []:
            name = str(item.get("speaker") or "someone")
            speaker = speakers.setdefault(name, Speaker(_slug(name), name))
            text = str(item.get("text") or "").strip()
            if not text:
                continue
            if item.get("dia_id"):
                where[str(item["dia_id"])] = channel
            turns.append(Utterance(len(turns), channel, speaker.user_id, speaker.name, text))
    asker = next(iter(speakers.values()))
    facts: list[Fact] = []
    probes: list[Probe] = []
    wanted = set(categories)
    for qa in record.get("qa") or []:
        if qa.get("category") not in wanted or "answer" not in qa:
            continue
        if max_questions is not None and len(probes) >= max_questions:
            break
        evidence = [str(e) for e in qa.get("evidence") or []]
        homes = {where[e] for e in evidence if e in where}
        home = sorted(homes)[0] if homes else last_channel
        kind: ProbeKind = "same_channel" if homes <= {last_channel} else "cross_channel"
        n = len(probes)
        answer = str(qa["answer"])
        fact = Fact(f"f{n:03d}", str(qa["question"]), home, (answer,), planted_at=-1)
        probe = Probe(
            f"p{n:03d}",
            fact.id,
            len(turns),
            last_channel,
            str(qa["question"]),
            answer,
            kind,
            match="words",
        )
        facts.append(fact)
        probes.append(probe)
        turns.append(
            Utterance(
                len(turns),
                last_channel,
                asker.user_id,
                asker.name,
                probe.question,
                "probe",
                fact.id,
                probe.id,
            )
        )
    return ConversationSet(
        name=f"locomo-{record.get('sample_id', sample)}",
        server_id="g-locomo",
        server_name="LoCoMo",
        channels=channel_names,
        speakers=tuple(speakers.values()),
        system_prompt=_SYSTEM,
        turns=tuple(turns),
        facts=tuple(facts),
        probes=tuple(probes),
        seed=None,
        source=f"locomo:{Path(path).name}",
    )
