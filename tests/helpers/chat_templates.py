"""Chat templates rendered as OpenAI-compatible servers render them (vLLM, SGLang, TGI,
llama.cpp, Ollama): a sandboxed jinja2 environment with ``trim_blocks`` and
``lstrip_blocks``, a ``raise_exception`` global, text content parts joined into one
string, and ``add_generation_prompt``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["TEMPLATES", "Refused", "chat_messages", "render"]

HERE = Path(__file__).resolve().parent / "jinja_templates"
#: name → template source: one that refuses what Gemma- and Mistral-like templates
#: refuse, one that drops every later system message as Phi-4-mini's does.
TEMPLATES = {
    "strict": (HERE / "strict_alternation.jinja").read_text(encoding="utf-8"),
    "first_system_only": (HERE / "first_system_only.jinja").read_text(encoding="utf-8"),
}


class Refused(Exception):
    """The template raised: the server answers the request with an error."""


def _raise(message: str) -> None:
    raise TemplateError(message)


_ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
_ENV.globals["raise_exception"] = _raise


def _text(content: Any) -> Any:
    # Servers hand text-only templates one string: the text parts joined.
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p
        )
    return content


def chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as a template receives them (``developer`` is read as
    ``system``, as servers map it)."""
    out = []
    for m in messages:
        role = "system" if m.get("role") == "developer" else m.get("role")
        out.append({**m, "role": role, "content": _text(m.get("content"))})
    return out


def responses_messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Responses input items as the chat messages a server renders them as: messages
    as they are, a ``function_call`` an assistant tool call, its output a tool result."""
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            call = {"id": item["call_id"], "type": "function"}
            call["function"] = {"name": item["name"], "arguments": item["arguments"]}
            if out and out[-1]["role"] == "assistant" and not out[-1].get("content"):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        elif kind == "reasoning":
            continue
        else:
            out.append(dict(item))
    return chat_messages(out)


def render(template: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt the model sees; :class:`Refused` when the template refuses it."""
    try:
        return _ENV.from_string(TEMPLATES[template]).render(
            messages=chat_messages(messages), bos_token="<bos>", add_generation_prompt=True
        )
    except TemplateError as exc:
        raise Refused(str(exc)) from exc
