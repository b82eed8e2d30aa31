"""Anthropic model sources for the LCEL cassette tests in this folder (the shared
``tests/integrations/conftest.py`` supplies ``vcr_config``, ``openai_source`` /
``openai_script``, the ``scripted(provider)`` marker and ``open_memory``).

As for every provider test: replay (default ``--record-mode=none``) answers from the
cassettes with no server; recording (``once``, ``rewrite``) answers from a local
:class:`~tests.fakeprovider.FakeProviderServer`; with ``STM_RECORD_REAL=1`` and
``ANTHROPIC_API_KEY`` set (``make record-cassettes``), api.anthropic.com answers and
the ``scripted`` tests are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakeprovider import FakeProviderServer, Script
from tests.integrations.conftest import REPLAY_BASE_URL, record_mode, uses_real_api


class AnthropicSource:
    """Where this test's Anthropic answers come from."""

    def __init__(self, mode: str, server: FakeProviderServer | None = None) -> None:
        self.mode = mode  # "replay" | "fake" | "real"
        self.server = server
        self.script = server.script if server is not None else Script()

    def client_options(self) -> dict[str, Any]:
        if self.mode == "real":
            return {}
        base_url = self.server.base_url if self.server is not None else REPLAY_BASE_URL
        return {"base_url": base_url, "api_key": "test", "max_retries": 0}


@pytest.fixture
def anthropic_source(request: pytest.FixtureRequest) -> Iterator[AnthropicSource]:
    if record_mode(request.config) == "none":
        yield AnthropicSource("replay")
    elif uses_real_api(request.config, "anthropic"):
        yield AnthropicSource("real")
    else:
        with FakeProviderServer() as server:
            yield AnthropicSource("fake", server)


@pytest.fixture
def anthropic_script(anthropic_source: AnthropicSource) -> Script:
    return anthropic_source.script
