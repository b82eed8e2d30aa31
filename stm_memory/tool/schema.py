"""The tool's JSON schema for one turn (a :class:`~stm_memory.wire.base.ToolSpec`, which
each API's wire module writes in its format: ``chat_tool``, ``responses_tool``,
``messages_tool``).

Built from the turn's category snapshot, so the schema the model saw is the one its
call is validated against, even when an admin edits the categories mid-turn.
"""

from __future__ import annotations

from typing import Any

from stm_memory.model.text import sanitize_placeholders
from stm_memory.tool.turn import TOOL_NAME, TurnContext
from stm_memory.wire.base import ToolSpec

__all__ = [
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


def tool_spec(turn: TurnContext, *, limit: int = 1500) -> ToolSpec:
    """The memory tool of ``turn`` (``limit``: the summary's length, said in the
    description)."""
    return ToolSpec(TOOL_NAME, tool_description(turn, limit=limit), tool_parameters(turn))
