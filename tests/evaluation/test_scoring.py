"""Scoring without a judge: the value must be there, an older value must not."""

from __future__ import annotations

from stm_memory.evaluation import ConversationSet, Probe, score_answer


def _probe(**kw: object) -> Probe:
    fields: dict[str, object] = {
        "id": "p",
        "fact_id": "f",
        "turn": 9,
        "channel": "c",
        "question": "q?",
        "expected": "4417",
        "kind": "same_channel",
    }
    return Probe(**{**fields, **kw})  # type: ignore[arg-type]


def test_the_planted_value_must_appear() -> None:
    probe = _probe()
    assert score_answer(probe, "The door code is 4417.")
    assert not score_answer(probe, "I don't know.")
    assert not score_answer(probe, "It is 44170.")  # not inside a longer number


def test_a_corrected_fact_answered_with_its_old_value_is_wrong() -> None:
    probe = _probe(expected="Marrowby", stale=("Nettlebed",))
    assert probe.corrected
    assert score_answer(probe, "It's at marrowby now.")
    assert not score_answer(probe, "It is Nettlebed.")
    # Naming both is not committing to the newer one.
    assert not score_answer(probe, "Marrowby (it used to be Nettlebed).")


def test_the_generated_corrected_probes_refuse_their_old_values(
    conversation: ConversationSet,
) -> None:
    corrected = [p for p in conversation.probes if p.corrected]
    assert corrected
    for probe in corrected:
        assert not score_answer(probe, f"It is {probe.stale[0]}.")
        assert score_answer(probe, f"It is {probe.expected}.")


def test_free_text_answers_match_word_by_word() -> None:
    probe = _probe(expected="7 May 2023", match="words")
    assert score_answer(probe, "That was on the 7 of May, 2023.")
    assert not score_answer(probe, "In May 2023.")
