"""Tests for stm_memory.tool.intent: explicit long-term-memory intent detection."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stm_memory.errors import ConfigurationError
from stm_memory.tool.intent import (
    DEFAULT_INTENT_PATTERNS,
    IntentDetector,
    detect_long_term_intent,
    make_intent_detector,
    normalize,
)

INTENT_CASES: list[tuple[str, bool]] = [
    # Required table.
    ("Please remember that I like tea", True),
    ("don’t forget my birthday", True),  # curly apostrophe
    ("覚えておいて", True),
    ("Remember: I'm vegan", True),
    ("note this down", True),
    ("I don't remember the plot", False),
    ("open my notebook", False),
    ("Footnote please", False),
    ("", False),
    # "remember" as a request.
    ("remember this", True),
    ("Remember my name is Bob", True),
    ("REMEMBER THAT I'M ALLERGIC TO NUTS", True),
    ("can you remember my sister's name?", True),
    ("Could you please remember that?", True),
    ("I want you to remember this", True),
    ("ok, remember, I hate cilantro", True),
    ("You should remember that I work nights", True),
    # "remember" as recall / narrative: not a request.
    ("I don't  remember the plot", False),  # extra whitespace
    ("I do not remember", False),
    ("I can’t remember his name", False),  # curly apostrophe
    ("I cannot remember", False),
    ("I couldn't remember the ending", False),
    ("I never remember passwords", False),
    ("I remember my first car", False),
    ("I still remember that day", False),
    ("We'll remember this trip", False),
    ("do you remember?", False),
    ("Don't you remember me?", False),
    ("remember when we met?", False),
    ("I remembered my keys", False),
    ("remembering the old days is nice", False),
    ("a remembrance service", False),
    ("Please don't remember this", False),  # user explicitly asks *not* to
    # forget.
    ("Don't forget: I'm vegan", True),
    ("do not forget my address", True),
    ("dont forget", True),
    ("Never forget that I'm allergic", True),
    ("I never forget a face", False),
    ("I'll never forget that day", False),
    ("I forgot my keys", False),
    ("forget it", False),
    # note.
    ("Note that I moved to Berlin", True),
    ("please note down my address", True),
    ("notes from the meeting", False),
    ("a footnote that matters", False),
    ("denote this", False),
    # memory phrases.
    ("Commit this to memory", True),
    ("commit to memory: my cat is Tom", True),
    ("commit my new address to memory", True),
    ("save this to your long-term memory", True),
    ("store that in memory", True),
    ("memorize this", True),
    ("I can't memorise anything", False),
    ("For future conversations, call me Sam", True),
    ("for future reference, I'm 30", True),
    ("in future chats use metric units", True),
    ("future reference books", False),
    ("my memory is bad", False),
    ("keep in mind I'm allergic", True),
    ("Keep that in mind", True),
    ("I'll keep that in mind", False),
    # Japanese (fullwidth punctuation is folded by NFKC).
    ("覚えて", True),
    ("覚えて！", True),
    ("これを覚えてください", True),
    ("私の名前を覚えてね", True),
    ("覚えといて", True),
    ("覚えていてね", True),
    ("忘れないで", True),
    ("忘れないでください", True),
    ("メモして", True),
    ("メモしておいて", True),
    ("記憶して", True),
    ("記憶しておいてください", True),
    ("覚えている", False),  # "I remember"
    ("覚えてない", False),  # "I don't remember"
    ("覚えてる？", False),  # "do you remember?"
    ("メモしてる", False),  # "I'm taking notes"
    ("今日は晴れ", False),
    # Unusual but valid input must not raise.
    ("\ud800 remember this", True),  # lone surrogate
    ("\x00\n\t", False),
]


@pytest.mark.parametrize(("text", "expected"), INTENT_CASES)
def test_detect_long_term_intent(text: str, expected: bool) -> None:
    assert detect_long_term_intent(text) is expected


@pytest.mark.parametrize(("text", "expected"), INTENT_CASES)
def test_default_made_detector_agrees(text: str, expected: bool) -> None:
    assert make_intent_detector()(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Don’t", "don't"),
        ("‘quoted’", "'quoted'"),
        ("itʼs", "it's"),
        ("ｄｏｎ＇ｔ", "don't"),  # fullwidth letters and apostrophe
        ("ＲＥＭＥＭＢＥＲ！", "remember!"),
        ("ﬁle", "file"),  # ligature
        ("e\u0301", "\u00e9"),  # composed
        ("İ\u0316", "i\u0316\u0307"),  # one NFKC+lower pass is not idempotent here
        ("", ""),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


combining_heavy = st.text(
    alphabet=st.one_of(
        st.sampled_from(["İ", "I", "Σ", "ᴬ", "\u0307", "\u0316", "\u0301", "\u0345", "’", "ﬀ"]),
        st.characters(),
    )
)


@given(st.one_of(st.text(), combining_heavy))
def test_normalize_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once


@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_detector_never_raises(text: str) -> None:
    assert isinstance(detect_long_term_intent(text), bool)
    assert isinstance(make_intent_detector(extra_patterns=[r"\bstash\b"])(text), bool)


@given(st.text())
def test_detector_is_case_and_apostrophe_insensitive(text: str) -> None:
    assert detect_long_term_intent(text) == detect_long_term_intent(normalize(text))


def test_default_patterns_are_exposed_and_compile() -> None:
    assert isinstance(DEFAULT_INTENT_PATTERNS, tuple)
    assert DEFAULT_INTENT_PATTERNS
    for pattern in DEFAULT_INTENT_PATTERNS:
        re.compile(pattern)


def test_extra_patterns_extend_defaults() -> None:
    detector: IntentDetector = make_intent_detector(extra_patterns=[r"\bstash (?:this|that)\b"])
    assert detector("Stash this: my PIN hint is blue")
    assert detector("please remember that")  # defaults still active
    assert not detector("open my notebook")


def test_extra_patterns_match_normalized_text() -> None:
    # Patterns see lower-cased, apostrophe-folded, whitespace-collapsed text.
    detector = make_intent_detector(extra_patterns=[r"\bdon't lose this\b"], replace=True)
    assert detector("DON’T    LOSE\nTHIS")


def test_replace_uses_only_extra_patterns() -> None:
    detector = make_intent_detector(extra_patterns=[r"\bstash\b"], replace=True)
    assert detector("stash it")
    assert not detector("please remember that I like tea")


def test_replace_without_patterns_never_matches() -> None:
    detector = make_intent_detector(replace=True)
    assert not detector("please remember that I like tea")


def test_invalid_pattern_fails_at_construction() -> None:
    with pytest.raises(re.error):
        make_intent_detector(extra_patterns=["(unclosed"])


def test_single_string_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="extra_patterns"):
        make_intent_detector(extra_patterns="stash")


def test_long_input_is_fast_enough() -> None:
    # Guard against catastrophic backtracking in the bounded word-gap patterns.
    text = "save " + "word " * 20_000 + "i remember " * 5_000
    assert detect_long_term_intent(text) is False


# Words and look-alikes of what the default patterns spell: detect_long_term_intent
# searches the English patterns only where one of their words is (a prefilter without
# IGNORECASE); make_intent_detector() searches every pattern, as it always did.
_WORDS = "remember memorize memorise commit keep note forget memory future reference"
# Look-alikes IGNORECASE takes for those letters: the dotless and dotted i, the Kelvin sign.
_LOOKALIKES = "REMEMBER Memor\u0131ze memor\u0130ze comm\u0131t COMM\u0130T \u212aeep KEEP Note"
_AROUND = "please don't dont never to your in mind this that down for all the i we"
_LOOKALIKE_WORDS = st.sampled_from(
    [*f"{_WORDS} {_LOOKALIKES} {_AROUND}".split(" "), "覚えておいて", "忘れないで", "!", "\u2019"]
)


@given(st.lists(_LOOKALIKE_WORDS, max_size=8).map(" ".join))
def test_the_default_detector_agrees_with_every_pattern_searched(text: str) -> None:
    assert detect_long_term_intent(text) is make_intent_detector()(text)
