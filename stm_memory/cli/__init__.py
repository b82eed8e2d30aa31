"""The ``stm-memory`` command line: inspect, delete, repair, sweep, and the offline demo."""

from stm_memory.cli.commands import app, main
from stm_memory.cli.eval import eval_command  # noqa: F401  (registers `stm-memory eval`)

__all__ = ["app", "main"]
