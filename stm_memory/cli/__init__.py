"""The ``stm-memory`` command line: inspect, delete, repair, sweep, and the offline demo."""

from stm_memory.cli.commands import app, main

__all__ = ["app", "main"]
