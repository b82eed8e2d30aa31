"""Local, scripted OpenAI/Anthropic-compatible HTTP server for cassette recording.

    with FakeProviderServer() as srv:                 # 127.0.0.1, ephemeral port
        srv.script.reply_tool_call("update_short_term_memory", {"summary": "..."})
        srv.script.reply_text("Done.")
        oai = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        ant = anthropic.Anthropic(base_url=srv.base_url, api_key="test", max_retries=0)
        ...                                           # run the agent loop
        path, body, headers = srv.requests[0]

Endpoints: POST /v1/chat/completions, /v1/responses, /v1/messages, each JSON or SSE
(``stream: true``). One script entry is consumed per accepted request, whichever
endpoint is called. A request the real provider would reject (tool-call/result
pairing, Anthropic role alternation) gets a 400 in that provider's error shape and
consumes nothing; an empty script gives a 500 (``x-should-retry: false``).
Usage is the APIs' own, with a prompt cache per provider
(:class:`stm_memory.testing.PromptCache`; ``FakeProviderServer(cache_profile=...)``): a
repeated prefix of 1024+ tokens is reported as cached (OpenAI ``cached_tokens``, Anthropic
``cache_read_input_tokens`` / ``cache_creation_input_tokens`` at ``cache_control``
breakpoints; more than four breakpoints get a 400).
Ids are counters per server (chatcmpl-1, resp_1, msg_1, fc_1, call_1, msg_01,
toolu_01, req_1), timestamps and the ``Date`` header are fixed, so cassettes
recorded twice on the same port are byte-identical.
"""

from __future__ import annotations

from .script import ErrorReply, Reply, ReplyFn, Script, ToolCall
from .server import DEFAULT_CREATED, FakeProviderServer, RecordedRequest
from .wire_anthropic import parse_partial_json

__all__ = [
    "DEFAULT_CREATED",
    "ErrorReply",
    "FakeProviderServer",
    "RecordedRequest",
    "Reply",
    "ReplyFn",
    "Script",
    "ToolCall",
    "parse_partial_json",
]
