"""The turn reaches the engine through typed calls: ``op(fn, afn, *args, **kw)`` carries
``fn``'s parameters (a ParamSpec), so the type checker checks every argument a step
hands the engine, and ``commit`` takes one :class:`~stm_memory.kit.TurnRecord`. Each bad
snippet below must fail ``mypy --strict``; the good one must pass, so the check can fail
both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]

HEAD = """\
from collections.abc import Generator
from typing import Any

from stm_memory.kit import Op, TurnEngine, TurnRecord, op
from stm_memory.tool.turn import TurnContext


def steps(m: TurnEngine, state: TurnContext) -> Generator[Op, Any, None]:
"""

GOOD = "    yield op(m.commit, m.acommit, TurnRecord(turn=state, dialogue=[], follows_seen=True))\n"

BAD = {
    "a turn state where the record goes": (
        "    yield op(m.commit, m.acommit, state)\n",
        'Argument 3 to "op" has incompatible type "TurnContext"',
    ),
    "a keyword the engine lacks": (
        "    yield op(m.commit, m.acommit, TurnRecord(turn=state), after_stored=True)\n",
        'Unexpected keyword argument "after_stored" for "op"',
    ),
    "a field the record lacks": (
        "    yield op(m.commit, m.acommit, TurnRecord(turn=state, stored=()))\n",
        'Unexpected keyword argument "stored" for "TurnRecord"',
    ),
    "a sync and an async twin that disagree": (
        "    yield op(m.commit, m.aget, TurnRecord(turn=state))\n",
        'Argument 3 to "op" has incompatible type "TurnRecord"; expected "Never"',
    ),
}


def _mypy(tmp_path: Path, body: str) -> tuple[str, int]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(HEAD + body, encoding="utf-8")
    # The project's configuration and cache (``make test`` has just type-checked the
    # package, so only the snippet is new).
    out, err, status = api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(snippet),
        ]
    )
    return out + err, status


def test_a_well_typed_step_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out, status = _mypy(tmp_path, GOOD)
    assert status == 0, out


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_wrong_argument_to_the_engine_fails_the_type_check(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    body, expected = BAD[case]
    out, status = _mypy(tmp_path, body)
    assert status == 1, out
    assert expected in out, out
