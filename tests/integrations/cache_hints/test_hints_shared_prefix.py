"""Two requests of one channel between memory rewrites share everything up to the new
exchange, in every integration, so the second is read from the provider's cache: the
prompt order of ``stm_memory.prompt.placement`` (this channel's memory at the top with,
on the first turn after it was rewritten, the other channels' briefings as a stable group
right after it; the dialogue since the cut; a briefing new or changed since the rewrite
right after the user message of the turn it entered) as it reaches the HTTP layer,
through the real SDK clients, replayed from cassettes recorded against the local fake
provider.

Requests are compared part by part as a provider's cache sees them
(:func:`stm_memory.testing.request_parts`: breakpoints are not content), and priced by
:class:`stm_memory.testing.PromptCache`, the model the fake provider reports usage from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from helpers.cache_hints import (
    LONG_SYSTEM,
    SUMMARIES,
    Entry,
    Env,
    Setup,
    cache_profile,
    driver,
    entries,
    scope,
    turn,
)
from helpers.memory import refresh

from stm_memory.testing import CACHE_PROFILES, PromptCache, request_parts

pytestmark = [
    pytest.mark.vcr,
    # RunnableWithMessageHistory is deprecated in langchain-core >= 1.3.3; it still works.
    pytest.mark.filterwarnings(
        "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
    ),
]

TEXTS = ["Which line goes from Kyoto to Nara?", "And from Nara back to Osaka?"]


def own_text_part(parts: Sequence[Any], text: str) -> int:
    """Index of the (last) part holding the user's words ``text``."""
    return max(i for i, part in enumerate(parts) if text in part.text)


@pytest.mark.parametrize("entry", entries())
async def test_a_channels_requests_share_their_prefix(entry: Entry, env: Env) -> None:
    # c1 has a memory (the top of its prompt); so has c2 (a briefing in c1's requests).
    for channel, summary in SUMMARIES.items():
        refresh(env.memory, scope(channel), summary)
    drive = driver(env, entry, Setup(system=LONG_SYSTEM))
    first = await turn(env, entry, drive, "c1", TEXTS[0])
    second = await turn(env, entry, drive, "c1", TEXTS[1])
    a, b = first.bodies[0], second.bodies[0]

    parts_a, parts_b = request_parts(a, provider=entry.api), request_parts(b, provider=entry.api)
    own = own_text_part(parts_a, TEXTS[0])
    # Everything up to and including the user's own words is the same, part by part...
    assert [p.text for p in parts_b[: own + 1]] == [p.text for p in parts_a[: own + 1]]

    # ... with this channel's memory in that prefix and, this being the first turn
    # after the memory was rewritten, the other channel's briefing in the stable group
    # after it, before the user's words (billed once: nothing of it after them).
    def holding(parts: Sequence[Any], text: str) -> list[int]:
        return [i for i, part in enumerate(parts) if text in part.text]

    memory_at, briefing_at = holding(parts_a, SUMMARIES["c1"]), holding(parts_a, SUMMARIES["c2"])
    assert memory_at and briefing_at
    assert max(memory_at) <= min(briefing_at) and max(briefing_at) < own
    # The second request keeps it where it was and does not send it again after its
    # own user message.
    own_b = own_text_part(parts_b, TEXTS[1])
    assert own_b > own
    assert holding(parts_b, SUMMARIES["c2"]) == briefing_at
    assert not any(SUMMARIES["c2"] in p.text for p in parts_b[own + 1 :])

    # So the second request reads at least everything before the first one's user
    # message from the cache (the long system prompt, the memory), as the provider
    # reported it.
    cache = PromptCache(CACHE_PROFILES[cache_profile(entry.provider)])
    usage_a, usage_b = (cache.observe(body, api=entry.api) for body in (a, b))
    step = cache.profile.step
    before_user = sum(p.tokens for p in parts_a[:own])
    assert before_user >= 1024
    assert usage_b.cached_tokens >= before_user // step * step
    assert (first.cached, second.cached) == (usage_a.cached_tokens, usage_b.cached_tokens)
