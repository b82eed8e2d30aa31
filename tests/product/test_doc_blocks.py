"""The README and the docs site's pages as a newcomer meets them: every Python block runs as
written, and what the text points at (pages, sections, extras, commands, entry points,
notebooks, the bench's figures) exists.

Each block is written to a file in its own empty temporary directory and run there with
this interpreter, as ``python block.py``, with provider keys removed and provider base
URLs pointing at a closed port (``conftest.offline_environment``): a block that needed a
key or the network would fail here, so the offline swap has to be on the page. A block
whose text just before it is ``<!-- doc-test: pytest (reason) -->`` is a test module
and runs under pytest instead; ``<!-- doc-test: services (reason) -->`` runs it with
``STM_DATABASE_URL`` and ``STM_REDIS_URL`` naming the suite's PostgreSQL (a fresh schema) and
Redis (a database of its own); ``<!-- doc-test: skip (reason) -->`` skips it, with the
reason shown. ``docs/testing.md``'s blocks are files of one project and have their own
test (``tests/testing_kit/test_docs.py``); the site's strict build is ``test_docs_site``.
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
DOCS = ROOT / "docs"
OWN_TEST = {DOCS / "testing.md"}
DOCUMENTS = [README, *(p for p in sorted(DOCS.rglob("*.md")) if p not in OWN_TEST)]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)
MARK = re.compile(r"<!-- doc-test: (?P<how>pytest|services|skip) \((?P<reason>[^)]+)\) -->\n\Z")
HEADING = re.compile(r"^(#{1,6}) (.+)$", re.M)
BLOCK_TIMEOUT = 180  # seconds; a block takes a few (mostly importing LangChain)
README_MAX_LINES = 250  # issue #50: a README that fits on a screen or three


@dataclass(frozen=True)
class Block:
    where: str  # the file, relative to the repository
    heading: str  # the section it is in
    line: int  # where it starts in its file
    body: str
    how: str  # "script", "pytest", "services" or "skip"
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.where}:L{self.line}"


def run_block(block: Block, cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """``python block.py`` in ``cwd``, offline, warnings shown as a newcomer sees them;
    ``variables`` added to its environment."""
    script = cwd / "block.py"
    script.write_text(block.body, encoding="utf-8")
    env = offline_environment() | variables
    env["PYTHONWARNINGS"] = "default"
    return subprocess.run(
        [sys.executable, script.name],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prose(text: str) -> str:
    """A page without its fenced blocks (a `# comment` in a block is no heading)."""
    return FENCE.sub("", text)


def blocks_of(path: Path) -> list[Block]:
    text = read(path)
    found = []
    for match in FENCE.finditer(text):
        if match["lang"] != "python":
            continue
        before = text[: match.start()]
        headings = HEADING.findall(prose(before))
        mark = MARK.search(before)
        found.append(
            Block(
                where=path.relative_to(ROOT).as_posix(),
                heading=headings[-1][1] if headings else "top",
                line=before.count("\n") + 1,
                body=match["body"],
                how=mark["how"] if mark else "script",
                reason=mark["reason"] if mark else "",
            )
        )
    return found


BLOCKS = [b for path in DOCUMENTS for b in blocks_of(path)]
# A block shown on two pages (the first agent) runs once, under its first place.
_FIRST: dict[str, Block] = {}
for _b in BLOCKS:
    _FIRST.setdefault(_b.body, _b)
SCRIPTS = [b for b in _FIRST.values() if b.how in ("script", "skip")]
TEST_MODULES = [b for b in _FIRST.values() if b.how == "pytest"]
ON_SERVICES = [b for b in _FIRST.values() if b.how == "services"]


def page(name: str) -> Path:
    return ROOT / name


def section(path: Path, title: str) -> str:
    """The text under a heading of ``path``, up to the next heading of its level or above
    (a ``#`` line inside a fenced block is no heading)."""
    lines = read(path).splitlines(keepends=True)
    fenced, level, out = False, 0, []
    for line in lines:
        fenced ^= line.startswith("```")
        heading = None if fenced else HEADING.match(line)
        if level and heading and len(heading[1]) <= level:
            break
        if not level and heading and heading[2] == title:
            level = len(heading[1])
        if level:
            out.append(line)
    assert out, f"{path.name} has no section {title!r}"
    return "".join(out)


# -- the blocks --------------------------------------------------------------------------

#: The pages of the entry points, each with a block that runs; the README's first agent.
PAGES_WITH_A_BLOCK = (
    "README.md",
    "docs/index.md",
    "docs/entry-points/core-api.md",
    "docs/entry-points/memory-turn.md",
    "docs/entry-points/create-agent.md",
    "docs/entry-points/openai.md",
    "docs/entry-points/anthropic.md",
    "docs/entry-points/classic-chains.md",
    "docs/entry-points/lcel.md",
    "docs/entry-points/agents-sdk.md",
    "docs/open-models.md",
    "docs/testing/overview.md",
)


def test_every_entry_point_page_has_its_block() -> None:
    where = {b.where for b in BLOCKS}
    for name in PAGES_WITH_A_BLOCK:
        assert name in where, f"no python block in {name}"
    for path in DOCUMENTS:
        assert read(path).count("```python") == len(blocks_of(path)), path


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
    assert done.returncode == 0, f"{block.id}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("block", SCRIPTS, ids=lambda b: b.id)
def test_the_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.how == "skip":
        pytest.skip(block.reason)
    done = run_block(block, tmp_path)
    where = f"{block.id} ({block.heading})"
    assert done.returncode == 0, f"{where} failed:\n{done.stderr}"
    # Each block shows the newcomer a result.
    assert done.stdout.strip(), f"{where} prints nothing"
    # Only LangChain's own deprecation notices, which the blocks announce in a comment.
    for line in done.stderr.splitlines():
        if "Warning" in line:
            assert "LangChainDeprecationWarning" in line, f"{where} warned: {line}"
            assert "deprecate" in block.body, f"{where} warns without saying so"


@pytest.mark.parametrize("block", ON_SERVICES, ids=lambda b: b.id)
def test_the_block_runs_on_the_servers(
    block: Block, tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    """A deployment block, as written, with the servers' URLs in the variables it reads."""
    done = run_block(block, tmp_path, STM_DATABASE_URL=postgres_url, STM_REDIS_URL=redis_url)
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr}"
    assert done.stdout.strip(), f"{block.id} prints nothing"
    assert "Warning" not in done.stderr, done.stderr


def test_the_cli_shows_what_the_core_api_block_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's promise: the CLI, on its defaults, reads the store the core API's first
    block wrote with from_url's defaults (issue #32: it used to say "no live memory")."""
    core = page("docs/entry-points/core-api.md")
    first = blocks_of(core)[0]
    done = run_block(first, tmp_path)
    assert done.returncode == 0, done.stderr
    written = done.stdout.strip().splitlines()[-1]  # the block prints the summary last
    monkeypatch.chdir(tmp_path)
    shown = CliRunner().invoke(app, ["show", "c1", "--user", "u1", "--server", "g1", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)[0]["summary"] == written
    assert "`stm-memory show c1 --user u1 --server g1`, run in the same directory" in " ".join(
        read(core).split()
    )


@pytest.mark.parametrize("block", TEST_MODULES, ids=lambda b: b.id)
def test_the_test_module_passes(block: Block, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_doc_block=block.body)
    expected = len(re.findall(r"^def test_", block.body, re.M))
    assert expected, "a pytest block holds a test"
    # The plugin comes from the installed package: no conftest in the throwaway project.
    result = pytester.runpytest_subprocess(*pytest_args())
    result.assert_outcomes(passed=expected)


# -- the README: short, and pointing into the site ---------------------------------------


def test_the_readme_fits_on_a_few_screens() -> None:
    assert read(README).count("\n") <= README_MAX_LINES


def slug(heading: str) -> str:
    """The anchor of a heading, as GitHub and Python-Markdown both make it for ours."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return re.sub(r"[-\s]+", "-", text)


def test_every_readme_link_resolves() -> None:
    """The site's own links are checked by its strict build; the README's here."""
    links = re.findall(r"\]\(([^)\s]+)\)", prose(read(README)))
    assert len(links) > 20, "the README points into the site"
    for link in links:
        if link.startswith("http"):
            continue
        target, _, anchor = link.partition("#")
        path = ROOT / target if target else README
        assert path.is_file(), f"README links to no file: {link}"
        if anchor:
            anchors = {slug(t) for _, t in HEADING.findall(prose(read(path)))}
            assert anchor in anchors, f"README links to no section: {link}"


def test_the_readme_links_every_page_of_the_site() -> None:
    linked = set(re.findall(r"\]\(docs/([^)#\s]+)", read(README)))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages <= linked, f"the README's map omits {sorted(pages - linked)}"


def test_the_readme_figures_are_the_latest_bench_run() -> None:
    """The 'Why: measured' table quotes `make bench`'s last committed run, key by key."""
    metrics = json.loads(read(ROOT / "benchmarks" / "results" / "latest.json"))["metrics"]
    rows = [r for r in section(README, "Why: measured").splitlines() if r.startswith("| ")]
    assert len(rows) >= 4
    for row in rows[1:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        value, key = cells[-2].rstrip("×"), cells[-1].strip("`")
        measured = metrics[key]
        shown = f"{measured:.3f}" if isinstance(measured, float) else str(measured)
        assert value == shown, f"{key}: the README says {value}, the bench {shown}"


# -- what the pages point at -------------------------------------------------------------

ENTRY_MODULES = (
    "stm_memory",
    "stm_memory_langchain",
    "stm_memory_openai",
    "stm_memory_anthropic",
    "stm_memory_openai_agents",
)
ENTRY_TABLES = (README, page("docs/entry-points/index.md"))


def _entry_rows(path: Path) -> list[list[str]]:
    table = [r for r in section(path, "Which entry point?").splitlines() if r.startswith("| ")]
    # after the header (the |---| line does not start with "| "); `\|` is a pipe in a cell
    return [re.split(r"(?<!\\) \| ", r.strip("| ")) for r in table[1:]]


@pytest.mark.parametrize("path", ENTRY_TABLES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_entry_point_table_names_what_ships(path: Path) -> None:
    rows = _entry_rows(path)
    assert len(rows) >= 8
    exported = {
        name for module in ENTRY_MODULES for name in importlib.import_module(module).__all__
    }
    for you_have, use, link in rows:
        names = {n for n in re.findall(r"`(\w+)", use) if n[0].isupper()}
        assert names, f"row names no entry point: {you_have}"
        assert names <= exported, f"{sorted(names - exported)} not exported ({you_have})"
        # Each row leads to a page that shows it running.
        target = re.fullmatch(r"\[[^\]]+\]\(([^)#]+)\)", link)
        assert target, link
        shown = (path.parent / target[1]).resolve().relative_to(ROOT).as_posix()
        assert shown in PAGES_WITH_A_BLOCK, f"{you_have}: {shown} runs no example"


def test_the_two_entry_point_tables_agree() -> None:
    readme, site = ([row[:2] for row in _entry_rows(p)] for p in ENTRY_TABLES)
    assert readme == site


@pytest.mark.parametrize("path", [README, page("docs/index.md")], ids=["README", "index"])
def test_the_install_lists_every_extra(path: Path) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    install = section(path, "Install")
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
    text = read(page("docs/operations/cli.md"))
    [block] = [m["body"] for m in FENCE.finditer(text) if m["lang"] == "bash"]
    used = set(re.findall(r"stm-memory ([a-z-]+)", block))
    assert used, "the CLI block shows commands"
    assert used <= commands, f"no such command: {sorted(used - commands)}"


def test_every_notebook_sits_in_the_site_section_it_walks_through() -> None:
    """The Notebooks page assigns each notebook to pages of the site; those pages name it,
    and it links them."""
    listing = page("docs/get-started/notebooks.md")
    rows = {}
    for row in section(listing, "Notebooks").splitlines()[2:]:
        cells = re.split(r"(?<!\\) \| ", row.strip("| "))
        if len(cells) == 3 and (name := re.search(r"`(notebooks/[\w.]+\.ipynb)`", cells[1])):
            rows[name[1]] = re.findall(r"\]\(([^)#]+)\)", cells[0])
    shipped = {f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert set(rows) == shipped, f"the Notebooks page lists {sorted(rows)}"
    for name, pages in rows.items():
        assert pages, f"{name} is in no section"
        opening = "".join(json.loads(read(ROOT / name))["cells"][0]["source"])
        for target in pages:
            shown = (listing.parent / target).resolve()
            assert name in read(shown), f"{target} omits {name}"
            # ... and the notebook's first cell links back to it.
            back = f"(../docs/{shown.relative_to(DOCS).as_posix()})"
            assert back in opening, f"{name} does not link {back}"
