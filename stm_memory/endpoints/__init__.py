"""The endpoint a model is served from, as the turn needs to know it: which host
(OpenAI's own, or an OpenAI-compatible server of an open model: :mod:`.hosts`) and how
many tokens a request may hold there — asked of the server, looked up for hosted models,
and read off the provider's refusal when a request held more (:mod:`.window`).

Beside the wire (which says how a request is written) and under the turn kit (which
decides what a request carries): server discovery and error parsing, nothing of a
turn's rules.
"""

from stm_memory.endpoints.hosts import form_for_host, is_openai_host, model_name, note_endpoint
from stm_memory.endpoints.window import (
    HOSTED_WINDOWS,
    ContextExceeded,
    adiscover_window,
    context_exceeded,
    context_exceeded_error,
    discover_window,
    history_budget,
    hosted_window,
    window_from_listing,
)

__all__ = [
    "HOSTED_WINDOWS",
    "ContextExceeded",
    "adiscover_window",
    "context_exceeded",
    "context_exceeded_error",
    "discover_window",
    "form_for_host",
    "history_budget",
    "hosted_window",
    "is_openai_host",
    "model_name",
    "note_endpoint",
    "window_from_listing",
]
