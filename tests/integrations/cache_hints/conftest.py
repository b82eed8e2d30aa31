"""Fixtures of the prompt-cache hint tests: ``wire`` (every request body an httpx client
sent, on replay as when recording) and ``env`` (this test's model sources, memory,
wire and clients). The entry points themselves are in ``helpers/cache_hints.py``; the
model sources, ``vcr_config`` and ``open_memory`` in ``tests/integrations/conftest.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import httpx2
import pytest
from helpers.cache_hints import Env, Wire

from stm_memory import ShortTermMemory
from tests.integrations.conftest import AnthropicSource, ModelSource


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Patches ``send`` of every httpx client class (the SDKs use ``httpx2``): above the
    transport, where vcr answers on replay and the fake server when recording."""
    seen = Wire()
    for module in (httpx, httpx2):
        sync_send, async_send = module.Client.send, module.AsyncClient.send

        def send(self: Any, request: Any, *args: Any, _send: Any = sync_send, **kw: Any) -> Any:
            seen.see(request)
            return _send(self, request, *args, **kw)

        async def asend(
            self: Any, request: Any, *args: Any, _send: Any = async_send, **kw: Any
        ) -> Any:
            seen.see(request)
            return await _send(self, request, *args, **kw)

        monkeypatch.setattr(module.Client, "send", send)
        monkeypatch.setattr(module.AsyncClient, "send", asend)
    return seen


@pytest.fixture
async def env(
    openai_source: ModelSource,
    anthropic_source: AnthropicSource,
    open_memory: Callable[[], ShortTermMemory],
    wire: Wire,
) -> AsyncIterator[Env]:
    async with AsyncExitStack() as stack:
        yield Env(openai_source, anthropic_source, open_memory(), wire, stack)
