"""A tool result a long turn's requests left out, as the live cache keeps it for reading
back (``stm_memory/live/results.py``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KeptResult"]


@dataclass(frozen=True, slots=True)
class KeptResult:
    """One cleared result: the call it answers and the tool's text, byte for byte."""

    call_id: str
    tool: str
    text: str
