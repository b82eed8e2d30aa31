"""Threads that start together and report their failures to the test thread.

One copy, kept with the published contract suites (which race threads too).
"""

from __future__ import annotations

from stm_memory.testing.contract._support import run_threads

__all__ = ["run_threads"]
