"""Tests for stm_memory.model.text: placeholder sanitiser, truncation, slugs."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stm_memory.model.text import (
    ALLOWED_PLACEHOLDERS,
    MAX_SLUG_LENGTH,
    clean_value,
    humanize_slug,
    sanitize_placeholders,
    slugify,
    truncate_code_points,
    unique_slugs,
)

SLUG_RE = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
# SPEC §3 "Cleaning": the sanitizer keeps {user}, {user_formatted}, {user_term}, {bot} and
# {char} (case-insensitive, single or double braces). Written out from the SPEC, never
# imported from the code under test: an oracle that reads the code's own list widens with it.
SPEC_KEPT_MACROS = frozenset({"user", "user_formatted", "user_term", "bot", "char"})
# A placeholder whose name is an identifier; used to check that none but allowed survive.
PLACEHOLDER_RE = re.compile(r"\{([A-Za-z][A-Za-z0-9_]*)\}")


def reference_sanitize(text: str) -> str:
    """Obviously-correct (but quadratic) model: strip innermost disallowed pairs to a fixpoint."""

    def bare(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name.lower() in SPEC_KEPT_MACROS else name

    while True:
        following = PLACEHOLDER_RE.sub(bare, text)
        if following == text:
            return text
        text = following


# Text that exercises brace handling far more often than arbitrary unicode would, with
# kept names and near-misses (a whole "{system}" too: a list that grew would keep it).
brace_text = st.lists(
    st.sampled_from(
        [
            *("{", "}", "a", "B", "1", "_", " ", "é", "{{", "}}"),
            *("user", "Char", "bOt", "system", "{system}", "{User}"),
        ]
    ),
    max_size=30,
).map("".join)


# --- sanitize_placeholders -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Allowed names survive verbatim: single, double, any case.
        ("{user}", "{user}"),
        ("{{user}}", "{{user}}"),
        ("{{User}}", "{{User}}"),
        ("{CHAR} and {{bot}}", "{CHAR} and {{bot}}"),
        ("{user_formatted}/{{User_Term}}", "{user_formatted}/{{User_Term}}"),
        # Other identifiers are bared, single or double braces.
        ("{foo}", "foo"),
        ("{{foo}}", "foo"),
        ("{{Secret_Key2}} here", "Secret_Key2 here"),
        ("hi {{name}}, I am {{char}}", "hi name, I am {{char}}"),
        ("{users}", "users"),  # prefix of an allowed name is not allowed
        # Non-identifiers are left alone.
        ("{foo bar}", "{foo bar}"),
        ("{1}", "{1}"),
        ("{}", "{}"),
        ("{{}}", "{{}}"),
        ("{_x}", "{_x}"),
        ("{é}", "{é}"),
        ("{ foo }", "{ foo }"),
        ("{foo-bar}", "{foo-bar}"),
        # Nested / adjacent / unbalanced: only matched pairs go, stray braces stay.
        ("{{foo}", "{foo"),
        ("{foo}}", "foo}"),
        ("{{{foo}}}", "foo"),
        ("{{a}b}", "ab"),  # removing the inner pair must not leave a new "{ab}"
        ("{a{b}}", "ab"),
        ("{us{er}}", "{user}"),  # what remains is an allowed placeholder
        ("{{user}", "{{user}"),
        ("{{user}x}", "{{user}x}"),
        ("{ {foo} }", "{ foo }"),
        ("{foo}{bar}", "foobar"),
        ("text {{a}} more {b} end", "text a more b end"),
        ('json {"k": 1}', 'json {"k": 1}'),
        # Nothing but braces is ever removed.
        ("", ""),
        ("plain text", "plain text"),
        ("}{", "}{"),
    ],
)
def test_sanitize_placeholders(text: str, expected: str) -> None:
    assert sanitize_placeholders(text) == expected


@given(brace_text)
def test_sanitize_matches_reference_model(text: str) -> None:
    assert sanitize_placeholders(text) == reference_sanitize(text)


@given(st.one_of(brace_text, st.text()))
def test_sanitize_properties(text: str) -> None:
    result = sanitize_placeholders(text)
    # Idempotent, and no disallowed placeholder survives.
    assert sanitize_placeholders(result) == result
    for match in PLACEHOLDER_RE.finditer(result):
        assert match.group(1).lower() in SPEC_KEPT_MACROS
    # Only braces are removed: deleting all braces gives the same text.
    assert result.replace("{", "").replace("}", "") == text.replace("{", "").replace("}", "")


def test_sanitize_is_linear_on_deep_nesting() -> None:
    # The fixpoint model is quadratic here; the real implementation must not be.
    depth = 20_000
    text = "{" * depth + "a" + "}b" * depth
    assert sanitize_placeholders(text) == "a" + "b" * depth


# --- the allow-list: SPEC §3's five macros, no more, no fewer ---------------------------------


def _casings(name: str) -> list[str]:
    """``name`` as written, upper-cased, capitalised and in alternating case."""
    alternating = "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(name))
    return list(dict.fromkeys([name, name.upper(), name.capitalize(), alternating]))


@pytest.mark.parametrize(
    "placeholder",
    [
        f"{open_}{written}{close}"
        for name in sorted(SPEC_KEPT_MACROS)
        for written in _casings(name)
        for open_, close in (("{", "}"), ("{{", "}}"))
    ],
)
def test_each_spec_macro_is_kept_in_any_case_and_brace_form(placeholder: str) -> None:
    assert sanitize_placeholders(placeholder) == placeholder
    text = f"before {placeholder} after"
    assert sanitize_placeholders(text) == text
    assert clean_value(f"  {placeholder} likes tea ", limit=100) == f"{placeholder} likes tea"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Case variants of the five ARE allowed (SPEC: case-insensitive).
        ("{User_Formatted}", "{User_Formatted}"),
        ("{{USER_TERM}}", "{{USER_TERM}}"),
        ("{{bot}}", "{{bot}}"),
        ("{cHaR}", "{cHaR}"),
        # Near-misses are other identifiers: bared, single or double braces, any case.
        ("{system}", "system"),
        ("{{system}}", "system"),
        ("{{System}}", "System"),
        ("{SYSTEM}", "SYSTEM"),
        ("{users}", "users"),
        ("{use}", "use"),
        ("{user_}", "user_"),
        ("{user2}", "user2"),
        ("{UserFormatted}", "UserFormatted"),
        ("{user_format}", "user_format"),
        ("{user_formatted_}", "user_formatted_"),
        ("{user_terms}", "user_terms"),
        ("{userterm}", "userterm"),
        ("{bots}", "bots"),
        ("{bo}", "bo"),
        ("{robot}", "robot"),
        ("{chars}", "chars"),
        ("{character}", "character"),
        ("{charname}", "charname"),
        ("{assistant}", "assistant"),
        ("{human}", "human"),
        ("{model}", "model"),
        ("{name}", "name"),
        ("{persona}", "persona"),
        ("{{prompt}}", "prompt"),
        # Not identifiers (SPEC: letter first, then letters/digits/underscore): kept as is.
        ("{foo bar}", "{foo bar}"),
        ("{1}", "{1}"),
        ("{1user}", "{1user}"),
        ("{_user}", "{_user}"),
        ("{user term}", "{user term}"),
        ("{user-term}", "{user-term}"),
        ("{ user }", "{ user }"),
        ("{{ system }}", "{{ system }}"),
        # In running text, each placeholder on its own.
        ("{{system}}: greet {{user}} as {char}", "system: greet {{user}} as {char}"),
        ("{bot} and {bots} and {{BOT}}", "{bot} and bots and {{BOT}}"),
    ],
)
def test_allow_list_near_misses(text: str, expected: str) -> None:
    assert sanitize_placeholders(text) == expected


def _any_case(name: str) -> st.SearchStrategy[str]:
    return st.tuples(*(st.sampled_from([c.lower(), c.upper()]) for c in name)).map("".join)


# Identifiers that hit the five and their near-misses far more often than random text does.
_NEAR_NAMES = [*sorted(SPEC_KEPT_MACROS), "system", "users", "bots", "chars", "user_", "userterm"]
identifiers = st.one_of(
    st.sampled_from(_NEAR_NAMES).flatmap(_any_case),
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True),
)


@given(identifiers, st.sampled_from([("{", "}"), ("{{", "}}")]))
def test_an_identifier_placeholder_is_kept_exactly_when_spec_names_it(
    name: str, braces: tuple[str, str]
) -> None:
    open_, close = braces
    placeholder = f"{open_}{name}{close}"
    expected = placeholder if name.lower() in SPEC_KEPT_MACROS else name
    assert sanitize_placeholders(placeholder) == expected


def test_the_exported_allow_list_is_the_spec_list() -> None:
    # The public constant documents the rule; the behaviour tests above check the rule.
    assert ALLOWED_PLACEHOLDERS == SPEC_KEPT_MACROS


# --- truncate_code_points / clean_value --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("hello", 10, "hello"),
        ("hello", 5, "hello"),
        ("hello", 3, "hel"),
        ("hello", 0, ""),
        ("", 3, ""),
        # "é" as e + U+0301 is two code points: a limit of 1 keeps only the "e".
        ("e\u0301", 1, "e"),
        ("e\u0301", 2, "e\u0301"),
        ("cafe\u0301", 4, "cafe"),
        ("caf\u00e9", 4, "caf\u00e9"),  # precomposed é is one code point
        # 👍🏽 is thumbs-up + skin-tone modifier: two code points.
        ("👍🏽", 1, "👍"),
        ("👍🏽", 2, "👍🏽"),
        ("a👍🏽b", 3, "a👍🏽"),
        ("𝄞x", 1, "𝄞"),  # astral char is one code point (no surrogate halves)
    ],
)
def test_truncate_code_points(text: str, limit: int, expected: str) -> None:
    assert truncate_code_points(text, limit) == expected


def test_truncate_rejects_negative_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        truncate_code_points("abc", -1)
    with pytest.raises(ValueError, match="limit"):
        clean_value("abc", limit=-1)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("  hello  ", 10, "hello"),
        ("  {{secret}} value ", 20, "secret value"),
        ("{{user}} likes tea", 100, "{{user}} likes tea"),
        ("{{a}}{{b}}cdef", 3, "abc"),  # truncation counts the sanitised text
        ("hello world", 6, "hello"),  # whitespace exposed by the cut is dropped
        ("\u3000全角\u3000", 5, "全角"),  # ideographic spaces are whitespace too
        ("e\u0301e\u0301", 3, "e\u0301e"),
        ("   ", 5, ""),
        ("abc", 0, ""),
    ],
)
def test_clean_value(text: str, limit: int, expected: str) -> None:
    assert clean_value(text, limit=limit) == expected


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_clean_value_never_exceeds_limit(text: str, limit: int) -> None:
    result = clean_value(text, limit=limit)
    assert len(result) <= limit
    assert result == result.strip()


@given(st.text(alphabet=st.characters(exclude_categories=())), st.integers(0, 20))
def test_clean_value_total_on_any_code_point(text: str, limit: int) -> None:
    # Includes lone surrogates and control characters.
    assert len(clean_value(text, limit=limit)) <= limit


# --- slugify / unique_slugs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("Plot points", "plot_points"),
        ("Plot & Mood!", "plot_mood"),
        ("  Mood  ", "mood"),
        ("already_slug", "already_slug"),
        ("a__b", "a_b"),
        ("__a__", "a"),
        ("CamelCase", "camelcase"),
        ("Ärger", "rger"),  # non-ASCII letters are separators, not transliterated
        ("Über Ärger", "ber_rger"),
        ("気分", "field"),
        ("気分 mood", "mood"),
        ("", "field"),
        ("!!!", "field"),
        ("___", "field"),
        ("1st place", "c_1st_place"),
        ("42", "c_42"),
        ("x" * 60, "x" * 48),
        # Cut at 48 lands right after a separator: the trailing "_" is trimmed.
        ("a" * 47 + " b", "a" * 47),
        ("1" * 60, "c_" + "1" * 46),
        ("\u212a", "k"),  # Kelvin sign lower-cases to ASCII "k"
    ],
)
def test_slugify(label: str, expected: str) -> None:
    assert slugify(label) == expected


@given(st.text())
def test_slugify_shape(label: str) -> None:
    slug = slugify(label)
    assert SLUG_RE.fullmatch(slug)
    assert slugify(slug) == slug  # slugs are fixed points


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([], []),
        (["Mood"], ["mood"]),
        (["Mood", "mood", "MOOD!"], ["mood", "mood_2", "mood_3"]),
        (["Mood", "Plot", "mood"], ["mood", "plot", "mood_2"]),
        # A suffix must not steal a slug that a later label produces naturally.
        (["a", "a", "a_2"], ["a", "a_3", "a_2"]),
        (["a_2", "a", "a"], ["a_2", "a", "a_3"]),
        (["気分", "Ärger?", ""], ["field", "rger", "field_2"]),
        (["a_2", "a_2"], ["a_2", "a_2_2"]),
        # Suffixed slugs stay within 48 characters.
        (["x" * 60, "x" * 50], ["x" * 48, "x" * 46 + "_2"]),
        # The base is re-trimmed when the cut exposes an "_".
        (["a" * 45 + "_bc", "a" * 45 + "_bc"], ["a" * 45 + "_bc", "a" * 45 + "_2"]),
    ],
)
def test_unique_slugs(labels: list[str], expected: list[str]) -> None:
    assert unique_slugs(labels) == expected


def test_unique_slugs_many_duplicates() -> None:
    result = unique_slugs(["x" * 60] * 1_000)
    assert len(set(result)) == 1_000
    assert result[-1] == "x" * 43 + "_1000"
    assert all(len(slug) <= MAX_SLUG_LENGTH for slug in result)


@given(st.lists(st.one_of(st.text(max_size=60), st.sampled_from(["a", "a_2", "a_3", "", "1"]))))
def test_unique_slugs_properties(labels: list[str]) -> None:
    result = unique_slugs(labels)
    assert len(result) == len(labels)
    assert len(set(result)) == len(result)
    assert all(SLUG_RE.fullmatch(slug) for slug in result)
    # The first label with a given natural slug always keeps it.
    first_seen: dict[str, str] = {}
    for label, slug in zip(labels, result, strict=True):
        first_seen.setdefault(slugify(label), slug)
    assert all(natural == slug for natural, slug in first_seen.items())


# --- humanize_slug -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "expected"),
    [
        ("plot_points", "Plot points"),
        ("field", "Field"),
        ("c_1st", "1st"),
        ("c_1st_place", "1st place"),
        ("c_major", "C major"),  # "c_" not followed by a digit is content
        ("c_", "C"),
        ("a__b_", "A b"),
        ("mood_2", "Mood 2"),
        ("", "Field"),
        ("___", "Field"),
        ("already Human", "Already Human"),  # only the first character is changed
    ],
)
def test_humanize_slug(slug: str, expected: str) -> None:
    assert humanize_slug(slug) == expected
