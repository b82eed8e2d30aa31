"""Prompt assembly: read the entries, choose what to show, render, place.

:func:`assemble_context` is the only function here that does I/O, and only through the
two readers it is given (:class:`EntryReader` for cache reads with hydration,
:class:`SettingsReader` for other servers' settings); it gathers what the pure
functions below need and never raises: any error is logged and yields an empty
:class:`MemoryContext`, because a memory problem must never fail the user's turn.

Which other channels are shown (:func:`select_other_entries`):

- In a server: server-scope entries of the server's other channels, plus — when the
  user opted in to cross-server memory — the user's user-scope entries from other
  servers (never their DMs: a server channel is not the place for them).
- In a DM: the user's user-scope entries of other channels, DMs only unless the user
  opted in (then server channels too).
- With a persona, only entries of the same persona (its lineage), wherever they come from.
- Privacy: an entry whose channel, or whose thread's parent, is in its server's
  ``private_channel_ids`` is dropped. The current server's ``stm_privacy_bypass``, or
  the current channel (or its parent) being private itself, lifts that for entries of
  the *current* server only: one server's settings never unlock another server's
  private channels.
- Expired entries and entries with nothing to show are skipped; the newest
  ``limits.other_channels_shown`` remain, ordered by ``(last_updated desc, key)`` so
  ties never depend on cache iteration order.

Candidates are read from the owners' ordered indexes a page at a time, newest first
(:func:`_gather`), until no unread entry could be among those shown: a server with
10,000 channels costs what one with 3 does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from stm_memory.config import Limits
from stm_memory.model import (
    Category,
    MemoryEntry,
    RenderMode,
    Scope,
    ScopeKind,
    ServerSettings,
    parse_key,
)
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.shown import ShownState
from stm_memory.model.tombstones import Forgetting
from stm_memory.prompt.briefings import briefing_groups, plan_briefings
from stm_memory.prompt.cut import HistoryWindow
from stm_memory.prompt.placement import MemoryContext
from stm_memory.prompt.quiet import is_quiet, nudge_due, writing
from stm_memory.prompt.render import (
    briefing_block,
    distilled_lines,
    join_parts,
    kept_lines,
    memory_block,
    nudge_text,
    other_channel_block,
)

if TYPE_CHECKING:
    from stm_memory.tool.turn import TurnContext

__all__ = [
    "EntryReader",
    "MemoryContext",
    "SettingsReader",
    "assemble_context",
    "build_memory_context",
    "history_window",
    "is_visible",
    "select_other_entries",
]

log = logging.getLogger("stm_memory")


class EntryReader(Protocol):
    """The live entries as assembly reads them (the engine's read-through cache)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, MemoryEntry]: ...

    def get_with_indexes(
        self, key: str, owners: Sequence[tuple[ScopeKind, str]]
    ) -> MemoryEntry | None: ...

    def newest(
        self, kind: ScopeKind, owner_id: str, *, offset: int, count: int
    ) -> list[tuple[str, float]]: ...

    def is_live(self, entry: MemoryEntry, now: datetime) -> bool: ...

    def channel_was_reset(self, channel_id: str) -> bool: ...


class SettingsReader(Protocol):
    """Other servers' settings and categories (an entry is shown under its own server's)."""

    def server_settings(self, server_id: str) -> ServerSettings: ...

    def categories(self, server_id: str) -> list[Category]: ...


def assemble_context(
    turn: TurnContext,
    *,
    entries: EntryReader,
    settings: SettingsReader,
    limits: Limits,
    clock: Callable[[], datetime],
    mark_key: bytes | None = None,
) -> MemoryContext:
    """Memory content and nudge for ``turn``; an empty context on any error.
    ``mark_key``: the key of erasure's marks, so requests leave erased messages out."""
    try:
        return _assemble(turn, _Reads(entries, settings, limits, clock(), mark_key))
    except Exception:
        scope = getattr(turn, "scope", None)
        key = getattr(scope, "live_key", "<unknown scope>")
        log.exception("stm-memory: assembling memory for %s failed; continuing without", key)
        return MemoryContext()


class _Reads:
    """What one assembly reads from, and the instant it reads at."""

    __slots__ = ("entries", "limits", "mark_key", "now", "settings")

    def __init__(
        self,
        entries: EntryReader,
        settings: SettingsReader,
        limits: Limits,
        now: datetime,
        mark_key: bytes | None,
    ) -> None:
        self.entries = entries
        self.settings = settings
        self.limits = limits
        self.now = now
        self.mark_key = mark_key

    def is_live(self, entry: MemoryEntry) -> bool:
        return self.entries.is_live(entry, self.now)


def _assemble(turn: TurnContext, reads: _Reads) -> MemoryContext:
    scope = turn.scope
    if not turn.settings.short_term_memory_enabled:
        return MemoryContext()
    limits = reads.limits
    sources = _sources(turn)
    live = reads.entries.get_with_indexes(scope.live_key, [(s.kind, s.owner) for s in sources])
    turn.seen_turns = live.messages if live is not None else ()
    pool, settings, labels = _gather(reads, turn, sources)
    if live is not None and live.briefings:
        _read_copied_sources(reads, turn, live, pool, settings, labels)
    reset = live is None and reads.entries.channel_was_reset(scope.channel_id)
    forgetting = (
        Forgetting(reads.mark_key, frozenset(live.forgotten))
        if live is not None and live.forgotten and reads.mark_key is not None
        else None
    )

    def window(shown: ShownState | None) -> HistoryWindow:
        return history_window(
            turn,
            live,
            # Only a channel without an entry needs the question (a new entry of a
            # reset channel carries the answer in turns_since_reset).
            reset=reset,
            overlap=limits.history_overlap,
            max_raw_turns=limits.max_raw_turns,
            token_budget=limits.history_token_budget,
            shown=shown,
            forgetting=forgetting,
        )

    return build_memory_context(
        turn,
        live=live,
        # The counters outlive expiry (they are bookkeeping); the content does not.
        shown_live=live if live is not None and reads.is_live(live) else None,
        others=pool,
        server_settings=settings,
        categories=labels,
        is_live=reads.is_live,
        limit=limits.other_channels_shown,
        window=window,
        now=reads.now,
    )


def history_window(
    turn: TurnContext,
    live: MemoryEntry | None,
    *,
    reset: bool,
    overlap: int,
    max_raw_turns: int,
    token_budget: int | None = None,
    shown: ShownState | None = None,
    forgetting: Forgetting | None = None,
) -> HistoryWindow:
    """How many earlier turns the turn may send (see :mod:`stm_memory.prompt.cut`).

    The memory shown (``shown``: the form a swap fixed, :mod:`stm_memory.prompt.swap`;
    None: the newest written) covers the dialogue up to the turn it was written in;
    the turns since are counted exactly by the engine (``turns_since_refresh`` of the
    newest, ``ShownState.turns`` of a shown one), and ``overlap`` covered turns go
    with them. That holds after the memory expired or its
    summary was cleared: what it covered stays forgotten. A reset channel sends nothing
    from before the reset. Same-channel memory is shown only to a model that can use
    tools, so only then does it replace the turns it covers.
    """
    keep: int | None
    if live is None:
        keep = 0 if reset else None
    else:
        since_reset = live.turns_since_reset
        written, since = (
            (live.last_refreshed_turn, live.turns_since_refresh)
            if shown is None
            else (shown.epoch, shown.turns)
        )
        if written > 0 and turn.tools_available:
            keep = since + overlap
            if since_reset is not None:
                keep = min(keep, since_reset)
        else:
            keep = since_reset
    return HistoryWindow(
        keep_turns=keep,
        max_raw_turns=max_raw_turns,
        token_budget=token_budget,
        forgetting=forgetting,
    )


class _Source:
    """One owner's ordered index, read page by page."""

    def __init__(self, kind: ScopeKind, owner: str) -> None:
        self.kind: ScopeKind = kind
        self.owner = owner
        self.offset = 0
        self.done = False
        # The score of the last member read: every unread member scores at most this.
        self.floor = float("inf")


def _sources(turn: TurnContext) -> list[_Source]:
    """The indexes other-channel memory comes from (see the module docstring)."""
    scope = turn.scope
    sources: list[_Source] = []
    if scope.server_id is not None:
        sources.append(_Source("server", scope.server_id))
    if scope.server_id is None or turn.user_settings.cross_server_opt_in:
        sources.append(_Source("user", scope.user_id))
    return sources


def _gather(
    reads: _Reads, turn: TurnContext, sources: Sequence[_Source]
) -> tuple[list[MemoryEntry], dict[str, ServerSettings], dict[str | None, Sequence[Category]]]:
    """Candidate entries (eligible and live) and their servers' settings and labels,
    read from the ordered indexes until the blocks shown cannot change: ``limit``
    entries that show something, each newer than anything still unread."""
    scope = turn.scope
    cross = turn.user_settings.cross_server_opt_in
    limits = reads.limits
    limit = limits.other_channels_shown
    if not sources or limit <= 0:
        return [], {}, {}
    # Nothing older than the longest TTL can be live: a page past it ends the index.
    oldest = (reads.now - max(limits.summary_ttl, limits.bare_ttl)).timestamp()
    seen: set[str] = set()
    pool: list[MemoryEntry] = []
    settings: dict[str, ServerSettings] = {}
    labels: dict[str | None, Sequence[Category]] = {}
    # The first page: the blocks shown and one more, whose score tells whether anything
    # unread could still come first (then twice as many per page: skipped entries —
    # private, empty, another persona — call for more).
    page = limit + 1
    while True:
        keys = _next_page(reads, sources, scope, seen, page=page, oldest=oldest)
        seen.update(keys)
        found = reads.entries.get_many(keys) if keys else {}
        fresh = [e for e in found.values() if _eligible(e, scope, cross) and reads.is_live(e)]
        pool += fresh
        _read_settings(reads, turn, fresh, settings, labels)
        if all(s.done for s in sources) or _settled(reads, turn, pool, settings, sources):
            return pool, settings, labels
        page *= 2


def _read_copied_sources(
    reads: _Reads,
    turn: TurnContext,
    live: MemoryEntry,
    pool: list[MemoryEntry],
    settings: dict[str, ServerSettings],
    labels: dict[str | None, Sequence[Category]],
) -> None:
    """Add to ``pool`` the sources of the channel's stored briefing copies that the
    paged read did not reach (older than those shown), so a copy whose source is still
    live and visible keeps its place (and one whose source is not is dropped)."""
    have = {e.key for e in pool}
    missing = sorted({c.source for c in live.briefings} - have)
    if not missing:
        return
    scope, cross = turn.scope, turn.user_settings.cross_server_opt_in
    found = reads.entries.get_many(missing)
    fresh = [e for e in found.values() if _eligible(e, scope, cross) and reads.is_live(e)]
    pool += fresh
    _read_settings(reads, turn, fresh, settings, labels)


def _next_page(
    reads: _Reads,
    sources: Sequence[_Source],
    scope: Scope,
    seen: set[str],
    *,
    page: int,
    oldest: float,
) -> list[str]:
    """The next ``page`` keys of every index not yet read to its end, new and showable."""
    keys: list[str] = []
    for src in (s for s in sources if not s.done):
        members = reads.entries.newest(src.kind, src.owner, offset=src.offset, count=page)
        src.offset += len(members)
        if members:
            src.floor = members[-1][1]
        src.done = len(members) < page or src.floor < oldest
        keys += [k for k, _ in members if k not in seen and _may_show(k, scope)]
    return keys


def _read_settings(
    reads: _Reads,
    turn: TurnContext,
    fresh: Sequence[MemoryEntry],
    settings: dict[str, ServerSettings],
    labels: dict[str | None, Sequence[Category]],
) -> None:
    """The settings and labels of the servers ``fresh`` entries belong to, added in
    place (the turn's own server from its snapshot). Looked up before filtering on
    them: each may be a SQL read."""
    own_server = turn.scope.server_id
    for sid in sorted({e.server_id for e in fresh if e.server_id is not None} - set(settings)):
        own = sid == own_server
        settings[sid] = turn.settings if own else reads.settings.server_settings(sid)
        labels[sid] = turn.categories if own else reads.settings.categories(sid)


def _settled(
    reads: _Reads,
    turn: TurnContext,
    pool: Sequence[MemoryEntry],
    settings: Mapping[str, ServerSettings],
    sources: Sequence[_Source],
) -> bool:
    """Whether the blocks shown can no longer change: ``limit`` entries that show
    something, the last of them newer than anything still unread."""
    limit = reads.limits.other_channels_shown
    shown = [
        e
        for e in select_other_entries(
            pool,
            scope=turn.scope,
            cross_server=turn.user_settings.cross_server_opt_in,
            current_settings=turn.settings,
            server_settings=settings,
            is_live=reads.is_live,
        )
        if e.summary or e.categories or e.messages
    ]
    # Strictly newer: an unread member with the same score may sort first by key.
    unread = max(s.floor for s in sources if not s.done)
    return len(shown) >= limit and shown[limit - 1].last_updated.timestamp() > unread


def _may_show(key: str, scope: Scope) -> bool:
    """What the key alone tells: another channel, and the same persona if any."""
    _kind, _owner, channel, persona = parse_key(key)
    if channel == scope.channel_id:
        return False
    return scope.persona_id is None or persona == scope.persona_id


def build_memory_context(
    turn: TurnContext,
    *,
    live: MemoryEntry | None,
    shown_live: MemoryEntry | None,
    others: Iterable[MemoryEntry],
    server_settings: Mapping[str, ServerSettings],
    categories: Mapping[str | None, Sequence[Category]],
    is_live: Callable[[MemoryEntry], bool],
    limit: int,
    history: HistoryWindow | None = None,
    window: Callable[[ShownState | None], HistoryWindow] | None = None,
    now: datetime | None = None,
) -> MemoryContext:
    """Pure: the context for ``turn`` given its live entry (``live``, expired or not,
    for the counters; ``shown_live`` only when it is live) and candidate entries.

    Two forms can be shown: the one the channel's requests showed last (``live.shown``,
    held) and the newest written. When the memory was written since, the context is
    the newest form with the held one as its ``alternative``, and the turn decides
    which its requests send (:mod:`stm_memory.prompt.swap`), once, on the dialogue it
    is given; else it is the held form alone (with no stored form, the newest).
    ``window`` gives each form's history window (default: ``history`` for both);
    ``now``: the instant read at, for how long the channel has been idle."""
    shown = select_other_entries(
        others,
        scope=turn.scope,
        cross_server=turn.user_settings.cross_server_opt_in,
        current_settings=turn.settings,
        server_settings=server_settings,
        is_live=is_live,
    )
    copies = _briefings(turn, shown, categories, limit=limit)
    visible = {e.key for e in shown}
    stored = live.shown if live is not None else None
    base = stored.swap if stored is not None else 0
    newest = ShownState(
        epoch=live.last_refreshed_turn if live is not None else 0,
        summary=live.summary if live is not None else None,
        categories=live.categories if live is not None else {},
        kept=live.kept if live is not None else (),
        turns=live.turns_since_refresh if live is not None else 0,
        swap=base + 1,
        at=stored.at if stored is not None else None,
    )

    nudge, early = _nudges(turn, live)
    # A quiet channel (stm_memory.prompt.quiet) is sent no briefing on its own.
    quiet = live is None or is_quiet(
        live.last_refreshed_turn, live.turns_since_refresh, turn.settings.refresh_cadence
    )

    def form(state: ShownState) -> MemoryContext:
        return _form(
            turn,
            live=live,
            state=state,
            show_memory=shown_live is not None and turn.tools_available,
            copies=copies,
            visible=visible,
            limit=limit,
            history=window(state) if window is not None else history,
            base=base,
            nudge=nudge,
            early=early,
            deliver=not quiet,
        )

    if stored is None:
        return form(newest)
    idle = now - stored.at if now is not None and stored.at is not None else None
    head = _head_idle(turn.scope, others, now, idle)
    held = replace(form(stored), head_idle=head)
    if stored.epoch == newest.epoch:
        # Nothing newer written: the held form stays, whatever the cache did. A swap
        # would only shed briefing copies, and a copy of a channel's raw turns holds
        # words its fresh briefing (the last few turns) no longer shows: shedding it
        # is forgetting (a model that never writes its memory lost every fact from
        # another channel that way). The set restarts only at its bounds.
        return replace(held, idle=idle, missed=stored.missed)
    # A newer memory: without a decision (the engine's own API: build_context, then
    # apply) it shows at once; the turn decides between it and the held form on the
    # dialogue it sends (MemoryTurn.settle).
    fresh = form(newest)
    return replace(
        fresh,
        alternative=held,
        idle=idle,
        missed=stored.missed,
        head_idle=head,
        # Whose words the turn may see: either form's (a wider provenance only means
        # an erasure reaches the update, never that it misses it).
        sources=held.sources | fresh.sources,
    )


def _head_idle(
    scope: Scope, others: Iterable[MemoryEntry], now: datetime | None, idle: timedelta | None
) -> timedelta | None:
    """How long since any channel sharing this one's cached head (the tools and system
    prompt: the channels of its server, or a user's DMs — one ``prompt_cache_key``) last
    sent a request: the head is cold only when all of them have been idle (None: not
    known). The channels read are the newest-first pool, the latest of which is the
    most recently active."""
    if now is None or idle is None:
        return None
    latest = now - idle
    for entry in others:
        shares = (
            entry.server_id == scope.server_id
            if scope.server_id is not None
            else entry.server_id is None and entry.user_id == scope.user_id
        )
        at = entry.shown.at if entry.shown is not None else None
        if shares and at is not None and at > latest:
            latest = at
    return now - latest


def _nudges(turn: TurnContext, live: MemoryEntry | None) -> tuple[str | None, str | None]:
    """``(nudge, early)``: the nudge when the cadence (the staleness bound) is due; else,
    once a turn has passed since the write, the same text for the turn to send only
    when a write pays (stm_memory.prompt.swap.write_pays). The same in either form."""
    if not turn.tool_offered or live is None or live.turns_since_refresh <= 0:
        return None, None
    settings = turn.settings
    text = nudge_text(
        categories=turn.categories,
        summary_mode=turn.summary_mode,
        override=settings.update_nudge_override,
    )
    if live.turns_since_refresh >= settings.refresh_cadence:
        # Past the cadence it backs off once ignored (stm_memory.prompt.quiet).
        due = nudge_due(live.turns_since_refresh, settings.refresh_cadence)
        return (text, None) if due else (None, None)
    return None, text


def _form(
    turn: TurnContext,
    *,
    live: MemoryEntry | None,
    state: ShownState,
    show_memory: bool,
    copies: Sequence[BriefingCopy],
    visible: Collection[str],
    limit: int,
    history: HistoryWindow | None,
    base: int,
    nudge: str | None,
    early: str | None,
    deliver: bool,
) -> MemoryContext:
    """One form's context: ``state``'s memory and cut, its briefing set (``deliver``:
    whether a briefing may be sent on its own between swaps)."""
    settings = turn.settings
    this_lines: list[str] = []
    kept: list[str] = []
    if show_memory:
        this_lines = distilled_lines(state.summary, state.categories, turn.categories)
        kept = kept_lines(state.kept)
    ledger, epoch = plan_briefings(
        live,
        copies,
        visible=visible,
        limit=limit,
        epoch=state.swap,
        now=state.turns,
        deliver=deliver,
    )
    groups = tuple(
        (back, briefing_block(entries))
        for back, entries in briefing_groups(ledger, turns_since_refresh=state.turns)
    )
    sources = frozenset(u for c in ledger for u in c.provenance)
    content, briefing_at = join_parts(memory_block(this_lines, kept), [text for _, text in groups])
    return MemoryContext(
        content=content,
        briefing_at=briefing_at,
        nudge=nudge,
        content_depth=settings.content_injection_depth,
        nudge_depth=settings.nudge_injection_depth,
        history=history,
        sources=sources,
        briefings=groups,
        cache_ordered=True,
        ledger=ledger,
        ledger_epoch=epoch,
        shown=state,
        shown_base=base,
        early_nudge=early,
        writing=writing(
            offered=turn.tool_offered and not turn.unwritten,
            writes=live.last_refreshed_turn if live is not None else 0,
            turns_since_refresh=live.turns_since_refresh if live is not None else 0,
            cadence=settings.refresh_cadence,
        ),
    )


def _briefings(
    turn: TurnContext,
    shown: Iterable[MemoryEntry],
    categories: Mapping[str | None, Sequence[Category]],
    *,
    limit: int,
) -> list[BriefingCopy]:
    """The first ``limit`` entries that render a block, each with the users whose
    words it may hold (provenance)."""
    settings = turn.settings
    copies: list[BriefingCopy] = []
    for entry in shown:
        if len(copies) >= limit:
            break
        block = _block(
            entry,
            tuple(categories.get(entry.server_id, ())),
            turn.scope.server_id,
            settings.render_mode,
            settings.crude_message_count,
        )
        if block is not None:
            copies.append(
                BriefingCopy(
                    source=entry.key,
                    channel_id=entry.channel_id,
                    server_id=entry.server_id,
                    text=block,
                    provenance=entry.provenance,
                )
            )
    return copies


#: entry key -> (the entry, the rest of the arguments, its block), for _block.
_BLOCKS: dict[str, tuple[MemoryEntry, tuple[object, ...], str | None]] = {}
_BLOCKS_KEPT = 128


def _block(
    entry: MemoryEntry,
    categories: tuple[Category, ...],
    current_server_id: str | None,
    render_mode: RenderMode,
    crude_count: int,
) -> str | None:
    """:func:`other_channel_block`, remembered per entry: a pure function of its
    arguments, and every turn renders the other channels again, mostly unchanged (the
    live entries reuse an unchanged entry's object, so an identity test tells)."""
    rest = (categories, current_server_id, render_mode, crude_count)
    known = _BLOCKS.get(entry.key)
    if known is not None and known[0] is entry and known[1] == rest:
        return known[2]
    block = other_channel_block(
        entry,
        categories=categories,
        current_server_id=current_server_id,
        render_mode=render_mode,
        crude_count=crude_count,
    )
    if len(_BLOCKS) >= _BLOCKS_KEPT:
        _BLOCKS.clear()  # simplest bound; a turn's few blocks come back next turn
    _BLOCKS[entry.key] = (entry, rest, block)
    return block


def _eligible(entry: MemoryEntry, scope: Scope, cross_server: bool) -> bool:
    if entry.channel_id == scope.channel_id:
        return False
    if scope.persona_id is not None and entry.persona_id != scope.persona_id:
        return False
    if entry.kind == "user" and entry.user_id != scope.user_id:
        return False
    if scope.server_id is not None:
        if entry.kind == "server":
            return entry.server_id == scope.server_id
        return cross_server and entry.server_id not in (None, scope.server_id)
    return entry.kind == "user" and (entry.server_id is None or cross_server)


def is_visible(
    entry: MemoryEntry,
    *,
    scope: Scope,
    current_settings: ServerSettings,
    entry_settings: ServerSettings | None,
) -> bool:
    """The privacy filter (see the module docstring)."""
    if entry.server_id is None or entry_settings is None:
        return True
    private = entry_settings.private_channel_ids
    if entry.channel_id not in private and entry.parent_channel_id not in private:
        return True
    if entry.server_id != scope.server_id:
        return False
    here = current_settings.private_channel_ids
    in_private = scope.channel_id in here or scope.parent_channel_id in here
    return current_settings.stm_privacy_bypass or in_private


def select_other_entries(
    entries: Iterable[MemoryEntry],
    *,
    scope: Scope,
    cross_server: bool,
    current_settings: ServerSettings,
    server_settings: Mapping[str, ServerSettings],
    is_live: Callable[[MemoryEntry], bool],
) -> list[MemoryEntry]:
    """Eligible, visible, live entries, newest first (ties broken by key)."""
    kept = [
        e
        for e in entries
        if _eligible(e, scope, cross_server)
        and is_live(e)
        and is_visible(
            e,
            scope=scope,
            current_settings=current_settings,
            entry_settings=server_settings.get(e.server_id) if e.server_id else None,
        )
    ]
    kept.sort(key=lambda e: e.key)
    kept.sort(key=lambda e: e.last_updated, reverse=True)
    return kept
