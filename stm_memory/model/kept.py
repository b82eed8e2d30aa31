"""What a write keeps beside the memory it wrote. Pure, no I/O.

At a write (``model/changes.py`` ``refreshed``) the turns the new memory lets the history
cut drop, the excerpts kept before and the lines of the memory it replaces are read with
:class:`Written` (the new memory as the check reads it); what the memory does not carry
(:mod:`stm_memory.model.details`) is kept as excerpts, verbatim, within a budget
(:func:`reconcile`). ``docs/design.md#details-a-lossy-writer-leaves-out`` says why each
rule is there and what it was measured to cost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache

from stm_memory.model._common_words import COMMON_WORDS
from stm_memory.model.details import Detail, DetailShape, carried, details, normalize
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.shown import ShownState

__all__ = [
    "EARLIER_NOTES",
    "EXCERPT_LIMIT",
    "Reconciled",
    "Statement",
    "Written",
    "excerpt",
    "just_before",
    "kept_details",
    "left_out",
    "reconcile",
    "rewritten",
    "written",
]

#: The most code points one kept excerpt holds: the sentence around a detail, not the
#: whole turn (a pasted log must not fill the budget with one item).
EXCERPT_LIMIT = 200
#: The most code points of one sentence in an excerpt, around its first detail: the
#: clause that says it ("the door code for the hall is 4821"), not a paragraph.
SENTENCE_LIMIT = 120


# -- excerpts --------------------------------------------------------------------------


def _sentences(text: str) -> list[tuple[int, int]]:
    # Spans of sentences; a dot inside a number, a time or an address is no end.
    spans: list[tuple[int, int]] = []
    start = 0
    for m in re.finditer(r"[.!?]+(?=\s|$)|\n", text):
        spans.append((start, m.end()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _whole_words(text: str, begin: int, end: int) -> str:
    """``text[begin:end]`` without the words it cuts at either end (a cut word would
    read as another word, or a capitalised one as a name, when the excerpt is checked
    again at the next write)."""
    if begin > 0 and not text[begin - 1].isspace():
        space = text.find(" ", begin, end)
        begin = space + 1 if space >= 0 else begin
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", begin, end)
        end = space if space > begin else end
    return text[begin:end].strip()


def excerpt(text: str, found: Sequence[Detail], *, limit: int = EXCERPT_LIMIT) -> str:
    """The sentences of ``text`` that hold ``found``, verbatim (joined by ``…``), each
    cut around its details to keep the whole within ``limit`` code points."""
    picked = [(s, e) for s, e in _sentences(text) if any(s <= d.start < e for d in found)]
    parts: list[str] = []
    share = max(40, min(SENTENCE_LIMIT, limit // max(1, len(picked))))
    for s, e in picked:
        part = text[s:e].strip()
        if len(part) > share:
            first = min(d.start for d in found if s <= d.start < e) - s
            lead = len(text[s:e]) - len(text[s:e].lstrip())
            begin = max(0, first - lead - share // 3)
            part = ("…" if begin else "") + _whole_words(part, begin, begin + share) + "…"
        parts.append(" ".join(part.split()))
    out = " … ".join(parts)
    return out if len(out) <= limit else out[: limit - 1].rstrip() + "…"


# -- reconciling at a write ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What a write keeps beside the memory it wrote.

    ``kept``: excerpts of turns whose details the memory does not carry, oldest
    first. ``held_from``: when the excerpts of the turns this write drops would pass
    the budget on their own, the first turn that did not fit: it and every turn after
    it stay raw in the request (the cut does not drop them), and the next write checks
    them again."""

    kept: tuple[StoredMessage, ...]
    held_from: StoredMessage | None = None


def left_out(kept: Sequence[StoredMessage], memory: str | Written) -> list[str]:
    """The details the ``kept`` excerpts hold that ``memory`` (normalised, or as
    :func:`written`) does not carry, as said, each once, oldest first."""
    if not kept:
        return []
    read = memory if isinstance(memory, Written) else Written(memory)
    read = _with_lower(read, [read.text, *(m.content for m in kept)], kept)
    return _unique(d.text for m in kept for d in read.lacks(m))


def _with_lower(
    memory: Written, texts: Sequence[str], messages: Sequence[StoredMessage]
) -> Written:
    """``memory`` knowing the words ``texts`` write in lower case, when a sentence of
    ``messages`` opens with a capitalised word that could be one of them."""
    if not any(d.opens for m in messages for d in details(m.content)):
        return memory
    found = _LOWER_WORD.findall("\n".join(texts))
    return replace(memory, lower=memory.lower | frozenset(found))


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = normalize(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def kept_details(shown: ShownState) -> list[str]:
    """The details a shown form keeps beside its memory (what the memory left out)."""
    return list(_kept_details(tuple(shown.kept), shown.summary, tuple(shown.categories.values())))


@lru_cache(maxsize=256)
def _kept_details(
    kept: tuple[StoredMessage, ...], summary: str | None, categories: tuple[str, ...]
) -> tuple[str, ...]:
    # Every turn of a channel settles on the same shown form until its next swap: the
    # check reads it once (pure, so a cached answer is the answer).
    return tuple(left_out(kept, written(summary, categories)))


_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_LOWER_WORD = re.compile(r"(?<![\w'-])[a-z][a-z'-]*(?![\w'-])")


def _context(text: str, spans: Iterable[tuple[int, int]]) -> frozenset[str]:
    """The words of ``text`` outside its details' ``spans``: what a statement is about
    ("host", "garden", "day" in "the host for the garden day is Okafor")."""
    blanked = list(text)
    for start, end in spans:
        blanked[start:end] = " " * (end - start)
    words = _WORD.findall(normalize("".join(blanked)))
    return frozenset(w for w in words if w not in COMMON_WORDS and w not in _LINKS)


#: Short words that link a statement's parts and say nothing of what it is about.
_LINKS = frozenset({"for", "and", "the", "its", "has", "was", "are", "will", "now", "new"})


@dataclass(frozen=True, slots=True)
class Statement:
    """One sentence of a written memory: what it is about, and its details."""

    about: frozenset[str]
    said: frozenset[tuple[DetailShape, str]]


@dataclass(frozen=True, slots=True)
class Written:
    """A written memory as the check reads it (:func:`written`).

    ``text``: normalised. ``raw``: as written, whose sentences (:func:`_statements`)
    tell a value it restates: a detail whose sentence the memory says again with another
    value of the same shape ("the host for the garden day is Okafor" after "… is
    Vasquez") was replaced by the writer, not left out. ``elsewhere``: what the model is
    shown beside the memory (other channels' briefings, normalised): a reply of the
    model that repeats one of their details is carried there."""

    text: str
    raw: str = ""
    elsewhere: str = ""
    #: Words the checked dialogue writes in lower case: a capitalised one of them that
    #: opens a sentence is that word, no name ("Tunnel ladder …" beside "the tunnel").
    lower: frozenset[str] = frozenset()

    def lacks(self, message: StoredMessage) -> list[Detail]:
        """The details of ``message`` this memory does not carry."""
        found = details(message.content)
        lacking = [
            d
            for d in found
            if not carried(d, self.text)
            and not (d.opens and d.shape == "name" and self._lower_word(d.text))
        ]
        if lacking and self.elsewhere and message.role == "assistant" and message.name is None:
            lacking = [d for d in lacking if not carried(d, self.elsewhere)]
        if lacking and self.raw:
            lacking = [d for d in lacking if not self._restated(message.content, d, found)]
        return lacking

    def _lower_word(self, word: str) -> bool:
        # The word, or the start of one (a value cut short by its writer's limit).
        folded = word.casefold()
        return folded in self.lower or (
            len(folded) >= 3 and any(w.startswith(folded) for w in self.lower)
        )

    def _restated(self, text: str, detail: Detail, found: Sequence[Detail]) -> bool:
        for start, end in _sentences(text):
            if start <= detail.start < end:
                inside = [(d.start - start, d.end - start) for d in found if start <= d.start < end]
                about = _context(text[start:end], inside)
                return len(about) >= 2 and any(
                    about <= s.about
                    and any(shape == detail.shape and key != detail.key for shape, key in s.said)
                    for s in _statements(self.raw)
                )
        return False


def written(summary: str | None, categories: Iterable[str], *, elsewhere: str = "") -> Written:
    """``summary`` and the category values as the check reads them (:class:`Written`);
    ``elsewhere``: the other channels' briefings the model is shown."""
    raw = "\n".join([summary or "", *categories])
    return Written(_normalized(raw), raw, _normalized(elsewhere) if elsewhere else "")


@lru_cache(maxsize=256)
def _normalized(text: str) -> str:
    # A write reads its memory twice (the check, the tool result's note), and the
    # briefings are the same for many writes.
    return normalize(text)


@lru_cache(maxsize=256)
def _statements(raw: str) -> tuple[Statement, ...]:
    """The sentences of a memory that state details: read only when a detail is
    missing, once per memory."""
    out = []
    for start, end in _sentences(raw):
        sentence = raw[start:end]
        found = details(sentence)
        if found:
            about = _context(sentence, [(d.start, d.end) for d in found])
            out.append(Statement(about, frozenset((d.shape, d.key) for d in found)))
    return tuple(out)


#: The speaker of an excerpt of the memory a write replaced (its turns were cut before).
EARLIER_NOTES = "Earlier notes"


def rewritten(previous: Iterable[str], at: datetime | None) -> tuple[StoredMessage, ...]:
    """The lines of the memory a write replaces (its summary, or the category values
    it overwrites), as excerpts written ``at`` by :data:`EARLIER_NOTES`: a detail the
    old memory carried stands for turns the cut dropped long ago, so a rewrite that
    leaves it out must keep it too."""
    if at is None:
        return ()
    lines = [line.strip() for text in previous for line in text.splitlines()]
    return tuple(
        StoredMessage(role="assistant", content=line, timestamp=at, name=EARLIER_NOTES)
        for line in lines
        if line
    )


def reconcile(
    kept: Sequence[StoredMessage],
    dropped: Sequence[StoredMessage],
    memory: Written,
    *,
    budget: int,
    replaced: Sequence[StoredMessage] = (),
) -> Reconciled:
    """Keep beside ``memory`` what it leaves out, each detail once, within ``budget``
    code points of excerpt text: first what the ``dropped`` turns (the turns this write
    lets the cut drop) said; past the budget, the first of them that does not fit and
    the rest stay raw (:class:`Reconciled`). Then, in what is left of the budget, the
    still-missing details of the excerpts kept before and of the ``replaced`` memory's
    lines (:func:`rewritten`), newest first: the oldest leave when the budget is full
    (the writer was told of them at each write since, and kept leaving them out).
    Oldest first in the result."""
    checked = (*kept, *replaced, *dropped)
    memory = _with_lower(memory, [m.content for m in checked], checked)
    # Each earlier excerpt's missing details, decided before the new turns claim theirs
    # (a detail said again in a new turn stays with its first excerpt).
    earlier: list[tuple[StoredMessage, list[Detail]]] = []
    seen: set[str] = set()
    for message in (*kept, *replaced):
        lacking = [d for d in memory.lacks(message) if d.key not in seen]
        if lacking:  # else released: the memory carries it now
            seen.update(d.key for d in lacking)
            earlier.append((message, lacking))
    fresh: list[StoredMessage] = []
    used = 0
    held: StoredMessage | None = None
    for message in dropped:
        lacking = [d for d in memory.lacks(message) if d.key not in seen]
        if not lacking:
            continue
        text = excerpt(message.content, lacking)
        if used + len(text) > budget:
            held = message
            break
        seen.update(d.key for d in lacking)
        fresh.append(_excerpted(message, text))
        used += len(text)
    older: list[StoredMessage] = []
    for message, lacking in reversed(earlier):
        text = (
            message.content
            if len(lacking) == len(details(message.content))
            else excerpt(message.content, lacking)
        )
        if used + len(text) > budget:
            break  # this one and every older one leave
        # Unchanged, the same object: it keeps its cached form (not encoded again).
        older.append(message if text == message.content else replace(message, content=text))
        used += len(text)
    return Reconciled((*reversed(older), *fresh), held_from=held)


def _excerpted(message: StoredMessage, text: str) -> StoredMessage:
    return StoredMessage(
        role=message.role,
        content=text,
        timestamp=message.timestamp,
        name=message.name,
        user_id=message.user_id,
    )


def just_before(at: datetime) -> datetime:
    """The instant before ``at``: turns captured after it include the one at ``at``."""
    return at - timedelta(microseconds=1)
