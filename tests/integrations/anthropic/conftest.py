"""Anthropic fixtures for the cassette tests; the shared ``tests/integrations/conftest.py``
supplies ``vcr_config`` (header filtering, fixed fake host, method + path + body
matching), the ``scripted(provider)`` marker and ``open_memory``.

Where the model's answers come from, as for the OpenAI tests:

- replay (default ``--record-mode=none``): the cassettes; no server runs.
- recording (``once``, ``rewrite``, …): a local
  :class:`~tests.fakeprovider.FakeProviderServer` answering from the test's script.
- real (recording with ``STM_RECORD_REAL=1`` and ``ANTHROPIC_API_KEY``, i.e.
  ``make record-cassettes``): api.anthropic.com. Tests marked
  ``@pytest.mark.scripted("anthropic")`` are skipped before any fixture runs.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest

from tests.fakeprovider import FakeProviderServer, Script

#: Where replaying clients point: nothing listens there, and vcr answers first.
REPLAY_BASE_URL = "http://127.0.0.1:9"


class AnthropicSource:
    """Where this test's model answers come from (see the module docstring)."""

    def __init__(self, mode: str, server: FakeProviderServer | None = None) -> None:
        self.mode = mode  # "replay" | "fake" | "real"
        self.server = server
        self.script = server.script if server is not None else Script()

    def client_options(self) -> dict[str, Any]:
        if self.mode == "real":
            return {}  # api.anthropic.com with ANTHROPIC_API_KEY and the SDK's retries
        base_url = self.server.base_url if self.server is not None else REPLAY_BASE_URL
        # max_retries=0: error tests need the 5xx/429 to surface, not a retry.
        return {"base_url": base_url, "api_key": "test", "max_retries": 0}


def _mode(config: pytest.Config) -> str:
    # The same rules as the shared conftest's record_mode()/uses_real_api().
    if (config.getoption("--record-mode") or "none") == "none":
        return "replay"
    if os.environ.get("STM_RECORD_REAL") == "1" and os.environ.get("ANTHROPIC_API_KEY"):
        return "real"
    return "fake"


@pytest.fixture
def anthropic_source(request: pytest.FixtureRequest) -> Iterator[AnthropicSource]:
    mode = _mode(request.config)
    if mode != "fake":
        yield AnthropicSource(mode)
        return
    with FakeProviderServer() as server:
        yield AnthropicSource(mode, server)


@pytest.fixture
def anthropic_script(anthropic_source: AnthropicSource) -> Script:
    """The fake model's replies (ignored on replay, where the cassette answers, and by
    the real API)."""
    return anthropic_source.script


@pytest.fixture
def anthropic_client(anthropic_source: AnthropicSource) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(**anthropic_source.client_options()) as client:
        yield client


@pytest.fixture
async def async_anthropic_client(
    anthropic_source: AnthropicSource,
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(**anthropic_source.client_options()) as client:
        yield client
