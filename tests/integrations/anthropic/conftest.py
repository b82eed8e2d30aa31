"""Anthropic SDK clients for the cassette tests. Where their answers come from
(``anthropic_source``: the cassettes on replay, a local
:class:`~tests.fakeprovider.FakeProviderServer` when recording, api.anthropic.com with
``STM_RECORD_REAL=1`` and ``ANTHROPIC_API_KEY``), ``vcr_config``, the
``scripted(provider)`` marker and ``open_memory`` are in the shared
``tests/integrations/conftest.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anthropic
import pytest

from tests.integrations.conftest import AnthropicSource


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
