"""A scripted, provider-compatible HTTP server for recording SDK cassettes.

Usage::

    with FakeProviderServer() as srv:
        srv.script.reply_tool_call("lookup", {"q": "x"}).reply_text("done")
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        ...
        assert srv.requests[0].body["messages"][0]["role"] == "user"

It speaks OpenAI Chat Completions (``/v1/chat/completions``), OpenAI Responses
(``/v1/responses``) and Anthropic Messages (``/v1/messages``), JSON and SSE.
Ids, timestamps and headers are deterministic so recorded cassettes are stable.

Open-model servers: ``FakeProviderServer(models_like="vllm", context_window=8192)``
(or ``"sglang"``, ``"llamacpp"``) also answers ``GET /v1/models``,
``GET /v1/models/{id}`` and ``GET /props`` as that server does (a route the real
server lacks is its 404), and refuses a request longer than ``context_window`` with
that server's exact "context length exceeded" 400 (see :meth:`FakeProviderServer.__init__`).
"""

from __future__ import annotations

import contextlib
import copy
import email.utils
import json
import logging
import socket
import threading
import traceback
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, NamedTuple, Self, TypeAlias
from urllib.parse import unquote, urlsplit

from stm_memory.testing.prompt_cache import CacheProfile

from .script import ErrorReply, ExceededKind, Reply, Script, context_exceeded_body
from .wire_anthropic import MessagesEndpoint, anthropic_error_body
from .wire_common import (
    Endpoint,
    IdGen,
    WireContext,
    WireError,
    WireResult,
    dumps,
    json_result,
    prompt_caches,
)
from .wire_openai import ChatCompletionsEndpoint, ResponsesEndpoint, openai_error_body

__all__ = ["DEFAULT_CREATED", "FakeProviderServer", "ModelsLike", "RecordedRequest"]

logger = logging.getLogger(__name__)

DEFAULT_CREATED = 1_700_000_000
SERVER_VERSION = "FakeProvider/1.0"

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
MODELS_PATH = "/v1/models"
PROPS_PATH = "/props"

#: Which open-model server's model listing (and context-exceeded body) to imitate.
ModelsLike: TypeAlias = Literal["vllm", "sglang", "llamacpp"]


class RecordedRequest(NamedTuple):
    """One request the server received. Header names are lower-cased."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that can drop its open keep-alive connections on stop."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: FakeProviderServer) -> None:
        self.app = app
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return SERVER_VERSION

    def date_time_string(self, timestamp: float | None = None) -> str:
        return self.server.app.http_date

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self, method: str) -> None:
        raw = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        result = self.server.app.handle(method, self.path, headers, raw)
        self.send_response(result.status)
        self.send_header("Content-Type", result.content_type)
        self.send_header("Content-Length", str(len(result.body)))
        for name, value in result.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(result.body)
        self.wfile.flush()


class FakeProviderServer:
    """Scripted OpenAI/Anthropic-compatible server on ``127.0.0.1`` in a background thread.

    ``port=0`` picks a free ephemeral port; pass a fixed port if the recorded
    cassette URIs must be identical across runs. ``created`` is the fixed
    timestamp used for ``created``/``created_at`` and the HTTP ``Date`` header.
    ``strict_anthropic_alternation=False`` merges consecutive same-role Anthropic
    messages (as the live API does) instead of rejecting them with a 400.

    Usage is reported as the APIs do, from one :class:`~stm_memory.testing.PromptCache`
    per provider: ``cache_profile`` names a profile (or several, one per provider) of
    :data:`~stm_memory.testing.CACHE_PROFILES`; the defaults are ``"openai-gpt-5"`` and
    ``"anthropic-sonnet-5m"``. The server has no clock: requests follow each other at
    once, so cached prefixes do not expire. An Anthropic request with more than four
    ``cache_control`` breakpoints gets a 400, as from the API.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        created: int = DEFAULT_CREATED,
        strict_anthropic_alternation: bool = True,
        cache_profile: str | CacheProfile | Iterable[str | CacheProfile] | None = None,
        models_like: ModelsLike | None = None,
        context_window: int | None = None,
        model_id: str = "fake-model",
        n_ctx_train: int = 131_072,
        exceeded_like: ExceededKind | None = None,
    ) -> None:
        """``models_like`` makes the server describe ``model_id`` as that server does:

        - ``"vllm"``: ``GET /v1/models`` entries carry ``max_model_len``
          (``vllm/entrypoints/openai/models/serving.py``); vLLM serves no
          ``/v1/models/{id}`` and no ``/props`` (FastAPI's ``{"detail": "Not Found"}``).
        - ``"sglang"``: ``max_model_len`` in ``GET /v1/models`` and
          ``GET /v1/models/{id}`` (``python/sglang/srt/entrypoints/http_server.py``).
        - ``"llamacpp"``: a ``llama-server`` build whose ``/v1/models`` entries carry
          only ``meta.n_ctx_train`` (``n_ctx_train``, the trained context; newer builds
          add ``meta.n_ctx``), while ``GET /props`` carries the slot's context in
          ``default_generation_settings.n_ctx`` (``tools/server/server-context.cpp``).

        ``context_window`` (tokens) is that context. A chat/responses/messages request
        longer than it is refused with a 400 in ``exceeded_like``'s exact body (default:
        ``models_like``'s own, else OpenAI's or Anthropic's by endpoint; see
        :func:`~tests.fakeprovider.script.context_exceeded_body`), consuming no script
        entry. The request's tokens are estimated as its compact JSON's length / 4
        (rounded up), plus ``max_tokens`` (or ``max_completion_tokens`` /
        ``max_output_tokens``) where the imitated server counts the reply.
        """
        if context_window is not None and (
            isinstance(context_window, bool) or not isinstance(context_window, int)
        ):
            raise TypeError("context_window must be an int")
        self.script = Script()
        self.models_like: ModelsLike | None = models_like
        self.context_window = context_window
        self.model_id = model_id
        self.n_ctx_train = n_ctx_train
        self.exceeded_like: ExceededKind | None = exceeded_like
        self.http_date = email.utils.formatdate(created, usegmt=True)
        self._host = host
        self._requested_port = port
        self._ctx = WireContext(
            ids=IdGen(),
            created=created,
            strict_anthropic_alternation=strict_anthropic_alternation,
            caches=prompt_caches(cache_profile),
        )
        self._endpoints: dict[str, Endpoint] = {
            CHAT_COMPLETIONS_PATH: ChatCompletionsEndpoint(self._ctx),
            RESPONSES_PATH: ResponsesEndpoint(self._ctx),
            MESSAGES_PATH: MessagesEndpoint(self._ctx),
        }
        self._requests: list[RecordedRequest] = []
        self._requests_lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("FakeProviderServer is already running")
        httpd = _HTTPServer((self._host, self._requested_port), self)
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="FakeProviderServer",
            daemon=True,
        )
        thread.start()
        self._httpd, self._thread = httpd, thread
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeProviderServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the Anthropic client's ``base_url``."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``: the OpenAI client's ``base_url``."""
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    # -- inspection -----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of every request received so far, oldest first."""
        with self._requests_lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    @property
    def last_request(self) -> RecordedRequest:
        with self._requests_lock:
            if not self._requests:
                raise LookupError("FakeProviderServer has received no request")
            return self._requests[-1]

    def evict_caches(self) -> None:
        """Forget every cached prompt prefix, as a provider evicts them (the script and
        the recorded requests stay)."""
        for cache in self._ctx.caches.values():
            cache.clear()

    def reset(self) -> None:
        """Forget the script, recorded requests, id counters, stored responses and cached
        prompt prefixes."""
        self.script.clear()
        with self._requests_lock:
            self._requests.clear()
        self._ctx.reset()

    # -- request handling (runs on the server's worker threads) ---------------------------------

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], raw_body: bytes
    ) -> WireResult:
        """Produce the response for one request. Never raises."""
        try:
            return self._handle(method, raw_path, headers, raw_body)
        except Exception:  # a bug here should surface in the test, not hang the client
            logger.exception("FakeProviderServer failed on %s %s", method, raw_path)
            message = "FakeProviderServer internal error:\n" + traceback.format_exc()
            return json_result(
                500, openai_error_body(message, status=500), {"x-should-retry": "false"}
            )

    def _handle(
        self, method: str, raw_path: str, headers: dict[str, str], raw_body: bytes
    ) -> WireResult:
        path = urlsplit(raw_path).path
        request_id = self._ctx.ids.next("req_")
        body: dict[str, Any] = {}
        parse_error: str | None = None
        if raw_body:
            try:
                parsed = json.loads(raw_body)
            except ValueError as exc:
                parse_error = f"We could not parse the JSON body of your request. ({exc})"
            else:
                if isinstance(parsed, dict):
                    body = parsed
                else:
                    parse_error = "The request body must be a JSON object."
        with self._requests_lock:
            self._requests.append(RecordedRequest(path, body, dict(headers)))
            request_number = len(self._requests)

        endpoint = self._endpoints.get(path)
        if endpoint is None or method != "POST":
            if self.models_like is not None and method == "GET":
                return self._describe_model(path, request_id)
            return self._unknown_route(method, path, headers, request_id)
        if parse_error is not None:
            return endpoint.render_error(WireError(parse_error), request_id)
        try:
            endpoint.validate(body)
        except WireError as err:
            return endpoint.render_error(err, request_id)
        exceeded = self._exceeded(path, body)
        if exceeded is not None:
            return endpoint.render_error(exceeded, request_id)

        entry = self.script.pop()
        if entry is None:
            return self._server_error(
                endpoint,
                request_id,
                f"FakeProviderServer script is empty: no scripted reply for {method} {path} "
                f"(request #{request_number}). Enqueue one with srv.script.reply_text(...), "
                "reply_tool_call(...) etc. before the client calls the model.",
            )
        if not isinstance(entry, (Reply, ErrorReply)):
            try:
                produced: object = entry(copy.deepcopy(body))
            except Exception:
                logger.exception("FakeProviderServer reply_with callable raised")
                return self._server_error(
                    endpoint,
                    request_id,
                    "FakeProviderServer reply_with callable raised:\n" + traceback.format_exc(),
                )
            if not isinstance(produced, (Reply, ErrorReply)):
                return self._server_error(
                    endpoint,
                    request_id,
                    f"FakeProviderServer reply_with callable returned {produced!r}; "
                    "expected a Reply or ErrorReply.",
                )
            entry = produced
        if isinstance(entry, ErrorReply):
            return endpoint.render_error(entry, request_id)
        return endpoint.render(entry, body, request_id)

    # -- open-model servers -------------------------------------------------------------

    def _exceeded(self, path: str, body: dict[str, Any]) -> ErrorReply | None:
        """The imitated server's refusal of ``body`` as longer than ``context_window``."""
        window = self.context_window
        if window is None:
            return None
        kind: ExceededKind = self.exceeded_like or (
            self.models_like or ("anthropic" if path == MESSAGES_PATH else "openai")
        )
        if kind == "openai" and path == RESPONSES_PATH and self.exceeded_like is None:
            kind = "openai-responses"
        prompt = -(-len(dumps(body)) // 4)  # ceil(len(json) / 4): the documented estimate
        reserve = next(
            (
                value
                for key in ("max_tokens", "max_completion_tokens", "max_output_tokens")
                if isinstance(value := body.get(key), int) and not isinstance(value, bool)
            ),
            0,
        )
        completion = 0
        if kind in ("llamacpp", "llamacpp-old", "sglang"):
            # llama-server and SGLang refuse the prompt itself once it fills the slot
            # (``n_tokens >= n_ctx``); the reply is cut at the context instead.
            over = prompt >= window
        elif kind in ("openai", "openai-responses", "anthropic", "ollama"):
            over = prompt > window
        else:  # vLLM and Anthropic's max_tokens form count the reply's reserve too
            completion = reserve
            over = prompt + completion > window
        if not over:
            return None
        payload = context_exceeded_body(
            kind, limit=window, requested=prompt + completion, completion=completion
        )
        return ErrorReply(status=400, message="context length exceeded", body=payload)

    def _model_card(self) -> dict[str, Any]:
        created = self._ctx.created
        if self.models_like == "llamacpp":
            # get_res_model_info (tools/server/server-context.cpp), a build whose meta
            # has no n_ctx yet: what the issue measured.
            return {
                "id": self.model_id,
                "object": "model",
                "created": created,
                "owned_by": "llamacpp",
                "meta": {
                    "vocab_type": 2,
                    "n_vocab": 49152,
                    "n_ctx_train": self.n_ctx_train,
                    "n_embd": 576,
                    "n_params": 134515008,
                    "size": 138071040,
                },
            }
        card: dict[str, Any] = {
            "id": self.model_id,
            "object": "model",
            "created": created,
            "owned_by": self.models_like,
            "root": self.model_id,
            "parent": None,
            "max_model_len": self.context_window,
        }
        if self.models_like == "vllm":
            card["permission"] = [
                {
                    "id": "modelperm-1",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ]
        return card

    def _describe_model(self, path: str, request_id: str) -> WireResult:
        """``GET`` routes of the imitated server: its model listing, its single-model
        route and llama.cpp's ``/props``; any other path is that server's 404."""
        kind = self.models_like
        headers = {"x-request-id": request_id}
        if path == MODELS_PATH:
            listing: dict[str, Any] = {"object": "list", "data": [self._model_card()]}
            return json_result(200, listing, headers)
        if kind == "sglang" and path.startswith(MODELS_PATH + "/"):
            model = unquote(path[len(MODELS_PATH) + 1 :])
            if model == self.model_id:
                return json_result(200, self._model_card(), headers)
            missing = {
                "error": {
                    "message": f"The model '{model}' does not exist",
                    "type": "invalid_request_error",
                    "param": "model",
                    "code": "model_not_found",
                }
            }
            return json_result(404, missing, headers)
        if kind == "llamacpp" and path == PROPS_PATH:
            props = {
                "default_generation_settings": {
                    "params": {"n_predict": -1, "temperature": 0.8, "top_k": 40, "top_p": 0.95},
                    "n_ctx": self.context_window,
                },
                "total_slots": 1,
                "model_alias": self.model_id,
                "model_path": f"/models/{self.model_id}.gguf",
                "modalities": {"vision": False, "audio": False},
                "build_info": "b0000-fakeprovider",
            }
            return json_result(200, props, headers)
        if kind == "llamacpp":
            not_found = {
                "error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}
            }
            return json_result(404, not_found, headers)
        return json_result(404, {"detail": "Not Found"}, headers)

    @staticmethod
    def _server_error(endpoint: Endpoint, request_id: str, message: str) -> WireResult:
        result = endpoint.render_error(WireError(message, status=500), request_id)
        result.headers["x-should-retry"] = "false"  # the SDKs would otherwise retry a 500
        return result

    @staticmethod
    def _unknown_route(
        method: str, path: str, headers: dict[str, str], request_id: str
    ) -> WireResult:
        known = f"{CHAT_COMPLETIONS_PATH}, {RESPONSES_PATH}, {MESSAGES_PATH}"
        if path in (CHAT_COMPLETIONS_PATH, RESPONSES_PATH, MESSAGES_PATH):
            status, message = 405, f"Method {method} not allowed for {path}; use POST."
        else:
            status, message = (
                404,
                f"Invalid URL ({method} {path}); FakeProviderServer serves POST {known}.",
            )
        if "anthropic-version" in headers:
            body = anthropic_error_body(message, status=status, request_id=request_id)
            return json_result(status, body, {"request-id": request_id})
        return json_result(
            status, openai_error_body(message, status=status), {"x-request-id": request_id}
        )
