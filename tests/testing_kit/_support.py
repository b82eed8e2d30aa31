"""Shared by the testing-kit tests."""

from __future__ import annotations

#: Installed pytest plugins a throwaway project does not need; blocking them makes each
#: subprocess pytest start in about a second instead of several.
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
