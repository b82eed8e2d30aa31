"""The ``update_short_term_memory`` tool end to end: results, cleaning, merge, snapshot,
descriptions, exports, ToolCall/ToolMessage and async."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from stm_memory import (
    TOOL_NAME,
    Category,
    MemoryTurn,
    Scope,
    ShortTermMemory,
    TurnContext,
    TurnOptions,
)
from stm_memory.kit import adrive, drive
from stm_memory.tool.arguments import parse_update_arguments
from stm_memory.tool.schema import tool_spec
from stm_memory.wire.anthropic import messages_tool
from stm_memory.wire.openai_chat import chat_tool
from stm_memory.wire.responses import responses_tool

SERVER = Scope(channel_id="c1", user_id="u1", server_id="g1")
DM = Scope(channel_id="d1", user_id="u1")
PLOT_MOOD = [Category("Plot", "What happened"), Category("Mood", "Tone of the scene")]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache")
    yield memory
    memory.close()


def begin(mem: ShortTermMemory, scope: Scope = SERVER, **kwargs: Any) -> TurnContext:
    kwargs.setdefault("provider", "openai")
    kwargs.setdefault("user_message", "let's continue")
    return mem.begin_turn(scope, **kwargs)


def offered(mem: ShortTermMemory, turn: TurnContext) -> BaseTool:
    tool = mem.tool(turn)
    assert tool is not None
    return tool


def invoke(mem: ShortTermMemory, args: Any, scope: Scope = SERVER) -> dict[str, Any]:
    """Run one call through the LangChain tool of a fresh turn; the parsed JSON result."""
    content = offered(mem, begin(mem, scope)).invoke(args)
    assert isinstance(content, str)
    result: dict[str, Any] = json.loads(content)
    return result


def assert_completed(result: dict[str, Any]) -> None:
    assert result["status"] == "completed"


def assert_failed(result: dict[str, Any], *fragments: str) -> str:
    assert set(result) == {"status", "reason", "tool_name"}, result
    assert result["status"] == "tool_execution_failed"
    assert result["tool_name"] == TOOL_NAME == "update_short_term_memory"
    reason = result["reason"]
    assert isinstance(reason, str) and reason.strip()
    for fragment in fragments:
        assert fragment in reason, (fragment, reason)
    return reason


def stored_summary(mem: ShortTermMemory, scope: Scope = SERVER) -> str | None:
    entry = mem.get(scope)
    return None if entry is None else entry.summary


def stored_categories(mem: ShortTermMemory, scope: Scope = SERVER) -> dict[str, str]:
    entry = mem.get(scope)
    return {} if entry is None else dict(entry.categories)


# --- the tool object -----------------------------------------------------------------------


def test_tool_is_a_langchain_basetool(mem: ShortTermMemory) -> None:
    tool = offered(mem, begin(mem))
    assert isinstance(tool, BaseTool)
    assert tool.name == "update_short_term_memory"
    assert tool.description
    assert tool.args_schema is not None
    assert list(tool.args) == ["summary"]


def test_args_schema_json_matches_export(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    turn = begin(mem)
    schema = offered(mem, turn).args_schema
    assert isinstance(schema, dict)
    params = chat_tool(tool_spec(turn))["function"]["parameters"]
    assert list(schema["properties"]) == list(params["properties"])
    assert schema["required"] == params["required"]
    assert schema["additionalProperties"] is False
    for name, prop in params["properties"].items():
        assert schema["properties"][name]["description"] == prop["description"]
        assert schema["properties"][name]["type"] == "string"


# --- success ------------------------------------------------------------------------------


def test_success_stores_summary_on_both_keys(mem: ShortTermMemory) -> None:
    assert_completed(invoke(mem, {"summary": "Ann and Bo planned a heist."}))
    assert stored_summary(mem) == "Ann and Bo planned a heist."
    user_entry = mem.get_key(SERVER.user_key)
    assert user_entry is not None and user_entry.summary == "Ann and Bo planned a heist."


def test_success_in_a_dm(mem: ShortTermMemory) -> None:
    assert_completed(invoke(mem, {"summary": "A DM chat."}, scope=DM))
    assert stored_summary(mem, DM) == "A DM chat."


def test_success_resets_counter_on_live_scope(mem: ShortTermMemory) -> None:
    mem.capture(SERVER, [{"role": "user", "content": "hi"}])
    warm = begin(mem)
    mem.end_turn(warm)
    entry = mem.get(SERVER)
    assert entry is not None and entry.turns_since_refresh == 1
    assert_completed(invoke(mem, {"summary": "refreshed"}))
    entry = mem.get(SERVER)
    assert entry is not None
    assert entry.turns_since_refresh == 0
    assert entry.last_refreshed_turn == 1
    assert [m.content for m in entry.messages] == ["hi"]  # messages are kept


def test_stored_value_survives_a_restart(mem: ShortTermMemory, tmp_path: Path) -> None:
    value = "😀 kept " + "x" * 2000
    assert invoke(mem, {"summary": value})["status"] == "completed"
    expected = value[:1500]
    mem.close()
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "fresh-cache"
    ) as again:
        assert stored_summary(again) == expected  # hydrated from SQL


def test_update_returns_plain_dicts(mem: ShortTermMemory) -> None:
    assert mem.update(begin(mem), {"summary": "direct"})["status"] == "completed"
    assert stored_summary(mem) == "direct"


# --- failures -------------------------------------------------------------------------------

FAILURES: list[tuple[Any, tuple[str, ...]]] = [
    ({"summary": 7}, ("'summary'", "string", "int")),
    ({"summary": ["x"]}, ("'summary'", "string", "list")),
    ({"summary": {"a": "b"}}, ("'summary'", "string", "dict")),
    ({"summary": False}, ("'summary'", "string", "bool")),
    ({"summary": ""}, ("'summary'", "empty")),
    ({"summary": " \n\t "}, ("'summary'", "empty")),
    ({}, ("No value given",)),
    ({"notes": "x"}, ("No value given",)),
    ({"summary": "fine", "notes": "x", "extra": 1}, ("'extra', 'notes'", "'summary'")),
    # Names that collide with Python/LangChain internals are ordinary unknown keys.
    ({"summary": "fine", "self": "x"}, ("'self'",)),
    ({"summary": "fine", "run_manager": "x"}, ("'run_manager'",)),
    ({"summary": "fine", "callbacks": "x"}, ("'callbacks'",)),
    ({"summary": "fine", "config": "x"}, ("'config'",)),
    ({"summary": "fine", "tool_call_id": "x"}, ("'tool_call_id'",)),
    ({"summary": "fine", "model_config": "x"}, ("'model_config'",)),
]


@pytest.mark.parametrize(("args", "fragments"), FAILURES)
def test_failures_through_the_tool(
    mem: ShortTermMemory, args: Any, fragments: tuple[str, ...]
) -> None:
    assert_failed(invoke(mem, args), *fragments)
    assert stored_summary(mem) is None


@pytest.mark.parametrize(("args", "fragments"), FAILURES)
def test_failures_through_update(
    mem: ShortTermMemory, args: Any, fragments: tuple[str, ...]
) -> None:
    assert_failed(mem.update(begin(mem), args), *fragments)
    assert stored_summary(mem) is None


@pytest.mark.parametrize("args", [["summary"], "summary", None, 3, ("summary", "x")])
def test_non_dict_arguments_to_update(mem: ShortTermMemory, args: Any) -> None:
    assert_failed(mem.update(begin(mem), args), "JSON object")


def test_positional_string_input_to_the_tool(mem: ShortTermMemory) -> None:
    result = json.loads(offered(mem, begin(mem)).invoke("just a string"))
    assert_failed(result)
    assert stored_summary(mem) is None


@pytest.mark.parametrize("args", [{"\ud800": ""}, {"summary": "ok", "x\udfff": 1}])
def test_unreadable_keys_still_give_a_json_result(mem: ShortTermMemory, args: Any) -> None:
    # pydantic rejects lone-surrogate keys before our validation runs; the result must
    # still be the tool's failure JSON, not LangChain's plain "Tool input validation error".
    assert_failed(invoke(mem, args))
    message = offered(mem, begin(mem)).invoke(
        {"name": TOOL_NAME, "args": args, "id": "call_s", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage)
    assert_failed(json.loads(str(message.content)))
    assert stored_summary(mem) is None


def test_a_null_summary_is_no_value_on_every_path(mem: ShortTermMemory) -> None:
    # null is "no value", as an omitted key: the same failure through update (the
    # provider loops) and through the LangChain tool.
    assert_failed(mem.update(begin(mem), {"summary": None}), "No value given", "'summary'")
    assert_failed(invoke(mem, {"summary": None}), "No value given", "'summary'")
    assert stored_summary(mem) is None


def test_a_null_category_keeps_its_value_on_every_path(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    assert_completed(invoke(mem, {"plot": "p1", "mood": "m1"}))
    # The provider loops hand the model's arguments to update as they are.
    assert mem.update(begin(mem), {"plot": "p2", "mood": None})["status"] == "completed"
    assert stored_categories(mem) == {"plot": "p2", "mood": "m1"}
    assert_completed(invoke(mem, {"plot": None, "mood": "m3"}))
    assert stored_categories(mem) == {"plot": "p2", "mood": "m3"}
    # All null is no value at all, whichever path.
    reason = assert_failed(mem.update(begin(mem), {"plot": None, "mood": None}), "No value given")
    assert reason == assert_failed(invoke(mem, {"plot": None, "mood": None}))


def test_failed_call_does_not_use_up_the_turn(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    tool = offered(mem, turn)
    assert_failed(json.loads(tool.invoke({"summary": ""})))
    assert_failed(json.loads(tool.invoke({"summary": "ok", "bogus": 1})), "'bogus'")
    assert_completed(json.loads(tool.invoke({"summary": "third time lucky"})))
    assert stored_summary(mem) == "third time lucky"


def test_one_update_per_turn(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    tool = offered(mem, turn)
    assert_completed(json.loads(tool.invoke({"summary": "first"})))
    assert_failed(json.loads(tool.invoke({"summary": "second"})), "already updated")
    assert_failed(mem.update(turn, {"summary": "third"}), "already updated")
    assert stored_summary(mem) == "first"


# --- one update per turn, under a forced race ----------------------------------------------

RACERS = 4
# Seconds a racer waits for the others: a call that never reaches the barrier breaks it,
# and the test fails instead of hanging.
BARRIER_TIMEOUT = 10.0

SyncCall = Callable[[int], dict[str, Any]]
AsyncCall = Callable[[int], Awaitable[dict[str, Any]]]


class GuardsPassedTogether:
    """Holds each of ``count`` concurrent updates of one turn between its guard check
    and its claim until all of them have passed the guard check.

    ``ShortTermMemory.update`` checks the guards, parses the arguments, then claims the
    turn's one update. Parsing is made to wait on a barrier first, so every call finds
    the turn unclaimed at the guard check and only the atomic claim can refuse all but
    one. Unforced, the first call usually finishes before the next starts and the guard
    check alone refuses the rest: a claim that no longer checks would go unnoticed.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int = RACERS) -> None:
        self.barrier = threading.Barrier(count, timeout=BARRIER_TIMEOUT)
        self.turn: TurnContext | None = None
        self.claimed_on_arrival: list[bool] = []

        def parse_when_all_have_passed_the_guards(*args: Any, **kwargs: Any) -> Any:
            assert self.turn is not None
            self.claimed_on_arrival.append(self.turn.updated)
            self.barrier.wait()  # BrokenBarrierError after the timeout
            return parse_update_arguments(*args, **kwargs)

        # The name the engine calls (raising if it has gone, so the race cannot silently
        # stop being forced).
        monkeypatch.setattr(
            "stm_memory.engine.parse_update_arguments", parse_when_all_have_passed_the_guards
        )

    def assert_one_winner(self, mem: ShortTermMemory, results: list[dict[str, Any]]) -> None:
        """The race was real (every call got past the guards to an unclaimed turn), one
        call stored and the others got the "already updated" failure."""
        assert not self.barrier.broken, f"not every call reached the claim: {results}"
        assert self.claimed_on_arrival == [False] * self.barrier.parties
        winners = [i for i, r in enumerate(results) if r == {"status": "completed"}]
        assert len(winners) == 1, results
        for i, result in enumerate(results):
            if i != winners[0]:
                assert_failed(result, "already updated this turn")
        assert stored_summary(mem) == f"writer {winners[0]}"


def summary_of(i: int) -> dict[str, str]:
    return {"summary": f"writer {i}"}


def memory_turn(mem: ShortTermMemory) -> MemoryTurn:
    options = TurnOptions(provider="openai")
    return drive(MemoryTurn.begin(mem, SERVER, options=options, user_message="let's continue"))


def race_through_update(mem: ShortTermMemory) -> tuple[TurnContext, SyncCall]:
    turn = begin(mem)
    return turn, lambda i: mem.update(turn, summary_of(i))


def race_through_the_langchain_tool(mem: ShortTermMemory) -> tuple[TurnContext, SyncCall]:
    # What LangGraph's ToolNode does with parallel calls of one reply: one tool, threads.
    turn = begin(mem)
    tool = offered(mem, turn)
    return turn, lambda i: json.loads(tool.invoke(summary_of(i)))


def race_through_memory_call(mem: ShortTermMemory) -> tuple[TurnContext, SyncCall]:
    # The step every provider loop and adapter runs a memory call with, raw JSON arguments.
    turn = memory_turn(mem)
    assert turn.state is not None
    return turn.state, lambda i: drive(turn.memory_call(json.dumps(summary_of(i))))


@pytest.mark.parametrize(
    "race",
    [race_through_update, race_through_the_langchain_tool, race_through_memory_call],
    ids=["update", "langchain-tool", "memory_call"],
)
def test_concurrent_calls_in_one_turn_store_once(
    mem: ShortTermMemory,
    monkeypatch: pytest.MonkeyPatch,
    race: Callable[[ShortTermMemory], tuple[TurnContext, SyncCall]],
) -> None:
    gate = GuardsPassedTogether(monkeypatch)
    gate.turn, call = race(mem)
    with ThreadPoolExecutor(RACERS) as pool:
        results = list(pool.map(call, range(RACERS)))
    gate.assert_one_winner(mem, results)


def arace_through_aupdate(mem: ShortTermMemory) -> tuple[TurnContext, AsyncCall]:
    turn = begin(mem)
    return turn, lambda i: mem.aupdate(turn, summary_of(i))


def arace_through_the_langchain_tool(mem: ShortTermMemory) -> tuple[TurnContext, AsyncCall]:
    turn = begin(mem)
    tool = offered(mem, turn)

    async def call(i: int) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(await tool.ainvoke(summary_of(i)))
        return result

    return turn, call


def arace_through_memory_call(mem: ShortTermMemory) -> tuple[TurnContext, AsyncCall]:
    turn = memory_turn(mem)
    assert turn.state is not None
    return turn.state, lambda i: adrive(turn.memory_call(json.dumps(summary_of(i))))


@pytest.mark.parametrize(
    "race",
    [arace_through_aupdate, arace_through_the_langchain_tool, arace_through_memory_call],
    ids=["aupdate", "langchain-tool-ainvoke", "memory_call-adrive"],
)
async def test_concurrent_async_calls_in_one_turn_store_once(
    mem: ShortTermMemory,
    monkeypatch: pytest.MonkeyPatch,
    race: Callable[[ShortTermMemory], tuple[TurnContext, AsyncCall]],
) -> None:
    # The async twins run the sync update on worker threads: they race the same way.
    gate = GuardsPassedTogether(monkeypatch)
    gate.turn, call = race(mem)
    results = await asyncio.gather(*(call(i) for i in range(RACERS)))
    gate.assert_one_winner(mem, list(results))


def test_internal_error_becomes_a_failed_result(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = offered(mem, begin(mem))

    def boom(*_: Any) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mem, "update", boom)
    assert_failed(json.loads(tool.invoke({"summary": "x"})), "Internal error", "disk on fire")
    message = tool.invoke(
        {"name": TOOL_NAME, "args": {"summary": "x"}, "id": "call_9", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert_failed(json.loads(str(message.content)), "Internal error")


# --- cleaning, checked on what is stored -----------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("   trimmed   \n", "trimmed"),
        ("{{secret}} met {Foo} and {{ bar }}", "secret met Foo and {{ bar }}"),
        (
            "{user} met {{Char}}, {BOT}, {user_term}, {{user_formatted}}",
            "{user} met {{Char}}, {BOT}, {user_term}, {{user_formatted}}",
        ),
        ("{foo bar} {1} {} {{}}", "{foo bar} {1} {} {{}}"),
        ("tab\tand\nnewline inside", "tab\tand\nnewline inside"),
        ("nul\x00byte", "nul\ufffdbyte"),
        ("x" * 1501, "x" * 1500),
        ("😀" * 1501, "😀" * 1500),
        ("👍🏽" * 800, "👍🏽" * 750),  # 2 code points each: cut at 1500 code points
        ("a" * 1499 + "😀😀😀", "a" * 1499 + "😀"),
    ],
)
def test_cleaning_is_applied_to_what_is_stored(mem: ShortTermMemory, raw: str, stored: str) -> None:
    result = invoke(mem, {"summary": raw})
    # A value cut to the limit completes with a note saying so; any other is plain.
    assert result == (
        {"status": "completed", "note": result["note"]}
        if len(raw) > 1500
        else {"status": "completed"}
    )
    assert stored_summary(mem) == stored
    value = stored_summary(mem)
    assert value is not None and len(value) <= 1500


def test_lone_surrogate_is_stored_safely(mem: ShortTermMemory) -> None:
    assert_completed(invoke(mem, {"summary": "before \ud800 after"}))
    value = stored_summary(mem)
    assert value is not None
    assert value.startswith("before ") and value.endswith(" after")
    value.encode("utf-8")


def test_limit_override_applies_to_storage_and_schema(tmp_path: Path) -> None:
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/small.db", cache_dir=tmp_path / "c", max_summary_length=10
    ) as small:
        turn = begin(small)
        tool = offered(small, turn)
        assert "10" in tool.description
        assert "10" in chat_tool(tool_spec(turn, limit=10))["function"]["description"]
        result = json.loads(tool.invoke({"summary": "0123456789abcdef"}))
        assert result["status"] == "completed" and "cut to 10" in result["note"]
        assert stored_summary(small) == "0123456789"


# --- category mode ----------------------------------------------------------------------


def test_category_mode_schema_and_store(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    turn = begin(mem)
    tool = offered(mem, turn)
    assert list(tool.args) == ["plot", "mood"]
    assert_completed(json.loads(tool.invoke({"plot": " heist ", "mood": "{{tense}}"})))
    assert stored_categories(mem) == {"plot": "heist", "mood": "tense"}
    entry = mem.get(SERVER)
    assert entry is not None and entry.summary is None


def test_category_merge_semantics(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    assert_completed(invoke(mem, {"plot": "p1", "mood": "m1"}))
    # Omitted keeps.
    assert_completed(invoke(mem, {"mood": "m2"}))
    assert stored_categories(mem) == {"plot": "p1", "mood": "m2"}
    # Blank keeps, given non-blank replaces.
    assert_completed(invoke(mem, {"plot": "p3", "mood": "   "}))
    assert stored_categories(mem) == {"plot": "p3", "mood": "m2"}
    # null means "not given".
    assert_completed(invoke(mem, {"plot": None, "mood": "m4"}))
    assert stored_categories(mem) == {"plot": "p3", "mood": "m4"}


def test_category_order_follows_the_server(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", [Category("Zeta"), Category("Alpha"), Category("Mid")])
    assert_completed(invoke(mem, {"mid": "3", "alpha": "2"}))
    assert list(stored_categories(mem)) == ["alpha", "mid"]
    assert_completed(invoke(mem, {"zeta": "1"}))
    assert list(stored_categories(mem)) == ["zeta", "alpha", "mid"]


def test_category_failures(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    assert_failed(invoke(mem, {"plot": 3, "mood": "ok"}), "'plot'", "string")
    assert_failed(invoke(mem, {"plot": "", "mood": "  "}), "No value given", "'plot', 'mood'")
    assert_failed(invoke(mem, {"summary": "x"}), "No value given")
    assert_failed(invoke(mem, {"plot": "p", "summary": "x"}), "'summary'", "'plot', 'mood'")
    assert stored_categories(mem) == {}


def test_category_slugs_per_spec(mem: ShortTermMemory) -> None:
    labels = ["Plot", "plot!", "1st Act", "気分", "Mood & Tone"]
    slugs = ["plot", "plot_2", "c_1st_act", "field", "mood_tone"]
    mem.set_categories("g1", [Category(label, f"About {label}") for label in labels])
    assert [c.slug for c in mem.categories("g1")] == slugs
    turn = begin(mem)
    for params in (
        chat_tool(tool_spec(turn))["function"]["parameters"],
        responses_tool(tool_spec(turn))["parameters"],
        messages_tool(tool_spec(turn))["input_schema"],
    ):
        assert list(params["properties"]) == slugs
        assert params["required"] == slugs
    tool = offered(mem, turn)
    assert list(tool.args) == slugs
    assert_completed(json.loads(tool.invoke({s: f"v-{s}" for s in slugs})))
    assert stored_categories(mem) == {s: f"v-{s}" for s in slugs}


def test_category_descriptions_are_sanitized(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", [Category("Plot", "What {{happened}} to {user}")])
    turn = begin(mem)
    description = chat_tool(tool_spec(turn))["function"]["parameters"]["properties"]["plot"][
        "description"
    ]
    assert "What happened to {user}" in description
    assert "{{happened}}" not in description
    assert offered(mem, turn).args["plot"]["description"] == description


def test_category_named_self_or_run_manager_works(mem: ShortTermMemory) -> None:
    # Slugs that are also parameter names of BaseTool's run() (``self``, ``run_manager``)
    # must reach the tool as arguments.
    mem.set_categories("g1", [Category("Self"), Category("Run manager"), Category("Callbacks")])
    assert_completed(invoke(mem, {"self": "a", "run_manager": "b", "callbacks": "c"}))
    assert stored_categories(mem) == {"self": "a", "run_manager": "b", "callbacks": "c"}


@pytest.mark.parametrize("label", ["Model dump", "Model config"])
def test_category_colliding_with_pydantic_members(mem: ShortTermMemory, label: str) -> None:
    mem.set_categories("g1", [Category(label), Category("Plot")])
    slug = mem.categories("g1")[0].slug
    assert_completed(invoke(mem, {slug: "value", "plot": "p"}))
    assert stored_categories(mem) == {slug: "value", "plot": "p"}


def test_schema_snapshot_survives_admin_edit(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    turn = begin(mem)
    # An admin replaces the categories while the model is thinking.
    mem.set_categories("g1", [Category("Setting"), Category("Cast")])
    tool = offered(mem, turn)
    assert list(tool.args) == ["plot", "mood"]
    assert list(chat_tool(tool_spec(turn))["function"]["parameters"]["properties"]) == [
        "plot",
        "mood",
    ]
    assert_failed(json.loads(tool.invoke({"setting": "x"})), "No value given")
    assert_completed(json.loads(tool.invoke({"plot": "heist", "mood": "tense"})))
    assert stored_categories(mem) == {"plot": "heist", "mood": "tense"}
    # The next turn sees the new schema.
    assert list(offered(mem, begin(mem)).args) == ["setting", "cast"]


def test_snapshot_from_summary_to_category_mode(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    mem.set_categories("g1", PLOT_MOOD)
    assert_completed(mem.update(turn, {"summary": "still summary mode"}))
    assert stored_summary(mem) == "still summary mode"


def test_snapshot_from_category_to_summary_mode(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    turn = begin(mem)
    mem.set_categories("g1", [])
    assert_completed(mem.update(turn, {"plot": "still categories"}))
    assert stored_categories(mem) == {"plot": "still categories"}


# --- descriptions --------------------------------------------------------------------------


def test_default_description_summary_mode(mem: ShortTermMemory) -> None:
    text = offered(mem, begin(mem)).description
    assert "working memory" in text.lower()
    assert "long-term memory" in text
    assert "explicitly" in text and "remember" in text


def test_default_description_category_mode(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    text = offered(mem, begin(mem)).description
    assert "working memory" in text.lower()
    assert "long-term memory" in text
    assert "explicitly" in text and "remember" in text


@pytest.mark.parametrize("category_mode", [False, True], ids=["summary", "categories"])
def test_description_override_in_both_modes(mem: ShortTermMemory, category_mode: bool) -> None:
    if category_mode:
        mem.set_categories("g1", PLOT_MOOD)
    mem.configure_server("g1", tool_description_override="Jot the {{scene}} for {user}.")
    turn = begin(mem)
    expected = "Jot the scene for {user}."
    assert offered(mem, turn).description == expected
    assert chat_tool(tool_spec(turn))["function"]["description"] == expected
    assert responses_tool(tool_spec(turn))["description"] == expected
    assert messages_tool(tool_spec(turn))["description"] == expected


# --- LangChain's own conversion (what bind_tools sends) ------------------------------------


@pytest.mark.parametrize("category_mode", [False, True], ids=["summary", "categories"])
def test_langchain_conversion_keeps_names_and_descriptions(
    mem: ShortTermMemory, category_mode: bool
) -> None:
    if category_mode:
        mem.set_categories("g1", PLOT_MOOD)
    turn = begin(mem)
    converted = convert_to_openai_tool(offered(mem, turn))["function"]
    ours = chat_tool(tool_spec(turn))["function"]
    assert converted["name"] == ours["name"]
    assert converted["description"] == ours["description"]
    assert list(converted["parameters"]["properties"]) == list(ours["parameters"]["properties"])


@pytest.mark.parametrize("category_mode", [False, True], ids=["summary", "categories"])
def test_langchain_conversion_is_strict(mem: ShortTermMemory, category_mode: bool) -> None:
    if category_mode:
        mem.set_categories("g1", PLOT_MOOD)
    turn = begin(mem)
    params = convert_to_openai_tool(offered(mem, turn))["function"]["parameters"]
    assert params["required"] == list(params["properties"])
    assert params["additionalProperties"] is False
    assert all("default" not in prop for prop in params["properties"].values())


# --- ToolCall in, ToolMessage out; async -------------------------------------------------


def test_tool_call_returns_tool_message(mem: ShortTermMemory) -> None:
    tool = offered(mem, begin(mem))
    message = tool.invoke(
        {
            "name": TOOL_NAME,
            "args": {"summary": "via a tool call"},
            "id": "call_1",
            "type": "tool_call",
        }
    )
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call_1"
    assert message.name == TOOL_NAME
    assert message.status == "success"
    assert json.loads(str(message.content))["status"] == "completed"
    assert stored_summary(mem) == "via a tool call"


def test_tool_call_failure_is_a_tool_message(mem: ShortTermMemory) -> None:
    tool = offered(mem, begin(mem))
    message = tool.invoke(
        {"name": TOOL_NAME, "args": {"oops": 1}, "id": "call_2", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call_2"
    assert_failed(json.loads(str(message.content)), "No value given")


async def test_ainvoke_stores(mem: ShortTermMemory) -> None:
    tool = offered(mem, begin(mem))
    content = await tool.ainvoke({"summary": "async summary"})
    assert json.loads(content)["status"] == "completed"
    assert stored_summary(mem) == "async summary"
    assert_failed(json.loads(await tool.ainvoke({"summary": "again"})), "already updated")


async def test_ainvoke_tool_call_returns_tool_message(mem: ShortTermMemory) -> None:
    mem.set_categories("g1", PLOT_MOOD)
    tool = offered(mem, begin(mem))
    message = await tool.ainvoke(
        {"name": TOOL_NAME, "args": {"plot": "async"}, "id": "call_3", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call_3"
    assert json.loads(str(message.content))["status"] == "completed"
    assert stored_categories(mem) == {"plot": "async"}


async def test_aupdate(mem: ShortTermMemory) -> None:
    turn = begin(mem)
    assert await mem.aupdate(turn, {"summary": "x", "y": 1}) == {
        "status": "tool_execution_failed",
        "reason": "Unknown field(s): 'y'. Allowed: 'summary'.",
        "tool_name": TOOL_NAME,
    }
    assert (await mem.aupdate(turn, {"summary": "via aupdate"}))["status"] == "completed"
    assert stored_summary(mem) == "via aupdate"


def test_a_cut_value_completes_and_the_tool_result_says_so(mem: ShortTermMemory) -> None:
    result = invoke(mem, {"summary": "y" * 1600})
    assert result["status"] == "completed"
    assert "'summary'" in result["note"] and "cut to 1500" in result["note"]
    assert stored_summary(mem) == "y" * 1500
    assert invoke(mem, {"summary": "short"})["status"] == "completed"
