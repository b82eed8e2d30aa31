"""notebooks/recall_vs_cost.ipynb runs offline, top to bottom, and shows its point.

Executed as tests/product/test_notebooks.py executes the other notebooks
(``helpers.notebooks``): nbclient, a kernel of this interpreter, an empty working
directory, provider keys removed and provider URLs pointing at a closed port.
"""

from __future__ import annotations

import time
from pathlib import Path

from helpers.notebooks import offline_environment, output_text, outputs, read, venv_kernel
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "recall_vs_cost.ipynb"


def test_the_notebook_runs_offline_and_says_what_it_measures(tmp_path: Path) -> None:
    nb = read(NOTEBOOK)
    for cell in nb.cells:  # committed clean
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    env = offline_environment()
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
