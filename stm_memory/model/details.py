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
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from stm_memory.model._common_words import COMMON_WORDS

__all__ = [
    "Detail",
    "DetailShape",
    "carried",
    "details",
    "missing",
    "normalize",
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


@dataclass(frozen=True, slots=True)
class Detail:
    """One detail: its shape, the text as said, and the normalised text matched."""

    shape: DetailShape
    text: str
    key: str
    start: int
    end: int
    #: A name whose first word opened a sentence: that word may be no part of it
    #: ("Plan Kyoto trip"), so the rest carries it; alone, it is a word like any other
    #: where the dialogue also writes it in lower case (:meth:`Written.lacks`).
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
    if text.isascii():
        plain = text.lower()  # nothing to fold or decompose: the common case, kept fast
    else:
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
_SENTENCE_START = re.compile(r"(?:^|[.!?:;|\n\"“(]\s*|[-*•]\s+)$")

#: Capitalised words that are no name when they open a sentence (or stand alone).
_COMMON = COMMON_WORDS


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
    return said, start, start + len(said), opens and start == match.start()


# -- carrying --------------------------------------------------------------------------


def _occurs(key: str, memory: str) -> bool:
    return key in memory and _bounded(key).search(memory) is not None


@lru_cache(maxsize=4096)
def _bounded(key: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")


def carried(detail: Detail, memory: str) -> bool:
    """Whether ``memory`` (normalised, :func:`normalize`) carries ``detail``."""
    if detail.shape == "name":
        words = detail.key.split()
        if detail.opens and len(words) > 1 and all(_occurs(w, memory) for w in words[1:]):
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
