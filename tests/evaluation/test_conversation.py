"""The generated conversation set: reproducible from its seed, and shaped as promised."""

from __future__ import annotations

import pytest

from stm_memory.evaluation import ConversationSet, generate_conversation


def test_the_same_seed_gives_the_same_set() -> None:
    one = generate_conversation(seed=11, turns=60)
    two = generate_conversation(seed=11, turns=60)
    assert one == two
    assert one.to_json() == two.to_json()


def test_another_seed_gives_another_set() -> None:
    assert (
        generate_conversation(seed=1, turns=60).turns
        != generate_conversation(seed=2, turns=60).turns
    )


def test_the_set_round_trips_through_json(conversation: ConversationSet) -> None:
    import json

    assert ConversationSet.from_dict(json.loads(conversation.to_json())) == conversation


def test_channels_users_facts_corrections_decoys_and_probes(
    conversation: ConversationSet,
) -> None:
    c = conversation
    assert len(c.channels) >= 3
    assert len({t.user_id for t in c.turns}) > 1
    kinds = {t.kind for t in c.turns}
    assert {"chat", "fact", "correction", "decoy", "probe"} <= kinds
    assert {p.kind for p in c.probes} == {"same_channel", "cross_channel"}
    for probe in c.probes:
        fact = c.fact(probe.fact_id)
        turn = c.turns[probe.turn]
        assert (turn.kind, turn.probe_id, turn.text) == ("probe", probe.id, probe.question)
        assert probe.turn > max((fact.planted_at, *fact.corrected_at))  # asked later
        assert (probe.channel == fact.channel) == (probe.kind == "same_channel")
        assert probe.expected == fact.current  # the newer value is right
        assert probe.stale == fact.values[:-1]
    corrected = [p for p in c.probes if p.corrected]
    assert corrected and any(p.kind == "cross_channel" for p in corrected)
    # Every planted and corrected value is said in its channel, at its turn.
    for fact in c.facts:
        said = [fact.planted_at, *fact.corrected_at]
        for at, value in zip(said, fact.values, strict=True):
            assert c.turns[at].channel == fact.channel
            assert value in c.turns[at].text
    # Values are unique, so an answer names one fact.
    values = [v.casefold() for f in c.facts for v in f.values]
    assert len(values) == len(set(values))


def test_too_short_or_too_narrow_sets_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        generate_conversation(turns=10)
    with pytest.raises(ValueError, match="two channels"):
        generate_conversation(channels=["only"])
