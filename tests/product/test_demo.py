"""The offline demo: a real loop, the offline model, the embedded default."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from stm_memory.cli.demo import CHANNELS, bills, run_conversation, run_demo, script


def test_script_is_multi_channel_and_sized() -> None:
    turns = script(30)
    assert len(turns) == 30
    assert {channel for channel, *_ in turns} == set(CHANNELS)


def test_conversation_updates_memory_and_saves_tokens_late(tmp_path: Path) -> None:
    rows, mem, _clock = run_conversation(tmp_path, turns=45)
    try:
        updates = [r for r in rows if r.tool_called]
        # refresh_cadence=4: the model is nudged and updates every few turns per channel.
        assert len(updates) >= 6
        assert all(r.memory.startswith("Recent conversation:") for r in updates)
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


def test_demo_output_restart_and_plot(tmp_path: Path) -> None:
    console = Console(record=True, width=1000)
    plot = tmp_path / "tokens.png"
    rows = run_demo(console, plot=str(plot), turns=30)
    text = console.export_text()
    assert "after a restart" in text and "hydrated from SQL" in text
    assert "zero extra LLM calls" in text
    assert plot.stat().st_size > 10_000
    assert len(rows) == 30
    assert "effective input cost" in text and "warm cache (24 h)" in text


def test_the_demo_prices_both_approaches_with_the_prompt_cache_model(tmp_path: Path) -> None:
    rows, mem, _clock = run_conversation(tmp_path, turns=30)
    mem.close()
    warm, lapsed = bills(rows)
    # Both are billed; a 24-hour cache serves more than a 5-minute one, never less.
    assert 0 < warm.ours <= lapsed.ours and 0 < warm.full <= lapsed.full
    assert 0.0 <= lapsed.cached_share <= warm.cached_share <= 1.0
    # Without any cache each approach would pay its whole input: the cache can only help.
    assert warm.ours <= sum(r.tokens_memory for r in rows) * 1.5


def test_the_demo_table_fits_an_80_column_terminal(tmp_path: Path) -> None:
    console = Console(record=True, width=80)
    rows = run_demo(console, turns=12)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    # Every turn is one table row showing both token counts.
    for r in rows:
        row = next(line for line in lines if line.startswith(f"│ {r.number:>2} │"))
        assert f" {r.tokens_full} " in row and f" {r.tokens_memory} " in row
