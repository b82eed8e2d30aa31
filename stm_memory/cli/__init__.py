"""The ``stm-memory`` command line: inspect, delete, repair, sweep, and the offline demo.

``main`` is the console script. It imports the commands when it runs, so that without
the ``cli`` extra (typer, rich) it says so in one line instead of a traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typer import Typer

__all__ = ["app", "main"]


def main() -> None:
    """The ``stm-memory`` console script."""
    try:
        from stm_memory.cli.commands import main as run
        from stm_memory.cli.eval import eval_command  # noqa: F401  (registers `eval`)
    except ImportError as exc:
        if "pip install" not in str(exc):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    run()


def __getattr__(name: str) -> Any:
    # ``app`` (the typer app, every command registered) for tests and embedding.
    if name == "app":
        from stm_memory.cli.commands import app
        from stm_memory.cli.eval import eval_command  # noqa: F401

        typer_app: Typer = app
        return typer_app
    raise AttributeError(name)
