"""Clearing inside a turn (stm_memory.prompt.clearing): which of the current turn's tool
results leave a request, as a table, and what stands in their place."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from stm_memory.prompt.clearing import (
    RECALL_TOOL,
    ClearingRule,
    ToolResult,
    placeholder,
    to_clear,
    turn_results,
    with_cleared,
)
from stm_memory.tool.turn import TOOL_NAME


def result(i: int, tokens: int = 100, tool: str = "read") -> ToolResult:
    return ToolResult(index=2 * i + 2, call_id=f"c{i}", tool=tool, text=f"doc {i}", tokens=tokens)


RULE = ClearingRule(window=32_000)  # batch 8,000; high 16,000; single 4,000; keep 3


@pytest.mark.parametrize(
    ("sizes", "request_tokens", "cleared", "leaving"),
    [
        # Below a batch, below the high mark: nothing leaves (a cache write is not paid back).
        ([1000] * 6, 9_000, (), []),
        # A block of a batch's tokens, all older than the newest three: it leaves whole.
        ([2000] * 7, 15_000, (), ["c0", "c1", "c2", "c3"]),
        # The request reaches the high mark: every clearable one leaves, though no batch
        # is due, enough for it to fall half a batch under the mark...
        ([3000, 3000, 3000, 1000, 1000, 1000], 16_000, (), ["c0", "c1", "c2"]),
        # ...the older of the newest too when the rest of the request is large (a long
        # system prompt), so the mark does not fire again at the next step.
        ([1000] * 6, 16_000, (), ["c0", "c1", "c2", "c3", "c4"]),
        # What left before stays left and is not decided again.
        ([2000] * 9, 15_000, ("c0", "c1", "c2", "c3"), []),
        ([2000] * 12, 15_000, ("c0", "c1", "c2", "c3"), ["c4", "c5", "c6", "c7"]),
        # A block one of the newest three is in waits for them to move on, whole.
        ([2000] * 10, 15_000, ("c0", "c1", "c2", "c3"), []),
        # Never the newest one, however large the request; below the mark, never the
        # newest three.
        ([1000] * 3, 30_000, (), ["c0", "c1"]),
        ([1000] * 3, 15_000, (), []),
        # A single result over an eighth of the window enters as its head, the newest too.
        ([100, 100, 5000], 6_000, (), ["c2"]),
    ],
)
def test_what_leaves(
    sizes: list[int], request_tokens: int, cleared: tuple[str, ...], leaving: list[str]
) -> None:
    results = [result(i, n) for i, n in enumerate(sizes)]
    out = to_clear(results, cleared, rule=RULE, request_tokens=request_tokens)
    assert [r.call_id for r in out] == leaving


def test_never_the_memory_tools_nor_an_excluded_tools() -> None:
    results = [result(0, 5000, TOOL_NAME), result(1, 5000, "todo"), result(2, 5000)]
    results += [result(i, 100) for i in range(3, 6)]
    out = to_clear(results, (), rule=RULE, request_tokens=30_000, exclude=("todo",))
    assert [r.call_id for r in out] == ["c2", "c3", "c4"]  # never c5, the newest


def test_a_result_read_back_leaves_again_in_its_turn() -> None:
    results = [result(0, 3000, RECALL_TOOL), *(result(i, 3000) for i in range(1, 6))]
    out = to_clear(results, (), rule=RULE, request_tokens=10_000)
    assert [r.call_id for r in out] == ["c0", "c1", "c2"]


def test_the_same_results_give_the_same_answer_wherever_they_are_sent() -> None:
    """Decided from the results alone: a later turn, another process, a per-call turn
    of the LCEL wrapper clear what the turn before did (below the high mark)."""
    results = [result(i, 1500) for i in range(30)]
    once = {r.call_id for r in to_clear(results, (), rule=RULE, request_tokens=9_000)}
    for n in range(4, 31):  # and what left at n results stays left at n + 1
        now = {r.call_id for r in to_clear(results[:n], (), rule=RULE, request_tokens=9_000)}
        later = {r.call_id for r in to_clear(results[: n + 1], (), rule=RULE, request_tokens=9_000)}
        assert now <= later
    assert once == {r.call_id for r in to_clear(results, (), rule=RULE, request_tokens=9_000)}
    assert len(once) == 27  # the five blocks of ~8,000 tokens before the newest three's


def test_the_rule_is_sized_from_the_window_and_the_bill() -> None:
    small, large = ClearingRule(window=24_576), ClearingRule(window=1_000_000)
    assert (small.batch, small.high, small.single) == (6_144, 12_288, 3_072)
    # A large window waits no longer than the bill's batch: the cost grows with the
    # square of the steps, the window would let it.
    assert large.batch == 12_000


def test_a_placeholder_names_the_call_and_is_the_same_bytes_every_time() -> None:
    r = ToolResult(3, "call_7", "open_report", "CODE = 1\nline two\n", 10)
    text = placeholder(r)
    assert text == placeholder(ToolResult(3, "call_7", "open_report", "CODE = 1\nline two\n", 10))
    assert "open_report" in text and "call_7" in text and RECALL_TOOL in text
    assert "CODE = 1…" in text and "line two" not in text and str(len(r.text)) in text
    head = placeholder(r, head=4)
    assert head.endswith("CODE") and "offset=4" in head


CHAT = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "read both"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "look", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "alpha"},
    {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "beta"}]},
]
RESPONSES = [
    {"role": "user", "content": "read"},
    {"type": "function_call", "call_id": "a", "name": "read", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "a", "output": "alpha"},
    {"type": "function_call", "call_id": "b", "name": "look", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "b", "output": "beta"},
]
ANTHROPIC = [
    {"role": "user", "content": "read"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "read", "input": {}},
            {"type": "tool_use", "id": "b", "name": "look", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "alpha"},
            {
                "type": "tool_result",
                "tool_use_id": "b",
                "content": [{"type": "text", "text": "beta"}],
            },
            {
                "type": "tool_result",
                "tool_use_id": "c",
                "content": [{"type": "image", "source": {}}],
            },
        ],
    },
]
LANGCHAIN = [
    HumanMessage("read"),
    AIMessage(
        "",
        tool_calls=[
            {"id": "a", "name": "read", "args": {}},
            {"id": "b", "name": "look", "args": {}},
        ],
    ),
    ToolMessage("alpha", tool_call_id="a"),
    ToolMessage("beta", tool_call_id="b"),
]


@pytest.mark.parametrize(
    "messages",
    [CHAT, RESPONSES, ANTHROPIC, LANGCHAIN],
    ids=["chat", "responses", "anthropic", "langchain"],
)
def test_every_format_reads_and_clears_its_results_and_keeps_every_pair(
    messages: list[Any],
) -> None:
    found = turn_results(messages)
    # A result with an image is never cleared: its text would not be all of it.
    assert [(r.call_id, r.tool, r.text) for r in found] == [
        ("a", "read", "alpha"),
        ("b", "look", "beta"),
    ]
    before = (
        copy.deepcopy(messages) if not isinstance(messages[0], HumanMessage) else list(messages)
    )
    out = with_cleared(messages, {"a": "[gone]"})
    assert messages == before  # the caller's are never mutated
    assert len(out) == len(messages)  # no message leaves: every call keeps its result
    assert [(r.call_id, r.text) for r in turn_results(out)] == [("a", "[gone]"), ("b", "beta")]
    assert out[-1] is messages[-1] or not isinstance(messages[-1], ToolMessage)


def test_results_before_the_start_are_not_the_turns() -> None:
    assert [r.call_id for r in turn_results(CHAT, start=4)] == ["b"]
