"""A writer: a chat model that writes a channel's memory in a call of its own, for a turn
model that cannot write it through the tool (``writer=`` on every entry point;
docs/open-models.md). Opt-in: it is the one place stm-memory makes a model call of its
own, at the cadence the nudge would have asked at.

What the writer is asked is built here, pure (:func:`write_request`: one plain user
message, no tools, so the same small local model can answer it), and its answer is
read back as the memory tool's arguments (:func:`written_arguments`); the turn runs
them through the same guards as a call (:meth:`~stm_memory.kit.MemoryTurn.assemble`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from stm_memory.errors import ConfigurationError
from stm_memory.model import Category, MemoryEntry, turns_after
from stm_memory.prompt.render import crude_lines, distilled_lines, kept_lines

__all__ = [
    "WRITER_TAG",
    "ChatModelWriter",
    "FunctionWriter",
    "WriteRequest",
    "Writer",
    "WriterLike",
    "as_writer",
    "write_request",
    "written_arguments",
]

#: Each turn of the dialogue the writer is shown, cut to this many code points.
_TURN_LIMIT = 2000
_FENCE = re.compile(r"^```[\w-]*\n(.*)\n```$", re.S)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRequest:
    """What the writer is asked: one plain user message (:meth:`messages`), and the
    category slugs its answer holds as a JSON object (empty: a summary, as text)."""

    prompt: str
    categories: tuple[str, ...] = ()

    def messages(self) -> list[dict[str, str]]:
        """The request as Chat Completions messages (any chat API takes this shape)."""
        return [{"role": "user", "content": self.prompt}]


@runtime_checkable
class Writer(Protocol):
    """Writes a channel's memory: the text a chat model answers ``request`` with."""

    def write(self, request: WriteRequest) -> str: ...

    async def awrite(self, request: WriteRequest) -> str: ...


@dataclass(frozen=True, slots=True)
class FunctionWriter:
    """A writer from a function (``request -> text``): call your own client in it (an
    async entry point runs it in a thread)."""

    function: Callable[[WriteRequest], str]

    def write(self, request: WriteRequest) -> str:
        return self.function(request)

    async def awrite(self, request: WriteRequest) -> str:
        return await asyncio.to_thread(self.function, request)


class _ChatModel(Protocol):
    # A LangChain chat model, by what the writer calls (no import of langchain here).
    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any: ...

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any: ...


#: The writer's calls are tagged, so a callback handler can tell them from the agent's.
WRITER_TAG = "stm_memory_writer"
_CONFIG: Mapping[str, Any] = {"run_name": WRITER_TAG, "tags": [WRITER_TAG]}


def _text(reply: Any) -> str:
    text = getattr(reply, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(reply, "content", reply)
    return content if isinstance(content, str) else str(content)


@dataclass(frozen=True, slots=True)
class ChatModelWriter:
    """A LangChain chat model as the writer (``ChatOpenAI`` on a local server, a
    cheaper hosted model …); its calls carry the tag :data:`WRITER_TAG`."""

    model: _ChatModel

    def write(self, request: WriteRequest) -> str:
        return _text(self.model.invoke(request.messages(), config=dict(_CONFIG)))

    async def awrite(self, request: WriteRequest) -> str:
        return _text(await self.model.ainvoke(request.messages(), config=dict(_CONFIG)))


#: What ``writer=`` takes: a writer, a LangChain chat model or a function.
WriterLike = Writer | _ChatModel | Callable[[WriteRequest], str]


def as_writer(value: WriterLike | None) -> Writer | None:
    """``writer=`` as an entry point takes it: a :class:`Writer`, a LangChain chat model
    or a function ``request -> text``; None: no writer (the default)."""
    if value is None or isinstance(value, Writer):
        return value
    if callable(getattr(value, "invoke", None)) and callable(getattr(value, "ainvoke", None)):
        return ChatModelWriter(value)  # type: ignore[arg-type]
    if callable(value):
        return FunctionWriter(value)
    raise ConfigurationError(
        "writer must be a LangChain chat model, a function (WriteRequest) -> str or a "
        f"stm_memory Writer, got {type(value).__name__}"
    )


def write_request(
    entry: MemoryEntry, categories: Sequence[Category], *, summary_mode: bool, limit: int
) -> WriteRequest | None:
    """What the writer is asked for ``entry``'s channel: its memory, the details kept
    beside it and the dialogue since it was written, to be rewritten in at most
    ``limit`` characters (as a summary, or as the ``categories``' values). None when
    nothing was said since the last write."""
    # What the write would replace, as its lossy-writer check reads it (changes.refreshed).
    said = turns_after(entry.messages, entry.refreshed_at, at=True)
    if not said:
        return None
    memory = distilled_lines(entry.summary, entry.categories, categories)
    kept = kept_lines(entry.kept)
    channel = f" #{entry.channel_name}" if entry.channel_name else ""
    parts = [
        f"You keep the short-term memory of the chat channel{channel}: a summary that "
        "replaces its recent dialogue, read by the assistant before every answer. "
        "Summarize the dialogue below into the new memory. Keep every concrete detail "
        "still true (names, numbers, dates, times, places, decisions, open questions), "
        "with its newest value; carry over what the current memory holds unless the "
        "dialogue changed it; leave out small talk."
    ]
    if summary_mode:
        parts.append(f"Answer with the memory text alone, at most {limit} characters.")
        slugs: tuple[str, ...] = ()
    else:
        slugs = tuple(c.slug for c in categories)
        fields = "\n".join(f"- {c.slug}: {c.label}. {c.description}".rstrip() for c in categories)
        parts.append(
            "Answer with one JSON object alone, with these keys (each value a string, "
            f"at most {limit} characters in all; an empty string for nothing):\n{fields}"
        )
    parts.append("Current memory:\n" + ("\n".join(memory) if memory else "(empty)"))
    if kept:
        parts.append("Said earlier and not yet in the memory:\n" + "\n".join(kept))
    parts.append(
        "Dialogue since the memory was written:\n"
        + "\n".join(crude_lines(said, len(said), limit=_TURN_LIMIT))
    )
    return WriteRequest(prompt="\n\n".join(parts), categories=slugs)


def written_arguments(text: str, request: WriteRequest) -> dict[str, Any] | None:
    """The memory tool's arguments from the writer's answer ``text``: the summary (a
    Markdown fence around it taken off), or the first JSON object in it (category
    mode); None when it holds no memory."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not request.categories:
        return {"summary": text} if text else None
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, Mapping):
            return {k: v for k, v in value.items() if k in request.categories}
        start = text.find("{", start + 1)
    return None
