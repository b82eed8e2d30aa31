"""The cost/recall knob (SPEC §6): its measured frontier is what the docs show, and the
default is the point that keeps recall."""

from __future__ import annotations

from pathlib import Path

from benchmarks.frontier import DEFAULT, DEFAULT_WAIT, PLOT, RESULTS, Row, load, table

ROOT = Path(__file__).resolve().parents[2]
ROWS = load(RESULTS / "frontier.json")


def test_the_docs_show_the_measured_frontier() -> None:
    assert ROWS, "benchmarks/results/frontier.json is empty: run python -m benchmarks.frontier"
    page = (ROOT / "docs" / "cost-recall.md").read_text("utf-8")
    assert table(ROWS) in page, "docs/cost-recall.md's table is not frontier.json's"
    assert (RESULTS / "frontier.md").read_text("utf-8") == table(ROWS)
    assert PLOT.is_file()


def test_the_default_is_marked_and_keeps_recall() -> None:
    (default,) = (r for r in ROWS if (r.cadence, r.wait) == DEFAULT)
    assert f"| {default.cadence} (default) | {default.wait} |" in table(ROWS)
    for row in ROWS:
        # No point recalls more than the default, at either length of conversation.
        assert row.perfect.rate <= default.perfect.rate, row
        assert row.perfect_short.rate <= default.perfect_short.rate, row
        assert row.seeds == default.seeds, row


def test_the_option_trades_bill_for_recall() -> None:
    # Along refresh_cadence (the briefings' wait at its default), a point that bills
    # more than another also recalls at least as much: the frontier, not a free lunch
    # left on the table.
    option: list[Row] = sorted((r for r in ROWS if r.wait == DEFAULT_WAIT), key=lambda r: r.cadence)
    assert len(option) >= 3
    (default,) = (r for r in option if r.cadence == DEFAULT[0])
    cheaper = [r for r in option if r.warm_vs_best_peer < default.warm_vs_best_peer]
    assert cheaper, "no cadence bills less than the default: the option moves nothing"
    assert all(r.perfect.rate < 1 or r.perfect_short.rate < 1 for r in cheaper), cheaper
