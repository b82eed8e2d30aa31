"""LangChain's standard tool test suites (``langchain-tests``) against our tool, in summary
mode and in category mode.

Each test gets a fresh engine and turn. Every ``invoke`` uses the turn's one update, so a
second invoke in the same test returns a failed-result JSON; the standard tests only need a
ToolMessage / no exception, which that satisfies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from stm_memory import Category, Scope, ShortTermMemory

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


class _SummaryModeTool:
    """Builds the tool from a real engine and turn (per test, via an autouse fixture)."""

    categories: tuple[Category, ...] = ()
    _mem: ShortTermMemory

    @pytest.fixture(autouse=True)
    def _engine(self) -> Iterator[None]:
        self._mem = ShortTermMemory.from_url("sqlite://")
        if self.categories:
            self._mem.set_categories("g1", list(self.categories))
        yield
        self._mem.close()

    @property
    def tool_constructor(self) -> BaseTool:
        turn = self._mem.begin_turn(SCOPE, provider="openai", user_message="go on")
        tool = self._mem.tool(turn)
        assert tool is not None
        return tool

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"summary": "Ann and Bo planned a heist; Bo is nervous."}


class _CategoryModeTool(_SummaryModeTool):
    categories = (Category("Plot", "What happened"), Category("Mood", "Tone of the scene"))

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"plot": "Ann and Bo planned a heist.", "mood": "tense"}


class TestSummaryModeUnit(_SummaryModeTool, ToolsUnitTests):
    pass


class TestSummaryModeIntegration(_SummaryModeTool, ToolsIntegrationTests):
    pass


class TestCategoryModeUnit(_CategoryModeTool, ToolsUnitTests):
    pass


class TestCategoryModeIntegration(_CategoryModeTool, ToolsIntegrationTests):
    pass


@pytest.mark.parametrize("holder", [_SummaryModeTool, _CategoryModeTool])
def test_example_args_really_store(holder: type[_SummaryModeTool]) -> None:
    """The examples given to the standard suites are valid calls, not failures."""
    instance = holder()
    with ShortTermMemory.from_url("sqlite://") as mem:
        if instance.categories:
            mem.set_categories("g1", list(instance.categories))
        instance._mem = mem
        tool = instance.tool_constructor
        assert tool.invoke(instance.tool_invoke_params_example) == '{"status": "completed"}'
        entry = mem.get(SCOPE)
        assert entry is not None
        example = instance.tool_invoke_params_example
        if instance.categories:
            assert dict(entry.categories) == example
        else:
            assert entry.summary == example["summary"]
