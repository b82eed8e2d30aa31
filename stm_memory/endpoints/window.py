"""The model's context window: how many tokens a request may hold, where it can be known,
and what a provider says when a request held more. Pure, except the two discovery
functions at the end, which ask the server once.

Three sources, best first (docs/open-models.md):

1. **The server's own description of the model** (:func:`window_from_listing`,
   :func:`discover_window`). An OpenAI-compatible server that runs the model knows the
   context it was started with; each says it in its own field:

   - vLLM ``GET /v1/models``: each entry's ``max_model_len`` (``ModelCard(max_model_len=
     model_config.max_model_len)`` in ``vllm/entrypoints/openai/models/serving.py``,
     https://github.com/vllm-project/vllm).
   - SGLang ``GET /v1/models``: ``max_model_len`` as well (``class ModelCard`` in
     ``python/sglang/srt/entrypoints/openai/protocol.py``,
     https://github.com/sgl-project/sglang).
   - llama.cpp ``llama-server``: ``GET /props`` carries
     ``default_generation_settings.n_ctx``, the slot's context, which is what a request
     must fit; ``GET /v1/models`` entries carry ``meta.n_ctx`` (the same slot context,
     in newer builds) and ``meta.n_ctx_train`` (the context the model was *trained*
     with, often far larger than the slot) — ``get_res_props`` / ``get_res_model_info``
     in ``tools/server/server-context.cpp``, https://github.com/ggml-org/llama.cpp.
   - Ollama ``POST /api/show``: ``parameters`` (a text of ``name value`` lines) may set
     ``num_ctx``, the context the model is run with; ``model_info["<arch>.context_length"]``
     is the trained length (``ShowResponse`` in ``api/types.go``,
     https://github.com/ollama/ollama); ``GET /api/ps`` entries carry the loaded
     ``context_length`` (``ProcessModelResponse``, same file).
   - LM Studio ``GET /api/v0/models``: ``max_context_length``
     (https://lmstudio.ai/docs/api/rest-api); a loaded instance's
     ``loaded_instances[].config.context_length`` (``/api/v1/models``) is preferred —
     that shape is read from third-party descriptions, not verified against LM Studio.

2. **A table of hosted models** (:data:`HOSTED_WINDOWS`, :func:`hosted_window`), for
   OpenAI's and Anthropic's own hosts, which do not say it.

3. **A documented default** otherwise (the caller's; this module has none).

When a request is longer anyway, the provider answers 400 with its own body;
:func:`context_exceeded` recognises each real one and reads the numbers it states, so
the entry point can cut the history to fit and send once more
(:func:`context_exceeded_error` reads them off the SDK's exception).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

from stm_memory._ops import Op, adrive, drive
from stm_memory.endpoints.hosts import is_openai_host
from stm_memory.errors import ConfigurationError

__all__ = [
    "HOSTED_WINDOWS",
    "ContextExceeded",
    "adiscover_window",
    "context_exceeded",
    "context_exceeded_error",
    "discover_window",
    "history_budget",
    "hosted_window",
    "window_from_listing",
]

log = logging.getLogger("stm_memory")

# ---------------------------------------------------------------------------------------
# Hosted models
# ---------------------------------------------------------------------------------------

_OPENAI_GPT5_INPUT = 272_000
_OPENAI_GPT54_INPUT = 922_000
_CLAUDE_1M = 1_000_000

#: The most tokens a request's *input* may hold on OpenAI's and Anthropic's own APIs,
#: matched on the longest prefix of the model name (``provider/`` stripped, case-folded).
#: This is the context window the providers list, except where the input is capped
#: below it: the GPT-5 family lists 400,000 tokens of which up to 128,000 are reserved
#: for output, and OpenAI refuses more than 272,000 input tokens ("Input tokens exceed
#: the configured limit of 272,000 tokens", https://community.openai.com/t/1344734; the
#: split is stated in OpenAI's GPT-5 launch post, not on the model pages).
#:
#: Sources (checked 2026-08 through aggregators that mirror OpenAI's model pages; OpenAI's
#: own pages were not in the searchable corpus): GPT-5/5.1/5.2 and 5.4-mini/-nano 400,000
#: (https://vercel.com/ai-gateway/models/gpt-5-nano.md, .../openai/gpt-5.2-fast.md,
#: .../openai/gpt-5.4-nano.md, .../gpt-5.4-mini-fast.md); GPT-5.4 1,050,000 with
#: "922K input, 128K output" (https://wavespeed.ai/pt/llm/openai/gpt-5.4,
#: https://vercel.com/ai-gateway/models/gpt-5.4.md); GPT-5.5 1,050,000
#: (https://docs.oxen.ai/inference-api/reference/models/gpt-5-5-2026-04-23.md — its
#: input split is assumed equal to 5.4's, unverified); gpt-5-chat / gpt-5.1-chat-latest
#: 128,000 (https://github.com/labring/fastgpt-plugin/pull/297); GPT-4.1 family 1,047,576
#: (https://contextwindows.dev/models/gpt-4-1); GPT-4o 128,000
#: (https://gitlab.com/gitlab-org/modelops/ai-model-validation-and-research/ai-evaluation/prompt-library/-/issues/297
#: citing platform.openai.com/docs/models/gpt-4o); o3 / o4-mini 200,000
#: (https://vercel.com/ai-gateway/models/o4-mini.md, https://github.com/RooCodeInc/Roo-Code/pull/2691
#: citing platform.openai.com/docs/models/o3); the older rows (o1, gpt-4, gpt-3.5,
#: gpt-oss) are the long-published values, not re-checked.
#:
#: Anthropic (https://platform.claude.com/docs/models/overview and each model's page):
#: Opus 4.6 and Sonnet 4.6 1M (…/models/opus-4-6/overview, …/models/sonnet-4-6/overview);
#: the Claude 5 family (Opus 5, Sonnet 5, Fable 5, and their 5.5 / 5.1 successors) 1M;
#: Haiku 4.5 200K. Opus 4 / 4.1 / 4.5 and Sonnet 4 / 4.5 are 200K by default (1M only with
#: a beta header, which a caller who sends it can state with ``context_window=``); any
#: other ``claude-opus-4-*`` (4.7, 4.8 — listed at 1M by third parties, not checked)
#: falls to the 200K row: too small a window only costs history, never a failed turn.
HOSTED_WINDOWS: Final[Mapping[str, int]] = {
    # OpenAI
    "gpt-5.5": _OPENAI_GPT54_INPUT,
    "gpt-5.4": _OPENAI_GPT54_INPUT,
    "gpt-5.4-mini": _OPENAI_GPT5_INPUT,
    "gpt-5.4-nano": _OPENAI_GPT5_INPUT,
    "gpt-5": _OPENAI_GPT5_INPUT,
    "gpt-5-chat": 128_000,
    "gpt-5.1-chat": 128_000,
    "gpt-5.2-chat": 128_000,  # unverified: assumed like the other chat variants
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "codex-mini": 200_000,
    "gpt-oss": 131_072,
    # Anthropic
    "claude-fable-5": _CLAUDE_1M,
    "claude-opus-5": _CLAUDE_1M,
    "claude-sonnet-5": _CLAUDE_1M,
    "claude-opus-4-6": _CLAUDE_1M,
    "claude-sonnet-4-6": _CLAUDE_1M,
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3": 200_000,  # 3 Opus/Sonnet/Haiku, 3.5 Sonnet/Haiku, 3.7 Sonnet
}


def hosted_window(model: str) -> int | None:
    """The input window of a hosted OpenAI or Anthropic model (:data:`HOSTED_WINDOWS`,
    longest matching prefix of the name after any ``provider/`` prefix, case-folded),
    else None. Meant for OpenAI's, Azure's and Anthropic's own hosts: a model an
    OpenAI-compatible server runs is described by the server (:func:`discover_window`)."""
    name = model.rsplit("/", 1)[-1].strip().casefold()
    matches = [key for key in HOSTED_WINDOWS if name.startswith(key)]
    return HOSTED_WINDOWS[max(matches, key=len)] if matches else None


def history_budget(window: int) -> int:
    """The history token budget for a model of ``window`` tokens: three quarters of it.

    The other quarter is left for what the request carries beside the history — the
    caller's system prompt and tools, the memory block and briefings, the current turn's
    estimate error (our count is about four characters a token; a server's tokenizer
    may count more) — and for the reply, which shares the window on every server that
    runs the model itself (vLLM, llama.cpp, SGLang count prompt + ``max_tokens``)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigurationError(f"context_window must be an integer >= 1, got {window!r}")
    return window * 3 // 4


# ---------------------------------------------------------------------------------------
# A server's description of the model
# ---------------------------------------------------------------------------------------

_NUM_CTX_LINE = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _positive(value: object) -> int | None:
    # bool is an int; a window of True tokens is nobody's answer.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _mapping(value: object) -> Mapping[str, object] | None:
    return value if isinstance(value, Mapping) else None


def _mappings(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _ollama_num_ctx(parameters: object) -> int | None:
    # /api/show sends the Modelfile parameters as text ("num_ctx    8192\nstop ...");
    # accept a mapping too, as clients that re-shape it do.
    if isinstance(parameters, str):
        found = _NUM_CTX_LINE.search(parameters)
        return _positive(int(found.group(1))) if found else None
    params = _mapping(parameters)
    return _positive(params.get("num_ctx")) if params is not None else None


def _ollama_trained(model_info: Mapping[str, object]) -> int | None:
    arch = model_info.get("general.architecture")
    if isinstance(arch, str) and f"{arch}.context_length" in model_info:
        return _positive(model_info[f"{arch}.context_length"])
    values = [v for k, v in model_info.items() if k.endswith(".context_length")]
    return _positive(values[0]) if len(values) == 1 else None


def _served_window(data: Mapping[str, object]) -> int | None:
    """The context the server runs the model with, where its description says it."""
    # llama.cpp /props: the slot's context.
    settings = _mapping(data.get("default_generation_settings"))
    if settings is not None and (n_ctx := _positive(settings.get("n_ctx"))):
        return n_ctx
    # llama.cpp /v1/models entry (newer builds): meta.n_ctx is the slot's context too.
    meta = _mapping(data.get("meta"))
    if meta is not None and (n_ctx := _positive(meta.get("n_ctx"))):
        return n_ctx
    # vLLM and SGLang /v1/models entries.
    if window := _positive(data.get("max_model_len")):
        return window
    # LM Studio /api/v1/models: a loaded instance's configured context.
    for instance in _mappings(data.get("loaded_instances")):
        config = _mapping(instance.get("config"))
        if config is not None and (window := _positive(config.get("context_length"))):
            return window
    # Ollama /api/ps entry: the loaded context; /api/show: the Modelfile's num_ctx.
    if window := _positive(data.get("context_length")):
        return window
    if window := _ollama_num_ctx(data.get("parameters")):
        return window
    # LM Studio /api/v0/models: the most the model may be loaded with.
    return _positive(data.get("max_context_length"))


def _trained_window(data: Mapping[str, object]) -> int | None:
    """The context the model was trained with: an upper bound, used only when the
    server does not say what it runs (llama.cpp's slot is often far smaller)."""
    meta = _mapping(data.get("meta"))
    if meta is not None and (n_ctx := _positive(meta.get("n_ctx_train"))):
        return n_ctx
    model_info = _mapping(data.get("model_info"))
    return _ollama_trained(model_info) if model_info is not None else None


def _single_entry(data: Mapping[str, object]) -> Mapping[str, object] | None:
    # A whole listing ({"data": [...]}, Ollama's {"models": [...]}) of one model.
    for key in ("data", "models"):
        entries = _mappings(data.get(key))
        if len(entries) == 1:
            return entries[0]
    return None


def window_from_listing(data: Mapping[str, object]) -> int | None:
    """The context window an OpenAI-compatible server states for a model, from its own
    description of it (the shapes are listed in this module's docstring): a vLLM or
    SGLang ``/v1/models`` entry, llama.cpp's ``/props`` or ``/v1/models`` entry, Ollama's
    ``/api/show`` or ``/api/ps`` entry, LM Studio's model entry, or a whole listing of a
    single model. What the server runs with wins over what the model was trained with.
    A value that is not a positive ``int`` is ignored; None when nothing usable is
    stated."""
    if not isinstance(data, Mapping):
        return None
    window = _served_window(data) or _trained_window(data)
    if window is None and (entry := _single_entry(data)) is not None:
        window = _served_window(entry) or _trained_window(entry)
    return window


# ---------------------------------------------------------------------------------------
# "Context length exceeded"
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContextExceeded:
    """A provider's refusal of a request longer than the model's context: the limit
    and the tokens the request needed, where its message states them (``requested``
    counts the reply's reserve too when the provider adds it), and the message."""

    limit: int | None
    requested: int | None
    message: str


_N = r"(\d[\d,]*)"  # OpenAI writes "272,000"; the others plain digits

#: Each provider's wording, with its numbers. Groups: ``limit``, ``requested`` (the
#: total the provider compared), or ``prompt`` + ``completion`` (summed). The exact
#: bodies these come from are in tests/unit/test_context_window.py.
_MESSAGES: Final[tuple[re.Pattern[str], ...]] = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        # llama.cpp tools/server/server-context.cpp (update_slots), type
        # exceed_context_size_error; the second with a non-splittable batch.
        rf"request \((?P<requested>{_N}) tokens\) exceeds the available context size "
        rf"\((?P<limit>{_N}) tokens\)",
        rf"input \((?P<requested>{_N}) tokens\) is larger than the max context size "
        rf"\((?P<limit>{_N}) tokens\)",
        # SGLang python/sglang/srt/managers/tokenizer_manager.py (_validate_token_len).
        rf"the input \((?P<requested>{_N}) tokens\) is longer than the model's context "
        rf"length \((?P<limit>{_N}) tokens\)",
        rf"exceeds the model's maximum context length of (?P<limit>{_N}) tokens\. "
        rf"you requested a total of (?P<requested>{_N}) tokens",
        # vLLM vllm/renderers/params.py (TokenizeParams._token_len_check), current.
        rf"you passed (?P<prompt>{_N}) input tokens and requested (?P<completion>{_N}) "
        rf"output tokens\. however, the model's context length is only (?P<limit>{_N}) tokens",
        # ... and its pre-tokenization check, in characters: no token count to read.
        rf"you passed {_N} input characters and requested {_N} output tokens\. however, "
        rf"the model's context length is only (?P<limit>{_N}) tokens",
        # vLLM 0.10-0.11 (serving_engine / renderer).
        rf"maximum context length is (?P<limit>{_N}) tokens\. however, you requested "
        rf"(?P<completion>{_N}) output tokens and your prompt contains at least "
        rf"(?P<prompt>{_N}) input tokens(?:, for a total of at least (?P<requested>{_N}) tokens)?",
        rf"maximum context length is (?P<limit>{_N}) tokens\. however, you requested "
        rf"{_N} output tokens and your prompt contains {_N} characters",
        rf"'max_tokens' or 'max_completion_tokens' is too large: (?P<completion>{_N})\. "
        rf"this model's maximum context length is (?P<limit>{_N}) tokens and your request "
        rf"has (?P<prompt>{_N}) input tokens",
        rf"the decoder prompt \(length (?P<requested>{_N})\) is longer than the maximum "
        rf"model length of (?P<limit>{_N})",
        # OpenAI (and vLLM before 0.10, which copied it): "you requested N tokens (A in
        # the messages, B in the completion)", "your messages resulted in N tokens";
        # OpenRouter's "This endpoint's ... you requested about N tokens".
        rf"(?:model|endpoint)'s maximum context length is (?P<limit>{_N}) tokens[.,]? "
        rf"however,? (?:you requested (?:about )?|your (?:messages|prompt) resulted in )"
        rf"(?P<requested>{_N}) tokens",
        # OpenAI, GPT-5's input cap.
        rf"input tokens exceed the configured limit of (?P<limit>{_N}) tokens\. "
        rf"your messages resulted in (?P<requested>{_N}) tokens",
        # Anthropic: the prompt alone, and the prompt with max_tokens.
        rf"prompt is too long: (?P<requested>{_N}) tokens > (?P<limit>{_N}) maximum",
        rf"input length and `?max_tokens`? exceed context limit: (?P<prompt>{_N}) \+ "
        rf"(?P<completion>{_N}) > (?P<limit>{_N})",
        # No numbers: OpenAI Responses; Ollama (llm/llama_server.go, server/routes.go).
        r"your input exceeds the context window of this model",
        r"the prompt is longer than the context length currently available to the model",
        r"the input length exceeds the context length",
        r"input exceeds maximum context length",
    )
)

#: Error ``code`` / ``type`` values that say it whatever the message: OpenAI's code;
#: llama.cpp's type (``format_error_response`` in tools/server/server-common.cpp).
_CODES: Final = frozenset({"context_length_exceeded"})
_TYPES: Final = frozenset({"exceed_context_size_error"})


def _number(text: str | None) -> int | None:
    return int(text.replace(",", "")) if text else None


def _parsed(body: object) -> object:
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, str):
        text = body.strip()
        try:
            return json.loads(text)
        except ValueError:
            return text
    return body


def _error_object(body: Mapping[str, object]) -> Mapping[str, object]:
    # {"error": {...}}: OpenAI, vLLM, llama.cpp, Ollama /v1, Anthropic's inner error;
    # the SDKs' exception ``body`` and SGLang's top-level {"object": "error", ...} are
    # already the error object.
    inner = _mapping(body.get("error"))
    return inner if inner is not None else body


def _message_of(error: Mapping[str, object], body: Mapping[str, object]) -> str:
    for source, key in ((error, "message"), (body, "error"), (body, "detail"), (body, "message")):
        value = source.get(key)
        if isinstance(value, str):
            return value
    return ""


def _read_message(message: str) -> tuple[bool, int | None, int | None]:
    for pattern in _MESSAGES:
        found = pattern.search(message)
        if found is None:
            continue
        groups = found.groupdict()
        limit = _number(groups.get("limit"))
        requested = _number(groups.get("requested"))
        prompt, completion = _number(groups.get("prompt")), _number(groups.get("completion"))
        if requested is None and prompt is not None:
            requested = prompt + (completion or 0)
        return True, limit, requested
    return False, None, None


def context_exceeded(status: int | None, body: object) -> ContextExceeded | None:
    """The provider said the request is longer than the model's context: its limit and
    the tokens requested where the message states them, else None.

    ``body`` is the response body as a parsed mapping, a JSON string or bytes (a plain
    text body is read as the message), or the error object an SDK exception carries.
    Recognised: OpenAI's ``context_length_exceeded`` code and messages, llama.cpp's
    ``exceed_context_size_error`` (with ``n_prompt_tokens`` / ``n_ctx`` where sent),
    vLLM's, SGLang's and Anthropic's messages, Ollama's. A ``status`` other than a 4xx
    (a 429 neither) is not a context error; None leaves it unchecked."""
    if status is not None and (status < 400 or status >= 500 or status == 429):
        return None
    parsed = _parsed(body)
    if isinstance(parsed, str):
        error: Mapping[str, object] = {}
        message = parsed
    elif isinstance(parsed, Mapping):
        error = _error_object(parsed)
        message = _message_of(error, parsed)
    else:
        return None
    matched, limit, requested = _read_message(message)
    marked = error.get("code") in _CODES or error.get("type") in _TYPES
    if not (matched or marked):
        return None
    # llama.cpp states the numbers as fields too (server_task_result_error::to_json).
    limit = _positive(error.get("n_ctx")) or limit
    requested = _positive(error.get("n_prompt_tokens")) or requested
    return ContextExceeded(limit=limit, requested=requested, message=message)


def _exception_chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _response_text(response: object) -> str | None:
    text = getattr(response, "text", None)
    return text if isinstance(text, str) else None


def context_exceeded_error(exc: BaseException) -> ContextExceeded | None:
    """:func:`context_exceeded` for a raised error: an ``openai`` or ``anthropic``
    ``APIStatusError`` (read by duck typing — ``status_code`` and ``body`` or
    ``response``; neither SDK is imported), or one a framework wrapped (LangChain
    raises its own error ``from`` the SDK's): the ``__cause__`` / ``__context__`` chain
    is searched. None when none of them is a context-length refusal."""
    for error in _exception_chain(exc):
        status = getattr(error, "status_code", None)
        if not isinstance(status, int) or isinstance(status, bool):
            status = None
        candidates: list[object] = []
        body = getattr(error, "body", None)
        if body is not None:
            candidates.append(body)
        text = _response_text(getattr(error, "response", None))
        if text:
            candidates.append(text)
        if status is not None:
            # The SDKs' own message ("Error code: 400 - {...}") carries the body too.
            candidates.append(str(error))
        for candidate in candidates:
            found = context_exceeded(status, candidate)
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------------------------------
# Discovery (the only I/O here)
# ---------------------------------------------------------------------------------------

_TIMEOUT = 5.0
_SKIP_HOSTS = ("api.anthropic.com",)
_STAND_IN_SUFFIX = ".invalid"


@dataclass(frozen=True, slots=True)
class _Call:
    """One request the discovery plan asks its driver to make."""

    kind: str  # "retrieve", "list", "get", "post"
    url: str = ""
    body: Mapping[str, object] | None = None


# What the driver sends back: the parsed answer (a mapping, a list of entries) or None
# when the request failed.
_Answer = Mapping[str, object] | list[Mapping[str, object]] | None


def _plan(quiet: Any, model: str, root: str) -> Generator[Op, Any, int | None]:
    """Which description to ask for next, sans I/O, so the sync and async drivers
    cannot drift: the model's own entry, then the listing's entry for it (a server of
    one model whatever its name: that entry), then llama.cpp's ``/props``, Ollama's
    ``/api/show`` (and its ``/api/ps`` when the Modelfile sets no ``num_ctx``), LM
    Studio's ``/api/v0/models/{id}``. The first served window wins; a trained window
    is the last resort. Each request is one :class:`Op`; a failed one answers None
    and the plan goes on."""
    trained: int | None = None

    def ask(call: _Call) -> Generator[Op, Any, _Answer]:
        request = functools.partial(_request, quiet, call, model)
        try:
            return _parsed_answer(call, (yield Op(request, request, f"discover:{call.kind}")))
        except Exception as exc:
            _failed(call, model, exc)
            return None

    def note(data: Mapping[str, object] | None) -> int | None:
        nonlocal trained
        if data is None:
            return None
        trained = trained or _trained_window(data)
        return _served_window(data)

    entry = _mapping((yield from ask(_Call("retrieve"))))
    if (window := note(entry)) is not None:
        return window
    listing = yield from ask(_Call("list"))
    entries = listing if isinstance(listing, list) else []
    named = [e for e in entries if e.get("id") == model]
    chosen = named[0] if named else (entries[0] if len(entries) == 1 else None)
    if (window := note(chosen)) is not None:
        return window
    if (window := note(_mapping((yield from ask(_Call("get", f"{root}/props")))))) is not None:
        return window
    shown = _mapping((yield from ask(_Call("post", f"{root}/api/show", {"model": model}))))
    if (window := note(shown)) is not None:
        return window
    if shown is not None:
        # Ollama without num_ctx: the loaded model's context (/api/ps) beats the
        # trained length, which is often far more than the server gives it.
        running = _mapping((yield from ask(_Call("get", f"{root}/api/ps"))))
        loaded = _mappings(running.get("models")) if running is not None else []
        mine = [m for m in loaded if model in (m.get("name"), m.get("model"))]
        if mine and (window := _served_window(mine[0])) is not None:
            return window
    lmstudio = _Call("get", f"{root}/api/v0/models/{quote(model, safe='')}")
    if (window := note(_mapping((yield from ask(lmstudio))))) is not None:
        return window
    return trained


def _root(base_url: object) -> str:
    # llama.cpp's /props and Ollama's /api/* sit beside /v1, not under it.
    root = str(base_url).rstrip("/")
    return root.removesuffix("/v1")


def _skipped(client: object) -> bool:
    base_url = getattr(client, "base_url", None)
    if base_url is None or getattr(client, "models", None) is None:
        return True
    host = (urlsplit(str(base_url)).hostname or "").lower()
    return is_openai_host(base_url) or host in _SKIP_HOSTS or host.endswith(_STAND_IN_SUFFIX)


def _quiet(client: Any) -> Any:
    # One try each, briefly: discovery must never hold up (or retry into) a turn.
    with_options = getattr(client, "with_options", None)
    if callable(with_options):
        try:
            return with_options(max_retries=0, timeout=_TIMEOUT)
        except Exception:  # an SDK without these options: use the client as it is
            return client
    return client


def _as_dict(value: object) -> Mapping[str, object] | None:
    # An SDK model keeps a server's extra fields (max_model_len, meta) in model_extra;
    # to_dict() / model_dump() return them with the declared ones.
    for name in ("to_dict", "model_dump"):
        method = getattr(value, name, None)
        if callable(method):
            try:
                dumped = method()
            except Exception:
                continue
            if isinstance(dumped, Mapping):
                return dumped
    return _mapping(value)


def _entries(page: object) -> list[Mapping[str, object]]:
    data = getattr(page, "data", page)
    if not isinstance(data, list):
        return []
    return [d for d in (_as_dict(item) for item in data) if d is not None]


def _json(text: object) -> Mapping[str, object] | None:
    parsed = _parsed(text)
    return _mapping(parsed)


def _failed(call: _Call, model: str, exc: Exception) -> None:
    log.debug(
        "stm-memory: context-window discovery for %s: %s %s failed: %s",
        model,
        call.kind,
        call.url,
        exc,
    )


def discover_window(client: object, model: str) -> int | None:
    """The context window the server behind an ``openai.OpenAI`` client states for
    ``model`` (:func:`window_from_listing`): ``client.models.retrieve(model)``, then the
    ``client.models.list()`` entry, then llama.cpp's ``/props``, Ollama's ``/api/show``
    (``/api/ps``) and LM Studio's ``/api/v0/models`` beside the ``/v1`` base URL — each asked once,
    without retries, stopping at the first that says it. None for OpenAI's, Azure's and
    Anthropic's hosts (use :func:`hosted_window` there) and when no answer says it; a
    failed request is logged at debug level, never raised."""
    return drive(_discovery(client, model))


async def adiscover_window(client: object, model: str) -> int | None:
    """:func:`discover_window` for an ``openai.AsyncOpenAI`` client."""
    return await adrive(_discovery(client, model))


def _request(quiet: Any, call: _Call, model: str) -> Any:
    """The SDK call for ``call`` (a value from a sync client, an awaitable from an
    async one: the same methods on both)."""
    if call.kind == "retrieve":
        return quiet.models.retrieve(model)
    if call.kind == "list":
        return quiet.models.list()
    if call.kind == "get":
        return quiet.get(call.url, cast_to=str)
    return quiet.post(call.url, cast_to=str, body=dict(call.body or {}))


def _parsed_answer(call: _Call, raw: object) -> _Answer:
    if call.kind == "retrieve":
        return _as_dict(raw)
    if call.kind == "list":
        return _entries(raw)
    return _json(raw)


def _discovery(client: object, model: str) -> Generator[Op, Any, int | None]:
    """:func:`_plan` for ``client``, one body for :func:`drive` and :func:`adrive`."""
    if _skipped(client):
        return None
    root = _root(getattr(client, "base_url", ""))
    return _positive((yield from _plan(_quiet(client), model, root)))
