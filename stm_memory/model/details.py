"""Details a dialogue states, and whether a written memory carries them. Pure, no I/O.

Real models leave details out of the memory they write (SPEC §6, "a lossy writer costs
no recall"). At each write the engine compares the details of the turns the new memory
lets the history cut drop with what the memory says; a detail it does not carry is
kept verbatim beside it (:func:`reconcile`), until a later write carries it.

A *detail* is a span of text a question could ask for and a summary could leave out,
recognised by its shape alone (no model, no vocabulary of the conversation):

==============  =================================================  ======================
shape           examples                                           matched as
==============  =================================================  ======================
email           ``ann@example.org``                                the address
url             ``https://x.org/a``, ``www.x.org``                 the address
path            ``/etc/app.toml``, ``src/app.py``, ``C:\\x\\y``    the path
quote           ``"blue door"``, ```make test```, “so it goes”     the quoted text
money           ``$40``, ``€12.50``, ``40 euros``                  the amount
date            ``2026-12-05``, ``5/12``, ``Dec 5``, ``Tuesday``   the date, as written
time            ``09:35``, ``9.35pm``, ``3 pm``                    hour and minutes
code            ``B42``, ``AB-1234``, ``teal-otter-42``, ``#482``  the token
number          ``4821``, ``1,200 people``, ``2.5 km``             the number
count           ``three kids``, ``a dozen``                        the word
name            ``Okafor``, ``Maple Street``, ``Dr Lin``           every word of it
value           ``the dog is called pickle``, ``password is x``    the stated word(s)
==============  =================================================  ======================

Normalised before matching (:func:`normalize`): case, accents (NFKD), curly quotes and
dashes, thousands separators (``1,200`` = ``1200``), the leading zero of an hour
(``09:35`` = ``9:35``). A detail is carried when its normalised text occurs in the
memory's at word boundaries (a name: each of its words). Not equated: a number and its
word (``3`` and ``three``), a date in two formats (``Dec 5`` and ``12/05``),
synonyms, paraphrases. Those count as missing: the detail is kept (a few tokens), never
lost. The documented misses — what the check never sees — are a name that opens a
sentence and is a common word (``Will``, ``May``), lower-case names and values stated
without a cue word, and facts that hold no detail of these shapes (``the meeting is
cancelled``); and a name of several words that opens a sentence counts as carried by its
words after the first (the first may be a verb: ``Plan Kyoto trip``).
``docs/design.md#details-a-lossy-writer-leaves-out`` has the measured table.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Literal

from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.shown import ShownState

__all__ = [
    "EARLIER_NOTES",
    "EXCERPT_LIMIT",
    "Detail",
    "DetailShape",
    "Reconciled",
    "Statement",
    "Written",
    "carried",
    "details",
    "excerpt",
    "just_before",
    "kept_details",
    "left_out",
    "missing",
    "normalize",
    "reconcile",
    "rewritten",
    "written",
]

DetailShape = Literal[
    "email",
    "url",
    "path",
    "quote",
    "money",
    "date",
    "time",
    "code",
    "number",
    "count",
    "name",
    "value",
]

#: The most code points one kept excerpt holds: the sentence around a detail, not the
#: whole turn (a pasted log must not fill the budget with one item).
EXCERPT_LIMIT = 200
#: The most code points of one sentence in an excerpt, around its first detail: the
#: clause that says it ("the door code for the hall is 4821"), not a paragraph.
SENTENCE_LIMIT = 120


@dataclass(frozen=True, slots=True)
class Detail:
    """One detail: its shape, the text as said, and the normalised text matched."""

    shape: DetailShape
    text: str
    key: str
    start: int
    end: int
    #: A name whose first word opened a sentence: that word may be no part of it
    #: ("Plan Kyoto trip"), so the rest carries it.
    opens: bool = False


# -- normalising -----------------------------------------------------------------------

_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
    }
)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_HOUR_ZERO = re.compile(r"(?<![\d:.])0(\d[:.]\d\d)")
_SPACES = re.compile(r"\s+")
_MONTH_DOT = re.compile(r"\b(jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.(?=\s*\d)")


def normalize(text: str) -> str:
    """``text`` as details are matched: case-folded, accents and typographic quotes
    folded, thousands separators and an hour's leading zero dropped, spaces collapsed."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_FOLD))
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    plain = _THOUSANDS.sub("", plain)
    plain = _HOUR_ZERO.sub(r"\1", plain)
    plain = _MONTH_DOT.sub(r"\1", plain)
    return _SPACES.sub(" ", plain).strip()


# -- recognising -----------------------------------------------------------------------

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_UNITS = "dollars?|euros?|pounds?|usd|eur|gbp|chf|yen|cents?|bucks"
_EXTENSIONS = (
    "py|js|ts|tsx|md|txt|json|ya?ml|toml|csv|pdf|docx?|xlsx?|png|jpe?g|html?|css|sh|sql"
    "|log|cfg|ini|rs|go|java|rb|c|h|cpp"
)
#: A number: thousands separated by commas, or plain digits; a decimal part.
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_COUNT_WORDS = (
    "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    "|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty"
    "|seventy|eighty|ninety|hundred|thousand|million|dozen|half a dozen"
)

#: The shapes in the order they claim text: an earlier one's span is not read again
#: by a later one (an address's digits are no number).
_PATTERNS: tuple[tuple[DetailShape, re.Pattern[str]], ...] = (
    # Every repeat is bounded and every start anchored to a token's start: one pasted
    # blob of 40k characters must not cost a write seconds of backtracking.
    ("email", re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")),
    ("url", re.compile(r"\b(?:https?://|www\.)[^\s<>\"')\]]+[^\s<>\"')\].,;:!?]")),
    (
        "date",
        re.compile(
            rf"\b\d{{4}}-\d{{1,2}}-\d{{1,2}}\b|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b"
            rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b"
            rf"|\b(?:{_DAYS})s?\b",
            re.I,
        ),
    ),
    (
        "path",
        re.compile(
            # Rooted (/, ~/, ./, ../); or two slashes; or a file name's extension.
            r"(?<![\w/.-])(?:~|\.{1,2})?/(?:[\w.-]{1,255}/){0,32}[\w.-]{0,255}[\w-]"
            r"|(?<![\w/.-])[\w.-]{1,255}(?:/[\w.-]{1,255}){2,32}(?<![.])"
            rf"|(?<![\w/.-])(?:[\w.-]{{1,255}}/){{0,32}}[\w-]{{1,100}}\.(?:{_EXTENSIONS})\b"
            r"|\b[A-Za-z]:\\[^\s\"']{0,255}[^\s\"'.,;:!?)]"
        ),
    ),
    (
        "quote",
        re.compile(
            r"(?<!\w)\"([^\"\n]{1,80})\"(?!\w)|`([^`\n]{1,80})`|\u201c([^\u201d\n]{1,80})\u201d"
        ),
    ),
    (
        "money",
        re.compile(
            rf"[$€£¥]\s?{_NUM}(?:\s?(?:[kKmMbB]n?|million|billion)\b)?"
            rf"|\b{_NUM}\s?(?:{_UNITS})\b",
            re.I,
        ),
    ),
    (
        "time",
        re.compile(
            r"\b\d{1,2}[:.]\d{2}(?:\s?(?:[ap]\.m\.|[ap]m\b))?|\b\d{1,2}\s?(?:[ap]\.m\.|[ap]m\b)",
            re.I,
        ),
    ),
    (
        "code",
        re.compile(
            # A token of letters and digits (hyphens, underscores between), 64 at most
            # a part: longer ones are blobs (keys, hashes), no detail to quote.
            r"#\d{1,12}\b"
            r"|(?<![\w-])(?=[\w-]{0,63}\d)(?=[\w-]{0,63}[A-Za-z])"
            r"[A-Za-z0-9]{1,64}(?:[-_][A-Za-z0-9]{1,64}){0,8}(?![\w-])"
            r"|(?<![\w-])[A-Z]{2,16}(?:[-_][A-Z0-9]{1,32}){1,8}(?![\w-])"
        ),
    ),
    ("number", re.compile(rf"(?<![\w.,]){_NUM}(?![\w])")),
    ("count", re.compile(rf"\b(?:{_COUNT_WORDS})\b", re.I)),
)

#: A value stated with a cue word: the words after it are the value.
_VALUE = re.compile(
    r"\b(?:called|named|nicknamed|known as|titled|spelled|renamed to|set to|changed to"
    r"|switched to|(?:password|passcode|pin|code|username|handle|nickname|name|colou?r"
    r"|flavou?r|word|answer|favou?rite \w+)\s+(?:is|was|will be|=|:))\s+"
    # Not a determiner ("named the kitten Miso"); a second word only when capitalised.
    r"(?!(?:the|a|an|my|our|his|her|their|this|that|its)\s)"
    r"([\w'-]{1,64}(?:\s+(?-i:[A-Z])[\w'-]{0,63})?)",
    re.I,
)

#: A run of capitalised words (a name may hold "of", "de", "van" between them).
_NAME = re.compile(
    r"\b[A-Z][\w'’-]*(?:\s+(?:(?:of|de|da|van|von|del|la|le|du|the)\s+)?[A-Z][\w'’-]*)*"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n\"“(]\s*|[-*•]\s+)$")

#: Capitalised words that are no name when they open a sentence (or stand alone): what
#: sentences start with. A name that is one of them is a documented miss.
_COMMON_WORDS = """
    a about above after again ah all also although am an and another any anyone anything
    are as at be because been before being below besides both but by can cannot could
    did do does doing done don't each either else even ever every everyone everything
    few first for from further had has have having he hello her here hers herself hey hi
    him himself his how however i i'd i'll i'm i've if in instead into is isn't it it's
    its itself just last let let's like maybe me might mine more most much must my
    myself neither never next no nobody none nor not nothing now of off oh ok okay on
    once one only or other others otherwise our ours ourselves out over perhaps please
    quick quite rather really same see she should since so some someone something soon
    still such sure than thank thanks that that's the their theirs them themselves then
    there there's these they they're this those though through thus to today together
    tomorrow tonight too under unless until up upon us very was we we'll we're well were
    what what's whatever when whenever where whether which while who whoever whom whose
    why will with within without would yes yesterday yet you you'd you'll you're your
    yours yourself great good nice cool fine done sorry anyway btw fyi note update
    change reminder settled remember update important also plus hmm wow yeah yep nope
    sounds looks seems got need needs want wants think know check make send bring
    tell give take keep use try let's lets shall may could would should cheers
    welcome congrats great awesome perfect right wait listen look ask asked answer
    people everybody somebody run open go come call add read write set get put start
    stop thing things way lot guys folks team all happy glad agreed noted understood
    absolutely definitely totally exactly indeed alright honestly basically apologies
    unfortunately luckily hopefully actually sounds count sorry correct true false
    interesting lovely brilliant excellent amazing fantastic good bad hard easy
    meet ask bring tell send call find show follow leave move pay buy sell book order
    wait hold turn pick drop share join stay walk drive fly ride eat drink cook clean
    fix build test run ship deploy merge push pull install update upgrade remove delete
    create edit write read print save load copy paste close open reply email text
    long short big small new old early late first second third last next few many
    several most least more less little much other another same different free busy
    ready able unable likely possibly probably certainly obviously apparently anyway
    meanwhile afterwards later earlier then besides otherwise finally overall still
    both either neither whatever wherever whoever however whenever ok okay hello hi
    hey dear morning evening night afternoon welcome bye goodbye cheers thanks thank
    re fwd fw ps can't couldn't didn't doesn't won't wouldn't shouldn't wasn't weren't
    aren't haven't hasn't hadn't here's where's who's how's she's he's we've they've
    you've let's lol haha
"""
_COMMON = frozenset(_COMMON_WORDS.split())


_FIRST_PERSON = frozenset({"i", "i'm", "i'd", "i'll", "i've"})


def _opens(word: str) -> bool:
    """Whether a capitalised word that opens a sentence is an ordinary word: a common
    one, or one with an inflection names rarely have (``Noted``, ``Thinking``,
    ``Clearly``)."""
    folded = word.casefold().strip("'’")
    return folded in _COMMON or folded.endswith(("ed", "ing", "ly"))


def _spans_free(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= s or start >= e for s, e in taken)


def details(text: str) -> list[Detail]:
    """The details ``text`` states, in order of where they start (see the module
    docstring for the shapes)."""
    return list(_details(text))


@lru_cache(maxsize=2048)
def _details(text: str) -> tuple[Detail, ...]:
    # Remembered per text: a channel's turns are checked at every write until one
    # carries them, and a server's write checks its user key's copy of the same turns.
    found: list[Detail] = []
    taken: list[tuple[int, int]] = []

    def add(shape: DetailShape, said: str, start: int, end: int, opens: bool = False) -> None:
        key = normalize(said)
        if key and _spans_free(taken, start, end):
            taken.append((start, end))
            found.append(Detail(shape, said, key, start, end, opens))

    for shape, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if shape == "quote":
                inner = next(g for g in m.groups() if g is not None)
                if inner.strip():
                    add(shape, inner.strip(), m.start(), m.end())
            else:
                add(shape, m.group(0), m.start(), m.end())
    for m in _VALUE.finditer(text):
        value = m.group(1).strip(" '-")
        if value and value.casefold() not in _COMMON:
            add("value", value, m.start(1), m.start(1) + len(value))
    for m in _NAME.finditer(text):
        name = _name(text, m)
        if name is not None:
            add("name", *name)
    found.sort(key=lambda d: d.start)
    return tuple(found)


def _name(text: str, match: re.Match[str]) -> tuple[str, int, int, bool] | None:
    """The name ``match`` holds, without a sentence's common opening word."""
    words = match.group(0).split()
    start = match.start()
    # "I" is capitalised wherever it stands ("Hi, I'm Ann" names Ann).
    while words and words[0].casefold().replace("’", "'") in _FIRST_PERSON:
        rest = match.group(0)[start - match.start() + len(words[0]) :]
        start += len(words[0]) + (len(rest) - len(rest.lstrip()))
        words = words[1:]
    # The opening word of a sentence is capitalised anyway: it is part of a name only
    # when it is no common word.
    opens = _SENTENCE_START.search(text, max(0, start - 16), start) is not None
    if opens and _opens(words[0]):
        skipped = len(words[0])
        words = words[1:]
        rest = match.group(0)[skipped:]
        start += skipped + (len(rest) - len(rest.lstrip()))
        while words and words[0].casefold() in {"of", "de", "da", "van", "von", "the", "la"}:
            start += len(words[0]) + 1
            words = words[1:]
    if not words:
        return None
    # A possessive is the name's: "Dr Patel's office" names Dr Patel.
    words[-1] = re.sub(r"(?:['’]s|['’])$", "", words[-1])
    said = " ".join(words)
    if said.casefold() in _COMMON or len(said) < 2:
        return None
    return said, start, start + len(said), opens and start == match.start() and len(words) > 1


# -- carrying --------------------------------------------------------------------------


def _occurs(key: str, memory: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", memory) is not None


def carried(detail: Detail, memory: str) -> bool:
    """Whether ``memory`` (normalised, :func:`normalize`) carries ``detail``."""
    if detail.shape == "name":
        words = detail.key.split()
        if detail.opens and all(_occurs(word, memory) for word in words[1:]):
            return True
        return all(_occurs(word, memory) for word in words)
    if detail.shape == "money":
        amount = re.sub(r"[^\d.,]", "", detail.key).strip(".,")
        return _occurs(detail.key, memory) or (bool(amount) and _occurs(amount, memory))
    if detail.shape == "time":
        return _time_carried(detail.key, memory)
    return _occurs(detail.key, memory)


_CLOCK = re.compile(r"(\d{1,2})(?:[:.](\d\d))?\s?(?:([ap])\.?m\b)?")


def _time_carried(key: str, memory: str) -> bool:
    """A time is carried as hour and minutes (``9:35`` = ``9.35`` = ``9:35pm``); a
    bare hour with its am/pm (``3 pm`` = ``3pm`` = ``3 p.m.``)."""
    said = _CLOCK.match(key)
    if said is None:
        return _occurs(key, memory)
    hour, minutes, half = said.groups()
    if minutes is not None:
        return re.search(rf"(?<![\d:.]){hour}[:.]{minutes}(?!\d)", memory) is not None
    return re.search(rf"(?<![\d:.]){hour}(?::00)?\s?{half}\.?m\b", memory) is not None


def missing(text: str, memory: str) -> list[Detail]:
    """The details of ``text`` that ``memory`` (normalised) does not carry."""
    return [d for d in details(text) if not carried(d, memory)]


# -- excerpts --------------------------------------------------------------------------

_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+(?=\s|$)|\n|$)|[.!?\n]")


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
            part = ("…" if begin else "") + part[begin : begin + share].strip() + "…"
        parts.append(" ".join(part.split()))
    out = " … ".join(parts)
    return out if len(out) <= limit else out[: limit - 1].rstrip() + "…"


# -- reconciling at a write ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What a write keeps beside the memory it wrote.

    ``kept``: excerpts of turns whose details the memory does not carry, oldest
    first. ``held_from``: when the kept excerpts would pass the budget, the first
    turn that did not fit: it and every turn after it stay raw in the request (the
    cut does not drop them), and the next write checks them again."""

    kept: tuple[StoredMessage, ...]
    held_from: StoredMessage | None = None


def left_out(kept: Sequence[StoredMessage], memory: str | Written) -> list[str]:
    """The details the ``kept`` excerpts hold that ``memory`` (normalised, or as
    :func:`written`) does not carry, as said, each once, oldest first."""
    read = memory if isinstance(memory, Written) else Written(memory)
    return _unique(d.text for m in kept for d in read.lacks(m))


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if normalize(item) not in seen:
            seen.add(normalize(item))
            out.append(item)
    return out


def kept_details(shown: ShownState) -> list[str]:
    """The details a shown form keeps beside its memory (what the memory left out)."""
    return left_out(shown.kept, written(shown.summary, shown.categories.values()))


_WORD = re.compile(r"[a-z][a-z'-]{2,}")


def _context(text: str, spans: Iterable[tuple[int, int]]) -> frozenset[str]:
    """The words of ``text`` outside its details' ``spans``: what a statement is about
    ("host", "garden", "day" in "the host for the garden day is Okafor")."""
    blanked = list(text)
    for start, end in spans:
        blanked[start:end] = " " * (end - start)
    words = _WORD.findall(normalize("".join(blanked)))
    return frozenset(w for w in words if w not in _COMMON and w not in _LINKS)


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

    ``text``: normalised. ``statements``: its sentences, for a value it restates: a
    detail whose sentence the memory says again with another value of the same shape
    ("the host for the garden day is Okafor" after "… is Vasquez") was replaced by the
    writer, not left out. ``elsewhere``: what the model is shown beside the memory
    (other channels' briefings, normalised): a reply of the model that repeats one of
    their details is carried there."""

    text: str
    statements: tuple[Statement, ...] = ()
    elsewhere: str = ""

    def lacks(self, message: StoredMessage) -> list[Detail]:
        """The details of ``message`` this memory does not carry."""
        found = details(message.content)
        lacking = [d for d in found if not carried(d, self.text)]
        if lacking and self.elsewhere and message.role == "assistant" and message.name is None:
            lacking = [d for d in lacking if not carried(d, self.elsewhere)]
        if lacking and self.statements:
            lacking = [d for d in lacking if not self._restated(message.content, d, found)]
        return lacking

    def _restated(self, text: str, detail: Detail, found: Sequence[Detail]) -> bool:
        for start, end in _sentences(text):
            if start <= detail.start < end:
                inside = [(d.start - start, d.end - start) for d in found if start <= d.start < end]
                about = _context(text[start:end], inside)
                return len(about) >= 2 and any(
                    about <= s.about
                    and any(shape == detail.shape and key != detail.key for shape, key in s.said)
                    for s in self.statements
                )
        return False


def written(summary: str | None, categories: Iterable[str], *, elsewhere: str = "") -> Written:
    """``summary`` and the category values as the check reads them (:class:`Written`);
    ``elsewhere``: the other channels' briefings the model is shown."""
    raw = "\n".join([summary or "", *categories])
    statements = []
    for start, end in _sentences(raw):
        sentence = raw[start:end]
        found = details(sentence)
        if found:
            about = _context(sentence, [(d.start, d.end) for d in found])
            statements.append(Statement(about, frozenset((d.shape, d.key) for d in found)))
    return Written(normalize(raw), tuple(statements), normalize(elsewhere))


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
    """Keep beside ``memory`` what it leaves out: the still-missing
    details of the excerpts kept before and of the ``replaced`` memory's lines
    (:func:`rewritten`), then those of the ``dropped`` turns (the turns this write
    lets the cut drop), each once, within ``budget`` code points of excerpt text (see
    :class:`Reconciled`; what was kept before is never dropped for the budget: only a
    dropped turn can stay raw instead)."""
    out: list[StoredMessage] = []
    seen: set[str] = set()
    used = 0
    for message in (*kept, *replaced):
        lacking = [d for d in memory.lacks(message) if d.key not in seen]
        if not lacking:
            continue  # released: the memory carries it now
        text = (
            message.content
            if len(lacking) == len(details(message.content))
            else excerpt(message.content, lacking)
        )
        seen.update(d.key for d in lacking)
        out.append(replace(message, content=text))
        used += len(text)
    for message in dropped:
        lacking = [d for d in memory.lacks(message) if d.key not in seen]
        if not lacking:
            continue
        text = excerpt(message.content, lacking)
        if used + len(text) > budget:
            return Reconciled(tuple(out), held_from=message)
        seen.update(d.key for d in lacking)
        out.append(_excerpted(message, text))
        used += len(text)
    return Reconciled(tuple(out))


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
