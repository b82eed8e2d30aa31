"""Arguments for a pytest run in a throwaway project (the testing-kit tests run the
plugin and the documented examples that way)."""

from __future__ import annotations

__all__ = ["UNRELATED_PLUGINS", "pytest_args"]

#: Installed pytest plugins a throwaway project does not need; blocked, because loading
#: them is most of each subprocess run's start-up time.
UNRELATED_PLUGINS = (
    "benchmark",
    "codspeed",
    "hypothesispytest",
    "langsmith_plugin",
    "nbmake",
    "syrupy",
    "xdist",
    "xdist.looponfail",
)


def pytest_args(*args: str) -> list[str]:
    """``args`` plus ``-p no:<plugin>`` for each unrelated plugin and no cache."""
    blocked = [arg for name in UNRELATED_PLUGINS for arg in ("-p", f"no:{name}")]
    return [*args, "-p", "no:cacheprovider", *blocked]
