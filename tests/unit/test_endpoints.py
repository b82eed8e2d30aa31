"""An entry point built for another host than OpenAI's says, once, that an open model's
chat template may need the portable form (``memory_role="inline"``)."""

from __future__ import annotations

import logging
from pathlib import Path

import openai
import pytest

from stm_memory import ShortTermMemory
from stm_memory.kit import endpoints, is_openai_host, note_endpoint
from stm_memory_openai import OpenAIChatLoop


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoints, "_warned", set())


@pytest.mark.parametrize(
    ("base_url", "openai_host"),
    [
        (None, True),  # the SDK's default
        ("https://api.openai.com/v1", True),
        ("https://example.openai.azure.com/openai", True),
        ("http://localhost:8000/v1", False),
        ("http://127.0.0.1:11434/v1", False),
        ("https://api.together.xyz/v1", False),
    ],
)
def test_openai_hosts(base_url: str | None, openai_host: bool) -> None:
    assert is_openai_host(base_url) is openai_host


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_another_host_is_named_once_with_the_option(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    note_endpoint("OpenAIChatLoop", "http://localhost:8000/v1", "system")
    note_endpoint("OpenAIChatLoop", "http://localhost:8000/v1", "system")
    [message] = warnings_of(caplog)
    assert "localhost:8000" in message and "memory_role='inline'" in message


@pytest.mark.parametrize(
    ("base_url", "role"),
    [
        ("http://localhost:8000/v1", "inline"),  # the portable form is on
        ("https://api.openai.com/v1", "system"),
        ("http://offline.invalid/v1", "system"),  # the offline stand-in serves no template
    ],
)
def test_nothing_is_said_otherwise(
    base_url: str, role: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    note_endpoint("OpenAIChatLoop", base_url, role)
    assert warnings_of(caplog) == []


def test_a_loop_built_for_a_local_server_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    client = openai.OpenAI(api_key="none", base_url="http://127.0.0.1:9/v1")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        OpenAIChatLoop(client, mem, model="llama")
        OpenAIChatLoop(client, mem, model="llama", memory_role="inline")
    [message] = warnings_of(caplog)
    assert "OpenAIChatLoop talks to 127.0.0.1:9" in message


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
