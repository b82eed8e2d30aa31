"""Scoring without a judge model: the expected value must appear in the answer, and for a
corrected fact no earlier value may (an answer naming both has not committed to the
newer one)."""

from __future__ import annotations

import re
import unicodedata

from stm_memory.evaluation._conversation import Probe

__all__ = ["mentions", "normalize", "score_answer"]

#: Words that carry no answer (dropped when a multi-word answer is matched word by word).
_FILLER = frozenset({"a", "an", "the", "of", "and", "in", "on", "at", "to", "is", "it"})


def normalize(text: str) -> str:
    """NFKC, casefolded, whitespace collapsed: the form values are compared in."""
    # NFKC and casefold, so "Café" and "CAFÉ" match, and any run of whitespace is one.
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def mentions(value: str, text: str) -> bool:
    """Whether ``value`` occurs in ``text`` as a whole phrase: case-insensitive, not
    inside a longer word or number ("17" is not in "1730")."""
    needle = normalize(value)
    if not needle:
        return False
    pattern = rf"(?<![\w]){re.escape(needle)}(?![\w])"
    return re.search(pattern, normalize(text)) is not None


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", normalize(text)) if w not in _FILLER]


def score_answer(probe: Probe, answer: str) -> bool:
    """True when ``answer`` is right for ``probe`` (see the module docstring)."""
    if probe.match == "words":
        # Free-text answers (LoCoMo): every content word of the expected answer appears.
        said = set(_words(answer))
        found = bool(_words(probe.expected)) and all(w in said for w in _words(probe.expected))
    else:
        found = mentions(probe.expected, answer)
    return found and not any(mentions(old, answer) for old in probe.stale)
