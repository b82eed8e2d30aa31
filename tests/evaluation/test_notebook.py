"""notebooks/recall_vs_cost.ipynb runs offline, top to bottom, and shows its point.

Executed as tests/product/test_notebooks.py executes the other notebooks: nbclient, a
kernel of this interpreter, an empty working directory, provider keys removed and
provider URLs pointing at a closed port. Its helpers are repeated here rather than
imported: that module imports its own conftest by name, which does not resolve from
this folder.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "recall_vs_cost.ipynb"
KEYS = (
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
)
CLOSED_URL = "http://127.0.0.1:9"


def venv_kernel() -> AsyncKernelManager:
    # No kernel directories: the only python3 spec is ipykernel's own, for this
    # interpreter, whatever a developer's Jupyter directories hold.
    specs = KernelSpecManager(kernel_dirs=[])
    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=specs)


def read(path: Path) -> Any:
    return nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]


def outputs(nb: Any) -> Iterator[Any]:
    for cell in nb.cells:
        yield from cell.get("outputs", [])


def output_text(nb: Any) -> str:
    parts = []
    for output in outputs(nb):
        if output.output_type == "stream":
            parts.append(output.text)
        elif "data" in output:
            parts.append(output.data.get("text/plain", ""))
    return "\n".join(parts)


def test_the_notebook_runs_offline_and_says_what_it_measures(tmp_path: Path) -> None:
    nb = read(NOTEBOOK)
    for cell in nb.cells:  # committed clean
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env.update(OPENAI_BASE_URL=f"{CLOSED_URL}/v1", ANTHROPIC_BASE_URL=CLOSED_URL)
    started = time.perf_counter()
    NotebookClient(
        nb,
        km=venv_kernel(),
        timeout=60,
        startup_timeout=60,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute(env=env)
    elapsed = time.perf_counter() - started
    assert [o for o in outputs(nb) if o.output_type == "error"] == []
    stderr = [o.text for o in outputs(nb) if o.output_type == "stream" and o.name == "stderr"]
    assert stderr == []
    text = output_text(nb)
    assert "measure the harness" in text
    assert "| stm-memory, provider loop |" in text
    assert "answers the perfect one gives, all about facts it dropped: True" in text
    assert "the forgetful model loses 0 answers" not in text
    assert any("image/png" in o.get("data", {}) for o in outputs(nb))
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "stm-memory eval --model openai:gpt-4.1-mini" in markdown  # how to run it for real
    assert list(tmp_path.iterdir()) == []  # nothing left behind
    assert elapsed < 60, f"the notebook took {elapsed:.0f} s"
