"""Placement (SPEC §8): where a request carries the memory block, the briefings and the
nudge — depths, roles (memory_role), tool pairs kept whole, each wire's shapes (OpenAI
dicts, Anthropic dicts, LangChain messages) — and each request decided whole by
MemoryTurn.prepare: the tool offered, described or left out with its tool_choice, and the
cache hints every entry point maps and none writes.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from helpers.memory import SERVER
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from stm_memory import TOOL_NAME, ShortTermMemory
from stm_memory.errors import ValidationError
from stm_memory.kit import (
    Ask,
    Breakpoints,
    MemoryTurn,
    PreparedRequest,
    TurnOptions,
    Wire,
    drive,
    has_tool_traffic,
    prompt_cache_key,
)
from stm_memory.prompt.placement import (
    MemoryContext,
    current_turn_index,
    insertion_index,
    message_role,
)
from stm_memory.wire.anthropic import ANTHROPIC_WIRE, count_breakpoints, system_placed
from stm_memory.wire.openai_chat import CHAT_WIRE
from stm_memory.wire.responses import RESPONSES_WIRE

# ------------------------------------------------------------------------------------
# Placement of memory content and the nudge (stm_memory.prompt.placement): depths, tool pairs,
# provider shapes (OpenAI dicts, Anthropic dicts, LangChain messages).

C = "[Short-term memory]\nThis channel:\nS"
N = "NUDGE"


def ctx(content_depth: int | None = None, nudge_depth: int | None = None) -> MemoryContext:
    return MemoryContext(
        content=C if content_depth is not None else None,
        nudge=N if nudge_depth is not None else None,
        content_depth=content_depth if content_depth is not None else -1,
        nudge_depth=nudge_depth if nudge_depth is not None else 2,
    )


# -- provider validity checks (what the real APIs reject) --------------------------------


def assert_openai_valid(messages: list[dict[str, Any]]) -> None:
    pending: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in pending, f"orphan tool result {m}"
            pending.remove(m["tool_call_id"])
            continue
        assert not pending, f"tool calls {pending} not answered before {m}"
        if m["role"] == "assistant":
            pending = [c["id"] for c in m.get("tool_calls") or []]
    assert not pending


def _blocks(m: dict[str, Any]) -> list[dict[str, Any]]:
    c = m["content"]
    return [{"type": "text", "text": c}] if isinstance(c, str) else c


def assert_anthropic_valid(messages: list[dict[str, Any]]) -> None:
    assert messages[0]["role"] == "user"
    tool_ids: list[str] = []
    for i, m in enumerate(messages):
        assert m["role"] in ("user", "assistant")
        if i:
            assert m["role"] != messages[i - 1]["role"], "roles must alternate"
        blocks = _blocks(m)
        if m["role"] == "assistant":
            tool_ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
            continue
        kinds = [b["type"] for b in blocks]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert sorted(results) == sorted(tool_ids), "every tool_use answered right after"
        # tool_result blocks first, any text after them
        assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
        tool_ids = []


def assert_langchain_valid(messages: list[BaseMessage]) -> None:
    pending: list[str] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending
            pending.remove(m.tool_call_id)
            continue
        assert not pending
        if isinstance(m, AIMessage):
            pending = [str(c["id"]) for c in m.tool_calls]
    assert not pending


def sysmsg(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


# -- depth rule, OpenAI dicts -----------------------------------------------------------

OPENAI = [
    sysmsg("base"),
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
    {"role": "assistant", "content": "a2"},
    {"role": "user", "content": "u3"},
]


def contents(messages: list[Any]) -> list[str]:
    return [m["content"] if isinstance(m, dict) else m.content for m in messages]


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (-1, ["base", C, "u1", "a1", "u2", "a2", "u3"]),
        (0, ["base", "u1", "a1", "u2", "a2", "u3", C]),
        (1, ["base", "u1", "a1", "u2", "a2", C, "u3"]),
        (2, ["base", "u1", "a1", "u2", C, "a2", "u3"]),
        (5, ["base", C, "u1", "a1", "u2", "a2", "u3"]),
        (6, ["base", C, "u1", "a1", "u2", "a2", "u3"]),  # beyond the history: before the first
        (50, ["base", C, "u1", "a1", "u2", "a2", "u3"]),
    ],
)
def test_openai_content_depths(depth: int, expected: list[str]) -> None:
    out = ctx(content_depth=depth).apply(OPENAI)
    assert contents(out) == expected
    injected = [m for m in out if m["content"] == C]
    assert injected == [{"role": "system", "content": C}]


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (0, ["base", "u1", "a1", "u2", "a2", "u3", N]),
        (1, ["base", "u1", "a1", "u2", "a2", N, "u3"]),
        (2, ["base", "u1", "a1", "u2", N, "a2", "u3"]),
        (9, ["base", N, "u1", "a1", "u2", "a2", "u3"]),
    ],
)
def test_openai_nudge_depths(depth: int, expected: list[str]) -> None:
    assert contents(ctx(nudge_depth=depth).apply(OPENAI)) == expected


def test_content_above_nudge_at_the_same_spot() -> None:
    out = ctx(content_depth=2, nudge_depth=2).apply(OPENAI)
    assert contents(out) == ["base", "u1", "a1", "u2", C, N, "a2", "u3"]
    out = ctx(content_depth=-1, nudge_depth=9).apply(OPENAI)
    assert contents(out) == ["base", C, N, "u1", "a1", "u2", "a2", "u3"]


def test_top_goes_after_all_leading_system_and_developer_messages() -> None:
    msgs = [
        {"role": "developer", "content": "d"},
        sysmsg("s"),
        {"role": "user", "content": "u"},
    ]
    out = ctx(content_depth=-1).apply(msgs)
    assert out[2] == {"role": "developer", "content": C}  # mirrors a developer-led list
    assert contents(out) == ["d", "s", C, "u"]


def test_non_leading_system_messages_are_not_dialogue() -> None:
    msgs = [
        sysmsg("s"),
        {"role": "user", "content": "u1"},
        sysmsg("mid"),
        {"role": "user", "content": "u2"},
    ]
    assert contents(ctx(nudge_depth=2).apply(msgs)) == ["s", N, "u1", "mid", "u2"]


def test_empty_history_and_empty_context() -> None:
    assert ctx(content_depth=-1, nudge_depth=2).apply([]) == [
        {"role": "system", "content": C},
        {"role": "system", "content": N},
    ]
    original = list(OPENAI)
    out = MemoryContext().apply(OPENAI)
    assert out == original and out is not OPENAI
    assert MemoryContext().is_empty and not ctx(content_depth=0).is_empty


def test_apply_never_mutates_its_input() -> None:
    msgs = copy.deepcopy(ANTHROPIC_TOOLS)
    before = copy.deepcopy(msgs)
    for depth in (-1, 0, 1, 2, 3, 9):
        ctx(content_depth=depth, nudge_depth=depth).apply(msgs, provider="anthropic")
        system_placed(
            ctx(content_depth=depth, nudge_depth=depth), msgs, [{"type": "text", "text": "s"}]
        )
    assert msgs == before


def test_apply_rejects_non_lists() -> None:
    with pytest.raises(ValidationError):
        ctx(content_depth=0).apply("hello")
    with pytest.raises(ValidationError):
        ctx(content_depth=0).apply({"role": "user", "content": "x"})  # type: ignore[arg-type]


# -- tool pairs, OpenAI ------------------------------------------------------------------


def call(i: str) -> dict[str, Any]:
    return {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}


OPENAI_TOOLS = [
    sysmsg("base"),
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
    {"role": "tool", "tool_call_id": "c1", "content": "r1"},
    {"role": "tool", "tool_call_id": "c2", "content": "r2"},
    {"role": "assistant", "content": "a2"},
]


@pytest.mark.parametrize(
    ("depth", "index"),
    [(-1, 1), (0, 6), (1, 5), (2, 2), (3, 2), (4, 2), (5, 1), (9, 1)],
)
def test_openai_never_splits_tool_calls_from_results(depth: int, index: int) -> None:
    assert insertion_index(OPENAI_TOOLS, depth) == index
    out = ctx(content_depth=depth, nudge_depth=depth).apply(OPENAI_TOOLS)
    assert_openai_valid(out)
    assert out.index({"role": "system", "content": C}) == index
    assert out.index({"role": "system", "content": N}) == index + 1


def test_openai_responses_items_keep_reasoning_with_its_call() -> None:
    items = [
        {"role": "user", "content": "u"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "k1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "k1", "output": "ok"},
    ]
    assert [message_role(m) for m in items] == ["user", "reasoning", "assistant", "tool"]
    out = ctx(nudge_depth=1).apply(items, provider="openai")
    assert out[1] == {"role": "system", "content": N}
    assert out[2:] == items[1:]


# -- Anthropic dicts -------------------------------------------------------------------------

ANTHROPIC = [
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
]


def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (-1, [[text(C), text("u1")], "a1", "u2"]),
        (0, ["u1", "a1", [text("u2"), text(C)]]),
        (1, ["u1", "a1", [text(C), text("u2")]]),
        (2, [[text("u1"), text(C)], "a1", "u2"]),
        (3, [[text(C), text("u1")], "a1", "u2"]),
        (8, [[text(C), text("u1")], "a1", "u2"]),
    ],
)
def test_anthropic_merges_into_user_turns(depth: int, expected: list[Any]) -> None:
    out = ctx(content_depth=depth).apply(ANTHROPIC, provider="anthropic")
    assert [m["content"] for m in out] == expected
    assert_anthropic_valid(out)


def test_anthropic_content_and_nudge_in_one_turn_keep_order() -> None:
    out = ctx(content_depth=1, nudge_depth=1).apply(ANTHROPIC, provider="anthropic")
    assert out[2]["content"] == [text(C), text(N), text("u2")]
    out = ctx(content_depth=1, nudge_depth=0).apply(ANTHROPIC, provider="anthropic")
    assert out[2]["content"] == [text(C), text("u2"), text(N)]


def test_anthropic_new_user_turn_between_assistants_or_at_the_end() -> None:
    msgs = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}]
    out = ctx(nudge_depth=0).apply(msgs, provider="anthropic")
    assert out[-1] == {"role": "user", "content": [text(N)]}
    assert_anthropic_valid(out)


ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {"role": "user", "content": [text("u1")]},
    {
        "role": "assistant",
        "content": [
            text("let me look"),
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r1"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "r2"}]},
]


@pytest.mark.parametrize("depth", [-1, 0, 1, 2, 3, 4, 5, 9])
def test_anthropic_tool_pairs_stay_valid(depth: int) -> None:
    out = ctx(content_depth=depth, nudge_depth=depth).apply(ANTHROPIC_TOOLS, provider="anthropic")
    assert_anthropic_valid(out)
    assert len(out) == len(ANTHROPIC_TOOLS)  # merged, never a new turn here
    flat = [b.get("text") for m in out for b in m["content"]]
    assert flat.index(C) + 1 == flat.index(N)


def test_anthropic_before_a_tool_result_moves_before_the_tool_use() -> None:
    out = ctx(nudge_depth=1).apply(ANTHROPIC_TOOLS, provider="anthropic")
    # Before the last tool_result = before the assistant's tool_use: appended to the
    # previous user turn, after its tool_result block (the API accepts text there).
    assert out[2]["content"] == [ANTHROPIC_TOOLS[2]["content"][0], text(N)]
    out = ctx(nudge_depth=0).apply(ANTHROPIC_TOOLS, provider="anthropic")
    assert out[4]["content"] == [ANTHROPIC_TOOLS[4]["content"][0], text(N)]


def test_anthropic_shape_is_detected_without_a_hint() -> None:
    out = ctx(nudge_depth=0).apply(ANTHROPIC_TOOLS)
    assert out[4]["content"][-1] == text(N)
    assert_anthropic_valid(out)


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        (None, C),
        ("", C),
        # A block of its own: the caller's prompt stays a prefix every channel shares.
        ("You are Ada.", [text("You are Ada."), text(C)]),
        (
            [{"type": "text", "text": "base", "cache_control": {"type": "ephemeral"}}],
            [{"type": "text", "text": "base", "cache_control": {"type": "ephemeral"}}, text(C)],
        ),
    ],
)
def test_the_messages_api_puts_top_content_in_system(system: Any, expected: Any) -> None:
    new_system, out = system_placed(ctx(content_depth=-1, nudge_depth=1), ANTHROPIC, system)
    assert new_system == expected
    assert [m["content"] for m in out] == ["u1", "a1", [text(N), text("u2")]]


def test_the_messages_api_keeps_deep_content_in_messages() -> None:
    system, out = system_placed(ctx(content_depth=2), ANTHROPIC, "sys")
    assert system == "sys"
    assert out[0]["content"] == [text("u1"), text(C)]


# -- LangChain messages ------------------------------------------------------------------------

LC = [
    SystemMessage("base"),
    HumanMessage("u1"),
    AIMessage("a1"),
    HumanMessage("u2"),
]


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (-1, ["base", C, "u1", "a1", "u2"]),
        (0, ["base", "u1", "a1", "u2", C]),
        (1, ["base", "u1", "a1", C, "u2"]),
        (2, ["base", "u1", C, "a1", "u2"]),
        (4, ["base", C, "u1", "a1", "u2"]),
    ],
)
def test_langchain_depths(depth: int, expected: list[str]) -> None:
    out = ctx(content_depth=depth).apply(LC)
    assert contents(out) == expected
    assert all(isinstance(m, BaseMessage) for m in out)
    assert isinstance(out[expected.index(C)], SystemMessage)


LC_TOOLS = [
    SystemMessage("base"),
    HumanMessage("u1"),
    AIMessage(
        "",
        tool_calls=[{"name": "f", "args": {}, "id": "c1"}, {"name": "f", "args": {}, "id": "c2"}],
    ),
    ToolMessage("r1", tool_call_id="c1"),
    ToolMessage("r2", tool_call_id="c2"),
    AIMessage("a2"),
]


@pytest.mark.parametrize(("depth", "index"), [(0, 6), (1, 5), (2, 2), (3, 2), (4, 2), (5, 1)])
def test_langchain_never_splits_tool_calls_from_results(depth: int, index: int) -> None:
    out = ctx(nudge_depth=depth).apply(LC_TOOLS)
    assert_langchain_valid(out)
    assert out[index].content == N and isinstance(out[index], SystemMessage)


def test_langchain_for_anthropic_uses_user_turns_below_the_top() -> None:
    out = ctx(content_depth=-1, nudge_depth=1).apply(LC, provider="anthropic")
    assert [type(m).__name__ for m in out] == [
        "SystemMessage",
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
    ]
    assert out[1].content == C  # consecutive leading system messages are accepted
    assert out[4].content == f"{N}\n\nu2"
    assert LC[3].content == "u2"  # the caller's message is untouched


def test_langchain_for_anthropic_after_tool_results_adds_a_human_turn() -> None:
    msgs = LC_TOOLS[:5]
    out = ctx(nudge_depth=0).apply(msgs, provider="anthropic")
    assert isinstance(out[-1], HumanMessage) and out[-1].content == N
    assert_langchain_valid(out)
    out = ctx(nudge_depth=1).apply(msgs, provider="anthropic")
    # before the tool-call message: merged into the preceding human turn
    # Appended as a block of its own: the user's words stay the block they were.
    assert out[1].content == [text("u1"), text(N)] and len(out) == len(msgs)


def test_langchain_block_content_gets_text_blocks() -> None:
    msgs = [HumanMessage([{"type": "text", "text": "u1"}])]
    out = ctx(nudge_depth=1).apply(msgs, provider="anthropic")
    assert out[0].content == [text(N), {"type": "text", "text": "u1"}]


# -- the cache-ordered prompt: this channel's memory up top, briefings by the user ------

MEM = "[Short-term memory]\nThis channel:\n  S"
BRIEF = "[Short-term memory]\nOther channels:\n- #c2, 3 minutes ago:\n  B"


def user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": t}


def asst(t: str) -> dict[str, Any]:
    return {"role": "assistant", "content": t}


def split_ctx(**kw: Any) -> MemoryContext:
    content = f"{MEM}\n\n{BRIEF}"
    return MemoryContext(content=content, briefing_at=len(MEM) + 2, **kw)


def test_split_context_parts() -> None:
    context = split_ctx()
    assert (context.memory, context.briefing) == (MEM, BRIEF)
    only_briefing = MemoryContext(content=BRIEF, briefing_at=0)
    assert (only_briefing.memory, only_briefing.briefing) == (None, BRIEF)
    whole = MemoryContext(content=MEM)  # built by hand: one part, placed whole
    assert (whole.memory, whole.briefing) == (MEM, None)
    assert split_ctx().without_memory().content == BRIEF


def test_memory_goes_up_top_and_briefings_after_the_current_user_message() -> None:
    msgs = [sysmsg("base"), user("u1"), asst("a1"), user("u2")]
    out = split_ctx(nudge=N, nudge_depth=2).apply(msgs)
    assert [m["content"] for m in out] == ["base", MEM, "u1", N, "a1", "u2", BRIEF]
    assert_openai_valid(out)


def test_current_turn_index_skips_tool_results() -> None:
    assert current_turn_index(OPENAI_TOOLS) == 1
    assert current_turn_index(ANTHROPIC_TOOLS) == 0
    assert current_turn_index([sysmsg("base")]) == 1
    # An Anthropic user message where the user's words follow the results is the turn.
    merged = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1"}, text("next")],
    }
    assert current_turn_index(
        [*ANTHROPIC_TOOLS, {"role": "assistant", "content": "a"}, merged]
    ) == (len(ANTHROPIC_TOOLS) + 1)


def _shared_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_steps_of_one_turn_send_the_same_prefix() -> None:
    # Step 1 of a turn, then step 2 after a caller's tool ran: everything step 1 sent
    # is a prefix of step 2 (the provider's cache serves it).
    step1 = [sysmsg("base"), user("u1"), asst("a1"), user("u2")]
    step2 = [*step1, {"role": "assistant", "content": None, "tool_calls": [call("c1")]}]
    step2.append({"role": "tool", "tool_call_id": "c1", "content": "r1"})
    first, second = split_ctx().apply(step1), split_ctx().apply(step2)
    assert second[: len(first)] == first
    assert_openai_valid(second)


def test_the_next_turn_shares_everything_before_the_last_exchange() -> None:
    turn1 = [sysmsg("base"), user("u1"), asst("a1"), user("u2")]
    turn2 = [*turn1, asst("a2"), user("u3")]
    first, second = split_ctx().apply(turn1), split_ctx().apply(turn2)
    # base, memory, u1, a1, u2 are shared; only what follows (the briefing moved on) is new.
    assert _shared_prefix(first, second) == 5


def test_anthropic_memory_in_system_and_briefing_in_the_current_user_turn() -> None:
    system, out = system_placed(split_ctx(), ANTHROPIC, "sys")
    assert system == [text("sys"), text(MEM)]
    assert out[-1]["content"] == [text("u2"), text(BRIEF)]
    assert_anthropic_valid(out)


def test_langchain_user_turn_providers_get_the_briefing_in_the_human_message() -> None:
    msgs = [SystemMessage("base"), HumanMessage("u1"), AIMessage("a1"), HumanMessage("u2")]
    out = split_ctx().apply(msgs, provider="anthropic")
    assert isinstance(out[1], SystemMessage) and out[1].content == MEM
    assert out[-1].content == [text("u2"), text(BRIEF)]
    assert_langchain_valid(out)


# -- token accounting of placed requests (stm_memory.prompt.tokens) --------------------------------


def test_count_tokens_accepts_every_request_shape() -> None:
    from stm_memory.prompt.tokens import count_tokens

    responses_items = [{"type": "function_call_output", "call_id": "k1", "output": "ok"}]
    for messages in (OPENAI_TOOLS, ANTHROPIC_TOOLS, LC_TOOLS, responses_items):
        assert count_tokens(messages) > 0
        placed = ctx(content_depth=-1, nudge_depth=1).apply(messages)
        assert count_tokens(placed) > count_tokens(messages)
    assert count_tokens([]) == 0
    assert count_tokens(ANTHROPIC, system="You are Ada.") > count_tokens(ANTHROPIC)
    # Approximate and deterministic: ~4 characters a token plus 3 per message.
    assert count_tokens([{"role": "user", "content": "x" * 40}]) == count_tokens(
        [HumanMessage("x" * 40)]
    )


def test_count_tokens_with_a_real_tokenizer_callable() -> None:
    from stm_memory.prompt.tokens import PER_MESSAGE_TOKENS, count_tokens, message_text

    words = [{"role": "user", "content": "one two three"}, AIMessage("four")]
    assert message_text(words[0]) == "user\none two three"
    assert count_tokens(words, counter=lambda s: len(s.split())) == 4 + 2 + 2 * PER_MESSAGE_TOKENS


@pytest.mark.parametrize(
    ("provider", "separate"), [("openai", True), ("anthropic", False), (None, False)]
)
def test_user_role_text_in_langchain_messages_goes_as_the_providers_loop_sends_it(
    provider: str | None, separate: bool
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    context = MemoryContext(content="[memory]", nudge="[nudge]", role="user")
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    chat.append({"role": "user", "content": "now"})
    lc = [HumanMessage("hi"), AIMessage("yo"), HumanMessage("now")]
    as_chat = [(m["role"], m["content"]) for m in context.apply(chat, provider="openai")]
    placed = context.apply(lc, provider=provider)
    as_lc = [({"human": "user", "ai": "assistant"}[m.type], m.text) for m in placed]
    # For an OpenAI model, what the Chat Completions loop sends: user text apart;
    # for others (or unknown), joined to the user's own message (taken everywhere).
    assert (as_lc == as_chat) is separate
    assert len(placed) == (len(as_chat) if separate else len(lc))


# ------------------------------------------------------------------------------------
# ``MemoryTurn.prepare`` decides each request whole: the memory tool offered, described
# or left out with the ``tool_choice`` that goes with it, and the cache hints, which every
# entry point maps and none writes (``tests/unit/test_kit_imports.py``).

HI = [{"role": "user", "content": "hi"}]
# An earlier call of a tool of the caller's, in the Messages API's blocks.
TRAFFIC = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
    {"role": "user", "content": "and now?"},
]


def begin(mem: ShortTermMemory, **options: Any) -> MemoryTurn:
    turn = drive(MemoryTurn.begin(mem, SERVER, options=TurnOptions(**options)))
    drive(turn.assemble())
    return turn


def test_an_offered_tool_keeps_the_callers_tool_choice(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    prepared = turn.prepare(HI, wire=CHAT_WIRE, ask=Ask(tool_choice="required"))
    assert (prepared.tool, prepared.tool_choice) == ("offer", "required")


@pytest.mark.parametrize(
    ("wire", "none"), [(ANTHROPIC_WIRE, {"type": "none"}), (CHAT_WIRE, "none")]
)
def test_a_hidden_tool_beside_tool_traffic_is_described_for_the_messages_api(
    mem: ShortTermMemory, wire: Wire, none: Any
) -> None:
    # Behind an excluded provider's name the turn offers no tool; the Messages API
    # refuses tool blocks without tools: described, never callable, in the API's words.
    turn = begin(mem, provider="novelai")
    assert not turn.status.tool_offered
    prepared = turn.prepare(TRAFFIC, wire=wire, ask=Ask(tool_choice={"type": "auto"}))
    if wire is ANTHROPIC_WIRE:
        assert (prepared.tool, prepared.tool_choice) == ("describe", none)
    else:  # OpenAI's API takes tool traffic without tools: nothing to describe
        assert prepared.tool is None
    # An OpenAI-compatible endpoint in front of Anthropic (the Agents SDK's model):
    # the turn's provider says so; "none" in the OpenAI format the request is written in.
    options = TurnOptions(provider="anthropic")
    remember = "remember this for future conversations"
    front = drive(MemoryTurn.begin(mem, SERVER, options=options, user_message=remember))
    assert not front.status.tool_offered  # the long-term-intent guard hides it
    decided = front.request_tools(TRAFFIC, wire=CHAT_WIRE)
    assert (decided.tool, decided.tool_choice) == ("describe", "none")
    # Other tools define one already: the memory tool is simply left out.
    busy = turn.prepare(TRAFFIC, wire=wire, ask=Ask(other_tools=True, tool_choice="auto"))
    assert (busy.tool, busy.tool_choice) == (None, "auto")


def test_a_tool_choice_is_dropped_where_it_would_be_refused(mem: ShortTermMemory) -> None:
    turn = begin(mem, provider="novelai")  # the tool hidden
    # No tools at all: the API refuses a tool_choice.
    assert turn.prepare(HI, wire=CHAT_WIRE, ask=Ask(tool_choice="auto")).tool_choice is None
    # Forcing the memory tool while it is not offered: never.
    forced = {"type": "function", "function": {"name": TOOL_NAME}}
    mine = turn.prepare(HI, wire=CHAT_WIRE, ask=Ask(other_tools=True, tool_choice=forced))
    assert mine.tool is None and mine.tool_choice is None
    theirs = {"type": "function", "function": {"name": "lookup"}}
    kept = turn.prepare(HI, wire=CHAT_WIRE, ask=Ask(other_tools=True, tool_choice=theirs))
    assert kept.tool_choice == theirs


def test_the_openai_key_is_the_turns_and_the_callers_wins(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    assert turn.prepare(HI, wire=CHAT_WIRE).hints == {"prompt_cache_key": prompt_cache_key(SERVER)}
    own = turn.prepare(HI, wire=CHAT_WIRE, ask=Ask(settings={"prompt_cache_key": "mine"}))
    assert own.hints == {}  # the caller's key goes as it is
    assert turn.prepare(HI, wire=CHAT_WIRE, ask=Ask(cache_hints=False)).hints == {}
    assert begin(mem, cache_hints=False).prepare(HI, wire=CHAT_WIRE).hints == {}
    # Messages: breakpoints instead
    assert turn.prepare(HI, wire=ANTHROPIC_WIRE.as_messages()).hints == {}
    assert turn.prepare(HI).hints == {}  # no API named: none
    # The Responses API is OpenAI's; a dict's user_id (ours) is not an API field.
    said = [{"role": "user", "content": "hi", "user_id": "u1"}]
    prepared = turn.prepare(said, wire=RESPONSES_WIRE, ask=Ask(system="Be brief."))
    assert prepared.hints and prepared.messages == HI


def test_anthropic_breakpoints_within_one_budget(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    context = MemoryContext(content="MEM\n\nBRIEF", briefing_at=5)
    dialogue = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    prepared = turn.prepare(
        dialogue,
        wire=ANTHROPIC_WIRE,
        ask=Ask(system="Be brief.", provider="anthropic", context=context),
    )
    assert prepared.breakpoints == Breakpoints(("BRIEF",), 1)
    body = prepared.with_breakpoints({"system": prepared.system, "messages": prepared.messages})
    assert count_breakpoints(body) == 3  # the dialogue's, the memory's, the caller's prompt
    assert body["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral"}
    off = turn.prepare(dialogue, wire=ANTHROPIC_WIRE, ask=Ask(context=context, cache_hints=False))
    assert off.breakpoints is None
    assert off.with_breakpoints({"messages": off.messages}) == {"messages": off.messages}
    # A framework's own messages: the one dialogue breakpoint, the budget counting the
    # request's markers and what a later layer keeps in reserve.
    bp = Breakpoints(("BRIEF",))
    contents = [
        "one",
        "two",
        [{"type": "text", "text": "three"}, {"type": "text", "text": "BRIEF"}],
    ]
    marker = {"type": "ephemeral", "ttl": "1h"}
    where = bp.on_dialogue(contents, 2, markers=[marker], reserved=2)
    assert where == (
        2,
        [
            {"type": "text", "text": "three", "cache_control": marker},
            {"type": "text", "text": "BRIEF"},
        ],
    )
    assert bp.on_dialogue(contents, 2, markers=[marker], reserved=3) is None  # no room
    assert bp.on_dialogue(contents, None, markers=[]) is None


def test_a_placing_error_still_decides_the_tool_and_the_hints(
    mem: ShortTermMemory,
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("placement broke")

    turn = begin(mem)
    wire = dataclasses.replace(ANTHROPIC_WIRE, place=broken)
    context = MemoryContext(content="MEM", content_depth=-1)
    said = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    prepared = turn.prepare(said, wire=wire, ask=Ask(provider="anthropic", context=context))
    # The caller's messages, as the API takes them (one user turn), without memory.
    assert prepared.messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]
    assert prepared.tool == "offer" and prepared.breakpoints is not None
    assert isinstance(prepared, PreparedRequest) and prepared.transient == ()


def test_tool_traffic_is_read_in_every_format() -> None:
    assert has_tool_traffic(TRAFFIC)  # Messages blocks
    assert has_tool_traffic([{"role": "assistant", "tool_calls": [{"id": "c"}]}])  # Chat
    assert has_tool_traffic([{"role": "tool", "tool_call_id": "c", "content": "ok"}])
    assert has_tool_traffic([{"type": "function_call", "call_id": "c"}])  # Responses
    assert has_tool_traffic([{"type": "function_call_output", "call_id": "c"}])

    class Item:  # an SDK object
        type = "custom_tool_call"

    assert has_tool_traffic([Item()])
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    assert has_tool_traffic([AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}])])
    assert has_tool_traffic([ToolMessage("ok", tool_call_id="1")])
    assert not has_tool_traffic([HumanMessage("hi"), AIMessage("hello")])
    assert not has_tool_traffic(HI) and not has_tool_traffic("hi")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "wire", [CHAT_WIRE, ANTHROPIC_WIRE.as_messages()], ids=["openai", "anthropic"]
)
@pytest.mark.parametrize("provider", ["openai", "anthropic", "novelai"])
def test_the_message_style_is_the_wires_whoever_serves_the_model(
    mem: ShortTermMemory, wire: Wire, provider: str
) -> None:
    # ``provider`` names who serves the model (an OpenAI-compatible endpoint in front
    # of Anthropic, say): its exclusion, prices and tool rules, never how a request
    # for ``api`` is written. The same request as with no provider named.
    mem.update(mem.begin_turn(SERVER), {"summary": "The crew meets at the mill."})
    said = [{"role": "system", "content": "You plan trips."}, *HI]

    def placed(**options: Any) -> list[Any]:
        return begin(mem, **options).prepare(said, wire=wire).messages

    written = placed(provider=provider)
    assert written == placed()
    assert any("The crew meets at the mill." in str(m) for m in written)
