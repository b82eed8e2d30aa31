"""``stm-memory eval --scenario long-turn``: one turn of reads past the model's window,
then questions about the reports. With any writer (perfect, forgetful, toolless) our
strategies complete the turn inside the window and answer every question, where the
full history is refused and clearing without a way back loses the early reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stm_memory.cli import app
from stm_memory.errors import ConfigurationError
from stm_memory.evaluation import run_long_turn

runner = CliRunner()


@pytest.mark.parametrize("kind", ["perfect", "forgetful", "toolless"])
@pytest.mark.parametrize("seed", [7, 11])
def test_any_writer_answers_every_question_inside_the_window(kind: str, seed: int) -> None:
    report = run_long_turn(kind, reads=16, window=8_192, seed=seed)
    outcomes = {o.key: o for o in report.outcomes}
    for key in ("stm-loop", "stm-middleware"):
        ours = outcomes[key]
        assert ours.completed and ours.refused == 0, ours
        assert ours.largest_share <= 0.75, ours
        assert ours.answered == ours.asked == 5, ours
    full = outcomes["full-history"]
    assert not full.completed and full.refused > 0 and full.largest_share > 1
    peer = outcomes["clear-tool-uses"]
    assert peer.completed and peer.answered < peer.asked  # cleared, with no way back
    assert report.cheapest_peer() == peer


def test_the_bill_of_a_rewrite_per_step_is_not_paid() -> None:
    """A long system prompt leaves little room under the high mark: each clear there
    falls well under it, so results do not leave one at a time at every step."""
    prompt = "You are a careful research assistant. " * 400  # ~3,200 tokens
    report = run_long_turn("forgetful", reads=24, window=12_288, system_prompt=prompt)
    ours = next(o for o in report.outcomes if o.key == "stm-loop")
    peer = report.cheapest_peer()
    assert ours.completed and ours.answered == ours.asked and peer is not None
    assert ours.units < peer.units, (ours.units, peer.units)


def test_bad_options_are_a_typed_error() -> None:
    with pytest.raises(ConfigurationError, match="scripted:perfect"):
        run_long_turn("paraphrase")
    with pytest.raises(ConfigurationError, match="unknown strategy"):
        run_long_turn("perfect", strategies=["window"])


def test_the_command_prints_the_table_and_writes_the_json(tmp_path: Path) -> None:
    args = ["eval", "--scenario", "long-turn", "--model", "scripted:forgetful", "--reads", "12"]
    result = runner.invoke(app, [*args, "--context-window", "8192", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for key in ("stm-loop", "stm-middleware", "full-history", "clear-tool-uses"):
        assert key in result.output
    assert "stm-loop: completed" in result.output
    data = json.loads((tmp_path / "long_turn.json").read_text())
    assert data["reads"] == 12 and data["window"] == 8192
    assert {o["key"] for o in data["outcomes"]} >= {"stm-loop", "clear-tool-uses"}
    bad = runner.invoke(app, ["eval", "--scenario", "marathon"])
    assert bad.exit_code != 0 and "dialogue or long-turn" in bad.output
