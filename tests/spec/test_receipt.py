"""The bill, as billed (SPEC §6): every turn reads the usage the API reported, prices
it and the full history's request beside it with the same rates, keeps the totals per
channel and day with the turn's count, and treats a cache that missed where a hit was
predicted as lapsed at the next decision.

Through a loop and the real OpenAI SDK client against the fake provider, run in-process
(its prompt cache is the one the tests evict), and the ``stm-memory savings`` command.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import openai
import pytest
from helpers.memory import refresh
from typer.testing import CliRunner

from stm_memory import DayTotals, Scope, ShortTermMemory
from stm_memory.cli.commands import app, savings_verdict
from stm_memory.kit.replies import TurnResult
from stm_memory.model.rates import CACHE_PROFILES
from stm_memory.model.receipt import (
    RECEIPT_DAYS,
    TurnBill,
    add_to_receipt,
    bill_turn,
    full_history_cost,
)
from stm_memory.testing import FrozenClock
from stm_memory_openai import OpenAIChatLoop
from tests.fakeprovider import FakeProviderServer

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SYSTEM = "You plan rail journeys in Japan; answer briefly and keep track of every leg. " * 60
OPENAI = CACHE_PROFILES["openai-gpt-5-24h"]

# -- pricing a full-history caller ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "new", "calls", "warm", "profile", "cost"),
    [
        # Warm: what it sent before is read (in 128-token steps), the rest is new.
        (3000, 200, 1, True, "openai-gpt-5-24h", 2688 * 0.1 + 312),
        # Cold: all of it at the input price (OpenAI writes for free before gpt-5.6) ...
        (3000, 200, 1, False, "openai-gpt-5-24h", 3000.0),
        # ... or at the write rate (gpt-5.6: 1.25x; Anthropic's 1 h: 2x).
        (3000, 200, 1, False, "openai-gpt-5.6", 3750.0),
        (3000, 200, 1, True, "anthropic-sonnet-1h", 2800 * 0.1 + 200 * 2.0),
        # A tool step reads the request before it.
        (3000, 200, 2, True, "openai-gpt-5-24h", 2688 * 0.1 + 312 + 300.0),
        # Under the minimum nothing is cached.
        (900, 100, 2, True, "openai-gpt-5-24h", 1800.0),
    ],
)
def test_the_full_history_is_priced_as_it_is_billed(
    tokens: int, new: int, calls: int, warm: bool, profile: str, cost: float
) -> None:
    priced = full_history_cost(
        tokens=tokens, new=new, calls=calls, warm=warm, profile=CACHE_PROFILES[profile]
    )
    assert priced == pytest.approx(cost)


def bill(**overrides: object) -> TurnBill:
    given: dict[str, object] = {
        "profile": OPENAI,
        "calls": 1,
        "input_tokens": 2000,
        "cached_tokens": 1536,
        "written_tokens": 0,
        "placed_delta": 900,
        "new_tokens": 100,
        "warm": True,
        "predicted_hit": True,
        "first_cached": 1536,
    }
    return bill_turn(**{**given, **overrides})  # type: ignore[arg-type]


def test_ours_is_the_apis_count_and_the_full_history_ours_plus_what_was_left_out() -> None:
    b = bill()
    assert b.cost == pytest.approx(464 + 1536 * 0.1)
    assert b.full_tokens == 2900
    assert b.full_cost == pytest.approx(2688 * 0.1 + 212)
    assert b.saved == pytest.approx(b.full_cost - b.cost)
    assert not b.missed


@pytest.mark.parametrize(
    ("predicted", "first_cached", "missed"),
    [(True, 0, True), (True, 1024, False), (None, 0, False), (True, None, False)],
)
def test_a_miss_is_a_predicted_hit_billed_as_none(
    predicted: bool | None, first_cached: int | None, missed: bool
) -> None:
    assert bill(predicted_hit=predicted, first_cached=first_cached).missed is missed


def test_a_receipt_keeps_a_day_per_day_and_a_bounded_number_of_days() -> None:
    receipt: dict[str, DayTotals] = {}
    start = date(2026, 1, 1)
    for n in range(RECEIPT_DAYS + 5):
        receipt = add_to_receipt(receipt, start + timedelta(days=n), bill())
        receipt = add_to_receipt(receipt, start + timedelta(days=n), bill(first_cached=0))
    assert len(receipt) == RECEIPT_DAYS
    assert min(receipt) == (start + timedelta(days=5)).isoformat()
    day = receipt[max(receipt)]
    assert (day.turns, day.calls, day.input_tokens, day.missed) == (2, 2, 4000, 1)
    assert day.cost == pytest.approx(2 * bill().cost)


def test_the_verdict_says_plainly_when_the_memory_cost_more() -> None:
    cheaper = DayTotals(turns=3, cost=600.0, full_cost=1000.0)
    dearer = DayTotals(turns=3, cost=1200.0, full_cost=1000.0)
    assert savings_verdict(cheaper).startswith("the memory saved 400")
    assert "0.60x" in savings_verdict(cheaper)
    assert savings_verdict(dearer).startswith("the memory cost 200 input-token units more")
    assert savings_verdict(DayTotals()) == "no turn was billed through the memory yet"


# -- through a loop, the SDK client and the fake provider ------------------------------------


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(cache_profile="openai-gpt-5-24h") as srv:
        yield srv


@pytest.fixture
def client(server: FakeProviderServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0) as c:
        yield c


def open_engine(root: Path, clock: FrozenClock, cache: str = "cache") -> ShortTermMemory:
    return ShortTermMemory.from_url(
        f"sqlite:///{root / 'stm.db'}", cache_dir=root / cache, clock=clock
    )


class Conversation:
    def __init__(self, memory: ShortTermMemory, client: openai.OpenAI, server: FakeProviderServer):
        self.loop = OpenAIChatLoop(client, memory, model="gpt-5-mini", prompt_cache_retention="24h")
        self.server = server
        self.history: list[object] = []

    def say(self, text: str) -> TurnResult:
        self.server.script.reply_text(f"Noted: {text}")
        self.history.append({"role": "user", "content": text})
        result = self.loop.run_turn(SCOPE, self.history, system=SYSTEM)
        self.history = list(result.messages)
        return result


def test_each_turn_is_billed_from_the_reported_usage_and_kept_per_day(
    tmp_path: Path, client: openai.OpenAI, server: FakeProviderServer
) -> None:
    clock = FrozenClock()
    with open_engine(tmp_path, clock) as memory:
        talk = Conversation(memory, client, server)
        results = []
        for i in range(6):
            results.append(talk.say(f"Leg {i}: Kyoto to Nara on train {i * 7}."))
            clock.advance(timedelta(minutes=3))
        bills = [r.bill for r in results]
        assert all(b is not None for b in bills)
        for result, b in zip(results, bills, strict=True):
            assert b is not None
            usage = result.usage
            assert (b.input_tokens, b.cached_tokens) == (
                usage.input_tokens,
                usage.cached_input_tokens,
            )
            uncached = usage.input_tokens - usage.cached_input_tokens
            assert b.cost == pytest.approx(uncached + usage.cached_input_tokens * 0.1)
        # Nothing was cut yet: the full history's request is ours, token for token.
        assert bills[1] is not None and bills[1].full_tokens == bills[1].input_tokens
        day = memory.get(SCOPE).receipt[clock().date().isoformat()]  # type: ignore[union-attr]
        assert day.turns == 6
        assert day.cost == pytest.approx(sum(b.cost for b in bills if b is not None), abs=0.01)
    # Durable: another process (a new live cache over the same database) reads it.
    with open_engine(tmp_path, clock, cache="cache-2") as again:
        total = again.savings(server_id="g1").total
        assert total.turns == 6
        assert total.input_tokens == sum(r.usage.input_tokens for r in results)


def test_a_cache_that_missed_where_a_hit_was_predicted_counts_as_lapsed(
    tmp_path: Path,
    client: openai.OpenAI,
    server: FakeProviderServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FrozenClock()
    with open_engine(tmp_path, clock) as memory:
        talk = Conversation(memory, client, server)
        for i in range(3):
            assert talk.say(f"Leg {i}: Kyoto to Nara.").bill is not None
            clock.advance(timedelta(minutes=3))
        server.reset()  # the provider evicted every cached prefix
        with caplog.at_level(logging.INFO, logger="stm_memory"):
            missed = talk.say("Leg 3: Nara to Osaka.")
        assert missed.decision is not None and missed.decision.rule == "unchanged"
        assert missed.bill is not None and missed.bill.predicted_hit and missed.bill.missed
        assert [r for r in caplog.records if "billed no cached input" in r.getMessage()]
        # A newer memory: without the miss a warm cache would weigh holding it.
        refresh(memory, SCOPE, "Ann rides Kyoto, Nara, Osaka by train.")
        clock.advance(timedelta(minutes=3))
        after = talk.say("Leg 4: Osaka back to Kyoto.")
        assert after.decision is not None and after.decision.rule == "lapsed"
        assert after.bill is not None and not after.bill.missed
        assert memory.get(SCOPE).receipt[clock().date().isoformat()].missed == 1  # type: ignore[union-attr]


def test_the_savings_command_reads_the_receipts(
    tmp_path: Path, client: openai.OpenAI, server: FakeProviderServer
) -> None:
    clock = FrozenClock()
    with open_engine(tmp_path, clock) as memory:
        talk = Conversation(memory, client, server)
        for i in range(3):
            talk.say(f"Leg {i}: Kyoto to Nara.")
        expected = memory.savings().total
    env = {
        "STM_DATABASE_URL": f"sqlite:///{tmp_path / 'stm.db'}",
        "STM_CACHE_DIR": str(tmp_path / "c"),
    }
    runner = CliRunner()
    shown = runner.invoke(app, ["savings", "--server", "g1", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["total"]["turns"] == 3
    assert data["total"]["cost"] == pytest.approx(expected.cost)
    assert data["verdict"] == savings_verdict(expected)
    later = runner.invoke(app, ["savings", "--since", "2999-01-01", "--json"], env=env)
    assert json.loads(later.output)["total"]["turns"] == 0
    bad = runner.invoke(app, ["savings", "--since", "yesterday"], env=env)
    assert bad.exit_code == 2 and "YYYY-MM-DD" in bad.output
    table = runner.invoke(app, ["savings"], env=env)
    assert table.exit_code == 0 and "full history" in table.output


def test_the_savings_command_on_an_empty_store(tmp_path: Path) -> None:
    env = {
        "STM_DATABASE_URL": f"sqlite:///{tmp_path / 'stm.db'}",
        "STM_CACHE_DIR": str(tmp_path / "cache"),
    }
    with open_engine(tmp_path, FrozenClock()):
        pass  # a store with its tables and no row
    shown = CliRunner().invoke(app, ["savings"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "no turn was billed through the memory yet" in shown.output
