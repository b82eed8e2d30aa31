"""The LoCoMo-layout loader, on a tiny handmade file (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stm_memory.errors import ConfigurationError
from stm_memory.evaluation import load_locomo, run_eval, score_answer

SAMPLE = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I adopted a cat named Biscuit."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Lovely! Mine is Pepper."},
            ],
            "session_2_date_time": "2:10 pm on 9 May, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1", "text": "I start pottery on Friday."},
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "Have fun at pottery!"},
            ],
        },
        "qa": [
            {
                "question": "What is Caroline's cat called?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 1,
            },
            {
                "question": "When does Melanie start pottery?",
                "answer": "Friday",
                "evidence": ["D2:1"],
                "category": 2,
            },
            {
                "question": "What is Melanie's dog called?",
                "adversarial_answer": "Pepper",
                "evidence": [],
                "category": 5,
            },
        ],
    }
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_tiny.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    return path


def test_a_locomo_sample_becomes_a_conversation_set(locomo_file: Path) -> None:
    c = load_locomo(locomo_file, channels=2)
    assert c.name == "locomo-tiny-1"
    assert [s.name for s in c.speakers] == ["Caroline", "Melanie"]
    said = [t for t in c.turns if t.kind == "chat"]
    assert [t.channel for t in said] == ["session-group-1"] * 2 + ["session-group-2"] * 2
    # The adversarial question (category 5, no answer) is left out.
    assert [p.question for p in c.probes] == [
        "What is Caroline's cat called?",
        "When does Melanie start pottery?",
    ]
    cat, pottery = c.probes
    # Asked after the last session, in its channel: the cat lives in another one.
    assert (cat.kind, pottery.kind) == ("cross_channel", "same_channel")
    assert all(c.turns[p.turn].probe_id == p.id for p in c.probes)
    assert score_answer(cat, "It's Biscuit.") and not score_answer(cat, "No idea.")


def test_a_locomo_set_runs_through_the_harness(locomo_file: Path) -> None:
    c = load_locomo(locomo_file, channels=2)
    report = run_eval("scripted:perfect", conversation=c, strategies=["full-server", "window"])
    assert report.strategy("full-server").recall.overall.rate == 1.0


def test_an_unreadable_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_locomo(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text("[]")
    with pytest.raises(ConfigurationError, match="sample"):
        load_locomo(tmp_path / "empty.json")
