"""Pure text helpers: placeholder sanitising, code-point truncation and field slugs.

Everything here is a pure function of its arguments (no I/O, no global state) so it can be
used from any layer of the package and tested exhaustively with property-based tests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "ALLOWED_PLACEHOLDERS",
    "MAX_SLUG_LENGTH",
    "clean_value",
    "humanize_slug",
    "sanitize_placeholders",
    "slugify",
    "storable_text_problem",
    "storage_safe",
    "truncate_code_points",
    "unique_slugs",
]

#: Template macros the host application expands on purpose. They are kept verbatim (any case,
#: single or double braces) because a memory value such as "{{user}} likes tea" must keep
#: referring to the user after expansion. Names are compared lower-cased.
ALLOWED_PLACEHOLDERS: frozenset[str] = frozenset(
    {"user", "user_formatted", "user_term", "bot", "char"}
)

#: Upper bound on slug length; ``unique_slugs`` keeps suffixed slugs within it too.
MAX_SLUG_LENGTH = 48

# The longest allowed name; an identifier longer than this cannot be allowed, so the
# sanitiser only needs to remember this many characters of an identifier to decide.
_ALLOWED_MAX_LEN = max(len(name) for name in ALLOWED_PLACEHOLDERS)

_FALLBACK_SLUG = "field"


def _is_ascii_letter(ch: str) -> bool:
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _is_ascii_word(ch: str) -> bool:
    return _is_ascii_letter(ch) or ("0" <= ch <= "9") or ch == "_"


class _Run:
    """The trailing run of ASCII word characters in the sanitiser's output.

    Only the first character (identifier check), the length and a short prefix (allowed-name
    check) are needed, so merging two runs is O(1); this is what keeps the sanitiser linear.
    """

    __slots__ = ("first", "length", "prefix")

    def __init__(self, first: str, length: int, prefix: str) -> None:
        self.first = first
        self.length = length
        self.prefix = prefix

    def extended(self, ch: str) -> _Run:
        prefix = self.prefix if len(self.prefix) > _ALLOWED_MAX_LEN else self.prefix + ch
        return _Run(self.first, self.length + 1, prefix)

    def merged_after(self, before: _Run | None) -> _Run:
        if before is None:
            return self
        # ``before.prefix`` is the whole of ``before`` whenever it is short enough to matter.
        prefix = (before.prefix + self.prefix)[: _ALLOWED_MAX_LEN + 1]
        return _Run(before.first, before.length + self.length, prefix)


def sanitize_placeholders(text: str) -> str:
    """Neutralise template placeholders that the host did not ask for.

    A placeholder is ``{name}`` or ``{{name}}`` where ``name`` is an identifier (an ASCII
    letter, then ASCII letters, digits or ``_``). Allowed names (:data:`ALLOWED_PLACEHOLDERS`,
    any case) are left exactly as written; any other placeholder is replaced by its bare
    name, so ``"{{secret}} and {Foo}"`` becomes ``"secret and Foo"``. Why: stored values are
    later pasted into prompt templates, and an unknown ``{{macro}}`` would otherwise be
    expanded (or crash a ``str.format``) with data the writer never meant to reference.

    Braces around non-identifiers (``{foo bar}``, ``{1}``, ``{}``) are left alone and nothing
    but braces is ever removed.

    Unbalanced braces: each ``}`` closes the nearest ``{`` directly before the identifier, so
    only matched pairs are removed and stray braces stay: ``"{{name}"`` -> ``"{name"``,
    ``"{name}}"`` -> ``"name}"``, ``"{{{name}}}"`` -> ``"name"``.

    The result never contains a disallowed ``{identifier}``, even one formed by removing
    braces (``"{{a}b}"`` -> ``"ab"``, not ``"{ab}"``), which makes the function idempotent.
    It runs in linear time: a single left-to-right pass with O(1) work per character.
    """
    if "{" not in text or "}" not in text:
        return text  # fast path: the overwhelmingly common case

    out: list[str] = []
    # Open braces that are followed in ``out`` only by word characters or by other such
    # braces, each with the word run that preceded it. Anything else appended makes them
    # unreachable for later ``}`` (only ``{`` are ever removed), so the stack is cleared.
    open_braces: list[tuple[int, _Run | None]] = []
    run: _Run | None = None

    for ch in text:
        if _is_ascii_word(ch):
            out.append(ch)
            run = _Run(ch, 1, ch) if run is None else run.extended(ch)
        elif ch == "{":
            open_braces.append((len(out), run))
            out.append(ch)
            run = None
        elif (
            ch == "}"
            and open_braces
            and run is not None
            and _is_ascii_letter(run.first)
            and not (run.length <= _ALLOWED_MAX_LEN and run.prefix.lower() in ALLOWED_PLACEHOLDERS)
        ):
            # Disallowed placeholder: blank out its "{" (O(1), joined away below) and drop
            # this "}". The identifier now continues the run that preceded the "{", so an
            # outer brace pair around the merged text is handled by a later "}".
            index, before = open_braces.pop()
            out[index] = ""
            run = run.merged_after(before)
        else:
            # Allowed placeholder, non-identifier braces or any other character: kept, and it
            # separates what follows from every brace before it.
            out.append(ch)
            open_braces.clear()
            run = None

    return "".join(out)


def truncate_code_points(text: str, limit: int) -> str:
    """Return at most ``limit`` Unicode code points of ``text``.

    Python strings are sequences of code points, so slicing never splits a UTF-8/UTF-16
    encoding. It can split a grapheme cluster (``"e\\u0301"``, ``"👍🏽"`` are two code
    points each); that is deliberate, since limits are specified in code points and
    grapheme segmentation would need a Unicode-data dependency and be version dependent.

    Raises ``ValueError`` for a negative ``limit`` (a silent ``text[:-n]`` would be a bug).
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    return text[:limit]


def clean_value(text: str, *, limit: int) -> str:
    """Normalise a value for storage: trim, sanitise placeholders, trim, truncate, rstrip.

    The sanitiser only removes braces next to identifier characters, so the second trim is
    defensive: it is cheap and keeps the result trimmed should the sanitiser rules change.
    The final ``rstrip`` removes whitespace exposed by the cut. Truncation comes last so the
    budget is spent on the text that is actually stored: the result has at most ``limit``
    code points (a ``ValueError`` is raised for a negative ``limit``).
    """
    value = sanitize_placeholders(text.strip()).strip()
    return truncate_code_points(value, limit).rstrip()


_NON_WORD_RUN = re.compile(r"[^a-z0-9_]+")
_UNDERSCORE_RUN = re.compile(r"_{2,}")


def slugify(label: str) -> str:
    """Turn a human label into a stable field key matching ``^[a-z_][a-z0-9_]{0,47}$``.

    Steps: lower-case; every run of characters outside ``[a-z0-9_]`` becomes one ``_``;
    repeated ``_`` collapse; ``_`` are trimmed at both ends; a leading digit gets a ``c_``
    prefix (keys must not start with a digit); the result is cut to 48 characters and
    trailing ``_`` trimmed again; an empty result becomes ``"field"``.

    Non-ASCII letters are separators, not transliterated ("Ärger" -> ``"rger"``,
    "気分" -> ``"field"``): transliteration would need tables and is locale dependent, while
    callers only need a deterministic ASCII key and keep the original label for display.
    Lower-casing happens first, so characters whose lower case is ASCII (the Kelvin sign)
    survive as letters.
    """
    slug = _NON_WORD_RUN.sub("_", label.lower())
    slug = _UNDERSCORE_RUN.sub("_", slug).strip("_")
    if not slug:
        return _FALLBACK_SLUG
    if slug[0].isdigit():
        slug = "c_" + slug
    # Cannot become empty: the slug starts with a letter (or "c_") after the steps above.
    return slug[:MAX_SLUG_LENGTH].rstrip("_")


def unique_slugs(labels: Sequence[str]) -> list[str]:
    """Slugify ``labels`` and make the results distinct, preserving order and length.

    The first label producing a slug keeps it; later duplicates get ``_2``, ``_3``, ... (the
    smallest free number, base shortened so the whole slug stays within 48 characters).
    Every label's natural slug is reserved up front, so a suffix never steals a slug that
    a later label produces naturally: ``["a", "a", "a_2"]`` -> ``["a", "a_3", "a_2"]``.
    That keeps a label's key independent of the labels listed before it whenever possible.
    """
    natural = [slugify(label) for label in labels]
    reserved = set(natural)
    taken: set[str] = set()
    next_suffix: dict[str, int] = {}  # per base, so n identical labels cost O(n), not O(n^2)
    result: list[str] = []

    for slug in natural:
        if slug not in taken:
            taken.add(slug)
            result.append(slug)
            continue
        n = next_suffix.get(slug, 2)
        while True:
            suffix = f"_{n}"
            candidate = slug[: MAX_SLUG_LENGTH - len(suffix)].rstrip("_") + suffix
            n += 1
            if candidate not in taken and candidate not in reserved:
                break
        next_suffix[slug] = n
        taken.add(candidate)
        result.append(candidate)

    return result


def humanize_slug(slug: str) -> str:
    """Render a slug as a label: ``"plot_points"`` -> ``"Plot points"``.

    A leading ``c_`` is dropped only when a digit follows, i.e. when :func:`slugify` added
    it (``"c_1st"`` -> ``"1st"``, but ``"c_major"`` -> ``"C major"``). Underscore runs
    become single spaces and only the first character is upper-cased (``str.capitalize``
    would lower-case the rest). A slug with no content gives ``"Field"``, mirroring the
    fallback of :func:`slugify`.
    """
    if len(slug) > 2 and slug.startswith("c_") and "0" <= slug[2] <= "9":
        slug = slug[2:]
    words = slug.replace("_", " ").split()
    if not words:
        return _FALLBACK_SLUG.capitalize()
    text = " ".join(words)
    return text[0].upper() + text[1:]


def storable_text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored everywhere (PostgreSQL rejects NUL; UTF-8 rejects
    lone surrogates), or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (lone surrogate)"
    return None


def storage_safe(text: str) -> str:
    """Make text storable everywhere: PostgreSQL rejects NUL, UTF-8 rejects lone
    surrogates. Both become U+FFFD so the rest of the value survives."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
