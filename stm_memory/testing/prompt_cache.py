"""One model of the providers' prompt caches, written from their documentation.

Providers bill a prompt prefix they have seen recently at a fraction of the input price.
:class:`PromptCache` observes request bodies in order and says, for each, how many input
tokens the provider would serve from its cache, write to it, or process afresh
(:class:`CacheUsage`), so that the fake provider, the offline SDK clients and the
benchmark all report and price caching the same way.

Sources (checked 2026):

- OpenAI, "Prompt caching" guide (developers.openai.com/api/docs/guides/prompt-caching):
  automatic for prompts of 1024 tokens or more; hits only on an exact prefix; cached
  tokens counted in 128-token steps; in-memory retention of minutes after last use, or
  ``prompt_cache_retention="24h"``; no fee to write. Cached input is 0.1x the input price
  for the gpt-5 family and 0.25x for gpt-4.1 (pricing page).
- Anthropic, "Prompt caching" (platform.claude.com/docs/en/build-with-claude/prompt-caching):
  the prefix is tools, then system, then messages; it is cached only up to blocks
  marked ``cache_control`` (at most 4 per request) or, with a top-level
  ``cache_control`` (automatic caching), up to the last cacheable block; each breakpoint
  looks for a hit at up to about 20 earlier block boundaries; reads cost 0.1x, writes
  1.25x (``ttl`` "5m", the default) or 2x ("1h"); a read refreshes the entry; prefixes
  below the model's minimum (1024 tokens Sonnet 4.x / Opus 4 / 4.1, 2048 Haiku 3 / 3.5,
  4096 Haiku 4.5 / Opus 4.5 / 4.6) are never cached; ``usage.input_tokens`` counts only
  the tokens after the last breakpoint, beside ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``.

Tokens are a deterministic approximation, ``ceil(len(text) / 4)`` of the canonical JSON of
each part of a request (:func:`request_parts`), so prefixes compare byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from stm_memory.model.rates import CACHE_PROFILES, CacheProfile
from stm_memory.wire.base import breakpoints_in

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "ANTHROPIC_MAX_BREAKPOINTS",
    "CACHE_PROFILES",
    "CacheProfile",
    "CacheUsage",
    "Part",
    "PromptCache",
    "count_text_tokens",
    "detect_api",
    "request_parts",
]

#: Anthropic: "up to 4 cache breakpoints"; a fifth is a 400.
ANTHROPIC_MAX_BREAKPOINTS = 4
#: Anthropic: a breakpoint checks "previous content block boundaries (up to approximately
#: 20 blocks before your explicit breakpoint)".
ANTHROPIC_LOOKBACK_BLOCKS = 20
_ANTHROPIC_TTLS = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1)}
#: OpenAI ``prompt_cache_retention`` values.
_OPENAI_RETENTION = {"in_memory": timedelta(minutes=5), "24h": timedelta(hours=24)}
#: OpenAI ``prompt_cache_options.ttl`` values (gpt-5.6 and later).
_OPENAI_TTLS = {"30m": timedelta(minutes=30), "12h": timedelta(hours=12)}
#: Blocks Anthropic cannot put a breakpoint on (automatic caching skips them).
_UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_APIS = ("openai_chat", "openai_responses", "anthropic")


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """The input tokens of one request (or a sum of requests), split by how they bill."""

    input_tokens: int  # every input token (cached, written and plain)
    cached_tokens: int = 0  # served from the cache (billed read_multiplier)
    cache_write_tokens: int = 0  # written to the cache (Anthropic; billed write_multiplier)

    @property
    def uncached_tokens(self) -> int:
        """Input tokens billed at the plain input price."""
        return self.input_tokens - self.cached_tokens - self.cache_write_tokens

    def cost(self, profile: CacheProfile, *, output_tokens: int = 0) -> float:
        """The price in input-token units (1.0 = one uncached input token)."""
        return (
            self.uncached_tokens
            + self.cached_tokens * profile.read_multiplier
            + self.cache_write_tokens * profile.write_multiplier
            + output_tokens * profile.output_multiplier
        )

    def __add__(self, other: CacheUsage) -> CacheUsage:
        return CacheUsage(
            self.input_tokens + other.input_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class Part:
    """One unit of a prompt prefix: its canonical JSON and its token count."""

    text: str
    tokens: int
    cache_ttl: str | None = None  # Anthropic: a breakpoint ends here ("5m" or "1h")
    marked: bool = False  # OpenAI: an explicit breakpoint ends here (gpt-5.6 and later)


def count_text_tokens(text: str) -> int:
    """The deterministic token estimate: four characters a token, rounded up."""
    return math.ceil(len(text) / 4)


def _part(obj: Any, cache_ttl: str | None = None) -> Part:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False)
    return Part(text, count_text_tokens(text), cache_ttl)


def _openai_part(message: Any) -> Part:
    """One OpenAI message (or input item) as a part. An explicit breakpoint is not
    content: the marker is left out of the prefix, and a message whose text was made
    one marked block to carry it is read as the text it was, so a message compares
    the same marked or not. A breakpoint on an earlier block of a message is taken to
    end the message (ours go on its last block)."""
    if not isinstance(message, Mapping) or not breakpoints_in(message):
        return _part(message)
    content = message["content"]
    blocks = [
        {k: v for k, v in b.items() if k != "prompt_cache_breakpoint"}
        if isinstance(b, Mapping)
        else b
        for b in content
    ]
    one = blocks[0] if len(blocks) == 1 else None
    if isinstance(one, Mapping) and set(one) == {"type", "text"}:
        clean: Any = {**message, "content": one["text"]}
    else:
        clean = {**message, "content": blocks}
    text = json.dumps(clean, sort_keys=True, ensure_ascii=False)
    return Part(text, count_text_tokens(text), marked=True)


def detect_api(body: Mapping[str, Any]) -> str:
    """``"anthropic"``, ``"openai_responses"`` or ``"openai_chat"`` for a request body."""
    if "input" in body or "instructions" in body:
        return "openai_responses"
    messages = body.get("messages") or []
    roles = {m.get("role") for m in messages if isinstance(m, Mapping)}
    blocks = {
        b.get("type")
        for m in messages
        if isinstance(m, Mapping) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, Mapping)
    }
    if "system" in body or "cache_control" in body or blocks & {"tool_use", "tool_result"}:
        return "anthropic"
    # Chat Completions also knows max_tokens, but its system/tool turns are messages.
    if "max_tokens" in body and not roles & {"system", "developer", "tool"}:
        return "anthropic"
    return "openai_chat"


def _ttl_of(cache_control: Any) -> str:
    ttl = cache_control.get("ttl", "5m") if isinstance(cache_control, Mapping) else "5m"
    if ttl not in _ANTHROPIC_TTLS:
        raise ValueError(f"cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
    return str(ttl)


def _anthropic_parts(body: Mapping[str, Any]) -> list[Part]:
    # (object hashed, explicit cache_control or None, block type) in prefix order.
    items: list[tuple[Any, Any, str | None]] = []

    def add(obj: Mapping[str, Any], wrap: Any = None) -> None:
        # cache_control is not content: moving a breakpoint keeps the prefix the same.
        clean = {k: v for k, v in obj.items() if k != "cache_control"}
        hashed = clean if wrap is None else {"role": wrap, "content": clean}
        items.append((hashed, obj.get("cache_control"), obj.get("type")))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        add(block)
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for i, block in enumerate(blocks or []):
            # The role goes into the first block, so a changed role breaks the prefix.
            add(block, message.get("role") if i == 0 else None)

    ttls: list[str | None] = [_ttl_of(cc) if cc is not None else None for _, cc, _ in items]
    automatic = body.get("cache_control")
    if automatic is not None:
        # Automatic caching: the breakpoint goes on the last cacheable block.
        last = max(
            (i for i, (_, _, kind) in enumerate(items) if kind not in _UNCACHEABLE_BLOCKS),
            default=None,
        )
        if last is not None and ttls[last] is None:
            ttls[last] = _ttl_of(automatic)
    found = sum(t is not None for t in ttls)
    if found > ANTHROPIC_MAX_BREAKPOINTS:
        raise ValueError(
            f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be "
            f"provided. Found {found}."
        )
    return [_part(obj, ttl) for (obj, _, _), ttl in zip(items, ttls, strict=True)]


def request_parts(body: Mapping[str, Any], *, provider: str | None = None) -> list[Part]:
    """The parts of a request's prompt in prefix order.

    ``provider`` is ``"openai_chat"`` (the tools list as one part, then each message),
    ``"openai_responses"`` (tools, instructions, each input item) or ``"anthropic"`` (each
    tool, each system block, each content block; the role folded into a message's first
    block); ``None`` detects it (:func:`detect_api`). An Anthropic request with more than
    four breakpoints raises :class:`ValueError`, as the API answers 400.
    """
    api = provider or detect_api(body)
    if api == "anthropic":
        return _anthropic_parts(body)
    if api not in _APIS:
        raise ValueError(f"provider must be one of {_APIS}, got {api!r}")
    parts = [_part(body["tools"])] if body.get("tools") else []
    if api == "openai_chat":
        return parts + [_openai_part(m) for m in body.get("messages") or []]
    if body.get("instructions"):
        parts.append(_part(body["instructions"]))
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    return parts + [_openai_part(item) for item in items]


@dataclass(slots=True)
class _Entry:
    expires: datetime
    ttl: timedelta
    next_texts: set[str] = field(default_factory=set)  # OpenAI: the parts seen after it


_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_FOREVER = datetime.max.replace(tzinfo=UTC)
_PURGE_ABOVE = 4096  # entries kept before expired ones are dropped


class PromptCache:
    """One provider-side prefix cache shared by every request observed (thread-safe)."""

    def __init__(self, profile: CacheProfile) -> None:
        self.profile = profile
        self._entries: dict[bytes, _Entry] = {}
        self._last = _EPOCH
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every cached prefix (and the counter clock)."""
        with self._lock:
            self._entries.clear()
            self._last = _EPOCH

    def observe(
        self, body: Mapping[str, Any], *, at: datetime | None = None, api: str | None = None
    ) -> CacheUsage:
        """Price ``body`` against what is cached at ``at``, then record it.

        ``at`` is an aware datetime; ``None`` means one microsecond after the last request
        seen (a counter, so tests without a clock get hits). ``api`` as in
        :func:`request_parts`. Raises :class:`ValueError` for a request the provider
        refuses (an Anthropic request with more than four breakpoints).
        """
        if at is not None and at.tzinfo is None:
            raise ValueError("at must be an aware datetime")
        api = api or detect_api(body)
        parts = request_parts(body, provider=api)
        with self._lock:
            now = at if at is not None else self._last + timedelta(microseconds=1)
            self._last = max(self._last, now)
            if len(self._entries) > _PURGE_ABOVE:
                self._entries = {k: e for k, e in self._entries.items() if e.expires > now}
            digests = self._digests(str(body.get("model", "")), parts)
            if api == "anthropic":
                return self._anthropic(parts, digests, now)
            return self._openai(body, parts, digests, now)

    def _digests(self, model: str, parts: list[Part]) -> list[bytes]:
        # digests[k] names the prefix of the first k parts; caches are per model.
        digests = [hashlib.sha256(model.encode()).digest()]
        for part in parts:
            digests.append(hashlib.sha256(digests[-1] + part.text.encode()).digest())
        root = self._entries.setdefault(digests[0], _Entry(_FOREVER, timedelta(0)))
        root.expires = _FOREVER
        return digests

    def _alive(self, digest: bytes, now: datetime) -> _Entry | None:
        entry = self._entries.get(digest)
        return entry if entry is not None and entry.expires > now else None

    def _put(self, digest: bytes, ttl: timedelta, now: datetime) -> _Entry:
        entry = self._entries.get(digest)
        if entry is None:
            entry = self._entries[digest] = _Entry(now + ttl, ttl)
        else:  # a write or read of a live entry refreshes it
            entry.ttl = max(entry.ttl, ttl) if entry.expires > now else ttl
            entry.expires = max(entry.expires, now + ttl)
        return entry

    def _openai(
        self, body: Mapping[str, Any], parts: list[Part], digests: list[bytes], now: datetime
    ) -> CacheUsage:
        profile = self.profile
        if profile.breakpoints:
            return self._at_breakpoints(body, parts, digests, now)
        total = sum(p.tokens for p in parts)
        # The longest byte-identical prefix: whole parts first (a prefix outlives none of
        # its extensions, so the first miss ends the match) ...
        k, matched = 0, 0
        while k < len(parts) and self._alive(digests[k + 1], now):
            matched += parts[k].tokens
            k += 1
        if k < len(parts):
            # ... then the characters shared with a part that followed this prefix before.
            shared = 0
            for text in self._entries[digests[k]].next_texts:
                if self._alive(hashlib.sha256(digests[k] + text.encode()).digest(), now):
                    shared = max(shared, _common_prefix(text, parts[k].text))
            matched += shared // 4
        # Counted only from min_tokens (1024) on, in steps of 128.
        cached = matched // profile.step * profile.step if matched >= profile.min_tokens else 0
        retention = body.get("prompt_cache_retention")
        ttl = _OPENAI_RETENTION.get(str(retention), profile.ttl) if retention else profile.ttl
        if total >= profile.min_tokens:
            # The whole prompt becomes a cached prefix; the parts it shares are refreshed.
            for i, part in enumerate(parts):
                self._entries[digests[i]].next_texts.add(part.text)
                self._put(digests[i + 1], ttl, now)
        return CacheUsage(total, cached, 0)

    def _at_breakpoints(
        self, body: Mapping[str, Any], parts: list[Part], digests: list[bytes], now: datetime
    ) -> CacheUsage:
        """OpenAI from gpt-5.6 on: a prefix is read only where a breakpoint written
        before ends it (no shorter unmarked prefix), and written at this request's
        breakpoints: the implicit one at the end of the newest message (unless
        ``prompt_cache_options.mode`` is ``"explicit"``) and the latest explicit ones,
        three beside it or four without; writes are billed."""
        options = body.get("prompt_cache_options")
        options = options if isinstance(options, Mapping) else {}
        explicit_only = options.get("mode") == "explicit"
        ttl = _OPENAI_TTLS.get(str(options.get("ttl", "30m")), self.profile.ttl)
        cumulative = [0]
        for part in parts:
            cumulative.append(cumulative[-1] + part.tokens)
        # Breakpoints written before are entries; the longest this request extends is read.
        hit = next((j for j in range(len(parts), 0, -1) if self._alive(digests[j], now)), 0)
        if hit:
            self._put(digests[hit], ttl, now)  # a read refreshes the entry
        marked = [i + 1 for i, p in enumerate(parts) if p.marked]
        ends = marked[-4:] if explicit_only else [*marked[-3:], len(parts)]
        written = hit
        for end in ends:
            if end > hit and cumulative[end] >= self.profile.min_tokens:
                self._put(digests[end], ttl, now)
                written = max(written, end)
        cached = cumulative[hit]
        return CacheUsage(cumulative[-1], cached, cumulative[written] - cached)

    def _anthropic(self, parts: list[Part], digests: list[bytes], now: datetime) -> CacheUsage:
        cumulative = [0]
        for part in parts:
            cumulative.append(cumulative[-1] + part.tokens)
        ends = [i + 1 for i, p in enumerate(parts) if p.cache_ttl is not None]
        # Each breakpoint looks for an entry ending at it or up to 20 boundaries earlier;
        # the longest hit is read.
        hit = 0
        for end in ends:
            for j in range(end, max(end - ANTHROPIC_LOOKBACK_BLOCKS, 1) - 1, -1):
                if self._alive(digests[j], now):
                    hit = max(hit, j)
                    break
        if hit:
            entry = self._entries[digests[hit]]
            entry.expires = now + entry.ttl  # a read refreshes the entry
        written = hit
        for end in ends:
            ttl = _ANTHROPIC_TTLS[parts[end - 1].cache_ttl or "5m"]
            if end < hit:
                if self._alive(digests[end], now):
                    self._put(digests[end], ttl, now)
            elif cumulative[end] >= self.profile.min_tokens:
                # Entries are written only for prefixes that end at a breakpoint and reach
                # the model's minimum length.
                self._put(digests[end], ttl, now)
                written = max(written, end)
        cached = cumulative[hit]
        return CacheUsage(cumulative[-1], cached, cumulative[written] - cached)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
