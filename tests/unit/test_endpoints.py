"""The form an OpenAI-style entry point writes is settled by its host when the caller
names none: the portable form (``memory_role="inline"``) for any host but OpenAI's or
Azure's, where an open model's chat template may render the request. An entry point
that places the memory before it sees the host (the LCEL history under the chain
wrapper) keeps the system form and says so, once."""

from __future__ import annotations

import logging
from pathlib import Path

import openai
import pytest

from stm_memory import ShortTermMemory
from stm_memory.kit import TurnOptions, endpoints, form_for_host, note_endpoint
from stm_memory_anthropic import AnthropicLoop
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoints, "_warned", set())


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("named", "base_url", "form"),
    [
        (None, None, "system"),  # the SDK's default host
        (None, "https://api.openai.com/v1", "system"),
        (None, "https://example.openai.azure.com/openai", "system"),
        (None, "http://offline.invalid/v1", "system"),  # the offline stand-in
        (None, "http://localhost:8000/v1", "inline"),  # vLLM, SGLang, TGI …
        (None, "http://127.0.0.1:11434/v1", "inline"),  # Ollama
        (None, "https://api.together.xyz/v1", "inline"),
        ("system", "http://localhost:8000/v1", "system"),  # the caller named a form
        ("user", "http://localhost:8000/v1", "user"),
        ("inline", "https://api.openai.com/v1", "inline"),
    ],
)
def test_the_host_settles_the_form_unless_one_is_named(
    named: str | None, base_url: str | None, form: str
) -> None:
    assert form_for_host(named, base_url) == form  # type: ignore[arg-type]
    options = TurnOptions(memory_role=named).for_host(base_url)  # type: ignore[arg-type]
    assert options.memory_role == options.form == form


def test_unsettled_options_write_the_system_form() -> None:
    assert TurnOptions().memory_role is None and TurnOptions().form == "system"


@pytest.mark.parametrize("loop_class", [OpenAIChatLoop, OpenAIResponsesLoop])
def test_an_openai_loop_for_a_local_server_writes_the_portable_form(
    tmp_path: Path, loop_class: type[OpenAIChatLoop], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    local = openai.OpenAI(api_key="none", base_url="http://127.0.0.1:9/v1")
    hosted = openai.OpenAI(api_key="none")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        assert loop_class(local, mem, model="llama").memory_role == "inline"
        assert loop_class(local, mem, model="llama", memory_role="system").memory_role == "system"
        assert loop_class(hosted, mem, model="gpt-4.1-mini").memory_role == "system"
    assert warnings_of(caplog) == []  # a default, not a warning


def test_the_anthropic_loop_keeps_its_own_form(tmp_path: Path) -> None:
    import anthropic

    client = anthropic.Anthropic(api_key="none", base_url="http://127.0.0.1:9")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        assert AnthropicLoop(client, mem, model="claude").options.form == "system"


def test_a_history_placed_before_the_host_is_known_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    note_endpoint("ShortTermMemoryChatModel", "http://localhost:8000/v1", None)
    note_endpoint("ShortTermMemoryChatModel", "http://localhost:8000/v1", None)
    [message] = warnings_of(caplog)
    assert "localhost:8000" in message and "memory_role='inline'" in message
    # Nothing is said where a form was named, or for OpenAI's host.
    note_endpoint("ShortTermMemoryChatModel", "http://localhost:9000/v1", "system")
    note_endpoint("ShortTermMemoryChatModel", "https://api.openai.com/v1", None)
    assert len(warnings_of(caplog)) == 1


def test_a_chain_over_chat_openai_for_a_local_server_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    from stm_memory import Scope
    from stm_memory_langchain import with_short_term_memory

    caplog.set_level(logging.WARNING, logger="stm_memory")
    model = ChatOpenAI(
        model="llama", api_key="none", base_url="http://127.0.0.1:9/v1", max_retries=0
    )
    scope = Scope(channel_id="c1", user_id="u1")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        chain = with_short_term_memory(model, mem, scope=scope)
        with pytest.raises(openai.APIConnectionError):  # nothing listens there
            chain.invoke([HumanMessage("hi")])
    [message] = warnings_of(caplog)
    assert "ShortTermMemoryChatModel talks to 127.0.0.1:9" in message
