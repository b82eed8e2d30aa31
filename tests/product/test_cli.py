"""The stm-memory command line against a real embedded store."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stm_memory import Scope, ShortTermMemory
from stm_memory.cli.commands import DEFAULT_DATABASE_URL, app

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "STM_DATABASE_URL": f"sqlite:///{tmp_path / 'stm.db'}",
        "STM_CACHE_DIR": str(tmp_path / "cache"),
    }


@pytest.fixture
def seeded(env: dict[str, str], tmp_path: Path) -> Scope:
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    with ShortTermMemory.from_url(env["STM_DATABASE_URL"], cache_dir=tmp_path / "cache") as mem:
        mem.capture(scope, [{"role": "user", "content": "hi", "name": "Ann"}])
        turn = mem.begin_turn(scope)
        assert mem.update(turn, {"summary": "Ann greeted the bot."}) == {"status": "completed"}
    return scope


def test_show_json_reads_the_live_entry(env: dict[str, str], seeded: Scope) -> None:
    result = runner.invoke(app, ["show", "c1", "--user", "u1", "--server", "g1", "--json"], env=env)
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.output)
    assert entry["summary"] == "Ann greeted the bot."
    assert entry["key"] == seeded.live_key


def test_show_unknown_scope_exits_non_zero(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["show", "nope", "--user", "u1"], env=env)
    assert result.exit_code == 1
    assert "no live memory" in result.output


def test_list_and_stats(env: dict[str, str], seeded: Scope) -> None:
    listed = runner.invoke(app, ["list", "--server", "g1", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    # Both rows of the scope live in server g1: the shared server row and the user's row.
    assert {row["key"] for row in json.loads(listed.output)} == set(seeded.keys)
    stats = runner.invoke(app, ["stats", "--json"], env=env)
    data = json.loads(stats.output)
    assert data["rows"] == 2 and data["queued_writes"] == 0
    assert data["cache_entries"] == 2
    assert sum(data["expiry"].values()) == 2


def test_clear_commands(env: dict[str, str], seeded: Scope) -> None:
    cleared = runner.invoke(app, ["clear-summary", "c1", "-u", "u1", "-s", "g1"], env=env)
    assert cleared.exit_code == 0, cleared.output
    shown = runner.invoke(app, ["show", "c1", "-u", "u1", "-s", "g1", "--json"], env=env)
    assert json.loads(shown.output)[0]["summary"] is None
    forgot = runner.invoke(app, ["forget-user", "u1"], env=env)
    # u1's own row deleted, and the shared c1 row (u1's words) cleared.
    assert forgot.exit_code == 0 and "2 row(s) deleted or cleared" in forgot.output
    gone = runner.invoke(app, ["clear-channel", "c1"], env=env)
    assert gone.exit_code == 0 and "1 row(s) deleted" in gone.output
    stats = runner.invoke(app, ["stats", "--json"], env=env)
    assert json.loads(stats.output)["rows"] == 0


def test_categories_and_settings_round_trip(env: dict[str, str]) -> None:
    out = runner.invoke(
        app, ["categories", "set", "g1", "Plot: what happened", "Mood: tone"], env=env
    )
    assert out.exit_code == 0, out.output
    got = runner.invoke(app, ["categories", "get", "g1", "--json"], env=env)
    assert [c["slug"] for c in json.loads(got.output)] == ["plot", "mood"]
    out = runner.invoke(
        app,
        [
            "settings",
            "set",
            "g1",
            "refresh_cadence=3",
            "render_mode=supersede",
            "private_channel_ids=a,b",
        ],
        env=env,
    )
    assert out.exit_code == 0, out.output
    got = json.loads(runner.invoke(app, ["settings", "get", "g1", "--json"], env=env).output)
    assert got["refresh_cadence"] == 3 and got["render_mode"] == "supersede"
    assert got["private_channel_ids"] == ["a", "b"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["settings", "set", "g1", "render_mode=bogus"], "render_mode"),
        (["settings", "set", "g1", "nope=1"], "unknown server setting"),
        (["settings", "set", "g1", "refresh_cadence"], "NAME=VALUE"),
        (["categories", "set", "g1", "a", "b", "c", "d", "e", "f"], "at most 5"),
        (["list"], "--server or --user"),
    ],
)
def test_bad_input_is_a_clear_error(env: dict[str, str], args: list[str], message: str) -> None:
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2
    assert message in result.output


def test_unreachable_database_exits_3(tmp_path: Path) -> None:
    env = {
        "STM_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/x",
        "STM_CACHE_DIR": str(tmp_path / "c"),
    }
    result = runner.invoke(app, ["stats"], env=env)
    assert result.exit_code == 3
    assert "cannot open the store" in result.output


def test_janitor_runs(env: dict[str, str], seeded: Scope) -> None:
    result = runner.invoke(app, ["janitor"], env=env)
    assert result.exit_code == 0, result.output
    assert "0 idle row(s) deleted" in result.output


# -- where the data lives: the CLI and the library agree ---------------------------------


def test_the_cli_default_is_the_librarys_default() -> None:
    default = inspect.signature(ShortTermMemory.from_url).parameters["database_url"].default
    assert default == DEFAULT_DATABASE_URL


def test_the_cli_reads_what_the_quickstart_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core API page's first block (from_url defaults), then `stm-memory show` in the same
    directory with no option and no variable: the same store, and one cache beside it."""
    monkeypatch.chdir(tmp_path)
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    with ShortTermMemory.from_url("sqlite:///stm.db") as mem:
        assert mem.update(mem.begin_turn(scope), {"summary": "Ann plans chapter one."}) == {
            "status": "completed"
        }
    result = runner.invoke(app, ["show", "c1", "--user", "u1", "--server", "g1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["summary"] == "Ann plans chapter one."
    # One cache per database: the CLI opened the cache from_url derives, not one of its own.
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["stm.db.stm-cache"]


def test_without_a_store_the_cli_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (["show", "c1", "--user", "u1"], ["stats"], ["clear-channel", "c1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        flat = " ".join(result.output.split())  # rich wraps long lines
        assert f"no store at {tmp_path / 'stm.db'}" in flat
        assert "STM_DATABASE_URL" in flat
    # Reading or deleting never leaves an empty store behind in the working directory.
    assert list(tmp_path.iterdir()) == []


def test_configuring_commands_create_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server can be configured before the application first runs: the settings land
    in the store the application will open with from_url's defaults."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["settings", "set", "g1", "refresh_cadence=3"])
    assert result.exit_code == 0, result.output
    with ShortTermMemory.from_url() as mem:
        assert mem.server_settings("g1").refresh_cadence == 3


def _silent_channel(env: dict[str, str], tmp_path: Path, turns: int) -> Scope:
    """A channel of g1 whose model never wrote its memory in ``turns`` turns (cadence 3)."""
    scope = Scope(channel_id="quiet", user_id="u2", server_id="g1")
    with ShortTermMemory.from_url(env["STM_DATABASE_URL"], cache_dir=tmp_path / "cache") as mem:
        mem.configure_server("g1", refresh_cadence=3)
        for i in range(turns):
            turn = mem.begin_turn(scope)
            mem.capture(scope, [{"role": "user", "content": f"line {i}", "name": "Bo"}])
            mem.end_turn(turn)
    return scope


def test_doctor_lists_the_channels_whose_model_does_not_write(
    env: dict[str, str], seeded: Scope, tmp_path: Path
) -> None:
    healthy = runner.invoke(app, ["doctor"], env=env)
    assert healthy.exit_code == 0, healthy.output
    assert "every model that was asked writes its memory" in healthy.output
    _silent_channel(env, tmp_path, turns=10)  # the cadence (3), three tries, then more
    sick = runner.invoke(app, ["doctor", "--json"], env=env)
    assert sick.exit_code == 1, sick.output
    report = json.loads(sick.output)
    assert report["channels"] == 2
    [channel] = report["not_writing"]
    assert channel == {
        "server_id": "g1",
        "channel_id": "quiet",
        "turns_since_write": 10,
        "writes": 0,
        "nudges_unanswered": 3,  # turns 3, 4 and 5; a retry comes 16 turns past
    }
    table = runner.invoke(app, ["doctor", "--server", "g1"], env=env)
    assert table.exit_code == 1 and "quiet" in table.output and "tool_calling=False" in table.output


def test_doctor_on_an_empty_store_finds_nothing(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["doctor"], env=env)
    assert result.exit_code == 0, result.output
    assert "0 channel(s)" in result.output


def test_show_says_whether_the_memory_is_written(
    env: dict[str, str], seeded: Scope, tmp_path: Path
) -> None:
    written = runner.invoke(app, ["show", "c1", "-u", "u1", "-s", "g1"], env=env)
    assert "memory: written by its model" in written.output
    _silent_channel(env, tmp_path, turns=10)
    silent = runner.invoke(app, ["show", "quiet", "-u", "u2", "-s", "g1", "--json"], env=env)
    [entry] = json.loads(silent.output)
    assert entry["writing"] == "not_writing"
    said = runner.invoke(app, ["show", "quiet", "-u", "u2", "-s", "g1"], env=env)
    assert "NOT WRITTEN" in said.output and "3 nudge(s) unanswered" in said.output


def test_doctor_lists_the_models_that_write_tool_calls_as_text(
    env: dict[str, str], seeded: Scope, tmp_path: Path
) -> None:
    with ShortTermMemory.from_url(env["STM_DATABASE_URL"], cache_dir=tmp_path / "cache") as mem:
        assert mem.note_text_caller("qwen2.5-coder-1.5b")
    listed = runner.invoke(app, ["doctor", "--json"], env=env)
    assert listed.exit_code == 1, listed.output
    [model] = json.loads(listed.output)["tool_calls_as_text"]
    assert model["model"] == "qwen2.5-coder-1.5b"
    table = runner.invoke(app, ["doctor"], env=env)
    assert table.exit_code == 1 and "qwen2.5-coder-1.5b" in table.output
    assert "--tool-call-parser" in table.output and "tool_calling=False" in table.output
    # The server was fixed: the developer says so, and the model is offered the tool again.
    retried = runner.invoke(app, ["doctor", "--retry-model", "qwen2.5-coder-1.5b"], env=env)
    assert retried.exit_code == 0 and "offered the memory tool again" in retried.output
    healthy = runner.invoke(app, ["doctor"], env=env)
    assert healthy.exit_code == 0, healthy.output
    with ShortTermMemory.from_url(env["STM_DATABASE_URL"], cache_dir=tmp_path / "cache") as mem:
        assert not mem.writes_tools_as_text("qwen2.5-coder-1.5b")
