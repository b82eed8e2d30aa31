"""Scripted models of known quality, for runs that measure the harness, not a model.

Each is an :class:`~stm_memory.testing.OfflineModel` (so it runs behind the offline
OpenAI / Anthropic clients and as a LangChain chat model) that knows the conversation
set's facts and reads like a perfect reader: asked a probe, it answers the fact's value
that comes last in what it was shown (memory blocks, summaries and user messages; its
own earlier replies are not evidence), or says it does not know. They differ only in
what they write when asked to remember:

- ``perfect``: when the nudge asks, calls ``update_short_term_memory`` with every fact
  it can see in this channel (its memory and the dialogue; not other channels'
  briefings), at its newest value; as a summarizer, writes the same lines.
- ``forgetful``: the same, but leaves out every third fact (:func:`dropped_facts`).
- ``paraphrase``: writes every fact it sees, but a value that is a plain number or a
  time in words (``4821`` as "four thousand eight hundred twenty-one", ``09:35`` as
  "nine thirty-five", :func:`paraphrased`), other values as they are. It reads its own
  words back as the fact when it writes again, but answers only from values written as
  the conversation states them (a reader that needs the digits).
- ``recent``: writes only the newest half of the facts it sees (by where the value it
  writes was last stated in what it was shown; with an odd count the middle one is
  kept), leaving out the older half.
- ``toolless``: never calls the tool; as a summarizer it writes what ``perfect`` does
  (asked in plain text, it answers in plain text).
- ``textcalls``: a small open model behind a server that parses no tool calls: offered
  any tool, it writes the memory call ``perfect`` would make as JSON in its message
  text, and nothing else; offered none, it answers.

As summarizers, ``forgetful``, ``paraphrase`` and ``recent`` write what they would
write to the memory.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from stm_memory.evaluation._conversation import ConversationSet, Fact
from stm_memory.evaluation._scoring import normalize
from stm_memory.prompt.render import CONTENT_HEADER, OTHER_CHANNELS
from stm_memory.testing.offline import OfflineModel, OfflineReply
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "SCRIPTED_KINDS",
    "ScriptedKind",
    "ScriptedModel",
    "dropped_facts",
    "number_words",
    "paraphrased",
]

ScriptedKind = Literal["perfect", "forgetful", "paraphrase", "recent", "toolless", "textcalls"]
SCRIPTED_KINDS: tuple[ScriptedKind, ...] = (
    "perfect",
    "forgetful",
    "paraphrase",
    "recent",
    "toolless",
    "textcalls",
)
UNKNOWN = "I don't know; it is not in what I can see."
_BLOCK_SPLIT = re.compile(rf"(?=^{re.escape(CONTENT_HEADER)}$)", re.M)
_FILLER = (
    "Thanks for raising that, it helps to have it written down here.",
    "That sounds workable; let me know if you want me to draft an announcement.",
    "Good idea. It is worth checking with the others before we commit to it.",
    "I would keep it simple and share the details once they are confirmed.",
    "Noted. If anything changes, post it in the channel so everyone sees it.",
    "Happy to help with that; a short list of next steps would make it easier.",
    "People usually appreciate a reminder a day before, so we could plan one.",
)


def dropped_facts(conversation: ConversationSet) -> frozenset[str]:
    """The facts the ``forgetful`` model never writes: every third, by position."""
    return frozenset(f.id for i, f in enumerate(conversation.facts) if i % 3 == 1)


_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen",
)  # fmt: skip
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_PLAIN_NUMBER = re.compile(r"\d+")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")


def number_words(n: int) -> str:
    """``n`` (0 or more) in English words: 4821 is "four thousand eight hundred
    twenty-one" (no "and", tens and units hyphenated)."""
    if n < 0:
        raise ValueError("number_words takes a number of 0 or more")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")
    for scale, name in _SCALES:
        if n >= scale:
            high, rest = divmod(n, scale)
            return f"{number_words(high)} {name}" + (f" {number_words(rest)}" if rest else "")
    raise AssertionError("unreachable")  # pragma: no cover


def paraphrased(value: str) -> str:
    """``value`` as the ``paraphrase`` model writes it: a plain number or a time in
    words ("4821" → "four thousand eight hundred twenty-one", "09:35" → "nine
    thirty-five", "09:00" → "nine o'clock", "09:05" → "nine oh five"); any other
    value as it is."""
    if _PLAIN_NUMBER.fullmatch(value):
        return number_words(int(value))
    clock = _CLOCK.fullmatch(value)
    if clock is None:
        return value
    hour, minute = int(clock.group(1)), int(clock.group(2))
    if minute == 0:
        return f"{number_words(hour)} o'clock"
    spoken = number_words(minute) if minute >= 10 else f"oh {number_words(minute)}"
    return f"{number_words(hour)} {spoken}"


def _filler(user_text: str) -> str:
    # A reply as wordy as a real model's (what makes raw history grow), that never
    # repeats a value: the user's words are not quoted back.
    seed = int.from_bytes(hashlib.sha256(user_text.encode()).digest()[:4], "big")
    picks = [_FILLER[(seed + k * 3) % len(_FILLER)] for k in range(3)]
    return " ".join(picks)


def _is_briefing(segment: str) -> bool:
    return OTHER_CHANNELS in segment.splitlines()


def _own_words(text: str) -> str:
    # The user's own paragraphs: injected memory blocks and nudges dropped (a loop may
    # merge them into the user turn, as the Anthropic placement does).
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    kept = [p for p in paragraphs if TOOL_NAME not in p and not p.startswith(CONTENT_HEADER)]
    return "\n\n".join(kept).strip()


def _last_position(values: Sequence[str], text: str) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for value in values:
        needle = re.escape(normalize(value))
        for match in re.finditer(rf"(?<![\w]){needle}(?![\w])", text):
            if best is None or match.start() > best[0]:
                best = (match.start(), value)
    return best


@dataclass
class ScriptedModel(OfflineModel):
    """A reader of known quality over one conversation set (see the module docstring)."""

    conversation: ConversationSet | None = None
    kind: ScriptedKind = "perfect"
    memory_writes: int = 0
    summaries_written: int = 0
    _questions: dict[str, Fact] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in SCRIPTED_KINDS:
            raise ValueError(f"kind must be one of {SCRIPTED_KINDS}, got {self.kind!r}")
        if self.conversation is not None:
            facts = {f.id: f for f in self.conversation.facts}
            self._questions = {
                normalize(p.question): facts[p.fact_id] for p in self.conversation.probes
            }

    @property
    def drops(self) -> frozenset[str]:
        if self.kind != "forgetful" or self.conversation is None:
            return frozenset()
        return dropped_facts(self.conversation)

    # -- reading ---------------------------------------------------------------------

    def _value_seen(self, fact: Fact, segments: Sequence[str]) -> str | None:
        found = _last_position(fact.values, normalize("\n".join(segments)))
        return found[1] if found else None

    def _facts_seen(self, segments: Sequence[str]) -> list[tuple[Fact, str]]:
        if self.conversation is None:
            return []
        if self.kind in ("paraphrase", "recent"):
            return self._facts_written(normalize("\n".join(segments)))
        out = []
        for fact in self.conversation.facts:
            if fact.id in self.drops:
                continue
            value = self._value_seen(fact, segments)
            if value is not None:
                out.append((fact, value))
        return out

    def _facts_written(self, text: str) -> list[tuple[Fact, str]]:
        # paraphrase: a fact is seen at its values or at their words (its own notes);
        # recent: the newest half of the facts seen, by where each was last stated.
        assert self.conversation is not None
        seen: list[tuple[int, Fact, str]] = []
        for fact in self.conversation.facts:
            forms = {v: v for v in fact.values}
            if self.kind == "paraphrase":
                forms.update({paraphrased(v): v for v in fact.values})
            found = _last_position(list(forms), text)
            if found is not None:
                seen.append((found[0], fact, forms[found[1]]))
        if self.kind == "recent":
            newest = sorted(seen, key=lambda s: s[0])[len(seen) // 2 :]
            kept = {fact.id for _, fact, _ in newest}
            seen = [s for s in seen if s[1].id in kept]
        return [(fact, value) for _, fact, value in seen]

    def _written(self, value: str) -> str:
        return paraphrased(value) if self.kind == "paraphrase" else value

    @staticmethod
    def _evidence(dialogue: Sequence[tuple[str, str]], *, this_channel: bool) -> list[str]:
        # What counts as having been told: everything but the model's own replies;
        # with this_channel, other channels' briefings are left out too.
        out: list[str] = []
        for role, text in dialogue:
            if role == "assistant":
                continue
            for segment in _BLOCK_SPLIT.split(text):
                if this_channel and _is_briefing(segment):
                    continue
                out.append(segment)
        return out

    def _notes(self, segments: Sequence[str]) -> str:
        seen = self._facts_seen(segments)
        lines = [f"- {fact.key}: {self._written(value)}" for fact, value in seen]
        if not lines:
            return "Nothing settled yet; small talk so far."
        return "Settled details:\n" + "\n".join(lines)

    # -- the model ---------------------------------------------------------------------

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        self.calls += 1
        tools = tools or {}
        if not tools and len(dialogue) == 1 and "summar" in dialogue[0][1].casefold():
            # A summarizer's request (LangChain SummarizationMiddleware sends one message).
            self.summaries_written += 1
            return OfflineReply(self._notes(self._evidence(dialogue, this_channel=False)))
        last_user = max((i for i, (r, _) in enumerate(dialogue) if r == "user"), default=-1)
        user_text = _own_words(dialogue[last_user][1]) if last_user >= 0 else ""
        answer = self._answer_to(user_text, dialogue)
        if any(role == "tool" for role, _ in dialogue[last_user + 1 :]):
            return OfflineReply(answer)  # the memory call already ran this turn
        if self.kind == "textcalls" and tools:
            # Every reply the call, as text (the server parses none), whatever was asked.
            self.memory_writes += 1
            notes = self._notes(self._evidence(dialogue, this_channel=True))
            call = {"name": TOOL_NAME, "arguments": {"summary": notes[:1400]}}
            return OfflineReply(f"```json\n{json.dumps(call)}\n```")
        nudged = any(TOOL_NAME in text for role, text in dialogue if role in ("system", "user"))
        if TOOL_NAME in tools and nudged and self.kind != "toolless":
            self.tool_calls_made += 1
            self.memory_writes += 1
            notes = self._notes(self._evidence(dialogue, this_channel=True))
            properties = list((tools[TOOL_NAME].get("properties") or {"summary": {}}).keys())
            args = {name: notes[:1400] for name in properties}
            return OfflineReply(answer, ((TOOL_NAME, args),))
        return OfflineReply(answer)

    def _answer_to(self, user_text: str, dialogue: Sequence[tuple[str, str]]) -> str:
        said = normalize(user_text)
        # Contained, not equal: a strategy may tag the message (e.g. with its channel).
        fact = next((f for q, f in self._questions.items() if q in said), None)
        if fact is None:
            return _filler(user_text)
        value = self._value_seen(fact, self._evidence(dialogue, this_channel=False))
        return f"It is {value}." if value is not None else UNKNOWN
