"""The README as a newcomer meets it: every Python block runs as written, and what the
text points at (sections, extras, commands, entry points, notebooks) exists.

Each block is written to a file in its own empty temporary directory and run there with
this interpreter, as ``python block.py``, with provider keys removed and provider base
URLs pointing at a closed port (``conftest.offline_environment``): a block that needed a
key or the network would fail here, so the offline swap has to be on the page. A block
whose text just before it is ``<!-- readme-test: pytest (reason) -->`` is a test module
and runs under pytest instead; ``<!-- readme-test: skip (reason) -->`` skips it, with the
reason shown.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.notebooks import offline_environment
from helpers.pytest_runs import pytest_args
from typer.testing import CliRunner

from stm_memory.cli.commands import app

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)
MARK = re.compile(r"<!-- readme-test: (?P<how>pytest|skip) \((?P<reason>[^)]+)\) -->\n\Z")
HEADING = re.compile(r"^(#{1,6}) (.+)$", re.M)
BLOCK_TIMEOUT = 180  # seconds; a block takes a few (mostly importing LangChain)


@dataclass(frozen=True)
class Block:
    heading: str  # the section it is in
    line: int  # where it starts in README.md
    body: str
    how: str  # "script", "pytest" or "skip"
    reason: str = ""

    @property
    def id(self) -> str:
        return f"L{self.line}-{re.sub(r'[^a-z0-9]+', '-', self.heading.lower()).strip('-')}"


def run_block(block: Block, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python block.py`` in ``cwd``, offline, warnings shown as a newcomer sees them."""
    script = cwd / "block.py"
    script.write_text(block.body, encoding="utf-8")
    env = offline_environment()
    env["PYTHONWARNINGS"] = "default"
    return subprocess.run(
        [sys.executable, script.name],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )


def readme() -> str:
    return README.read_text(encoding="utf-8")


def prose(text: str) -> str:
    """The README without its fenced blocks (a `# comment` in a block is no heading)."""
    return FENCE.sub("", text)


def python_blocks() -> list[Block]:
    text = readme()
    blocks = []
    for match in FENCE.finditer(text):
        if match["lang"] != "python":
            continue
        before = text[: match.start()]
        headings = HEADING.findall(prose(before))
        mark = MARK.search(before)
        blocks.append(
            Block(
                heading=headings[-1][1] if headings else "top",
                line=before.count("\n") + 1,
                body=match["body"],
                how=mark["how"] if mark else "script",
                reason=mark["reason"] if mark else "",
            )
        )
    return blocks


BLOCKS = python_blocks()
SCRIPTS = [b for b in BLOCKS if b.how != "pytest"]
TEST_MODULES = [b for b in BLOCKS if b.how == "pytest"]


def test_the_readme_has_its_blocks() -> None:
    # One block per entry point of "Which entry point?", and the testing-kit example.
    headings = {b.heading for b in BLOCKS}
    for expected in (
        "The core API",
        "Your own loop: `MemoryTurn`",
        "LangChain `create_agent`",
        "OpenAI",
        "Anthropic",
        "Classic chains: `ShortTermMemoryBuffer`",
        "LCEL chains",
        "OpenAI Agents SDK",
        "Testing your agent with stm-memory",
    ):
        assert expected in headings, f"no python block under {expected!r}"
    assert readme().count("```python") == len(BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_the_block_defines_every_name_it_uses(block: Block) -> None:
    """Checked for every block, the skipped ones too: a block copied alone must not
    lean on names from another block (pyflakes' undefined-name rule, through ruff)."""
    ruff = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821,E9"]
    done = subprocess.run(
        [*ruff, "--output-format", "concise", "--stdin-filename", "block.py", "-"],
        input=block.body,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"README.md line {block.line}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("block", SCRIPTS, ids=lambda b: b.id)
def test_the_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.how == "skip":
        pytest.skip(block.reason)
    done = run_block(block, tmp_path)
    where = f"README.md line {block.line} ({block.heading})"
    assert done.returncode == 0, f"{where} failed:\n{done.stderr}"
    # Each block shows the newcomer a result.
    assert done.stdout.strip(), f"{where} prints nothing"
    # Only LangChain's own deprecation notices, which the blocks announce in a comment.
    for line in done.stderr.splitlines():
        if "Warning" in line:
            assert "LangChainDeprecationWarning" in line, f"{where} warned: {line}"
            assert "deprecate" in block.body, f"{where} warns without saying so"


def test_the_cli_shows_what_the_core_api_block_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's promise: the CLI, on its defaults, reads the store the quickstart's
    first block wrote with from_url's defaults (issue #32: it used to say "no live memory")."""
    first = next(b for b in BLOCKS if b.heading == "The core API")
    done = run_block(first, tmp_path)
    assert done.returncode == 0, done.stderr
    written = done.stdout.strip().splitlines()[-1]  # the block prints the summary last
    monkeypatch.chdir(tmp_path)
    shown = CliRunner().invoke(app, ["show", "c1", "--user", "u1", "--server", "g1", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)[0]["summary"] == written
    assert "`stm-memory show c1 --user u1 --server g1`, run in the same directory" in " ".join(
        readme().split()
    )


@pytest.mark.parametrize("block", TEST_MODULES, ids=lambda b: b.id)
def test_the_test_module_passes(block: Block, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_readme_block=block.body)
    expected = len(re.findall(r"^def test_", block.body, re.M))
    assert expected, "a pytest block holds a test"
    # The plugin comes from the installed package: no conftest in the throwaway project.
    result = pytester.runpytest_subprocess(*pytest_args())
    result.assert_outcomes(passed=expected)


# -- what the prose points at ------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation gone, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_section_link_resolves() -> None:
    text = readme()
    anchors = {slug(title) for _, title in HEADING.findall(prose(text))}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links, "the README links its sections"
    assert links <= anchors, f"links to no section: {sorted(links - anchors)}"


def section(title: str) -> str:
    text = readme()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


ENTRY_MODULES = (
    "stm_memory",
    "stm_memory_langchain",
    "stm_memory_openai",
    "stm_memory_anthropic",
    "stm_memory_openai_agents",
)


def test_the_entry_point_table_names_what_ships() -> None:
    table = [r for r in section("Which entry point?").splitlines() if r.startswith("| ")]
    rows = table[1:]  # after the header (the |---| line does not start with "| ")
    assert len(rows) >= 8
    exported = {
        name for module in ENTRY_MODULES for name in importlib.import_module(module).__all__
    }
    for row in rows:
        # The "use" column: `Name`, `Name(...)`, `Name / Other` …
        use = row.split(" | ")[1]
        names = {n for n in re.findall(r"`(\w+)", use) if n[0].isupper()}
        assert names, f"row names no entry point: {row}"
        assert names <= exported, f"{sorted(names - exported)} not exported ({row})"


def test_the_install_lists_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    install = section("Install")
    listed = set()
    for line in install.splitlines():
        for group in re.findall(r'stm-memory\[([\w,-]+)\]"', line):
            assert "#" in line, f"an install line says what it enables: {line}"
            listed.update(group.split(","))
    # The user-facing extras, one line each; dev and bench belong to a checkout.
    assert listed == set(extras) - {"dev", "bench"}
    assert 'pip install -e ".[dev]"' in install
    assert 'pip install -e ".[dev,bench]"' in install


def test_the_cli_block_names_real_commands() -> None:
    import typer.main

    group = typer.main.get_command(app)
    commands = set(group.commands)  # type: ignore[attr-defined]
    [block] = [m["body"] for m in FENCE.finditer(section("CLI")) if m["lang"] == "bash"]
    used = set(re.findall(r"stm-memory ([a-z-]+)", block))
    assert used, "the CLI block shows commands"
    assert used <= commands, f"no such command: {sorted(used - commands)}"


def test_the_readme_names_every_notebook() -> None:
    shown = section("Notebooks")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"notebooks/{path.name}" in shown, f"README's Notebooks omit {path.name}"
