"""What a strategy kept outside its memory: the excerpts the engine keeps beside a
written memory when the memory leaves out details of the turns the write lets the
history cut drop (:mod:`stm_memory.model.details`).

Two measures: at the end of the run, each channel's live entry (the details its
excerpts hold that its memory does not carry, and the excerpts' estimated tokens); and,
over the run, the kept-excerpt lines of every recorded request, found under
:data:`~stm_memory.prompt.render.KEPT_TITLE` in the memory block's text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stm_memory.evaluation._recording import RecordedRequest, RecordedTurn
from stm_memory.evaluation._results import KeptDetails
from stm_memory.model.kept import left_out, written
from stm_memory.prompt.render import INDENT, KEPT_TITLE, NOTES_TITLE, kept_lines
from stm_memory.prompt.tokens import text_tokens

if TYPE_CHECKING:
    from stm_memory.model import MemoryEntry

__all__ = ["kept_block_lines", "measure_kept"]


def _strings(value: Any) -> Iterator[str]:
    """Every string a request body holds, whatever its API's shape (Chat messages,
    Messages blocks, Responses items)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for item in value:
            yield from _strings(item)


def kept_block_lines(text: str) -> list[str]:
    """The lines ``text`` holds because excerpts were kept: the
    :data:`~stm_memory.prompt.render.KEPT_TITLE` line, the indented excerpts under it,
    and the :data:`~stm_memory.prompt.render.NOTES_TITLE` line that then opens the
    notes (nothing when ``text`` shows no kept excerpt)."""
    lines = text.split("\n")
    out: list[str] = []
    for at, line in enumerate(lines):
        if line != KEPT_TITLE:
            continue
        out.append(line)
        rest = at + 1
        while rest < len(lines) and lines[rest].startswith(INDENT):
            out.append(lines[rest])
            rest += 1
        if rest < len(lines) and lines[rest] == NOTES_TITLE:
            out.append(lines[rest])
    return out


def _sent_tokens(request: RecordedRequest) -> int:
    lines = [line for text in _strings(request.body) for line in kept_block_lines(text)]
    return text_tokens("\n".join(lines)) if lines else 0


def measure_kept(
    entries: Sequence[MemoryEntry] | None, turns: Sequence[RecordedTurn]
) -> KeptDetails | None:
    """The kept details of a run (see :class:`KeptDetails`): ``entries`` are the
    channels' live entries at its end, None for a strategy that keeps no memory."""
    if entries is None:
        return None
    details = excerpts = tokens = 0
    for entry in entries:
        memory = written(entry.summary, entry.categories.values())
        details += len(left_out(entry.kept, memory))
        excerpts += len(entry.kept)
        if entry.kept:
            tokens += text_tokens("\n".join(kept_lines(entry.kept)))
    sent = [
        _sent_tokens(request) for turn in turns for request in (*turn.side_requests, *turn.requests)
    ]
    return KeptDetails(
        details=details,
        excerpts=excerpts,
        tokens=tokens,
        sent_tokens=sum(sent),
        requests=sum(1 for n in sent if n),
    )
