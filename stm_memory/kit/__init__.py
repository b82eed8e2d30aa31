"""The integration kit: what an integration author builds an entry point with.

- the memory turn every entry point drives (:mod:`.turn`, ``MemoryTurn``: it builds
  what each request sends, ``PreparedRequest``: the messages, the memory tool and its
  ``tool_choice``, the cache hints; runs the memory call, captures and ends;
  ``TurnPhase``, where it stands, and ``TurnStatus``, what it knows; ``TurnEngine``,
  what it needs of the engine; ``TurnRecord``, the one write that ends a turn) and the
  options they share (:mod:`.options`, ``TurnOptions``);
- the agent turn of the loops, written once without I/O (:mod:`.loop`), the
  operations it yields and their sync/async drivers (``Op``, ``drive``, ``adrive``),
  and the loop shells every provider loop subclasses (:mod:`.shell`);
- the providers' prompt-cache hints (:mod:`.cache_hints`: OpenAI's key, the retention
  a request asks for; Anthropic's breakpoints are its wire module's; which ones a
  request gets is the turn's decision, in its ``PreparedRequest``);
- ``writer=``'s model, for a turn model that cannot write its memory (:mod:`.writer`:
  ``Writer``, ``WriteRequest``, ``WriterLike``: what an entry point takes);
- argument checks raising the library's own errors (:mod:`.checks`) and the import
  guard of an optional SDK (:mod:`.guards`);
- one reader of requests in every format (:mod:`.requests`);
- ``Wire``, the value an API a request is written for is (its rules, how memory is
  placed in it), ``MESSAGES_WIRE`` and ``wire_for`` (a chat model's provider to its
  wire). Each API's own value, its calls read off a reply and its results sent back
  are its wire module's (:mod:`stm_memory.wire.openai_chat`,
  :mod:`~stm_memory.wire.responses`, :mod:`~stm_memory.wire.anthropic`), which the
  integrations for that API import.

Nothing behind the turn is exported: the cut and placement (each wire's), the
memory call (:mod:`stm_memory.tool.call`) and what capture is handed (:mod:`.capture`) run
inside ``MemoryTurn``. An integration imports ``stm_memory``, ``stm_memory.kit`` and
its API's wire modules only (``tests/unit/test_kit_imports.py``).
"""

from stm_memory._ops import Op, adrive, drive, op
from stm_memory.endpoints.hosts import form_for_host, is_openai_host, model_name, note_endpoint
from stm_memory.endpoints.window import (
    ContextExceeded,
    adiscover_window,
    context_exceeded_error,
    discover_window,
    history_budget,
    hosted_window,
)
from stm_memory.kit.cache_hints import cache_retention, prompt_cache_key, request_hints
from stm_memory.kit.capture import CAPTURE_WINDOW, is_dialogue, is_summary_message
from stm_memory.kit.checks import (
    MEMORY_ROLES,
    as_messages,
    check_flag,
    check_memory,
    check_memory_role,
    check_memory_setup,
    check_message_list,
    check_model,
    check_positive_int,
    check_provider,
    check_provider_name,
    check_tools,
    named_options,
    refuse_async_callables,
    refuse_reserved,
    refuse_wrong_client,
)
from stm_memory.kit.guards import missing_extra
from stm_memory.kit.long_turn import RECALL_SPEC
from stm_memory.kit.loop import (
    ModelReply,
    ProviderAdapter,
    ToolCall,
    ToolHandler,
    TurnResult,
    Usage,
    call_fitted,
    model_steps,
    run_turn_steps,
)
from stm_memory.kit.options import OptionsView, TurnOption, TurnOptions
from stm_memory.kit.replies import answer_last, answered_then_remembered, usage_of
from stm_memory.kit.requests import (
    current_user_index,
    current_user_text,
    forces_tool,
    has_tool_traffic,
    is_request_body,
    offered_tool_names,
    read_request,
    text_of,
    tool_choice_none,
    tool_name,
)
from stm_memory.kit.shell import (
    AsyncLoop,
    LoopShell,
    OnText,
    SyncLoop,
    System,
    aemit_text,
    emit_text,
)
from stm_memory.kit.turn import (
    Ask,
    Breakpoints,
    MemoryTurn,
    PlacedView,
    PreparedRequest,
    ToolOffer,
    ToolRequest,
    TurnEngine,
    TurnPhase,
    TurnStatus,
)
from stm_memory.kit.writer import WRITER_TAG, Writer, WriteRequest, WriterLike
from stm_memory.model.messages import without_speaker_ids
from stm_memory.prompt.clearing import RECALL_TOOL
from stm_memory.prompt.cut import strip_calls, strip_memory_calls
from stm_memory.prompt.placement import MemoryContext, MemoryRole
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.tool.turn import TurnRecord, failure
from stm_memory.tool.vetting import is_truncated, tool_result_text
from stm_memory.wire import OPENAI_PROVIDERS, wire_for
from stm_memory.wire.base import MESSAGES_WIRE, ToolSpec, Wire

__all__ = [
    "CAPTURE_WINDOW",
    "CONTENT_HEADER",
    "MEMORY_ROLES",
    "MESSAGES_WIRE",
    "OPENAI_PROVIDERS",
    "RECALL_SPEC",
    "RECALL_TOOL",
    "WRITER_TAG",
    "Ask",
    "AsyncLoop",
    "Breakpoints",
    "ContextExceeded",
    "LoopShell",
    "MemoryContext",
    "MemoryRole",
    "MemoryTurn",
    "ModelReply",
    "OnText",
    "Op",
    "OptionsView",
    "PlacedView",
    "PreparedRequest",
    "ProviderAdapter",
    "SyncLoop",
    "System",
    "ToolCall",
    "ToolHandler",
    "ToolOffer",
    "ToolRequest",
    "ToolSpec",
    "TurnEngine",
    "TurnOption",
    "TurnOptions",
    "TurnPhase",
    "TurnRecord",
    "TurnResult",
    "TurnStatus",
    "Usage",
    "Wire",
    "WriteRequest",
    "Writer",
    "WriterLike",
    "adiscover_window",
    "adrive",
    "aemit_text",
    "answer_last",
    "answered_then_remembered",
    "as_messages",
    "cache_retention",
    "call_fitted",
    "check_flag",
    "check_memory",
    "check_memory_role",
    "check_memory_setup",
    "check_message_list",
    "check_model",
    "check_positive_int",
    "check_provider",
    "check_provider_name",
    "check_tools",
    "context_exceeded_error",
    "current_user_index",
    "current_user_text",
    "discover_window",
    "drive",
    "emit_text",
    "failure",
    "forces_tool",
    "form_for_host",
    "has_tool_traffic",
    "history_budget",
    "hosted_window",
    "is_dialogue",
    "is_openai_host",
    "is_request_body",
    "is_summary_message",
    "is_truncated",
    "missing_extra",
    "model_name",
    "model_steps",
    "named_options",
    "note_endpoint",
    "offered_tool_names",
    "op",
    "prompt_cache_key",
    "read_request",
    "refuse_async_callables",
    "refuse_reserved",
    "refuse_wrong_client",
    "request_hints",
    "run_turn_steps",
    "strip_calls",
    "strip_memory_calls",
    "text_of",
    "tool_choice_none",
    "tool_name",
    "tool_result_text",
    "usage_of",
    "wire_for",
    "without_speaker_ids",
]
