"""Shared cassette set-up for the provider integration tests (see ``cassettes/README.md``).

Where the model's answers come from depends on pytest-recording's ``--record-mode``:

- replay (default ``none``): the checked-in cassettes answer; no server runs and nothing
  leaves the machine, and a request with no recorded match fails the test. Tests
  therefore assert on what the loop sent and kept (``TurnResult.requests`` /
  ``.messages``), never on a server's records.
- recording (``once``, ``rewrite``, …): a local
  :class:`~tests.fakeprovider.FakeProviderServer` answers from each test's script.
- real (recording with ``STM_RECORD_REAL=1`` and the provider's API key, i.e.
  ``make record-cassettes``): the provider's API answers. Tests marked
  ``@pytest.mark.scripted("openai")`` depend on scripted replies and are skipped before
  any fixture runs, so ``--record-mode=rewrite`` never deletes their cassettes.

Request bodies are deterministic (frozen clock, fixed model name, counter ids from the
fake server), so cassettes match on method + path + body; host and port are ignored
(the fake server's port is ephemeral) and local URIs are recorded with one fixed
host. Authentication and machine-specific request headers are dropped and responses
keep only the headers the SDKs read.

OpenAI clients keep OpenAI's own ``base_url`` in every mode: the fake server stands in
for OpenAI's API, and an OpenAI-style entry point settles its memory form by the host it
talks to (the portable form for any host but OpenAI's, SPEC §8). While recording, their
requests are forwarded to the fake server by the client's transport; on replay vcr
answers before any connection.

Provider folders may extend ``vcr_config`` (request it as an argument and add to it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import openai
import pytest

from stm_memory import ShortTermMemory
from tests.fakeprovider import FakeProviderServer, Script

#: The environment variable that names each provider's API key.
API_KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: Where replaying clients point: nothing listens there, and vcr answers first.
REPLAY_BASE_URL = "http://127.0.0.1:9"
#: Where OpenAI clients point in every mode (see the module docstring).
OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Recorded URIs of the fake server use this host, whatever port it had.
RECORDED_FAKE_HOST = "127.0.0.1:8999"

FILTERED_REQUEST_HEADERS = [
    # credentials
    "authorization",
    "x-api-key",
    "api-key",
    "openai-organization",
    "openai-project",
    "cookie",
    "set-cookie",
    # machine- and run-specific
    "host",
    "user-agent",
]
FILTERED_REQUEST_HEADER_PREFIXES = ("x-stainless-",)
#: Everything else a real response carries (organisation and project ids, cookies,
#: rate limits, edge ids, processing times) is account- or run-specific.
KEPT_RESPONSE_HEADERS = frozenset(
    {
        "content-type",
        "request-id",
        "x-request-id",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
    }
)


def _scrub_request(request: Any) -> Any:
    for name in list(request.headers):
        if name.lower().startswith(FILTERED_REQUEST_HEADER_PREFIXES):
            del request.headers[name]
    parts = urlsplit(request.uri)
    if parts.hostname == "127.0.0.1":
        request.uri = urlunsplit(parts._replace(netloc=RECORDED_FAKE_HOST))
    return request


def _scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    headers = response.get("headers") or {}
    response["headers"] = {k: v for k, v in headers.items() if k.lower() in KEPT_RESPONSE_HEADERS}
    return response


def _forwarded(request: httpx2.Request, server: str) -> httpx2.Request:
    # The fake server answers OpenAI's paths (/v1/...) at its own address.
    target = httpx2.URL(server)
    request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
    return request


class _ToFakeServer(httpx2.HTTPTransport):
    """An OpenAI client's transport (the SDK's clients are ``httpx2``'s) that sends its
    requests to the fake server (vcr patches ``HTTPTransport.handle_request``, so
    recording sees the request as sent)."""

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server = server

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return super().handle_request(_forwarded(request, self.server))


class _AsyncToFakeServer(httpx2.AsyncHTTPTransport):
    """:class:`_ToFakeServer` for async clients."""

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server = server

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await super().handle_async_request(_forwarded(request, self.server))


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    return {
        "filter_headers": list(FILTERED_REQUEST_HEADERS),
        "before_record_request": _scrub_request,
        "before_record_response": _scrub_response,
        "match_on": ["method", "path", "body"],
        "decode_compressed_response": True,
    }


# -- where answers come from -------------------------------------------------------------


def record_mode(config: pytest.Config) -> str:
    return str(config.getoption("--record-mode") or "none")


def uses_real_api(config: pytest.Config, provider: str) -> bool:
    """Recording against the provider's real API (``make record-cassettes``)?"""
    return (
        record_mode(config) != "none"
        and os.environ.get("STM_RECORD_REAL") == "1"
        and bool(os.environ.get(API_KEY_VARS[provider]))
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "scripted(provider): asserts on scripted model replies; skipped when recording "
        "against that provider's real API",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    # A hook, not a fixture: it must run before pytest-recording's autouse ``vcr``
    # fixture, which in rewrite mode deletes the cassette as it starts.
    marker = item.get_closest_marker("scripted")
    if marker is not None and uses_real_api(item.config, marker.args[0]):
        pytest.skip(f"scripted model replies; the real {marker.args[0]} API answers for itself")


@dataclass
class ModelSource:
    """Where this test's model answers come from (see the module docstring)."""

    mode: str  # "replay" | "fake" | "real"
    server: FakeProviderServer | None = None
    script: Script = field(default_factory=Script)

    def reset(self) -> None:
        """Start the fake server's id counters afresh (a second identical run)."""
        if self.server is not None:
            self.server.reset()

    def openai_options(
        self,
        *,
        is_async: bool = False,
        event_hooks: dict[str, list[Any]] | None = None,
        openai_host: bool = True,
    ) -> dict[str, Any]:
        """An ``openai.OpenAI`` (``is_async``: ``AsyncOpenAI``) client's options: OpenAI's
        ``base_url``, forwarded to the fake server while recording; ``event_hooks`` go
        to its httpx client. ``openai_host=False`` points the client at the fake
        server's own address (the Agents SDK adds a ``prompt_cache_key`` of its own for
        OpenAI's host; the session's tests pin the wire without it)."""
        # max_retries=0: error tests need the 429 to surface, not a retry.
        options: dict[str, Any] = {"max_retries": 0}
        if self.mode == "real":  # api.openai.com with OPENAI_API_KEY
            pass
        elif not openai_host:
            base_url = self.server.openai_base_url if self.server else f"{REPLAY_BASE_URL}/v1"
            options.update(base_url=base_url, api_key="test")
        else:
            options.update(base_url=OPENAI_BASE_URL, api_key="test")
        if (self.server is None or not openai_host) and event_hooks is None:
            return options
        server = self.server.base_url if self.server is not None and openai_host else None
        hooks = event_hooks or {}
        if is_async:
            transport: Any = _AsyncToFakeServer(server) if server else None
            options["http_client"] = openai.DefaultAsyncHttpxClient(
                transport=transport, event_hooks=hooks
            )
        else:
            transport = _ToFakeServer(server) if server else None
            options["http_client"] = openai.DefaultHttpxClient(
                transport=transport, event_hooks=hooks
            )
        return options

    def chat_openai_options(self) -> dict[str, Any]:
        """``ChatOpenAI``'s options: the same, with a sync and an async client."""
        options = self.openai_options()
        if "http_client" in options:
            options["http_async_client"] = self.openai_options(is_async=True)["http_client"]
        return options


@pytest.fixture
def openai_source(request: pytest.FixtureRequest) -> Iterator[ModelSource]:
    if record_mode(request.config) == "none":
        yield ModelSource("replay")
    elif uses_real_api(request.config, "openai"):
        yield ModelSource("real")
    else:
        with FakeProviderServer() as server:
            yield ModelSource("fake", server, server.script)


@pytest.fixture
def openai_script(openai_source: ModelSource) -> Script:
    """The fake model's replies (ignored on replay, where the cassette answers)."""
    return openai_source.script


@pytest.fixture
def openai_client(openai_source: ModelSource) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(**openai_source.openai_options()) as client:
        yield client


@pytest.fixture
async def async_openai_client(openai_source: ModelSource) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(**openai_source.openai_options(is_async=True)) as client:
        yield client


class AnthropicSource:
    """Where this test's Anthropic answers come from (as :class:`ModelSource` for OpenAI)."""

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
    """The fake model's replies (ignored on replay, where the cassette answers, and by
    the real API)."""
    return anthropic_source.script


# -- memory ------------------------------------------------------------------------------

#: The cadence the bounded-prompt tests count their turns by (the default, 5), pinned:
#: what they check is the bound a cadence gives (cadence + overlap + the current
#: turn), which a change of the default must not move silently.
COUNTED_CADENCE = 5


def at_counted_cadence(memory: ShortTermMemory) -> ShortTermMemory:
    """``memory`` with server ``g1`` at :data:`COUNTED_CADENCE`."""
    memory.configure_server("g1", refresh_cadence=COUNTED_CADENCE)
    return memory
