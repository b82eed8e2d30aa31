"""Which endpoint an entry point talks to, for the one memory choice it decides: the
portable form for open models behind OpenAI-compatible servers.

Such a server (vLLM, SGLang, TGI, llama.cpp's server, Ollama) renders each request
with the model's chat template; many take one leading system message and strict
alternation, or drop every later system message — and with it the memory, while the
history cut has removed the turns the memory replaced. ``memory_role="inline"``
writes what every such template renders. It is not picked silently: OpenAI-compatible
hosted services that take system messages would see their prompts change. Instead an
entry point built for another host than OpenAI's says so, once, in a warning that
names the option.
"""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlsplit

__all__ = ["is_openai_host", "note_endpoint"]

log = logging.getLogger("stm_memory")

#: Hosts that take system messages anywhere in the list (OpenAI's own and Azure's).
_OPENAI_HOSTS = ("api.openai.com",)
_OPENAI_SUFFIXES = (".openai.azure.com",)

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def is_openai_host(base_url: object) -> bool:
    """``base_url`` (a string or an httpx URL; None: the SDK's default) is OpenAI's."""
    if base_url is None:
        return True
    host = (urlsplit(str(base_url)).hostname or "").lower()
    return host in _OPENAI_HOSTS or host.endswith(_OPENAI_SUFFIXES)


def note_endpoint(owner: str, base_url: object, memory_role: str) -> None:
    """Warn, once per entry point and host, when ``owner`` talks to a host other than
    OpenAI's without the portable form."""
    if memory_role == "inline" or is_openai_host(base_url):
        return
    host = urlsplit(str(base_url)).netloc or str(base_url)
    if host.endswith(".invalid"):  # an in-process stand-in (the offline clients)
        return
    with _lock:
        if (owner, host) in _warned:
            return
        _warned.add((owner, host))
    log.warning(
        "stm-memory: %s talks to %s, not OpenAI. If that server runs an open model with "
        "its chat template (vLLM, SGLang, TGI, llama.cpp, Ollama), pass "
        "memory_role='inline': many templates refuse a second system message or drop it, "
        "and with it the memory (README: 'Open models').",
        owner,
        host,
    )
