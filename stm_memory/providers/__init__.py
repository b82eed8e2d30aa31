"""The kit provider integrations build on.

- the memory turn every entry point drives (:mod:`.turn`, ``MemoryTurn``) and the
  options they share (:mod:`.options`, ``TurnOptions``);
- the agent turn of the loops, written once without I/O (:mod:`.loop`), the
  operations it yields and their sync/async drivers (:mod:`.ops`), and the loop shells
  every provider loop subclasses (:mod:`.shell`);
- the providers' prompt-cache hints (:mod:`.cache_hints`);
- argument checks raising the library's own errors (:mod:`.checks`) and the import
  guard of an optional SDK (:mod:`.guards`);
- wire helpers per API: OpenAI Chat (:mod:`.wire_chat`), Responses
  (:mod:`.wire_responses`), Anthropic Messages (:mod:`.wire_anthropic`);
- one reader of requests in every format (:mod:`.requests`); what capture is handed
  (:mod:`.capture`) and one memory call (:mod:`.memory_call`), the steps behind
  ``MemoryTurn.finish`` and ``MemoryTurn.memory_call``;
- the core functions integrations need, re-exported: an integration imports
  ``stm_memory`` and ``stm_memory.providers`` only.
"""

from typing import TYPE_CHECKING, Any

from stm_memory.model.messages import message_text, without_speaker_ids
from stm_memory.prompt.cut import strip_memory_calls
from stm_memory.prompt.placement import MemoryContext, MemoryRole
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.providers.cache_hints import (
    MAX_BREAKPOINTS,
    agreed_ttl,
    anthropic_breakpoints,
    breakpoint_marker,
    breakpoint_markers,
    count_breakpoints,
    dialogue_breakpoint,
    prompt_cache_key,
)
from stm_memory.providers.capture import (
    dialogue_for_capture,
    is_dialogue,
    is_summary_message,
    needs_previous,
    stored_as_dicts,
)
from stm_memory.providers.checks import (
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
    check_tools,
    refuse_async_callables,
    refuse_reserved,
    refuse_wrong_client,
)
from stm_memory.providers.endpoints import is_openai_host, note_endpoint
from stm_memory.providers.guards import missing_extra
from stm_memory.providers.loop import (
    ModelReply,
    ProviderAdapter,
    ToolCall,
    ToolHandler,
    TurnResult,
    Usage,
    run_turn_steps,
)
from stm_memory.providers.memory_call import run_memory_call
from stm_memory.providers.ops import Op, adrive, attempt, drive, op
from stm_memory.providers.options import OptionsView, TurnOption, TurnOptions
from stm_memory.providers.requests import (
    MessageKind,
    RequestMessage,
    content_texts,
    is_request_body,
    last_user_text,
    offered_tool_names,
    read_request,
    text_of,
    tool_choice_none,
    tool_name,
)
from stm_memory.providers.shell import (
    AsyncLoop,
    LoopShell,
    OnText,
    SyncLoop,
    System,
    aemit_text,
    emit_text,
)
from stm_memory.providers.turn import MemoryTurn
from stm_memory.providers.wire_anthropic import (
    anthropic_system,
    anthropic_tool_results,
    anthropic_user_text,
    has_tool_blocks,
    is_failed_result,
    text_blocks,
    tool_result_only,
    wire_messages,
)
from stm_memory.providers.wire_chat import chat_tool_call, chat_tool_results, function_call
from stm_memory.providers.wire_responses import (
    is_call_item,
    responses_tool_results,
)
from stm_memory.tool.schema import (
    anthropic_tool,
    openai_chat_tool,
    openai_responses_tool,
    tool_description,
    tool_parameters,
)
from stm_memory.tool.turn import failure
from stm_memory.tool.vetting import check_tool_call, is_truncated, tool_result_text
from stm_memory.wire import message_role

if TYPE_CHECKING:
    from stm_memory.tool.memory_tool import build_tool

__all__ = [
    "CONTENT_HEADER",
    "MAX_BREAKPOINTS",
    "MEMORY_ROLES",
    "AsyncLoop",
    "LoopShell",
    "MemoryContext",
    "MemoryRole",
    "MemoryTurn",
    "MessageKind",
    "ModelReply",
    "OnText",
    "Op",
    "OptionsView",
    "ProviderAdapter",
    "RequestMessage",
    "SyncLoop",
    "System",
    "ToolCall",
    "ToolHandler",
    "TurnOption",
    "TurnOptions",
    "TurnResult",
    "Usage",
    "adrive",
    "aemit_text",
    "agreed_ttl",
    "anthropic_breakpoints",
    "anthropic_system",
    "anthropic_tool",
    "anthropic_tool_results",
    "anthropic_user_text",
    "as_messages",
    "attempt",
    "breakpoint_marker",
    "breakpoint_markers",
    "build_tool",
    "chat_tool_call",
    "chat_tool_results",
    "check_flag",
    "check_memory",
    "check_memory_role",
    "check_memory_setup",
    "check_message_list",
    "check_model",
    "check_positive_int",
    "check_provider",
    "check_tool_call",
    "check_tools",
    "content_texts",
    "count_breakpoints",
    "dialogue_breakpoint",
    "dialogue_for_capture",
    "drive",
    "emit_text",
    "failure",
    "function_call",
    "has_tool_blocks",
    "is_call_item",
    "is_dialogue",
    "is_failed_result",
    "is_openai_host",
    "is_request_body",
    "is_summary_message",
    "is_truncated",
    "last_user_text",
    "message_role",
    "message_text",
    "missing_extra",
    "needs_previous",
    "note_endpoint",
    "offered_tool_names",
    "op",
    "openai_chat_tool",
    "openai_responses_tool",
    "prompt_cache_key",
    "read_request",
    "refuse_async_callables",
    "refuse_reserved",
    "refuse_wrong_client",
    "responses_tool_results",
    "run_memory_call",
    "run_turn_steps",
    "stored_as_dicts",
    "strip_memory_calls",
    "text_blocks",
    "text_of",
    "tool_choice_none",
    "tool_description",
    "tool_name",
    "tool_parameters",
    "tool_result_only",
    "tool_result_text",
    "wire_messages",
    "without_speaker_ids",
]


def __getattr__(name: str) -> Any:
    # The LangChain tool pulls in langchain_core.tools (and LangSmith with it): imported
    # on first use, so the testing kit's assertions stay light.
    if name == "build_tool":
        from stm_memory.tool.memory_tool import build_tool

        globals()[name] = build_tool
        return build_tool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
