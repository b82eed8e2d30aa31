"""Same inputs and a frozen clock give byte-identical requests, across processes.

``scripted_conversation.py`` drives one multi-turn, multi-channel conversation through
the OpenAI Chat Completions, OpenAI Responses and Anthropic loops (real SDK clients
answered in-process by the offline model, recorded by vcrpy into cassettes) and the
LangChain middleware, and dumps ``build_context`` output. It runs in two fresh
processes side by side that differ in everything that must not matter: hash seed
(set order), time zone, working and database directories, and the wall clock (the
second process runs with ``datetime.now``/``time.time`` moved 400 days ahead, so a
wall-clock read reaching a prompt would show). The cassette files and the captured
request bodies must be equal byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from stm_memory.testing import (
    assert_request_carries_memory,
    assert_request_lacks_memory,
    assert_tool_not_offered,
    assert_tool_offered,
)

SCRIPT = Path(__file__).with_name("scripted_conversation.py")
CASSETTES = ("openai_chat.yaml", "openai_responses.yaml", "anthropic.yaml")
OUTPUTS = (*CASSETTES, "requests.json")

#: Runs a script (argv[1:]) with the wall clock moved ahead: ``datetime.now``/``utcnow``/
#: ``today`` and ``time.time``. Patched before stm-memory is imported, so its
#: ``from datetime import datetime`` sees the moved clock too.
SHIFTED_WALL_CLOCK = """
import datetime as dt, runpy, sys, time
SHIFT = dt.timedelta(days=400, hours=7, minutes=13)
class Shifted(dt.datetime):
    @classmethod
    def now(cls, tz=None): return super().now(tz) + SHIFT
    @classmethod
    def utcnow(cls): return super().utcnow() + SHIFT
    @classmethod
    def today(cls): return super().today() + SHIFT
dt.datetime = Shifted
real_time = time.time
time.time = lambda: real_time() + SHIFT.total_seconds()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _start(
    out: Path, work: Path, *, hash_seed: str, tz: str, shift_clock: bool = False
) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "TZ": tz}
    boot = ["-c", SHIFTED_WALL_CLOCK] if shift_clock else []
    return subprocess.Popen(
        [sys.executable, *boot, str(SCRIPT), str(out), str(work)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(process: subprocess.Popen[bytes]) -> None:
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, (stdout + stderr).decode(errors="replace")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two fresh processes, run side by side; returns their output folders."""
    base = tmp_path_factory.mktemp("determinism")
    outs = [base / "first", base / "second"]
    processes = [
        _start(outs[0], base / "work-a", hash_seed="1", tz="UTC"),
        _start(
            outs[1],
            base / "work-b" / "nested",
            hash_seed="987654",
            tz="Asia/Tokyo",
            shift_clock=True,
        ),
    ]
    for process in processes:
        _finish(process)
    return outs


@pytest.mark.parametrize("name", OUTPUTS)
def test_outputs_are_byte_identical_across_processes(runs: list[Path], name: str) -> None:
    a, b = (runs[0] / name).read_bytes(), (runs[1] / name).read_bytes()
    assert a, f"{name} is empty"
    if a != b:
        lines = zip(a.decode().splitlines(), b.decode().splitlines(), strict=False)
        where = next((i + 1 for i, (x, y) in enumerate(lines) if x != y), None)
        pytest.fail(f"{name} differs between the processes (first at line {where})")


def _load(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "requests.json").read_text(encoding="utf-8")))


def _cassette_bodies(path: Path) -> list[Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [json.loads(i["request"]["body"]) for i in data["interactions"]]


@pytest.mark.parametrize("name", CASSETTES)
def test_cassettes_record_exactly_the_bodies_the_loops_built(runs: list[Path], name: str) -> None:
    captured = _load(runs[0])[name.removesuffix(".yaml")]
    assert _cassette_bodies(runs[0] / name) == captured


def test_the_conversation_exercises_memory(runs: list[Path]) -> None:
    """The comparison means something: memory is injected, the tool is offered and
    called, and privacy holds."""
    captured = _load(runs[0])
    for loop in ("openai_chat", "openai_responses", "anthropic"):
        requests = captured[loop]
        assert_tool_offered(requests[0])
        assert_request_carries_memory(requests, "Recent conversation")
    # The nudge asked for an update, and the model's summaries ("Recent conversation…",
    # checked above) came back as memory content.
    assert_request_carries_memory(captured["openai_chat"], "After you answer, call")
    contexts = {c["scope"]: c for c in captured["contexts"]}
    # The private channel's memory never reaches a public channel of the server.
    assert_request_lacks_memory(contexts["plot"]["applied"], "Ketch is Mira's father")
    assert_request_carries_memory(contexts["secret"]["applied"], "Ketch is Mira's father")
    # A briefing's time comes from the frozen clock only (the day it starts on).
    assert_request_carries_memory(contexts["dm"]["applied"], "Writers' Guild, 2026-01-05 ")
    prompts = captured["langchain"]
    assert len(prompts) >= 3
    assert_request_carries_memory(prompts[-1], "Recent conversation")


def test_tool_offer_is_visible_in_recorded_bodies(runs: list[Path]) -> None:
    """The helpers read recorded bodies as bytes too (what a cassette stores)."""
    body = json.dumps(_load(runs[0])["anthropic"][0]).encode()
    assert_tool_offered(body)
    with pytest.raises(AssertionError, match="not to be offered"):
        assert_tool_not_offered(body)
