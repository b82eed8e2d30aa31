"""The first hour (what a new user trips on): every mistake is a typed error that names
the field, what was given and what would do; the CLI says a missing extra in one line;
the offline agent of the README bills its turns; the demo says how to read its receipt.
(The answer being the last message: tests/spec/test_answer_last.py; the docs' rendered
roles and citations: test_docs_site.py.)"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from helpers.factory import MemFactory

from stm_memory import ConfigurationError, DatabaseError, Scope, ShortTermMemory
from stm_memory.cli import app
from stm_memory.testing import offline_openai_client
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import OpenAIChatLoop

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


# -- a store URL ---------------------------------------------------------------------------


def test_a_misspelt_database_names_the_forms() -> None:
    with pytest.raises(
        DatabaseError, match=r"database_url: unknown database 'sqllite'.*sqlite:///"
    ):
        ShortTermMemory.from_url("sqllite:///stm.db")


def test_a_folder_that_does_not_exist_is_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    with pytest.raises(DatabaseError, match="does not exist"):
        ShortTermMemory.from_url(f"sqlite:///{missing / 'stm.db'}")
    assert not missing.parent.exists()


def test_postgresql_without_its_driver_names_the_extra() -> None:
    done = _python(
        """
        import sys
        sys.modules["psycopg"] = None  # as if the extra were not installed
        from stm_memory import DatabaseError, ShortTermMemory
        try:
            ShortTermMemory.from_url("postgresql://u@127.0.0.1/test")
        except DatabaseError as exc:
            print(exc)
        """
    )
    assert 'pip install "stm-memory[postgres]"' in done.stdout, done.stderr[-2000:]


# -- options ----------------------------------------------------------------------------------


def test_an_unknown_from_url_option_names_the_ones_there_are() -> None:
    with pytest.raises(
        ConfigurationError, match=r"'cache_directory' \(did you mean 'cache_dir'\?\)"
    ):
        ShortTermMemory.from_url("sqlite:///:memory:", cache_directory="x")


def test_an_unknown_middleware_option_is_a_configuration_error(mem: ShortTermMemory) -> None:
    with pytest.raises(ConfigurationError) as caught:
        ShortTermMemoryMiddleware(mem, refresh_cadance=3)  # type: ignore[call-arg]
    said = str(caught.value)
    assert "'refresh_cadance'" in said and "configure_server(server_id, refresh_cadence=" in said
    assert "trim_history" in said  # the options it takes


@pytest.mark.parametrize("entry", ["session", "history", "lcel"])
def test_every_entry_point_names_an_unknown_option(mem: ShortTermMemory, entry: str) -> None:
    from stm_memory.testing import OfflineChatModel
    from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory
    from stm_memory_openai_agents import ShortTermMemorySession

    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    build = {
        "session": lambda: ShortTermMemorySession(mem, scope, trim_histroy=False),
        "history": lambda: ShortTermMemoryHistory(mem, scope, trim_histroy=False),
        "lcel": lambda: with_short_term_memory(OfflineChatModel(), mem, trim_histroy=False),
    }[entry]
    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) 'trim_histroy'"):
        build()


def test_an_unknown_loop_option_is_refused_when_the_loop_is_built(mem: ShortTermMemory) -> None:
    with pytest.raises(ConfigurationError, match=r"'max_stesp' \(did you mean 'max_steps'\?\)"):
        OpenAIChatLoop(offline_openai_client(), mem, model="m", max_stesp=3)
    # A parameter of the SDK's call passes through, as before.
    OpenAIChatLoop(offline_openai_client(), mem, model="m", temperature=0.2)


def test_an_unknown_provider_is_refused_everywhere(mem: ShortTermMemory) -> None:
    for build in (
        lambda: ShortTermMemoryMiddleware(mem, provider="banana"),
        lambda: OpenAIChatLoop(offline_openai_client(), mem, model="m", provider="banana"),
    ):
        with pytest.raises(ConfigurationError, match=r"unknown provider 'banana'.*openai"):
            build()
    ShortTermMemoryMiddleware(mem, provider="Anthropic")  # known, whatever its case


def test_a_value_cut_to_the_limit_is_logged_once_per_scope(
    mem: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for _ in range(2):
            turn = mem.begin_turn(scope)
            result = mem.update(turn, {"summary": "x" * 1501})
            mem.end_turn(turn)
            assert result["status"] == "completed" and "cut to 1500" in result["note"]
    warned = [r for r in caplog.records if "max_summary_length" in r.getMessage()]
    assert len(warned) == 1 and scope.live_key in warned[0].getMessage()


# -- the CLI ------------------------------------------------------------------------------------


def test_a_missing_extra_is_one_line_and_exit_2() -> None:
    done = _python(
        """
        import sys
        sys.modules["openai"] = None  # as if the extra were not installed
        from stm_memory.cli import main
        sys.argv = ["stm-memory", "eval", "--quiet", "--turns", "16"]
        main()
        """
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and 'pip install "stm-memory[openai]"' in lines[0], done.stderr


def test_the_cli_without_its_extra_is_one_line_and_exit_2() -> None:
    done = _python(
        """
        import sys
        sys.modules["typer"] = None  # as if the cli extra were not installed
        from stm_memory.cli import main
        main()
        """
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        'error: The stm-memory CLI needs its extra: pip install "stm-memory[cli]"'
    ]


def test_eval_prints_the_ratio_and_a_verdict_naming_its_regime(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        sys.modules["matplotlib"] = None  # no plot extra: the hint keeps its brackets
        from stm_memory.cli import main
        main()
        """,
        "eval",
        "--quiet",
        "--turns",
        "16",
        "-s",
        "stm-loop",
        "-s",
        "full-history",
        "--out",
        str(tmp_path / "out"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "vs full" in done.stdout and "1.00×" in done.stdout  # the full history's own row
    assert "stm-loop: " in done.stdout and "the full history's bill" in done.stdout
    assert "regime: 16 turns, no system prompt" in done.stdout
    assert '"stm-memory[plot]"' in done.stderr.replace("\n", " ")


def test_every_option_has_help_and_no_markup_eats_it() -> None:
    command = typer.main.get_command(app)

    def walk(cmd: object, path: str) -> list[str]:
        missing = [f"{path} {p.name}" for p in cmd.params if not getattr(p, "help", None)]  # type: ignore[attr-defined]
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            missing += walk(sub, f"{path} {name}")
        return missing

    assert walk(command, "stm-memory") == []
    done = _python("from stm_memory.cli import main; main()", "--help")
    assert "URL of the store (default: sqlite:///stm.db" in " ".join(done.stdout.split())


# -- the offline agent bills, the demo keeps its receipt ----------------------------------------


def test_the_readmes_offline_agent_shows_a_receipt(make_mem: MemFactory) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from stm_memory.testing import OfflineChatModel

    mem = make_mem()
    agent = create_agent(
        OfflineChatModel(),
        middleware=[ShortTermMemoryMiddleware(mem)],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, object] = {
        "configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"}
    }
    for text in ["Let's plan chapter two.", "Make Ketch the traitor."]:
        state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)  # type: ignore[arg-type]
        assert state["messages"][-1].usage_metadata["input_tokens"] > 0
    total = mem.savings().total
    assert total.turns == 2 and total.full_cost > 0


def test_the_demo_keeps_its_store_where_savings_reads_it(tmp_path: Path) -> None:
    store = tmp_path / "stm-demo"
    done = _python(
        "from stm_memory.cli import main; main()", "demo", "--turns", "8", "--store", str(store)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    url = f"sqlite:///{store / 'run' / 'stm.db'}"
    assert f"stm-memory --database-url {url} savings" in done.stdout
    read = _python("from stm_memory.cli import main; main()", "--database-url", url, "savings")
    assert read.returncode == 0 and "turn(s)" in read.stdout, read.stderr[-2000:]
    # Run again: the folder it made is made anew; a folder of someone else's is refused.
    again = _python(
        "from stm_memory.cli import main; main()", "demo", "--turns", "8", "--store", str(store)
    )
    assert again.returncode == 0, again.stderr[-2000:]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    refused = _python(
        "from stm_memory.cli import main; main()", "demo", "--store", str(tmp_path / "mine")
    )
    assert refused.returncode == 2 and (tmp_path / "mine" / "notes.txt").exists()
