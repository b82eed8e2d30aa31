"""Every Python snippet of ``docs/testing.md`` runs as shown.

Each ``python`` block there starts with ``# <file name>.py``; the blocks are written into
a throwaway project (no conftest: the plugin comes from the installed package) and run
with pytest twice, as the page tells users to: ``--record-mode=once`` records the
cassette, then the default mode replays it with no model behind the client.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.pytest_runs import pytest_args

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"^```python\n# (?P<name>[\w/]+\.py)\n(?P<body>.*?)^```$", re.M | re.S)
CASSETTE = Path("cassettes/test_agent_cassette/test_memory_reaches_the_next_channel.yaml")


def snippets() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    found = {m["name"]: f"# {m['name']}\n{m['body']}" for m in BLOCK.finditer(text)}
    assert len(found) == text.count("```python"), "every python block must name its file"
    return found


def test_the_page_has_the_promised_sections() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.startswith("## Testing your agent with stm-memory\n")
    for heading in ("### Fixtures", "### Assertion helpers", "### The offline model"):
        assert heading in text
    assert "### Recording cassettes with pytest-recording" in text
    assert set(snippets()) >= {"test_memory_basics.py", "test_agent_cassette.py"}


def test_every_snippet_runs(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cassette example must take its offline branch (and never reach the network).
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    files = snippets()
    for name, body in files.items():
        pytester.makepyfile(**{name.removesuffix(".py"): body})
    expected = sum(len(re.findall(r"^def test_", body, re.M)) for body in files.values())

    recorded = pytester.runpytest_subprocess(*pytest_args("--record-mode=once"))
    recorded.assert_outcomes(passed=expected, warnings=0)
    cassette = pytester.path / CASSETTE
    assert cassette.exists()
    first = cassette.read_bytes()

    replayed = pytester.runpytest_subprocess(*pytest_args("test_agent_cassette.py"))
    replayed.assert_outcomes(passed=1)
    assert cassette.read_bytes() == first
