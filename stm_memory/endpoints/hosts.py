"""Which endpoint an entry point talks to, for the one memory choice it decides: the
portable form for open models behind OpenAI-compatible servers.

Such a server (vLLM, SGLang, TGI, llama.cpp's server, Ollama) renders each request
with the model's chat template; many take one leading system message and strict
alternation, or drop every later system message — and with it the memory, while the
history cut has removed the turns the memory replaced. ``memory_role="inline"``
writes what every such template renders, so it is the default for any host other
than OpenAI's or Azure's (SPEC §8): a request whose memory a template would drop is
never the silent default. A caller names either form to choose it (a hosted service
that takes system messages anywhere may keep ``memory_role="system"``).

Where an entry point cannot see the host before it places the memory (the LCEL
history and the Agents SDK session read their view before the model is known), it
keeps the system form and says so, once, in a warning naming the option.
"""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlsplit

from stm_memory.prompt.placement import MemoryRole

__all__ = ["form_for_host", "is_openai_host", "model_name", "note_endpoint"]

log = logging.getLogger("stm_memory")

#: Hosts that take system messages anywhere in the list (OpenAI's own and Azure's).
_OPENAI_HOSTS = ("api.openai.com",)
_OPENAI_SUFFIXES = (".openai.azure.com",)
#: In-process stand-ins for OpenAI (``stm_memory.testing``'s offline clients): no
#: server renders a template there.
_STAND_IN_SUFFIX = ".invalid"

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def _host(base_url: object) -> str:
    return (urlsplit(str(base_url)).hostname or "").lower()


def is_openai_host(base_url: object) -> bool:
    """``base_url`` (a string or an httpx URL; None: the SDK's default) is OpenAI's."""
    if base_url is None:
        return True
    host = _host(base_url)
    return host in _OPENAI_HOSTS or host.endswith(_OPENAI_SUFFIXES)


def form_for_host(memory_role: MemoryRole | None, base_url: object) -> MemoryRole:
    """The form an OpenAI-style entry point writes for ``base_url``: the caller's
    ``memory_role`` when named, else the system form for OpenAI's and Azure's hosts
    (and the offline stand-ins), the portable form for any other."""
    if memory_role is not None:
        return memory_role
    if is_openai_host(base_url) or _host(base_url).endswith(_STAND_IN_SUFFIX):
        return "system"
    return "inline"


def note_endpoint(owner: str, base_url: object, memory_role: MemoryRole | None) -> None:
    """Warn, once per entry point and host, when ``owner`` — an entry point that places
    the memory before it sees the host — talks to a host other than OpenAI's with no
    form named (it keeps the system form)."""
    if memory_role is not None or form_for_host(None, base_url) != "inline":
        return
    host = urlsplit(str(base_url)).netloc or str(base_url)
    with _lock:
        if (owner, host) in _warned:
            return
        _warned.add((owner, host))
    log.warning(
        "stm-memory: %s talks to %s, not OpenAI, and places the memory before it sees "
        "the model: it keeps system messages. If that server runs an open model with its "
        "chat template (vLLM, SGLang, TGI, llama.cpp, Ollama), pass memory_role='inline': "
        "many templates refuse a second system message or drop it, and with it the "
        "memory (docs: open-models.md). memory_role='system' says you chose it.",
        owner,
        host,
    )


def model_name(model: object) -> str | None:
    """The name of the model a framework's model object calls (LangChain's
    ``ChatOpenAI.model_name``, ``ChatAnthropic.model``, an Agents SDK model's
    ``model``), or the string itself; None when it names none. The judgement of
    whether a model writes its memory is said once per name, and its context window is
    looked up by it."""
    if isinstance(model, str):
        return model.strip() or None
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
