"""The one way an integration says its optional SDK is missing.

Each integration module that needs an SDK tries the import at its top and, on
``ImportError``, raises ``missing_extra(...) from exc``: the message names the exact
``pip install`` that fixes it (pydantic-ai's habit)."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(who: str, what: str, extra: str) -> ImportError:
    """``ImportError("<who> needs <what>: pip install "stm-memory[<extra>]"")``."""
    return ImportError(f'{who} needs {what}: pip install "stm-memory[{extra}]"')
