"""Detect an explicit *long-term* memory request in the user's message.

When the user says "remember that I'm vegan" they want a permanent memory; offering the
short-term-memory tool on that turn would invite the model to park the fact in the wrong
store. The detector is deliberately a cheap, deterministic regex heuristic (this package makes
no extra LLM calls): it aims at clear imperative/request phrasings and errs towards *not*
matching narrative uses ("I don't remember the plot"), because a false positive hides the
short-term tool for a turn while a false negative merely leaves it available.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Protocol

from stm_memory.errors import ConfigurationError

__all__ = [
    "DEFAULT_INTENT_PATTERNS",
    "IntentDetector",
    "detect_long_term_intent",
    "make_intent_detector",
    "normalize",
]


class IntentDetector(Protocol):
    """Callable deciding whether ``text`` explicitly asks for a long-term memory."""

    def __call__(self, text: str) -> bool: ...


# NFKC already folds the fullwidth apostrophe (U+FF07); it is listed anyway so the mapping is
# explicit and independent of normalisation details. These are the forms keyboards and
# autocorrect produce for "don't", which must match the ASCII patterns.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})

# Lower-casing can un-normalise text (e.g. "İ" + a combining mark lower-cases to a sequence
# whose marks NFKC reorders), so one pass is not always idempotent; a second pass has been
# enough for every input seen, and the bound only guards against an unforeseen cycle.
_MAX_NORMALIZE_PASSES = 4


def _normalize_once(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().translate(_APOSTROPHES)


def normalize(text: str) -> str:
    """NFKC-normalise, lower-case and map curly/modifier apostrophes to ``'``.

    Fullwidth letters and punctuation (common in Japanese input) become ASCII through NFKC,
    so the patterns only need to spell each form once. Idempotent.
    """
    if text.isascii():
        # NFKC leaves ASCII as it is and no apostrophe mapped is ASCII: one lower() is
        # the whole of it (most messages; the passes below cost microseconds).
        return text.lower()
    current = _normalize_once(text)
    for _ in range(_MAX_NORMALIZE_PASSES):
        following = _normalize_once(current)
        if following == current:
            break
        current = following
    return current


def _prepare(text: str) -> str:
    # Patterns are written with single spaces between words; collapsing whitespace here
    # (rather than in ``normalize``, whose contract is fixed) keeps them simple.
    return " ".join(normalize(text).split())


def _unless_after(word: str, prefixes: Sequence[str]) -> str:
    """``word`` followed by one negative look-behind per prefix.

    ``re`` look-behinds must be fixed width, so alternatives cannot share one. Placing them
    *after* the word (each covering "prefix word") means they are only evaluated where the
    word actually matched, instead of at every position of the text.
    """
    return word + "".join(f"(?<!{prefix} {word})" for prefix in prefixes)


# Words that negate a following "remember"/"memorize": "don't/can't/never remember" is a
# statement about recall, not a request. "n't" has no leading \b because it is glued to
# its verb ("don't", "couldn't", ...).
_NEGATIONS = (
    "n't",
    r"\bnot",
    r"\bnever",
    r"\bcannot",
    r"\bdont",
    r"\bcant",
    r"\bdidnt",
    r"\bdoesnt",
    r"\bcouldnt",
    r"\bwont",
    r"\bwouldnt",
    r"\bhardly",
    r"\bbarely",
    r"\bno longer",
)
# A first/third-person subject makes it a narrative ("I remember my first car", "we'll keep
# that in mind"). "you" is absent on purpose: "can you remember my name?" is a request.
_SUBJECTS = ("i", "we", "they", "he", "she")
_CONTRACTED_SUBJECTS = ("i'll", "i'd", "we'll", "we'd", "they'll")
# Words commonly between such a subject and the verb ("I still remember", "I'll always ...").
_ADVERBS_AND_MODALS = (
    "still",
    "also",
    "really",
    "always",
    "just",
    "do",
    "did",
    "can",
    "could",
    "will",
    "would",
    "should",
    "must",
    "might",
    "may",
    "vaguely",
    "definitely",
    "totally",
)
_SUBJECT_PREFIXES = (
    *(rf"\b{s}" for s in (*_SUBJECTS, *_CONTRACTED_SUBJECTS)),
    *(rf"\b{s} {a}" for s in (*_SUBJECTS, *_CONTRACTED_SUBJECTS) for a in _ADVERBS_AND_MODALS),
)
# Asking whether the assistant recalls something is a question, not a request to store it.
_QUESTION_PREFIXES = (r"\bdo you", r"\bdid you", r"n't you")

_RECALL_VETO = (*_NEGATIONS, *_SUBJECT_PREFIXES, *_QUESTION_PREFIXES)

# Japanese request forms of a te-form verb stem (覚え "remember", メモし "note",
# 記憶し "memorise"). The bare te-form is an imperative only when the clause ends there;
# otherwise "覚えている"/"覚えてない" ("I remember"/"I don't remember") would match.
# NFKC has already turned fullwidth "!" and "~" into ASCII; "?" is deliberately absent
# from the clause ends because "覚えて?" asks rather than requests.
_JA_CLAUSE_END = r"(?=[\s!。、.,~〜…」』)]|$)"


def _ja_request(stem: str) -> str:
    return (
        rf"{stem}(?:ておいて|といて|てて"
        r"|て(?:ください|下さい|くれ|ね|ほしい|欲しい|もら[えいう])"
        r"|ていて(?:ください|下さい|くれ|ね|ほしい|欲しい)"
        rf"|て{_JA_CLAUSE_END})"
    )


#: Regular expressions (``re`` syntax, searched with ``re.IGNORECASE``) of the default
#: detector. They are matched against ``normalize(text)`` with whitespace runs collapsed to
#: one space and the ends trimmed, so write them lower-case, with single spaces and ``'``.
_ENGLISH_PATTERNS: tuple[str, ...] = (
    # "remember"/"memorize" as a request: "please remember that ...", "Remember: ...",
    # "can you remember my ...". \b rejects "remembered"/"remembering" (narrative forms);
    # "remember when ..." is reminiscing.
    r"\b" + _unless_after("remember", _RECALL_VETO) + r"\b(?! when\b)",
    r"\b" + _unless_after("memori[sz]e", _RECALL_VETO) + r"\b",
    # "don't forget" / "do not forget" / "never forget" — unless it is the speaker's habit
    # ("I never forget a face").
    r"\b(?:"
    + "|".join(
        _unless_after(neg, _SUBJECT_PREFIXES) for neg in ("don't", "dont", "do not", "never")
    )
    + r") forget\b",
    # "note this/that/it/down": \b keeps "notebook" and "footnote" out.
    r"\bnote (?:this|that|it|down)\b",
    # "commit (this|my address) to memory", "save/store/add ... to/in your memory".
    r"\bcommit(?: [\w']+){0,4} to (?:your )?memory\b",
    r"\b(?:save|store|add|put|keep|write)(?: [\w']+){0,4} (?:to|in|into) "
    r"(?:your |the )?(?:long-term |long term |permanent )?memory\b",
    r"\b(?:for|in) (?:all )?future (?:conversations?|chats?|sessions?)\b",
    r"\bfor future reference\b",
    # "keep (this) in mind" — but "I'll keep that in mind" is the user's own resolution.
    r"\b" + _unless_after("keep", _SUBJECT_PREFIXES) + r" (?:this |that |it )?in mind\b",
)
_JAPANESE_PATTERNS: tuple[str, ...] = (
    # Japanese: 覚えておいて / 覚えて / 忘れないで / メモして / 記憶して and polite variants.
    _ja_request("覚え"),
    _ja_request("メモし"),
    _ja_request("記憶し"),
    r"忘れないで|忘れるな",
)
DEFAULT_INTENT_PATTERNS: tuple[str, ...] = (*_ENGLISH_PATTERNS, *_JAPANESE_PATTERNS)

#: A word every English default pattern spells out literally: a message with none of them
#: cannot match one, and most messages have none. One search for these words spares the
#: nine searches of patterns with look-behinds (~18 µs a message; the words, ~1 µs). A
#: pattern added above must add its word here (checked below, as far as a check can).
_ENGLISH_WORDS = ("remember", "memori", "forget", "note ", "commit", "memory", "future", "keep")
if not all(any(w in p for w in _ENGLISH_WORDS) for p in _ENGLISH_PATTERNS):  # pragma: no cover
    raise AssertionError("an English intent pattern spells none of _ENGLISH_WORDS")


def _compile(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    # Compiled separately rather than joined with "|": a caller's pattern may use a top-level
    # "|" or inline flags, which would leak into (or be rejected next to) its neighbours.
    return tuple(re.compile(pattern, re.IGNORECASE) for pattern in patterns)


def _matches_any(compiled: tuple[re.Pattern[str], ...], text: str) -> bool:
    if not compiled or not text:
        return False
    prepared = _prepare(text)
    return any(pattern.search(prepared) for pattern in compiled)


_ENGLISH_COMPILED = _compile(_ENGLISH_PATTERNS)
_JAPANESE_COMPILED = _compile(_JAPANESE_PATTERNS)
# Searched without IGNORECASE (with it, sre tries every word at every position: as slow
# as the patterns), which is exact on prepared text: normalize() lower-cases it, and of the
# characters IGNORECASE takes for a letter of these words (its two cases; for "i" also "İ"
# and the dotless "ı", for "k" the Kelvin sign) only "ı" is lower-case.
_ENGLISH_WORD = re.compile("|".join(re.escape(w).replace("i", "[iı]") for w in _ENGLISH_WORDS))


def _matches_default(prepared: str) -> bool:
    """Any default pattern matches the prepared text (``_matches_any`` of all of them),
    the English ones searched only where one of their words is."""
    if _ENGLISH_WORD.search(prepared) and any(p.search(prepared) for p in _ENGLISH_COMPILED):
        return True
    return any(p.search(prepared) for p in _JAPANESE_COMPILED)


def detect_long_term_intent(text: str) -> bool:
    """Return ``True`` if ``text`` explicitly asks to remember something long term.

    Uses :data:`DEFAULT_INTENT_PATTERNS`. Never raises for any ``str``.
    """
    return bool(text) and _matches_default(_prepare(text))


def make_intent_detector(
    *, extra_patterns: Sequence[str] = (), replace: bool = False
) -> IntentDetector:
    """Build a detector from the default patterns plus ``extra_patterns``.

    With ``replace=True`` only ``extra_patterns`` are used (none -> never matches). Patterns
    are compiled here, so an invalid one raises ``re.error`` at construction instead of on a
    user's message. See :data:`DEFAULT_INTENT_PATTERNS` for the text they are matched against.
    """
    if isinstance(extra_patterns, str):
        # A lone string is a Sequence[str] of characters; treating it as one pattern per
        # character would silently match almost anything.
        raise ConfigurationError("extra_patterns must be a sequence of pattern strings, not a str")
    base: tuple[str, ...] = () if replace else DEFAULT_INTENT_PATTERNS
    compiled = _compile((*base, *extra_patterns))

    def detector(text: str) -> bool:
        return _matches_any(compiled, text)

    return detector
