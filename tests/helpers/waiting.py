"""Polling instead of fixed sleeps: fast when the condition comes early.

One copy, kept with the published contract suites (which poll too).
"""

from __future__ import annotations

from stm_memory.testing.contract._support import wait_until

__all__ = ["wait_until"]
