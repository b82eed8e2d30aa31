"""The docs site (``mkdocs.yml``, ``docs/``): it builds strictly — a broken link or
anchor, a page left out of the navigation, an API reference that does not resolve fails
the build. Its pages' Python blocks run in ``test_doc_blocks``, with the README's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _build(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = _build(tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    # The API reference is generated from the docstrings, integrations included.
    memory = (tmp_path / "site" / "reference" / "memory" / "index.html").read_text("utf-8")
    assert "begin_turn" in memory and "clear_user" in memory
    integrations = (tmp_path / "site" / "reference" / "integrations" / "index.html").read_text(
        "utf-8"
    )
    for name in ("OpenAIChatLoop", "AnthropicLoop", "ShortTermMemorySession", "run_turn"):
        assert name in integrations, name
    # The docstrings' Sphinx roles are rendered (a link, or the name in code), never shown
    # as text; no page cites a document users do not have.
    pages = {p: p.read_text("utf-8") for p in (tmp_path / "site").rglob("*.html")}
    for page, text in pages.items():
        roles = re.findall(r":(?:class|func|meth|mod|attr|data|exc|obj):`?~?[\w.]+", text)
        assert not roles, (page, roles[:5])
        assert "SPEC §" not in text, page
    links = pages[tmp_path / "site" / "reference" / "integrations" / "index.html"]
    assert 'href="../memory/#stm_memory.engine.ShortTermMemory"><code>ShortTermMemory' in links


def test_the_build_fails_on_what_it_should() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))
    assert config["strict"] is True
    assert set(config["validation"].values()) == {"warn"}  # each one fails a strict build
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    in_nav = set(re.findall(r"[\w/.-]+\.md", (ROOT / "mkdocs.yml").read_text("utf-8")))
    assert pages == in_nav, pages ^ in_nav


#: Issue #50's new user, from the navigation alone: the task → the nav label that leads to
#: it and what the page must show to do it.
TASKS = {
    "add memory to a create_agent agent": ("create_agent", "middleware=[ShortTermMemoryMiddleware"),
    "keep two customers apart": ("customers kept apart", "(no `server_id`)"),
    "delete a user": ("forget a user", "`clear_user` is erasure"),
    "run on PostgreSQL + Redis": ("PostgreSQL, Redis", 'redis_url=os.environ["STM_REDIS_URL"]'),
    "evaluate on your own model": ("evaluate your own model", "stm-memory eval --model"),
}


@pytest.mark.parametrize("task", TASKS)
def test_the_navigation_leads_to_each_task(task: str) -> None:
    label, shown = TASKS[task]
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))["nav"]
    pages = [
        page
        for section in nav
        for entries in section.values()
        for entry in (entries if isinstance(entries, list) else [{"": entries}])
        for title, page in entry.items()
        if label in title
    ]
    assert len(pages) == 1, f"{task}: no single nav entry names {label!r}"
    assert shown in (DOCS / pages[0]).read_text("utf-8"), f"{task}: {pages[0]} lacks {shown!r}"


def test_the_benchmarks_page_holds_the_last_runs_targets() -> None:
    """No figure of the page's table is written by hand: it is the last full run's."""
    from benchmarks.run import TARGETS_END, TARGETS_START, targets_table

    payload = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text("utf-8"))
    text = (DOCS / "evaluate" / "benchmarks.md").read_text("utf-8")
    shown = text.split(TARGETS_START, 1)[1].split(TARGETS_END, 1)[0]
    assert shown == "\n" + targets_table(payload)
    # Every key with a target is there, misses included.
    for data in payload["cases"].values():
        for key, metric in data["metrics"].items():
            if metric.get("passed") is not None:
                assert f"`{key}`" in shown
