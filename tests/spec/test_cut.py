"""The history cut (SPEC §8): what of a caller's whole history a request carries — the
memory block, the turns since it was written, the current turn — within the history
budget; the cut as a pure function, then through the engine.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from helpers.dialogues import (
    FORMATS,
    Step,
    Turn,
    memory_call_count,
    render,
    render_turns,
    say,
    validity_errors,
)
from helpers.factory import MemFactory
from helpers.memory import DM, SERVER, refresh, scope_dict, turn
from helpers.sqlite_lock import SqliteWriteLock
from helpers.subproc import run_worker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.prompt.cut import HistoryWindow, cut_history, split_turns, turn_tokens
from stm_memory.testing import FrozenClock

# ------------------------------------------------------------------------------------
# The history cut (stm_memory.prompt.cut), table-driven for each wire format, and its
# properties for random dialogues: valid requests, the current turn whole, no covered
# turn beyond the window, no earlier memory call, idempotence.

MEM = TOOL_NAME


def window(keep: int | None, cap: int = 30) -> HistoryWindow:
    return HistoryWindow(keep_turns=keep, max_raw_turns=cap)


def chat(n: int) -> list[Turn]:
    return [say(f"question {i}", answer=f"answer {i}") for i in range(n)]


def cut(fmt: str, turns: list[Turn], keep: int | None, *, cap: int = 30, **kw: Any) -> list[Any]:
    return cut_history(render(fmt, turns, **kw), window(keep, cap)).messages


# -- table-driven, each format ----------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_covered_turns_are_dropped_and_the_current_turn_stays(fmt: str) -> None:
    turns = [*chat(10), say("the new question", answer=None)]
    out = cut(fmt, turns, keep=2)
    assert out == render(fmt, [turns[8], turns[9], turns[10]])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_leading_system_prompt_stays(fmt: str) -> None:
    turns = [*chat(5), say("now", answer=None)]
    out = cut(fmt, turns, keep=0, system="You are a co-writer.")
    assert out == render(fmt, [turns[5]], system="You are a co-writer.")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_kept_turn_keeps_its_tool_calls_with_their_results(fmt: str) -> None:
    searched = Turn(("look it up",), (Step(None, (("s1", "search"),)), Step("found it")))
    turns = [*chat(4), searched, say("thanks", answer="welcome"), say("next", answer=None)]
    out = cut(fmt, turns, keep=2)
    assert out == render(fmt, turns[4:])
    assert validity_errors(fmt, out) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_parallel_calls_lose_only_the_memory_call(fmt: str) -> None:
    both = Turn(("plan it",), (Step(None, (("s1", "search"), ("m1", MEM))), Step("planned")))
    turns = [both, say("next", answer=None)]
    out = cut(fmt, turns, keep=5)
    expected = [Turn(("plan it",), (Step(None, (("s1", "search"),)), Step("planned"))), turns[1]]
    assert out == render(fmt, expected)
    assert validity_errors(fmt, out) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_earlier_memory_call_goes_and_the_answer_text_stays(fmt: str) -> None:
    # The epilogue shape: the model answered and called the memory tool in one reply.
    epilogue = Turn(("how far?",), (Step("Two days' ride.", (("m1", MEM),)),))
    turns = [epilogue, say("and then?", answer=None)]
    out = cut(fmt, turns, keep=5)
    assert out == render(fmt, [say("how far?", answer="Two days' ride."), turns[1]])
    assert memory_call_count(fmt, out) == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_memory_call_alone_in_its_reply_goes_whole(fmt: str) -> None:
    alone = Turn(("hi",), (Step(None, (("m1", MEM),)), Step("hello")))
    turns = [alone, say("next", answer=None)]
    out = cut(fmt, turns, keep=5)
    assert out == render(fmt, [say("hi", answer="hello"), turns[1]])


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_current_turn_keeps_its_own_memory_call(fmt: str) -> None:
    current = Turn(("plan it",), (Step(None, (("m9", MEM),)),))
    turns = [*chat(3), current]
    out = cut(fmt, turns, keep=0)
    assert out == render(fmt, [current])
    assert memory_call_count(fmt, out) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_group_turn_is_one_turn(fmt: str) -> None:
    group = Turn(("Ann: hi", "Bob: hey", "Cy: yo"), (Step("hello all"),))
    turns = [*chat(3), group, say("Ann: so?", answer=None)]
    out = cut(fmt, turns, keep=1)
    assert out == render(fmt, [group, turns[-1]])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_thread_shorter_than_the_window_is_unchanged(fmt: str) -> None:
    turns = [*chat(2), say("now", answer=None)]
    messages = render(fmt, turns)
    assert cut_history(messages, window(6)).messages == messages


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_memory_keeps_everything_under_the_cap(fmt: str) -> None:
    turns = [*chat(12), say("now", answer=None)]
    result = cut_history(render(fmt, turns), window(None, cap=30))
    assert result.messages == render(fmt, turns)
    assert not result.capped


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_safety_cap_bounds_uncovered_turns_in_steps(fmt: str) -> None:
    starts = []
    for n in range(10, 40):
        turns = [*chat(n), say("now", answer=None)]
        result = cut_history(render(fmt, turns), window(None, cap=10))
        _lead, kept = split_turns(result.messages)
        assert 5 < len(kept) - 1 <= 10  # earlier turns kept
        assert result.capped == (n > 10)
        starts.append(n - (len(kept) - 1))
    # The first kept turn moves every 5 turns, not every turn (prompt caches).
    assert len(set(starts)) <= 7


@pytest.mark.parametrize("fmt", FORMATS)
def test_keep_zero_sends_only_the_current_turn(fmt: str) -> None:
    current = Turn(("now",), (Step(None, (("s1", "search"),)),))
    out = cut(fmt, [*chat(4), current], keep=0)
    assert out == render(fmt, [current])


def test_responses_reasoning_before_a_dropped_memory_call_goes_with_it() -> None:
    reasoned = Turn(("plan",), (Step(None, (("m1", MEM),), reasoning=True), Step("done")))
    out = cut("responses", [reasoned, say("next", answer=None)], keep=5)
    assert [i.get("type") for i in out] == ["message", "message", "message"]
    assert validity_errors("responses", out) == []


def test_responses_reasoning_before_a_kept_message_stays() -> None:
    reasoned = Turn(("plan",), (Step("planned", (("m1", MEM),), reasoning=True),))
    out = cut("responses", [reasoned, say("next", answer=None)], keep=5)
    assert [i.get("type") for i in out] == ["message", "reasoning", "message", "message"]


def test_anthropic_tool_results_then_a_user_message_start_a_new_turn() -> None:
    # After an epilogue memory call the next user message follows the tool_result turn.
    turns = [
        Turn(("a",), (Step("A", (("m1", MEM),)),)),
        say("b", answer="B"),
        say("c", answer=None),
    ]
    out = cut("anthropic", turns, keep=1)
    assert out == render("anthropic", turns[1:])


def test_langchain_openai_style_additional_kwargs_lose_the_memory_call() -> None:
    call = {"id": "m1", "type": "function", "function": {"name": MEM, "arguments": "{}"}}
    ai = AIMessage(
        content="Noted.",
        tool_calls=[{"name": MEM, "args": {}, "id": "m1", "type": "tool_call"}],
        additional_kwargs={"tool_calls": [call]},
    )
    out = cut_history([HumanMessage("a"), ai, HumanMessage("b")], window(3)).messages
    assert isinstance(out[1], AIMessage)
    assert out[1].tool_calls == [] and "tool_calls" not in out[1].additional_kwargs
    assert out[1].content == "Noted."


def test_an_assistant_greeting_before_any_user_counts_as_a_turn() -> None:
    messages = [{"role": "assistant", "content": "Welcome!"}, *render("openai", chat(2))]
    messages.append({"role": "user", "content": "now"})
    assert cut_history(messages, window(2)).messages == messages[1:]
    assert cut_history(messages, window(3)).messages == messages


def test_the_input_is_not_mutated() -> None:
    turns = [Turn(("a",), (Step("A", (("m1", MEM), ("s1", "search"))),)), say("b", answer=None)]
    for fmt in FORMATS:
        messages = render(fmt, turns)
        before = [
            m.model_copy(deep=True) if hasattr(m, "model_copy") else repr(m) for m in messages
        ]
        cut_history(messages, window(3))
        after = [m.model_copy(deep=True) if hasattr(m, "model_copy") else repr(m) for m in messages]
        assert before == after


# -- properties ---------------------------------------------------------------------------

_ids = iter(range(10**9))


@st.composite
def steps(draw: st.DrawFn, *, final: bool) -> Step:
    names = draw(st.lists(st.sampled_from([MEM, "search", "lookup"]), max_size=3))
    calls = tuple((f"call_{next(_ids)}", n) for n in names)
    text = draw(st.one_of(st.none(), st.sampled_from(["sure", "here it is", "noted"])))
    if not calls and text is None:
        text = "ok"
    return Step(text, calls, reasoning=draw(st.booleans()))


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    users = tuple(
        draw(st.lists(st.sampled_from(["hi", "Ann: go on", "Bob: wait"]), min_size=1, max_size=3))
    )
    n = draw(st.integers(0, 3))
    return Turn(users, tuple(draw(steps(final=i == n - 1)) for i in range(n)))


@st.composite
def dialogues(draw: st.DrawFn) -> tuple[list[Turn], HistoryWindow, bool]:
    earlier = draw(st.lists(turns(), max_size=12))
    # Earlier turns are finished: each ends with an answer the user saw.
    earlier = [
        t if t.steps and not t.steps[-1].calls else Turn(t.users, (*t.steps, Step("done")))
        for t in earlier
    ]
    current = draw(turns())
    keep = draw(st.one_of(st.none(), st.integers(0, 14)))
    cap = draw(st.integers(1, 10))
    return [*earlier, current], window(keep, cap), draw(st.booleans())


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=dialogues())
def test_properties_of_the_cut(fmt: str, case: tuple[list[Turn], HistoryWindow, bool]) -> None:
    all_turns, win, with_system = case
    system = "You are terse." if with_system else None
    messages = render(fmt, all_turns, system=system)
    assert validity_errors(fmt, messages) == []
    result = cut_history(messages, win)
    out = result.messages

    assert validity_errors(fmt, out) == []
    current = render(fmt, [all_turns[-1]])
    assert out[len(out) - len(current) :] == current  # the current turn, whole
    if system is not None:
        assert out[0] == messages[0]
    lead = 1 if system is not None else 0
    earlier = out[lead : len(out) - len(current)]
    _l, earlier_turns = split_turns(earlier)
    assert len(earlier_turns) <= win.max_raw_turns
    if win.keep_turns is not None:
        assert len(earlier_turns) <= win.keep_turns
    assert memory_call_count(fmt, earlier) == 0
    # What is kept of the earlier dialogue is its end, with memory calls removed.
    full_earlier = cut_history(messages, window(10**6, 10**6)).messages[lead : len(messages)]
    tail = full_earlier[: len(full_earlier) - len(current)]
    assert earlier == tail[len(tail) - len(earlier) :] if earlier else True
    # Idempotent.
    assert cut_history(out, win).messages == out


def test_render_turns_helper_matches_render() -> None:
    # The helpers themselves: rendering turn by turn gives the same messages.
    turns_ = [*chat(2), Turn(("x",), (Step(None, (("c1", "search"),)), Step("y")))]
    for fmt in FORMATS:
        assert [m for part in render_turns(fmt, turns_) for m in part] == render(fmt, turns_)


# -- the token budget (no regret: uncovered turns go only past it, in large steps) --------


def long_chat(n: int, words: int = 40) -> list[Turn]:
    return [
        say(f"question {i} " + "word " * words, answer=f"answer {i} " + "word " * words)
        for i in range(n)
    ]


def budgeted(keep: int | None, budget: int) -> HistoryWindow:
    return HistoryWindow(keep_turns=keep, token_budget=budget)


@pytest.mark.parametrize("fmt", FORMATS)
def test_under_the_budget_every_uncovered_turn_is_sent(fmt: str) -> None:
    # A model that never writes its memory is sent what a full-history caller sends.
    turns = [*long_chat(200, words=5), say("the new question", answer=None)]
    messages = render(fmt, turns)
    result = cut_history(messages, budgeted(None, 64_000))
    assert result.messages == messages and result.dropped_turns == 0 and not result.capped


@pytest.mark.parametrize("fmt", FORMATS)
def test_past_the_budget_the_oldest_go_and_the_rest_fits(fmt: str) -> None:
    turns = [*long_chat(60), say("the new question", answer=None)]
    budget = 2_000
    messages = render(fmt, turns)
    result = cut_history(messages, budgeted(None, budget))
    assert result.capped and result.dropped_turns > 0
    _, kept = split_turns(result.messages)
    assert kept[-1] == split_turns(render(fmt, turns[-1:]))[1][0]  # the current turn whole
    assert sum(turn_tokens(t) for t in kept[:-1]) <= budget
    # Large steps: at least half the budget's worth of turns went at once.
    _, whole = split_turns(messages)
    dropped = whole[: result.dropped_turns]
    assert sum(turn_tokens(t) for t in dropped) >= sum(turn_tokens(t) for t in whole[:-1]) - budget


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_budgeted_cut_moves_in_steps_so_requests_extend_each_other(fmt: str) -> None:
    budget = 2_000
    turns = long_chat(80)
    firsts = []
    for n in range(1, len(turns)):
        messages = render(fmt, [*turns[:n], say("now", answer=None)])
        firsts.append(cut_history(messages, budgeted(None, budget)).dropped_turns)
    # The first kept turn never moves back, and moves only now and then, by several turns.
    assert firsts == sorted(firsts)
    moves = [b - a for a, b in itertools.pairwise(firsts) if b != a]
    assert moves and len(moves) <= len(firsts) // 4
    assert min(moves) >= 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_budget_bounds_a_long_stretch_since_the_memory_too(fmt: str) -> None:
    turns = [*long_chat(60), say("now", answer=None)]
    covered = cut_history(render(fmt, turns), budgeted(50, 2_000))
    unbounded = cut_history(render(fmt, turns), HistoryWindow(keep_turns=50))
    assert unbounded.dropped_turns == 10
    assert covered.dropped_turns > 10 and covered.capped


def test_a_bad_budget_is_a_configuration_error_naming_it() -> None:
    from stm_memory import ConfigurationError
    from stm_memory.config import Limits

    for bad in (0, -5, "64k", 1.5, True):
        with pytest.raises(ConfigurationError, match="history_token_budget"):
            Limits(history_token_budget=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="STM_HISTORY_TOKEN_BUDGET"):
        Limits.from_env({"STM_HISTORY_TOKEN_BUDGET": "lots"})
    assert Limits.from_env({"STM_HISTORY_TOKEN_BUDGET": "8000"}).history_token_budget == 8000


# ------------------------------------------------------------------------------------
# The history window the engine computes (how many earlier turns a turn may send):
# after refreshes, with no memory, after expiry, a cleared summary, a cleared channel
# (also queued while the database is down), a restart in a new process, and two hosts.


def keep(mem: ShortTermMemory, scope: Scope = SERVER) -> int | None:
    window = mem.build_context(mem.begin_turn(scope, provider="openai")).history
    assert window is not None
    return window.keep_turns


def sent(mem: ShortTermMemory, history: int, scope: Scope = SERVER) -> list[Any]:
    """What a request carries of ``history`` earlier turns plus a new message."""
    messages = render("openai", [*(say(f"q{i}", answer=f"a{i}") for i in range(history))])
    messages.append({"role": "user", "content": "now"})
    context = mem.build_context(mem.begin_turn(scope, provider="openai"))
    return [m for m in context.apply(messages) if m["role"] != "system"]


@pytest.mark.parametrize("scope", [SERVER, DM], ids=["server", "dm"])
def test_the_window_is_the_turns_since_the_refresh_plus_the_overlap(
    make_mem: MemFactory, scope: Scope
) -> None:
    mem = make_mem()
    for _ in range(3):
        turn(mem, scope)
    assert keep(mem, scope) is None  # no memory yet: only the safety cap
    refresh(mem, scope, "Ann and Bob planned the heist.")
    assert keep(mem, scope) == 1  # the refresh turn itself, as overlap
    turn(mem, scope)
    turn(mem, scope)
    assert keep(mem, scope) == 3
    contents = [m["content"] for m in sent(mem, 20, scope)]
    assert contents == ["q17", "a17", "q18", "a18", "q19", "a19", "now"]


def test_the_overlap_is_configurable(make_mem: MemFactory) -> None:
    mem = make_mem(history_overlap=0)
    refresh(mem, SERVER, "s")
    assert keep(mem) == 0
    assert [m["content"] for m in sent(mem, 5)] == ["now"]


def test_an_expired_memory_keeps_the_turns_it_covered_forgotten(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "A secret plan.")
    turn(mem, SERVER)
    fake_clock.advance(hours=25)
    context = mem.build_context(mem.begin_turn(SERVER, provider="openai"))
    assert context.content is None or "secret" not in context.content
    assert context.history is not None and context.history.keep_turns == 2


def test_a_cleared_summary_keeps_the_turns_it_covered_forgotten(make_mem: MemFactory) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "A secret plan.")
    turn(mem, SERVER)
    mem.clear_summary(SERVER)
    assert keep(mem) == 2


def test_a_cleared_channel_starts_afresh(make_mem: MemFactory) -> None:
    mem = make_mem(history_overlap=2)
    refresh(mem, SERVER, "before the reset")
    turn(mem, SERVER)
    mem.clear_channel("c1")
    assert keep(mem) == 0
    assert [m["content"] for m in sent(mem, 8)] == ["now"]
    turn(mem, SERVER)
    assert keep(mem) == 1
    turn(mem, SERVER)
    assert keep(mem) == 2
    # A refresh right after the reset: the overlap never reaches across it.
    mem.clear_channel("c1")
    refresh(mem, SERVER, "after the reset")
    assert keep(mem) == 1  # min(0 + overlap 2, 1 turn since the reset)


def test_a_reset_reaches_other_users_and_personas_of_the_channel(make_mem: MemFactory) -> None:
    mem = make_mem()
    other = Scope(channel_id="c1", user_id="u2", server_id="g1", persona_id="bard")
    turn(mem, other)
    mem.clear_channel("c1")
    assert keep(mem, other) == 0
    assert keep(mem, Scope(channel_id="c2", user_id="u2", server_id="g1")) is None


def test_a_reset_queued_while_the_database_is_down_still_starts_afresh(
    make_mem: MemFactory,
) -> None:
    mem = make_mem(timeout=0.2)
    refresh(mem, SERVER, "before")
    with SqliteWriteLock(make_mem.sqlite_path):
        assert mem.clear_channel("c1") == 0  # queued
        assert keep(mem) == 0
        turn(mem, SERVER)  # the new entry starts counting from the reset
        assert keep(mem) == 1
    assert mem.flush() >= 1
    assert keep(mem) == 1
    assert mem._store.channel_reset_at("c1") is not None


def test_the_window_survives_a_restart_in_a_new_process(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "We agreed to meet on Friday.")
    turn(mem, SERVER)
    turn(mem, SERVER)
    mem.clear_channel("c2")
    turn(mem, Scope(channel_id="c2", user_id="u1", server_id="g1"))
    mem.close()
    common: dict[str, Any] = {
        "database_url": make_mem.database_url("sqlite"),
        "outbox_path": str(make_mem.outbox_path),
        "now": fake_clock.advance(minutes=5).isoformat(),
    }
    for cache in ("same", "empty"):
        cache_dir = make_mem.cache_dir if cache == "same" else make_mem.tmp_path / "fresh"
        c1 = run_worker(
            "history_window", cache_dir=str(cache_dir), scope=scope_dict(SERVER), **common
        )
        assert c1["keep_turns"] == 3, cache
        c2_scope = scope_dict(Scope(channel_id="c2", user_id="u1", server_id="g1"))
        c2 = run_worker("history_window", cache_dir=str(cache_dir), scope=c2_scope, **common)
        assert c2["keep_turns"] == 1, cache


@pytest.mark.postgres
@pytest.mark.redis
def test_two_hosts_agree_on_the_window(make_mem: MemFactory) -> None:
    a = make_mem("postgres", "redis", outbox_path=make_mem.tmp_path / "a.sqlite3")
    b = make_mem("postgres", "redis", outbox_path=make_mem.tmp_path / "b.sqlite3")
    refresh(a, SERVER, "summary")
    for host in (a, b, a, b):
        turn(host, SERVER)
    assert keep(a) == keep(b) == 5
    b.clear_channel("c1")
    assert keep(a) == 0
    turn(a, SERVER)
    assert keep(b) == 1


@pytest.mark.postgres
def test_two_hosts_on_postgres_see_a_reset_without_a_shared_cache(make_mem: MemFactory) -> None:
    a = make_mem("postgres", cache_dir=make_mem.tmp_path / "cache-a")
    b = make_mem(
        "postgres",
        cache_dir=make_mem.tmp_path / "cache-b",
        outbox_path=make_mem.tmp_path / "b.sqlite3",
    )
    a.clear_channel("c1")
    assert keep(b) == 0


def test_a_forgotten_users_dm_starts_afresh(make_mem: MemFactory) -> None:
    mem = make_mem()
    refresh(mem, DM, "what the user said in the DM")
    turn(mem, DM)
    assert keep(mem, DM) == 2
    mem.clear_user(DM.user_id)
    # The caller's transcript of the DM is not sent to the model again.
    assert keep(mem, DM) == 0
    assert [m["content"] for m in sent(mem, 6, DM)] == ["now"]
