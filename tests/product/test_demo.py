"""The offline demo: a real loop, the offline model, the embedded default, and a printout
whose every number and sentence is the run's.

The claims are checked against numbers this file recomputes from the request bodies the
run sent (``DemoReport.rows[i].requests``, ``.full_request``), not against the demo's
own per-turn fields, so a demo that summed, counted or priced wrongly fails here too.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest
from rich.console import Console

from stm_memory.cli.commands import demo as demo_command
from stm_memory.cli.demo import (
    AGENT_SYSTEM,
    CHANNELS,
    COLD,
    FIVE_MINUTES,
    QUESTIONS,
    UNKNOWN,
    WARM,
    Answer,
    DemoReport,
    DemoTurn,
    bills,
    run_conversation,
    run_demo,
    script,
)
from stm_memory.prompt.render import CONTENT_HEADER, OTHER_CHANNELS, THIS_CHANNEL
from stm_memory.testing.prompt_cache import (
    CACHE_PROFILES,
    PromptCache,
    count_text_tokens,
    request_parts,
)
from stm_memory.tool.turn import TOOL_NAME

README = Path(__file__).resolve().parents[2] / "README.md"


def tokens(body: Mapping[str, Any]) -> int:
    return sum(p.tokens for p in request_parts(body, provider="openai_chat"))


def texts(body: Mapping[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in body["messages"]]


def flat(text: str) -> str:
    """Printed text with the panels' borders and line wrapping taken out."""
    lines = [line.strip().strip("│").strip() for line in text.splitlines()]
    return " ".join(" ".join(lines).split())


def pct(ours: int, full: int) -> str:
    return f"{1 - ours / full:.0%} fewer" if ours <= full else f"{ours / full - 1:.0%} more"


def runs(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1–3, 7"``: consecutive turns as one span."""
    groups: list[list[int]] = []
    for n in numbers:
        if groups and n == groups[-1][-1] + 1:
            groups[-1].append(n)
        else:
            groups.append([n])
    return ", ".join(str(g[0]) if len(g) == 1 else f"{g[0]}–{g[-1]}" for g in groups)


def claims_disagreeing(printed: str, report: DemoReport) -> list[str]:
    """Every claim of the printout that the run's request bodies do not bear out."""
    text = flat(printed)
    rows = report.rows
    ours = [sum(tokens(b) for b in r.requests) for r in rows]
    full = [tokens(r.full_request) for r in rows if r.full_request is not None]
    schema = sum(
        tokens(b) - tokens({k: v for k, v in b.items() if k != "tools"})
        for r in rows
        for b in r.requests
    )
    larger = [r.number for r, o, f in zip(rows, ours, full, strict=True) if o > f]
    third = max(1, len(rows) // 3)
    saving_first = fmean(full[:third]) - fmean(ours[:third])
    saving_last = fmean(full[-third:]) - fmean(ours[-third:])
    # A memory write is a turn after which the channel's summary changed.
    before: dict[str, str] = {}
    writes = 0
    for r in rows:
        writes += r.memory != before.get(r.channel, "")
        before[r.channel] = r.memory
    briefed = sum(any(OTHER_CHANNELS in t for b in r.requests for t in texts(b)) for r in rows)
    expected = [
        f"carried {sum(ours):,} tokens with stm-memory",
        f"(the memory tool's schema included: {schema:,} of them)",
        f"and {sum(full):,} with the full history: {pct(sum(ours), sum(full))}.",
        f"The last turn sent {ours[-1]:,} tokens instead of {full[-1]:,}.",
        f"wrote the memory {writes} times",
        f"{len(rows)} turns took {sum(len(r.requests) for r in rows)} model calls",
        f"{briefed} of {len(rows)} requests carried briefings",
        "The saving grew over the run"
        if saving_last > saving_first
        else "The saving did not grow over the run",
    ]
    if larger:
        expected.append(f"In {len(larger)} of {len(rows)} turns ({runs(larger)}) the request")
    else:
        expected.append("No request with memory was larger")
    problems = [claim for claim in expected if claim not in text]
    for r, o, f in zip(rows, ours, full, strict=True):
        row = re.search(rf"│ +{r.number} │ {r.channel} +│[^│]*│ +(\d+) │ +(\d+) │", printed)
        if row is None or (int(row[1]), int(row[2])) != (f, o):
            problems.append(f"table row {r.number}: expected full {f}, sent {o}")
    # What no run can claim: the old demo printed these whatever it measured.
    problems += [s for s in ("the gap grows with every turn",) if s in text]
    return problems


def priced(rows: Sequence[DemoTurn], profile: str) -> tuple[float, float]:
    """Ours (input as billed + memory output at 4x) and the full history's, recomputed."""
    if profile == COLD:
        output = sum(r.memory_output for r in rows) * 4
        return sum(tokens(b) for r in rows for b in r.requests) + output, sum(
            tokens(r.full_request) for r in rows if r.full_request
        )
    cache_profile = CACHE_PROFILES[profile]
    ours_cache, full_cache = PromptCache(cache_profile), PromptCache(cache_profile)
    ours = full = 0.0
    for r in rows:
        for body in r.requests:
            ours += ours_cache.observe(body, at=r.at).cost(cache_profile)
        ours += r.memory_output * cache_profile.output_multiplier
        assert r.full_request is not None
        full += full_cache.observe(r.full_request, at=r.at).cost(cache_profile)
    return ours, full


def cost_claims_disagreeing(printed: str, report: DemoReport) -> list[str]:
    """Each regime's row and verdict, recomputed from its run's request bodies."""
    text = flat(printed)
    problems = []
    for regime in report.regimes:
        ours, full = priced(regime.rows, regime.bill.profile)
        row = f"{regime.label} {ours:,.0f} {full:,.0f} {ours / full:.2f}x"
        if row not in text:
            problems.append(f"no row {row!r}")
        verdict = "costs less" if ours < full else "costs more"
        if f"{regime.label}: stm-memory {verdict} ({ours / full:.2f}x)." not in text:
            problems.append(f"{regime.label}: the verdict is not {verdict!r}")
    return problems


def knew(answer: str, detail: str) -> bool:
    return detail.casefold() in answer.casefold()


def held(body: Mapping[str, Any], detail: str) -> bool:
    """Whether the request put ``detail`` before the model (its own replies aside)."""
    said = [
        t
        for m, t in zip(body["messages"], texts(body), strict=True)
        if m.get("role") not in ("assistant", "tool")
    ]
    return detail.casefold() in " ".join(" ".join(said).split()).casefold()


def recall_claims_disagreeing(printed: str, report: DemoReport) -> list[str]:
    """The recall panel and the first verdict, recomputed from the answers' requests."""
    text = flat(printed)
    problems = []
    ours = full = 0
    for a in report.answers:
        detail = a.question.answer
        # The stand-in answers from what its request held, and from nothing else.
        for request, answer in ((a.memory_request, a.memory), (a.full_request, a.full)):
            expected = f"It is {detail}." if held(request, detail) else UNKNOWN
            if answer != expected:
                problems.append(f"{a.question.text}: answered {answer!r}, held {expected!r}")
        ours += knew(a.memory, detail)
        full += knew(a.full, detail)
    n = len(report.answers)
    first = f"stm-memory answered {ours} of {n} and the full history {full} of {n}."
    if first not in text:
        problems.append(f"no {first!r}")
    story = text.split(" what happened ", 1)[1].lstrip("─╮ ")
    if not story.startswith("Asked about details settled in another channel"):
        problems.append("the first verdict is not about recall")
    return problems


@pytest.fixture(scope="module", params=[60, 30], ids=lambda n: f"{n}-turns")
def printed_run(request: pytest.FixtureRequest) -> tuple[str, DemoReport]:
    console = Console(record=True, width=100)
    report = run_demo(console, turns=request.param)
    return console.export_text(), report


def test_script_is_multi_channel_and_sized() -> None:
    turns = script(30)
    assert len(turns) == 30
    assert {channel for channel, *_ in turns} == set(CHANNELS)


def test_conversation_updates_memory_and_saves_tokens_late(tmp_path: Path) -> None:
    run = run_conversation(tmp_path, turns=45)
    rows, mem = run.rows, run.mem
    try:
        updates = [r for r in rows if r.tool_called]
        # refresh_cadence=4: the model is nudged and updates every few turns per channel.
        assert len(updates) >= 6
        assert all(r.memory.startswith("Recent conversation:") for r in updates)
        # The memory call's arguments are what the summary now holds, counted once.
        for r in updates:
            assert r.memory_output == count_text_tokens(
                json.dumps({"summary": r.memory}, ensure_ascii=False)
            )
        # The caller passes each channel's whole transcript: once summaries exist, late
        # turns send far less than the growing full history, and no more than early ones.
        late = rows[-5:]
        assert all(r.tokens_memory < 0.8 * r.tokens_full for r in late)
        assert (
            max(r.tokens_memory for r in rows[-15:])
            <= max(r.tokens_memory for r in rows[:15]) * 1.6
        )
        assert mem.stats()["queued_writes"] == 0
    finally:
        mem.close()


def test_every_request_counts_the_tool_schema(tmp_path: Path) -> None:
    run = run_conversation(tmp_path, turns=6)
    rows = run.rows
    run.mem.close()
    for r in rows:
        [body] = r.requests
        assert TOOL_NAME in json.dumps(body["tools"])
        without_tools = tokens({"messages": body["messages"]})
        assert r.tokens_memory == tokens(body) > without_tools
        assert r.tool_tokens == r.tokens_memory - without_tools


def test_the_printed_claims_are_the_runs_numbers(printed_run: tuple[str, DemoReport]) -> None:
    printed, report = printed_run
    assert claims_disagreeing(printed, report) == []


def test_a_claim_the_run_does_not_bear_out_is_caught(printed_run: tuple[str, DemoReport]) -> None:
    """The check above is not vacuous: a printout with one number changed fails it."""
    printed, report = printed_run
    total = f"{report.figures.ours:,} tokens with stm-memory"
    wrong = printed.replace(total, f"{report.figures.ours + 1:,} tokens with stm-memory")
    assert claims_disagreeing(wrong, report) != []
    grew = "The saving grew" if "The saving grew" in printed else "The saving did not grow"
    flipped = "The saving did not grow" if grew == "The saving grew" else "The saving grew"
    assert claims_disagreeing(printed.replace(grew, flipped), report) != []


def test_the_cost_panel_is_the_runs_bill(printed_run: tuple[str, DemoReport]) -> None:
    printed, report = printed_run
    assert "what it costs" in printed
    assert cost_claims_disagreeing(printed, report) == []
    # Priced behind the agent-sized prompt (over 2,000 tokens): every request cacheable.
    for regime in report.regimes:
        first = regime.rows[0].full_request
        assert first is not None and first["messages"][0]["content"] == AGENT_SYSTEM
    assert count_text_tokens(AGENT_SYSTEM) >= 2000
    # The regimes that decide the bill, each verdict naming its own.
    labels = [r.label for r in report.regimes]
    n = len(report.rows)
    assert labels == [
        f"{n} turns, cache warm (24 h)",
        f"{n} turns, cache lapsed (5 minutes)",
        f"{n} turns, no cache",
        "300 turns, cache warm (24 h)",
    ]
    assert [r.bill.profile for r in report.regimes] == [WARM, FIVE_MINUTES, COLD, WARM]
    assert len(report.regimes[-1].rows) == 300


def test_where_it_costs_more_it_says_what_it_bought(
    printed_run: tuple[str, DemoReport],
) -> None:
    printed, report = printed_run
    text = flat(printed)
    dearer = [r.label for r in report.regimes if r.bill.ours >= r.bill.full]
    bought = sum(
        knew(a.memory, a.question.answer) and not knew(a.full, a.question.answer)
        for a in report.answers
    )
    if dearer and bought:
        assert f"Where it costs more ({'; '.join(dearer)}), the bill bought" in text
        assert f"stm-memory answered {bought} of the {len(report.answers)} questions" in text
    elif dearer:
        assert "it bought no answer here that the full history lacked" in text
    else:
        assert "It costs less in every regime priced here." in text
    # A long conversation is where the memory pays, warm cache or not.
    assert report.regimes[-1].ratio < 1


def test_more_caching_never_costs_more(printed_run: tuple[str, DemoReport]) -> None:
    _, report = printed_run
    # The same requests priced with more caching never cost more. (The printed warm
    # row prices another run, whose caller asked for the day's retention: its turns
    # decided what to show by it, so its requests differ.)
    warm, five, cold = bills(report.regimes[1].rows)
    assert cold.profile == COLD
    assert 0 < warm.ours <= five.ours <= cold.ours
    assert 0 < warm.full <= five.full <= cold.full
    assert 0.0 == cold.cached_share <= five.cached_share <= warm.cached_share <= 1.0
    for regime in report.regimes:
        assert bills(regime.rows, (regime.bill.profile,)) == [regime.bill]


def test_the_recall_part_is_the_runs_answers(printed_run: tuple[str, DemoReport]) -> None:
    printed, report = printed_run
    assert [a.question for a in report.answers] == list(QUESTIONS)
    assert recall_claims_disagreeing(printed, report) == []
    # First: the recall panel comes before the cost panel.
    assert printed.index("what the memory is for") < printed.index("what it costs")
    if len(report.rows) >= 60:
        # By then both details were said, in one channel each: only the memory knows.
        for a in report.answers:
            assert knew(a.memory, a.question.answer), a
            assert not knew(a.full, a.question.answer), a


def test_a_recall_claim_the_run_does_not_bear_out_is_caught(
    printed_run: tuple[str, DemoReport],
) -> None:
    printed, report = printed_run
    ours = sum(knew(a.memory, a.question.answer) for a in report.answers)
    said = f"stm-memory answered {ours} of"
    assert recall_claims_disagreeing(
        printed.replace(said, f"stm-memory answered {ours + 1} of"), report
    )
    wrong = Answer(
        report.answers[0].question,
        memory=report.answers[0].full,
        full=report.answers[0].memory,
        said=True,
        memory_request=report.answers[0].memory_request,
        full_request=report.answers[0].full_request,
    )
    swapped = DemoReport(report.rows, report.figures, answers=(wrong, *report.answers[1:]))
    assert recall_claims_disagreeing(printed, swapped) != []


def test_one_late_request_is_shown_as_sent(printed_run: tuple[str, DemoReport]) -> None:
    printed, report = printed_run
    shown = report.shown
    assert shown is not None and shown.number > len(report.rows) // 2
    [body] = shown.requests
    sent = texts(body)
    # The memory block, the briefings and the nudge, in full, as the model read them.
    injected = [p for t in sent for p in t.split("\n\n") if p.startswith(CONTENT_HEADER)]
    assert any(THIS_CHANNEL in p for p in injected)
    assert any(OTHER_CHANNELS in p for p in injected)
    text = flat(printed)
    for paragraph in injected:
        assert " ".join(paragraph.split()) in text
    # The cut, counted from the body: the dialogue the request carried of what was passed.
    carried = sum(
        1
        for m, t in zip(body["messages"][1:], sent[1:], strict=True)
        if not t.startswith(CONTENT_HEADER) or m.get("role") != "system"
    )
    assert carried < shown.passed
    assert f"The caller passed {shown.passed} messages" in text
    assert f"the request carried {carried}. The other {shown.passed - carried}" in text


def test_the_offline_model_is_labelled_a_stand_in(printed_run: tuple[str, DemoReport]) -> None:
    printed, _ = printed_run
    text = flat(printed)
    assert "offline stand-in" in text
    assert "memory written by the model" not in text
    assert re.findall(r"#[\w-]+: memory written by the offline stand-in", printed)


def test_the_readme_describes_the_default_run() -> None:
    default = inspect.signature(run_demo).parameters["turns"].default
    assert inspect.signature(demo_command).parameters["turns"].default == default
    readme = README.read_text(encoding="utf-8")
    assert f"make demo   # offline: a {default}-turn conversation in {len(CHANNELS)} channels" in (
        readme
    )


def test_demo_output_restart_and_plot(tmp_path: Path) -> None:
    console = Console(record=True, width=1000)
    plot = tmp_path / "tokens.png"
    report = run_demo(console, plot=str(plot), turns=12)
    text = console.export_text()
    assert "after a restart" in text and "read back from SQL" in text
    assert report.hydrated and report.hydrated in text
    assert "read it back from SQL" in text
    assert plot.stat().st_size > 10_000
    assert len(report.rows) == 12


def test_the_demo_table_fits_an_80_column_terminal() -> None:
    console = Console(record=True, width=80)
    report = run_demo(console, turns=12)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    # Every turn is one table row showing both token counts.
    for r in report.rows:
        row = next(line for line in lines if line.startswith(f"│ {r.number:>2} │"))
        assert f" {r.tokens_full} " in row and f" {r.tokens_memory} " in row
