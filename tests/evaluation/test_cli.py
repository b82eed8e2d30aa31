"""``stm-memory eval`` runs offline end to end and writes the table and the plot."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from stm_memory.cli import app

runner = CliRunner()
#: Nothing listens on port 9: a client that tried to reach an API would fail at once.
CLOSED = "http://127.0.0.1:9"


def test_eval_runs_offline_and_writes_the_table_and_the_plot(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    # Three strategies keep it quick; every strategy runs in the scripted-score tests.
    chosen = ["stm-loop", "summarization", "window"]
    args = ["eval", "--turns", "20", "--out", str(out), "--quiet"]
    result = runner.invoke(app, [*args, *(a for s in chosen for a in ("-s", s))])
    assert result.exit_code == 0, result.output
    assert "measure the harness" in result.output
    for strategy in chosen:
        assert strategy in result.output
    assert (out / "recall_vs_cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "table.md").read_text()
    assert "| stm-memory, provider loop |" in table and "measure the harness" in table
    header = (out / "table.csv").read_text().splitlines()[0]
    assert header.startswith("strategy,label,recall,same_channel,cross_channel,corrected")
    assert "kept_details" in header and "kept_tokens" in header
    assert "kept tok" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["scripted"] == "perfect"
    assert [s["strategy"] for s in report["strategies"]] == chosen


def test_eval_prints_an_estimate_and_max_cost_aborts_a_real_run(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-not-used", "OPENAI_BASE_URL": f"{CLOSED}/v1"}
    result = runner.invoke(
        app,
        [
            "eval",
            "--model",
            "openai:gpt-4.1-mini",
            "--turns",
            "16",
            "--max-cost",
            "0.00001",
            "-s",
            "window",
            "--out",
            str(tmp_path / "never"),
        ],
        env=env,
    )
    assert result.exit_code == 4, result.output
    assert "Estimated cost for openai:gpt-4.1-mini: about $" in result.output
    assert "nothing was sent" in result.output
    assert not (tmp_path / "never").exists()


def test_eval_refuses_an_unknown_strategy() -> None:
    result = runner.invoke(app, ["eval", "--turns", "16", "-s", "telepathy"])
    assert result.exit_code == 2
    assert "strategies must be among" in result.output


def test_eval_sends_your_system_prompt_first(tmp_path: Path) -> None:
    prompt = tmp_path / "agent.txt"
    prompt.write_text("You are our agent. " * 400, encoding="utf-8")  # ~2,000 tokens
    out = tmp_path / "eval"
    result = runner.invoke(
        app,
        [
            "eval",
            "--turns",
            "16",
            "-s",
            "window",
            "--system-prompt",
            str(prompt),
            "--out",
            str(out),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    [row] = json.loads((out / "report.json").read_text())["strategies"]
    assert row["input_tokens"] > 16 * 1900
    assert row["cached_tokens"] > 0  # long enough for the prompt cache


def test_eval_reads_a_locomo_file_from_the_given_path(tmp_path: Path) -> None:
    session = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "My bike is a green Batavus."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice, mine is red."},
    ]
    qa = [
        {
            "question": "What brand is Ann's bike?",
            "answer": "Batavus",
            "evidence": ["D1:1"],
            "category": 1,
        }
    ]
    sample = {
        "sample_id": "s1",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": session},
        "qa": qa,
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    out = tmp_path / "eval"
    result = runner.invoke(
        app, ["eval", "--locomo", str(path), "-s", "full-history", "--out", str(out), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["conversation"] == "locomo-s1" and report["probes"] == 1
    assert report["strategies"][0]["recall"] == 1.0
