"""Writers that leave details out of the memory they write, and what our memory keeps.

``paraphrase`` writes every fact but a number or a time in words, ``recent`` only the
newest half of the facts it sees; the engine keeps what a write leaves out of the turns
it lets the history cut drop, verbatim beside the memory ("a lossy writer costs no
recall"), and the report counts what was kept and what it cost.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest

from stm_memory.evaluation import (
    ConversationSet,
    EvalReport,
    Fact,
    ScriptedModel,
    StrategyResult,
    generate_conversation,
    paraphrased,
    run_eval,
)
from stm_memory.evaluation._kept import kept_block_lines
from stm_memory.prompt.render import CONTENT_HEADER, KEPT_TITLE, NOTES_TITLE, THIS_CHANNEL
from stm_memory.tool.turn import TOOL_NAME

#: Long enough for every channel's memory to be rewritten and its early turns cut.
LOSSY_TURNS = 120
#: Two sets (the eval's default seed and another); `stm-memory eval` measures more.
SEEDS = (7, 11)
TOOLS: dict[str, dict[str, Any]] = {TOOL_NAME: {"properties": {"summary": {}}}}
_NUMBER = re.compile(r"\d+|\d{1,2}:\d{2}")


@cache
def _conversation(seed: int) -> ConversationSet:
    return generate_conversation(seed=seed, turns=LOSSY_TURNS)


@cache
def _run(kind: str, seed: int) -> EvalReport:
    strategies = ["full-history"] if kind == "perfect" else ["stm-loop"]
    return run_eval(f"scripted:{kind}", conversation=_conversation(seed), strategies=strategies)


def _right(result: StrategyResult) -> dict[str, bool]:
    return {p.probe_id: p.correct for p in result.probes if p.kind == "same_channel"}


def _numeric(fact: Fact) -> bool:
    return all(_NUMBER.fullmatch(v) for v in fact.values)


def _write(kind: str, conversation: ConversationSet, channel: str, upto: int) -> str:
    """What ``kind`` writes when nudged after the user turns of ``channel`` up to turn
    ``upto`` (everything it was shown)."""
    model = ScriptedModel(conversation=conversation, kind=kind)  # type: ignore[arg-type]
    dialogue = [("system", f"Call {TOOL_NAME} now.")]
    dialogue += [("user", u.text) for u in conversation.turns[: upto + 1] if u.channel == channel]
    reply = model.respond(dialogue, tools=TOOLS)
    assert [name for name, _ in reply.tool_calls] == [TOOL_NAME]
    args: dict[str, Any] = reply.tool_calls[0][1]
    return str(args["summary"])


def _stated(conversation: ConversationSet, channel: str, upto: int) -> list[tuple[int, Fact]]:
    """The facts of ``channel`` stated by turn ``upto``, with the turn that last stated
    one, oldest first."""
    out = []
    for fact in conversation.facts:
        said = [t for t in (fact.planted_at, *fact.corrected_at) if t <= upto]
        if fact.channel == channel and said:
            out.append((max(said), fact))
    return sorted(out, key=lambda s: s[0])


def test_paraphrase_puts_plain_numbers_and_times_in_words() -> None:
    assert paraphrased("4821") == "four thousand eight hundred twenty-one"
    assert paraphrased("09:35") == "nine thirty-five"
    assert paraphrased("21:00") == "twenty-one o'clock"
    assert paraphrased("12:05") == "twelve oh five"
    assert paraphrased("7010") == "seven thousand ten"
    for value in ("B42", "teal-otter-42", "Marrowby"):
        assert paraphrased(value) == value


@pytest.mark.parametrize("seed", SEEDS)
def test_the_paraphrasing_writer_writes_every_fact_but_no_digits_of_a_number(
    seed: int,
) -> None:
    conversation = _conversation(seed)
    numbers = 0
    for channel in conversation.channels:
        upto = len(conversation.turns) - 1
        perfect = _write("perfect", conversation, channel, upto)
        written = _write("paraphrase", conversation, channel, upto)
        facts = [fact for _, fact in _stated(conversation, channel, upto)]
        assert facts
        assert written.count("\n- ") == perfect.count("\n- ") == len(facts)
        for fact in facts:
            value = fact.value_at(upto + 1)
            assert f"- {fact.key}: {paraphrased(value)}" in written
            if _numeric(fact):
                numbers += 1
                assert not any(v in written for v in fact.values), fact
            else:
                assert f"- {fact.key}: {value}" in written
    assert numbers >= 2


@pytest.mark.parametrize("seed", SEEDS)
def test_the_recent_writer_leaves_out_the_older_half(seed: int) -> None:
    conversation = _conversation(seed)
    left_out = 0
    for channel in conversation.channels:
        upto = len(conversation.turns) - 1
        stated = _stated(conversation, channel, upto)
        written = _write("recent", conversation, channel, upto)
        # With an odd count the middle one is kept.
        older, newer = stated[: len(stated) // 2], stated[len(stated) // 2 :]
        left_out += len(older)
        for _, fact in newer:
            assert f"- {fact.key}: {fact.value_at(upto + 1)}" in written
        for _, fact in older:
            assert fact.key not in written
            assert not any(v in written for v in fact.values)
    assert left_out >= 4


@pytest.mark.parametrize("seed", SEEDS)
def test_the_paraphrasing_writer_s_memory_never_shows_the_digits(seed: int) -> None:
    conversation = _conversation(seed)
    result = _run("paraphrase", seed).strategy("stm-loop")
    numeric = [v for f in conversation.facts if _numeric(f) for v in f.values]
    notes_seen = 0
    for turn in result.turns:
        for message in turn.requests[0].body["messages"]:
            text = str(message.get("content") or "")
            if not text.startswith(CONTENT_HEADER) or THIS_CHANNEL not in text:
                continue
            block = text.split(THIS_CHANNEL, 1)[1]
            if KEPT_TITLE in block:
                block = block.split(NOTES_TITLE, 1)[1] if NOTES_TITLE in block else ""
            notes_seen += 1
            assert not any(re.search(rf"(?<!\w){v}(?!\w)", block) for v in numeric)
    assert notes_seen


@pytest.mark.parametrize("kind", ["forgetful", "paraphrase", "recent"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_lossy_writer_costs_no_same_channel_recall(kind: str, seed: int) -> None:
    full = _run("perfect", seed).strategy("full-history")
    ours = _run(kind, seed).strategy("stm-loop")
    assert full.recall.same_channel.rate == 1.0
    assert _right(ours) == _right(full)
    assert ours.kept is not None and ours.kept.details > 0  # it was kept, not lucky


def test_the_report_counts_the_kept_details_and_their_cost(
    forgetful: EvalReport, perfect: EvalReport
) -> None:
    ours = forgetful.strategy("stm-loop")
    assert ours.kept is not None
    assert ours.kept.details > 0 and ours.kept.excerpts > 0 and ours.kept.tokens > 0
    # Sent with many requests: more than what is kept at the end, less than all input.
    assert ours.kept.tokens < ours.kept.sent_tokens < ours.cost.input_tokens
    assert 0 < ours.kept.requests <= ours.model_calls
    row = ours.row()
    assert row["kept_details"] == ours.kept.details > 0
    assert row["kept_tokens"] == ours.kept.tokens > 0
    assert 0 < row["kept_sent_share"] < 1
    # No memory, nothing kept: 0 in the data, a dash in the table.
    for report, key in ((perfect, "full-history"), (forgetful, "summarization")):
        result = report.strategy(key)
        assert result.kept is None
        assert {k: v for k, v in result.row().items() if k.startswith("kept_")} == {
            "kept_details": 0,
            "kept_excerpts": 0,
            "kept_tokens": 0,
            "kept_sent_tokens": 0,
            "kept_sent_share": 0.0,
        }
    table = perfect.to_markdown()
    assert "| kept | kept tok. | kept sent tok. |" in table
    full_line = next(x for x in table.splitlines() if x.startswith("| full history (per"))
    assert full_line.endswith("| — | — | — |")
    assert "kept_details" in forgetful.to_csv().splitlines()[0]
    data = forgetful.to_dict()["strategies"][0]
    assert data["strategy"] == "stm-loop" and data["kept_details"] == ours.kept.details


def test_kept_lines_are_found_in_a_memory_block() -> None:
    block = "\n".join(
        [
            CONTENT_HEADER,
            THIS_CHANNEL,
            KEPT_TITLE,
            '  2026-01-05 09:10 UTC, Ben: "the door code is 4821."',
            NOTES_TITLE,
            "  Settled details:",
        ]
    )
    assert kept_block_lines(block) == [
        KEPT_TITLE,
        '  2026-01-05 09:10 UTC, Ben: "the door code is 4821."',
        NOTES_TITLE,
    ]
    assert kept_block_lines(f"{CONTENT_HEADER}\n{THIS_CHANNEL}\n  Settled details:") == []
