"""Every entry point's options: the same names and defaults wherever an option applies,
and the docs' table (``docs/entry-points/options.md``) says which apply where. A signature
that drifts fails here."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stm_memory import TurnOptions
from stm_memory_anthropic import AnthropicLoop, AsyncAnthropicLoop
from stm_memory_langchain import (
    ShortTermMemoryBuffer,
    ShortTermMemoryHistory,
    ShortTermMemoryMiddleware,
    with_short_term_memory,
)
from stm_memory_openai import (
    AsyncOpenAIChatLoop,
    AsyncOpenAIResponsesLoop,
    OpenAIChatLoop,
    OpenAIResponsesLoop,
)
from stm_memory_openai_agents import ShortTermMemorySession

OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "entry-points" / "options.md"

#: option → its one default, wherever it applies.
DEFAULTS: dict[str, Any] = {
    "provider": None,
    "trim_history": True,
    "memory_role": None,  # by the host (the portable form for an open model's server)
    "max_steps": 8,
    "cache_hints": True,
    "tool_calling": True,
    "context_window": None,
    "keep_tool_results": (),
    "writer": None,
}
#: The table's column → the callables it stands for, and the options that apply there.
ENTRY_POINTS: dict[str, tuple[list[Callable[..., Any]], set[str]]] = {
    "loops": (
        [
            OpenAIChatLoop,
            AsyncOpenAIChatLoop,
            OpenAIResponsesLoop,
            AsyncOpenAIResponsesLoop,
            AnthropicLoop,
            AsyncAnthropicLoop,
        ],
        {
            "provider",
            "trim_history",
            "memory_role",
            "max_steps",
            "cache_hints",
            "tool_calling",
            "context_window",
            "keep_tool_results",
            "writer",
        },
    ),
    "`ShortTermMemoryMiddleware`": (
        [ShortTermMemoryMiddleware],
        {
            "provider",
            "trim_history",
            "memory_role",
            "cache_hints",
            "tool_calling",
            "context_window",
            "keep_tool_results",
            "writer",
        },
    ),
    "`with_short_term_memory`": ([with_short_term_memory], {"max_steps", "cache_hints"}),
    "`ShortTermMemoryHistory`": (
        [ShortTermMemoryHistory],
        {
            "provider",
            "trim_history",
            "memory_role",
            "tool_calling",
            "context_window",
            "keep_tool_results",
            "writer",
        },
    ),
    "`ShortTermMemorySession`": (
        [ShortTermMemorySession],
        {
            "provider",
            "trim_history",
            "memory_role",
            "cache_hints",
            "tool_calling",
            "context_window",
            "keep_tool_results",
            "writer",
        },
    ),
    "`ShortTermMemoryBuffer`": ([ShortTermMemoryBuffer], {"provider"}),
}
#: Where a default differs, and why (the table says so too).
EXCEPTIONS: dict[tuple[str, str], Any] = {}


def _parameters(target: Callable[..., Any]) -> dict[str, Any]:
    if isinstance(target, type) and "model_fields" in vars(target):  # a pydantic model
        return {n: f.default for n, f in target.model_fields.items()}  # type: ignore[attr-defined]
    signature = inspect.signature(target)
    return {n: p.default for n, p in signature.parameters.items()}


@pytest.mark.parametrize("column", list(ENTRY_POINTS))
def test_each_entry_point_takes_its_options_with_the_one_default(column: str) -> None:
    targets, applies = ENTRY_POINTS[column]
    for target in targets:
        params = _parameters(target)
        for option in DEFAULTS:
            if option in applies:
                expected = EXCEPTIONS.get((column, option), DEFAULTS[option])
                assert option in params, f"{target.__name__} lacks {option}="
                assert params[option] == expected, (target.__name__, option, params[option])
            else:
                assert option not in params, f"{target.__name__} takes {option}=: update the table"


def _options_table() -> dict[str, dict[str, str]]:
    text = OPTIONS_PAGE.read_text(encoding="utf-8")
    section = text.split("# Options of every entry point", 1)[1].split("\n# ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]  # not |---|
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table: dict[str, dict[str, str]] = {}
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        option = re.match(r"`?([\w ]+)`?", cells[0])
        assert option is not None
        table[option.group(1).strip()] = dict(zip(header[1:], cells[1:], strict=True))
    return table


def test_the_options_table_says_where_each_option_applies() -> None:
    table = _options_table()
    columns = {name.split(" (")[0]: name for name in next(iter(table.values()))}
    for column, (_targets, applies) in ENTRY_POINTS.items():
        cells = {option: table[option][columns[column]] for option in DEFAULTS}
        for option, cell in cells.items():
            if option in applies:
                default = EXCEPTIONS.get((column, option), DEFAULTS[option])
                assert cell.startswith(f"`{default!r}`".replace("'", '"')), (column, option, cell)
            else:
                assert cell.startswith("—"), (column, option, cell)


def test_the_one_default_is_turn_options_default() -> None:
    # The memory options' defaults and checks live in TurnOptions, which every entry
    # point builds from its keywords: the table's defaults must be that object's.
    memory_options = {f.name: f.default for f in dataclasses.fields(TurnOptions)}
    assert memory_options == {k: v for k, v in DEFAULTS.items() if k in memory_options}
    assert set(memory_options) == set(DEFAULTS) - {"max_steps"}
