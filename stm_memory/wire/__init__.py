"""Message formats at the edge: one codec per wire format (OpenAI Chat dicts, Responses
items, Anthropic Messages dicts, LangChain messages), and which one a message or a
list is written in. Placement and the history cut (:mod:`stm_memory.prompt`) ask these
codecs everything format-specific, so they hold no format's rules and import no SDK.

This layer sits at the bottom with :mod:`stm_memory.model` (it imports only
:mod:`stm_memory.errors`): the memory tool's name is passed in, not imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stm_memory.wire.anthropic import ANTHROPIC, ANTHROPIC_WIRE, Breakpoints
from stm_memory.wire.base import (
    MESSAGES_WIRE,
    Codec,
    MessageView,
    Reader,
    Role,
    Wire,
    has_tool_blocks,
)
from stm_memory.wire.openai_chat import CHAT, CHAT_WIRE
from stm_memory.wire.responses import RESPONSES, is_item
from stm_memory.wire.shorthand import SHORTHAND

__all__ = [
    "OPENAI_PROVIDERS",
    "Breakpoints",
    "Codec",
    "MessageView",
    "Reader",
    "Role",
    "approximate_tokens",
    "codec_for",
    "codec_of",
    "message_role",
    "wire_for",
]

# LangChain bindings of these providers reject (or mangle) a SystemMessage that does
# not lead the list; the user-turn form is accepted by every provider.
_LEADING_SYSTEM_ONLY = frozenset(
    {"anthropic", "bedrock", "bedrock_converse", "google", "google_genai", "gemini", "vertexai"}
)
#: Provider names (LangChain's, the options') whose requests are OpenAI's API: with
#: these hints a dict list is OpenAI's even if some content looks like Anthropic's.
OPENAI_PROVIDERS = frozenset({"openai", "azure", "azure_openai"})
_CONVERTED_ANTHROPIC = ANTHROPIC_WIRE.as_messages()


# The LangChain side, loaded on the first object that is not a dict, tuple or string
# (the dict formats never load LangChain through this layer), then kept: these run for
# every message of every request, and an import statement is a lookup each time.
_is_message: Callable[[Any], bool] | None = None
_langchain_codecs: tuple[Codec, Codec, Codec] | None = None


def _is_langchain(message: Any) -> bool:
    # The concrete types first: an isinstance against the Mapping ABC is the slow check.
    if isinstance(message, dict | tuple | str | Mapping):
        return False
    return _is_langchain_object(message)


def _is_langchain_object(message: Any) -> bool:
    """:func:`_is_langchain` of an object known not to be a mapping."""
    global _is_message
    if isinstance(message, tuple | str):
        return False
    if _is_message is None:
        # An isinstance check against BaseMessage (rather than guessing from
        # type(m).__module__) also recognises a caller's own subclasses, and
        # langchain-core is a dependency of the package, so the import cannot fail.
        from stm_memory.wire.langchain import is_message

        _is_message = is_message
    return _is_message(message)


def _langchain_codec(provider: str) -> Codec:
    global _langchain_codecs
    if _langchain_codecs is None:
        from stm_memory.wire.langchain import LANGCHAIN, LEADING_SYSTEM_ONLY, SEPARATE_USER

        _langchain_codecs = (LANGCHAIN, LEADING_SYSTEM_ONLY, SEPARATE_USER)
    langchain, leading_system_only, separate_user = _langchain_codecs
    if provider in _LEADING_SYSTEM_ONLY:
        return leading_system_only
    # An OpenAI model is sent what the OpenAI loops send (user text apart).
    return separate_user if provider in OPENAI_PROVIDERS else langchain


def codec_of(message: Any) -> Reader:
    """The reader of one message, from its own shape: a dict without a role is a
    Responses item, a dict with ``tool_use``/``tool_result`` blocks Anthropic's, any
    other dict a Chat (or Responses) message; LangChain messages; tuples, strings and
    other objects as shorthand."""
    if isinstance(message, Mapping):
        if is_item(message):
            return RESPONSES
        return ANTHROPIC if has_tool_blocks([message]) else CHAT
    if _is_langchain_object(message):
        return _langchain_codec("")
    return SHORTHAND


def message_role(message: Any) -> Role:
    """Normalised role: system, user, assistant, tool (a tool result), reasoning or
    other."""
    return codec_of(message).role(message)


def codec_for(messages: Sequence[Any], provider: str | None = None) -> Codec:
    """The format injections into ``messages`` are written in: LangChain when the list
    holds LangChain messages; Anthropic with ``provider="anthropic"`` or when some
    message carries ``tool_use``/``tool_result`` blocks (unless ``provider`` says
    OpenAI); else OpenAI (Responses when some item has no role, Chat otherwise)."""
    hint = (provider or "").lower()
    if any(_is_langchain(m) for m in messages):
        return _langchain_codec(hint)
    if hint == "anthropic":
        return ANTHROPIC
    if hint not in OPENAI_PROVIDERS and has_tool_blocks(messages):
        return ANTHROPIC
    return RESPONSES if any(is_item(m) for m in messages) else CHAT


def approximate_tokens(message: Any) -> int:
    """LangChain's token estimate for one message of any format it converts; raises on
    a shape it does not take. The library's default counter, so it loads LangChain."""
    from stm_memory.wire.langchain import approximate_tokens as estimate

    return estimate(message)


def wire_for(provider: str | None) -> Wire:
    """The wire a chat model of ``provider`` (LangChain's name, or the options') writes
    its requests for: a list of messages it converts, with its API's hints and
    refusals (:data:`MESSAGES_WIRE` for an API whose hints stm-memory does not write).
    The one map from a provider to a wire."""
    if provider == "anthropic":
        return _CONVERTED_ANTHROPIC
    return CHAT_WIRE if provider in OPENAI_PROVIDERS else MESSAGES_WIRE
