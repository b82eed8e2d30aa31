"""The tool's JSON schema for one turn, exported for LangChain, OpenAI and Anthropic.

Built from the turn's category snapshot, so the schema the model saw is the one its
call is validated against, even when an admin edits the categories mid-turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

from stm_memory.model.text import sanitize_placeholders
from stm_memory.tool.turn import TOOL_NAME, TurnContext

__all__ = [
    "ToolSpec",
    "anthropic_tool",
    "chat_tool",
    "messages_tool",
    "openai_chat_tool",
    "openai_responses_tool",
    "responses_tool",
    "tool_description",
    "tool_parameters",
    "tool_spec",
]

# Sent with every request that offers the tool, so every word is paid for each turn.
_SUMMARY_DESCRIPTION = (
    "Replace this channel's recent dialogue with a compact summary (under {limit} chars) "
    "of what matters to continue it. Working memory for the ongoing conversation, not for "
    "things a user explicitly asks you to remember permanently (long-term memory). Call "
    "silently, at most once per turn."
)
_CATEGORY_DESCRIPTION = (
    "Replace this channel's recent dialogue with a compact note per category (each under "
    "{limit} chars) of what matters to continue it. Working memory for the ongoing "
    "conversation, not for things a user explicitly asks you to remember permanently "
    "(long-term memory). Call silently, at most once per turn."
)


def tool_description(turn: TurnContext, *, limit: int = 1500) -> str:
    """The server's override in both modes, else the default for the mode."""
    override = turn.settings.tool_description_override
    if override and override.strip():
        return sanitize_placeholders(override.strip())
    template = _SUMMARY_DESCRIPTION if turn.summary_mode else _CATEGORY_DESCRIPTION
    return template.format(limit=limit)


def tool_parameters(turn: TurnContext) -> dict[str, Any]:
    """A JSON schema valid under OpenAI ``strict`` mode: every property required, no extras."""
    properties: dict[str, Any] = {}
    if turn.summary_mode:
        properties["summary"] = {
            "type": "string",
            "description": "Compact summary of the recent dialogue.",
        }
    else:
        for cat in turn.categories:
            label = sanitize_placeholders(cat.label)
            text = sanitize_placeholders(cat.description.strip()) or label
            properties[cat.slug] = {
                "type": "string",
                "description": f"{label}: {text}",
            }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """The memory tool as one turn describes it, in no API's format: its description
    and its JSON-schema parameters (each API's entry: :func:`chat_tool`,
    :func:`responses_tool`, :func:`messages_tool`, each a deep copy: a request may be
    edited by its caller)."""

    description: str
    parameters: Mapping[str, Any]
    name: str = TOOL_NAME

    def schema(self) -> dict[str, Any]:
        """The parameters as a fresh JSON schema (a deep copy: the spec is the turn's,
        and a framework may edit the schema it is handed)."""
        return deepcopy(dict(self.parameters))


def tool_spec(turn: TurnContext, *, limit: int = 1500) -> ToolSpec:
    """The memory tool of ``turn`` (``limit``: the summary's length, said in the
    description)."""
    return ToolSpec(tool_description(turn, limit=limit), tool_parameters(turn))


def chat_tool(spec: ToolSpec) -> dict[str, Any]:
    """Chat Completions ``tools=[...]`` entry."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.schema(),
            "strict": True,
        },
    }


def responses_tool(spec: ToolSpec) -> dict[str, Any]:
    """Responses API function tool (flat shape)."""
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.schema(),
        "strict": True,
    }


def messages_tool(spec: ToolSpec) -> dict[str, Any]:
    """Messages API ``tools=[...]`` entry."""
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.schema(),
    }


def openai_chat_tool(turn: TurnContext, *, limit: int = 1500) -> dict[str, Any]:
    """Chat Completions ``tools=[...]`` entry of ``turn``'s tool."""
    return chat_tool(tool_spec(turn, limit=limit))


def openai_responses_tool(turn: TurnContext, *, limit: int = 1500) -> dict[str, Any]:
    """Responses API function tool of ``turn``'s tool (flat shape)."""
    return responses_tool(tool_spec(turn, limit=limit))


def anthropic_tool(turn: TurnContext, *, limit: int = 1500) -> dict[str, Any]:
    """Messages API ``tools=[...]`` entry of ``turn``'s tool."""
    return messages_tool(tool_spec(turn, limit=limit))
