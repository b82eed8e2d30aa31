"""Run test code in fresh Python processes (restart and multi-process tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["Gate", "finish_worker", "run_worker", "start_worker"]

TESTS_DIR = Path(__file__).resolve().parent.parent


class Gate:
    """The test's side of :func:`helpers.workers._rendezvous`."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory

    def __str__(self) -> str:
        return str(self.directory)

    def open_when_ready(self, workers: int, timeout: float = 30.0) -> None:
        """Wait until ``workers`` processes are ready, then let them all go."""
        deadline = time.monotonic() + timeout
        while len(list(self.directory.glob("ready-*"))) < workers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {workers} workers got ready")
            time.sleep(0.005)
        (self.directory / "go").touch()


def _command(function: str, kwargs: dict[str, Any]) -> list[str]:
    # The worker reads its arguments as JSON and prints its result as JSON on the
    # last line of stdout.
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(TESTS_DIR)!r})\n"
        "from helpers import workers\n"
        f"result = workers.{function}(**json.loads(sys.argv[1]))\n"
        "print(json.dumps(result))\n"
    )
    return [sys.executable, "-c", code, json.dumps(kwargs)]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def start_worker(function: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start ``helpers.workers.<function>(**kwargs)`` in a new interpreter."""
    return subprocess.Popen(
        _command(function, kwargs),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def finish_worker(proc: subprocess.Popen[str], timeout: float = 60) -> Any:
    """Wait for a worker; its JSON result, or an AssertionError carrying its stderr."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"worker failed with exit code {proc.returncode}:\n{err}")
    return json.loads(out.strip().splitlines()[-1])


def run_worker(function: str, timeout: float = 60, **kwargs: Any) -> Any:
    return finish_worker(start_worker(function, **kwargs), timeout=timeout)
