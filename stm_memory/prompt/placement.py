"""Where memory content and the nudge go in a request. Pure.

Why these places: ``docs/design.md#placement``.

The prompt is ordered by how often each part changes, because providers bill a
repeated prefix at about a tenth of the input price and a part that changes throws
away the cache of everything after it, and every request extends the last: the
caller's system prompt and tools; this channel's distilled memory and the stable
briefings (change only when the model rewrites it: the top, by default); the dialogue
since the cut (append-only between two rewrites), each turn's new briefings staying
after that turn's user message (``briefings``: groups counted in turns back, see
:mod:`stm_memory.prompt.briefings`); then what is this turn's alone — briefings new
this turn and the nudge — right after the current user message. A context built by
hand with ``content`` alone places it whole at ``content_depth`` and the nudge at
``nudge_depth``.

Depth rule: depth ``N >= 1`` inserts before the N-th dialogue message from the end
(dialogue = every message that is not a system/developer message), before the first
dialogue message when there are fewer; depth 0 appends after the last message; a
negative depth is the top (after the leading system messages). Content lands above
the nudge when both land at the same spot.

Tool pairs: an insertion point is never between an assistant message with tool calls
and its results (OpenAI ``tool`` messages and Responses ``*_call_output`` items,
LangChain ``ToolMessage``, Anthropic user messages carrying ``tool_result`` blocks),
nor right after a Responses ``reasoning`` item (which must precede its own item): it
moves earlier, to before the assistant tool-call message.

Message formats: each message is read by the codec of its own shape
(:func:`stm_memory.wire.codec_of`), and injections are written in the list's format,
chosen from the list and the ``provider`` hint (:func:`stm_memory.wire.codec_for`):

- OpenAI-style dicts (default): injections are separate ``system`` messages
  (``developer`` when the list opens with a developer message).
- LangChain messages: ``SystemMessage`` objects, and the result is a list of LangChain
  messages again. With a provider that only takes leading system messages
  (``anthropic``, ``google_genai``, ``bedrock``, …) the top still gets a
  ``SystemMessage`` after the leading ones, but other injections become user text
  merged into the neighbouring ``HumanMessage`` (or a new one after tool results, which
  those bindings fold into the tool-result turn).
- Anthropic dicts (``provider="anthropic"`` or ``tool_use``/``tool_result`` blocks seen):
  there is no system role, so injections become text blocks merged into the
  neighbouring user turn — prepended to the next plain user message, else appended to
  the previous user message (text *after* ``tool_result`` blocks is accepted by the API),
  else a new user message where the neighbours are assistants — so roles still
  alternate. The Messages API's wire moves top content into the ``system`` parameter
  instead (:func:`stm_memory.wire.anthropic.system_placed`).

``MemoryContext.role = "user"`` (``memory_role=`` on the loops and the middleware)
makes every injection a user turn: merged into LangChain ``HumanMessage`` and
Anthropic user turns as above, a user message of its own for OpenAI dicts (Chat and
Responses content parts differ, and both APIs take several user messages in a row).

``apply`` first cuts the dialogue the memory covers (:mod:`stm_memory.prompt.cut`;
``trim=False`` skips it), then places. It returns a new list and never mutates its
input or the messages in it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Literal

from stm_memory.errors import ValidationError
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.shown import ShownState
from stm_memory.prompt.cut import HistoryWindow, cut_history, forget_erased
from stm_memory.prompt.quiet import Writing
from stm_memory.wire import Codec, codec_for, codec_of, message_role

__all__ = [
    "MemoryContext",
    "current_turn_index",
    "insertion_index",
    "message_role",
    "turn_anchors",
]

MemoryRole = Literal["system", "user", "inline"]
log = logging.getLogger("stm_memory")


def insertion_index(messages: Sequence[Any], depth: int) -> int:
    """Index to insert before for ``depth`` (see the module docstring), moved earlier
    so that it never separates tool calls from their results."""
    roles = [message_role(m) for m in messages]
    dialogue = [i for i, role in enumerate(roles) if role != "system"]
    if depth < 0:
        index = next((i for i, role in enumerate(roles) if role != "system"), len(roles))
    elif depth == 0:
        index = len(roles)
    elif len(dialogue) >= depth:
        index = dialogue[-depth]
    else:
        index = dialogue[0] if dialogue else len(roles)
    while index > 0 and (
        (index < len(roles) and roles[index] == "tool") or roles[index - 1] == "reasoning"
    ):
        index -= 1
    return index


def current_turn_index(messages: Sequence[Any]) -> int:
    """Index of the current user message, where per-turn injections go: the last user
    message with something besides tool results (an Anthropic user message that only
    carries results is not one; one where the user's words follow the results is).
    Every step of one turn's tool loop finds the same place, so the steps share their
    prefix. With no user message, the end."""
    for index in range(len(messages) - 1, -1, -1):
        if codec_of(messages[index]).user_words(messages[index]):
            return index
    return len(messages)


def _after_current_turn(messages: Sequence[Any]) -> int:
    # Right after the current user message: the user's words then stay part of the
    # prefix the next turn re-reads from the cache; only what follows is billed anew.
    index = current_turn_index(messages)
    return index + 1 if index < len(messages) else index


def turn_anchors(messages: Sequence[Any]) -> list[int]:
    """For each turn of ``messages``, oldest first, the index right after its user
    message (the last one with the user's words before the answer): where what a
    turn added for that turn alone stays in later requests. The last is the current
    turn's (:func:`current_turn_index` + 1)."""
    anchors: list[int] = []
    pending: int | None = None
    for index, message in enumerate(messages):
        role = message_role(message)
        if role == "system":
            continue
        if codec_of(message).user_words(message):
            pending = index
        elif pending is not None:
            anchors.append(pending + 1)
            pending = None
    if pending is not None:
        anchors.append(pending + 1)
    return anchors


def _after_earlier_turn(messages: Sequence[Any], back: int, anchors: Sequence[int]) -> int:
    """After the user message of the turn ``back`` (>= 1) turns before the current one
    (``anchors``: :func:`turn_anchors` of ``messages``); at the top when the request
    does not hold that turn (cut, or never passed)."""
    if back < len(anchors):
        return anchors[len(anchors) - 1 - back]
    return insertion_index(messages, -1)


class _Once:
    """A flag set once, shared by the copies of one turn's context (the loops drop the
    nudge with ``replace``), so the history budget's warning is logged once per turn."""

    __slots__ = ("_done", "_lock")

    def __init__(self) -> None:
        self._done = False
        self._lock = threading.Lock()

    def first(self) -> bool:
        with self._lock:
            done, self._done = self._done, True
            return not done


@dataclass(frozen=True, slots=True)
class MemoryContext:
    """Memory content and nudge for one turn, with their injection depths, and the
    history window: how much earlier dialogue the memory leaves to send.

    ``content_depth`` −1 means the top; ``nudge_depth`` counts dialogue messages from
    the end. ``history`` is ``None`` when the turn has no say over the dialogue (memory
    off for the server, or assembly failed): then nothing is cut. An empty context (no
    content, no nudge, no history window) leaves requests unchanged.
    """

    content: str | None = None
    nudge: str | None = None
    content_depth: int = -1
    nudge_depth: int = 2
    history: HistoryWindow | None = None
    # Where in ``content`` the other channels' briefings start (None: ``content`` is
    # one part, placed whole at ``content_depth``). Before it: this channel's memory,
    # placed at ``content_depth``; from it: the briefings, placed right after the
    # current user message (see the module docstring).
    briefing_at: int | None = None
    # The role the memory and the nudge are injected with: "system" (system/developer
    # messages, Anthropic's system parameter for top content; the default, because
    # the block is the application's context, not something the user said) or "user"
    # (user turns everywhere, for deployments that keep system authority for their
    # own prompt only). Providers without a system role always get user turns.
    role: MemoryRole = "system"
    # Provenance of the briefings in ``content`` (users whose words they may hold).
    sources: frozenset[str] = frozenset()
    # The briefings as groups placed apart, ``(turns back, block)``: -1 the stable
    # group after this channel's memory (fixed when it was last rewritten), 0 after
    # the current user message, k after the user message k turns before. Assembly's
    # contexts use it; with it empty, ``briefing`` goes after the current message.
    briefings: tuple[tuple[int, str], ...] = ()
    # Assembly's contexts: the nudge goes after the current user message (with what
    # else is this turn's alone), so every step of the turn and the next turn's
    # request keep everything before it. A context built by hand keeps nudge_depth.
    cache_ordered: bool = False
    # The briefing copies these groups were rendered from, for the engine to store
    # with the channel's entry (None: nothing to store), and the rewrite they hold for.
    ledger: tuple[BriefingCopy, ...] | None = field(default=None, compare=False, repr=False)
    ledger_epoch: int = field(default=0, compare=False, repr=False)
    # Assembly's contexts: the form this context shows (stored with the entry at the
    # turn's end), the stored swap it was read against, on the newest form the held
    # one it may keep showing instead (the turn picks one, stm_memory.prompt.swap)
    # and how long the channel has been idle (None: not known).
    shown: ShownState | None = field(default=None, compare=False, repr=False)
    shown_base: int = field(default=0, compare=False, repr=False)
    alternative: MemoryContext | None = field(default=None, compare=False, repr=False)
    idle: timedelta | None = field(default=None, compare=False, repr=False)
    # The provider billed the channel's last request as a miss where a hit was
    # predicted: its cached prefix counts as lapsed whatever ``idle`` says.
    missed: bool = field(default=False, compare=False, repr=False)
    # How long since any channel sharing this one's cached head (tools, system prompt)
    # sent a request: the tool list may change for free only when it is cold too.
    head_idle: timedelta | None = field(default=None, compare=False, repr=False)
    # The nudge before the cadence is due, for the turn to send when a write pays.
    early_nudge: str | None = field(default=None, compare=False, repr=False)
    # Whether the channel's memory is being written (stm_memory.prompt.quiet.Writing),
    # judged from its counters at assembly (None: not assembled).
    writing: Writing | None = field(default=None, compare=False, repr=False)
    # The request's own say over the nudge (for_request): a nudge the turn decides
    # later (a retry of the tool, stm_memory.prompt.quiet) goes only where it may.
    nudge_allowed: bool = field(default=True, compare=False, repr=False)
    _warned: _Once = field(default_factory=_Once, compare=False, repr=False)
    # The index of earlier turns' tool results this request no longer carries
    # (stm_memory/prompt/clearing.py, ``results_index``), placed after this channel's
    # memory at the top: fixed for the turn, as the cut is.
    index: str | None = None

    @property
    def is_empty(self) -> bool:
        return not self.content and not self.nudge and self.history is None and not self.index

    @property
    def memory(self) -> str | None:
        """This channel's part of ``content``: stable until the memory is rewritten."""
        if not self.content or self.briefing_at is None:
            return self.content or None
        return self.content[: self.briefing_at].rstrip() or None

    @property
    def briefing(self) -> str | None:
        """The briefings first sent this turn (after the current user message)."""
        if self.briefings:
            return "\n\n".join(text for back, text in self.briefings if back == 0) or None
        if not self.content or self.briefing_at is None:
            return None
        return self.content[self.briefing_at :].strip() or None

    @property
    def transient(self) -> list[str]:
        """What this request carries that the next turn's will not (the nudge; and a
        hand-built context's briefing): a cache breakpoint goes before these."""
        out = [] if self.briefings else [t for t in (self.briefing,) if t]
        return [*out, *(t for t in (self.nudge,) if t)]

    def top(self) -> str | None:
        """What goes at the top: the stable group of briefings, then this channel's
        memory (at depth -1), one text. What changes least goes first (SPEC §6): a
        swap shows a new memory, and the briefings before it, unchanged, keep their
        cached bytes."""
        parts = [text for back, text in self.briefings if back < 0]
        parts += [self.memory] if self.memory and self.content_depth < 0 else []
        return "\n\n".join(p for p in (*parts, self.index) if p) or None

    def injections(self, messages: Sequence[Any]) -> list[tuple[int, str, bool]]:
        """``(index, text, top)`` for ``messages``, in the order they stack at one index:
        this channel's memory, the briefings (oldest first), the nudge. ``top``: placed
        at the top (a system message wherever the provider takes one there)."""
        out: list[tuple[int, str, bool]] = []
        if top := self.top():
            out.append((insertion_index(messages, -1), top, True))
        if (memory := self.memory) and self.content_depth >= 0:
            out.append((insertion_index(messages, self.content_depth), memory, False))
        current = _after_current_turn(messages)
        anchors: list[int] | None = None  # read only for a group of an earlier turn
        if self.briefings:
            for back, text in sorted(self.briefings, key=lambda g: -g[0]):
                if back > 0:
                    anchors = turn_anchors(messages) if anchors is None else anchors
                    out.append((_after_earlier_turn(messages, back, anchors), text, False))
                elif back == 0:
                    out.append((current, text, False))
        elif briefing := self.briefing:
            out.append((current, briefing, False))
        if self.nudge:
            index = current if self.cache_ordered else insertion_index(messages, self.nudge_depth)
            out.append((index, self.nudge, False))
        return out

    def for_request(self, *, role: MemoryRole, trim: bool, nudge: bool) -> MemoryContext:
        """This context as one request of an entry point sends it: with the entry
        point's ``role``, the history cut only when ``trim``, and the nudge only while
        ``nudge`` (the tool is offered: no guard of the turn's start hides it; this
        turn's update does not). Every integration derives its request's context here."""
        same_say = nudge == self.nudge_allowed
        if role == self.role and (trim or self.history is None) and same_say:
            return self  # all replace() would copy, field for field (frozen: the same)
        history = self.history
        if not trim and history is not None:
            # Untrimmed, the caller windows its own history; erasure still holds in it.
            history = (
                HistoryWindow(keep_turns=None, forgetting=history.forgetting, forget_only=True)
                if history.forgetting
                else None
            )
        return replace(
            self,
            role=role,
            history=history,
            nudge=self.nudge if nudge else None,
            early_nudge=self.early_nudge if nudge else None,
            nudge_allowed=nudge,
        )

    def without_memory(self) -> MemoryContext:
        """This context less what goes at the top (this channel's memory at depth -1,
        the stable briefings); the rest stays."""
        if self.briefings:
            groups = tuple(g for g in self.briefings if g[0] >= 0)
            kept = self.memory if self.content_depth >= 0 else None
            rest = "\n\n".join(t for t in [kept, *(t for _, t in groups)] if t) or None
            at = (len(kept) + 2 if kept else 0) if groups else None
            return replace(self, content=rest, briefing_at=at, briefings=groups)
        briefing = self.briefing
        return replace(self, content=briefing, briefing_at=0 if briefing else None)

    def cut(self, messages: Sequence[Any]) -> list[Any]:
        """``messages`` without the earlier turns the memory covers (the history cut,
        :mod:`stm_memory.prompt.cut`); unchanged when there is no history window."""
        items = _as_list(messages)
        if self.history is None:
            return items
        if self.history.forget_only:  # an untrimmed request (see for_request)
            return forget_erased(items, self.history.forgetting)
        result = cut_history(items, self.history)
        if result.capped and self._warned.first():
            log.warning(
                "stm-memory: the earlier dialogue outgrew the history budget "
                "(history_token_budget=%s, max_raw_turns=%d); its %d oldest turns were "
                "dropped",
                self.history.token_budget,
                self.history.max_raw_turns,
                result.dropped_turns,
            )
        return result.messages

    def apply(
        self, messages: Sequence[Any], *, provider: str | None = None, trim: bool = True
    ) -> list[Any]:
        """A new list: the history cut (unless ``trim=False``), then content and nudge
        placed (see the module docstring)."""
        history = self.history
        if trim:
            items = self.cut(messages)
        else:
            items = forget_erased(messages, history.forgetting if history else None)
        codec = codec_for(items, provider)
        role = self.role
        if role == "inline":
            if not codec.system_apart:
                return _place_inline(items, self.injections(items), codec)
            role = "system"  # Messages turns are merged already; the top goes to system
        as_system: dict[int, list[str]] = {}
        as_user: dict[int, list[str]] = {}
        for index, text, top in self.injections(items):
            # Leading system messages are accepted everywhere, so the top is a system
            # message wherever the format has a system role, unless the user role was
            # asked for.
            system = role == "system" and codec.system_at(top)
            target = as_system if system else as_user
            target.setdefault(index, []).append(text)
        if not as_system and not as_user:
            return items
        return _place(items, as_system, as_user, codec)


def _as_list(messages: Sequence[Any]) -> list[Any]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise ValidationError("messages must be a list of messages")
    return list(messages)


def _place_inline(
    items: list[Any], injections: Sequence[tuple[int, str, bool]], codec: Codec
) -> list[Any]:
    """The portable form (``role="inline"``): what goes at the top joins the caller's
    leading system message (after its text: the caller's prefix stays cached), or,
    with none in the list, goes ahead of the first user message's words (a system
    message of its own only in a list without one); everything else joins the user
    message it follows
    (its turn's, where per-turn text stands), else the next one. No message is added
    between two of the caller's, so a chat template that takes one leading system
    message and strict user/assistant alternation renders every request, and one that
    keeps only the first system message still sees the memory."""
    if not injections:
        return items
    lead = 0
    while lead < len(items) and message_role(items[lead]) == "system":
        lead += 1
    users = [i for i, m in enumerate(items) if message_role(m) == "user"]
    top: list[str] = []
    merges: dict[int, list[str]] = {}
    for index, text, is_top in injections:
        if is_top:
            top.append(text)
            continue
        before = [i for i in users if i < index]
        after = [i for i in users if i >= index]
        target = before[-1] if before else after[0] if after else None
        if target is None:
            top.append(text)  # no user message at all: the system message carries it
        else:
            merges.setdefault(target, []).append(text)
    if top and lead:
        merges.setdefault(lead - 1, [])[:0] = top
        top = []
    elif top and not users:
        return [codec.system_message("\n\n".join(top), items), *items]
    # No system message in the list: the caller's prompt may be kept apart (a prompt
    # template, create_agent's system message, instructions) and join it in front, so
    # the top goes ahead of the first user message's words instead.
    front = {users[0]: top} if top else {}
    out = []
    for i, message in enumerate(items):
        if i in front:
            message = codec.merged(message, front[i], before=True)
        if i in merges:
            message = codec.merged(message, merges[i])
        out.append(message)
    return out


def _place(
    items: list[Any],
    as_system: Mapping[int, list[str]],
    as_user: Mapping[int, list[str]],
    codec: Codec,
) -> list[Any]:
    """Build the new list: system messages inserted before index i, user texts merged
    into the next plain user message, else the previous user turn, else a new one."""
    prepends: dict[int, list[str]] = {}
    appends: dict[int, list[str]] = {}
    inserts: dict[int, list[str]] = {}
    for index in sorted(as_user):
        texts = as_user[index]
        if index < len(items) and codec.can_prepend(items[index]):
            prepends.setdefault(index, []).extend(texts)
        elif index > 0 and index not in as_system and codec.can_append(items[index - 1]):
            appends.setdefault(index - 1, []).extend(texts)
        else:
            inserts.setdefault(index, []).extend(texts)
    out: list[Any] = []
    for i in range(len(items) + 1):
        out.extend(codec.system_message(text, items) for text in as_system.get(i, ()))
        if i in inserts:
            out.append(codec.user_message(inserts[i]))
        if i < len(items):
            message = items[i]
            if i in prepends:
                message = codec.prepend(message, prepends[i])
            if i in appends:
                message = codec.append(message, appends[i])
            out.append(message)
    return out
