"""Clearing never parts a call from its result (issue "long turns"): over generated
long turns in each wire format (parallel calls, mixed ids, a result missing, results
of every size), the requests keep every message and every call, each result in its
place (whole, or its placeholder), are exactly as valid as what they were built from,
and come out the same bytes when built again."""

from __future__ import annotations

from typing import Any

from helpers.dialogues import validity_errors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from stm_memory.kit.long_turn import LongTurn
from stm_memory.prompt.clearing import ClearingRule, turn_results
from stm_memory.wire import codec_of

#: A step: the sizes (characters) of its parallel calls' results; None: a call whose
#: result is missing (the caller's transcript is invalid: we must not make it worse).
Step = list[int | None]

steps = st.lists(
    st.lists(st.one_of(st.integers(0, 9_000), st.none()), min_size=1, max_size=3),
    min_size=1,
    max_size=30,
)
ids = st.sampled_from(["call_{}", "toolu_{:02d}", "{}", "fc-{}-x"])


def text(size: int, k: int) -> str:
    return (f"result {k} " * (size // 9 + 1))[:size]


def chat(turn: list[Step], pattern: str) -> list[Any]:
    out: list[Any] = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    k = 0
    for step in turn:
        calls, results = [], []
        for size in step:
            cid = pattern.format(k)
            calls.append(
                {"id": cid, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            )
            if size is not None:
                results.append({"role": "tool", "tool_call_id": cid, "content": text(size, k)})
            k += 1
        out += [{"role": "assistant", "content": None, "tool_calls": calls}, *results]
    return out


def responses(turn: list[Step], pattern: str) -> list[Any]:
    out: list[Any] = [{"role": "user", "content": "go"}]
    k = 0
    for step in turn:
        for size in step:
            cid = pattern.format(k)
            out.append({"type": "function_call", "call_id": cid, "name": "read", "arguments": "{}"})
            if size is not None:
                out.append(
                    {"type": "function_call_output", "call_id": cid, "output": text(size, k)}
                )
            k += 1
    return out


def anthropic(turn: list[Step], pattern: str) -> list[Any]:
    out: list[Any] = [{"role": "user", "content": "go"}]
    k = 0
    for step in turn:
        uses, results = [], []
        for size in step:
            cid = pattern.format(k)
            uses.append({"type": "tool_use", "id": cid, "name": "read", "input": {}})
            if size is not None:
                results.append(
                    {"type": "tool_result", "tool_use_id": cid, "content": text(size, k)}
                )
            k += 1
        out.append({"role": "assistant", "content": uses})
        out.append({"role": "user", "content": results or [{"type": "text", "text": "?"}]})
    return out


def langchain(turn: list[Step], pattern: str) -> list[Any]:
    out: list[BaseMessage] = [HumanMessage("go")]
    k = 0
    for step in turn:
        calls, results = [], []
        for size in step:
            cid = pattern.format(k)
            calls.append({"id": cid, "name": "read", "args": {}})
            if size is not None:
                results.append(ToolMessage(text(size, k), tool_call_id=cid))
            k += 1
        out += [AIMessage("", tool_calls=calls), *results]
    return out


FORMATS = {"openai": chat, "responses": responses, "anthropic": anthropic, "langchain": langchain}


def tokens(messages: Any) -> int:
    return sum(len(codec_of(m).text(m)) // 4 + 3 for m in messages)


def check(fmt: str, turn: list[Step], pattern: str, window: int) -> None:
    long = LongTurn(ClearingRule(window=window))
    build = FORMATS[fmt]
    built: list[list[Any]] = []
    for n in range(1, len(turn) + 1):
        messages = build(turn[:n], pattern)
        out = long.placed(messages, messages, tokens)
        built.append(out)
        assert len(out) == len(messages)  # nothing leaves: a placeholder takes a result's place
        for message, sent in zip(messages, out, strict=True):
            assert codec_of(sent).calls(sent) == codec_of(message).calls(message)
            before = codec_of(message).results(message)
            after = codec_of(sent).results(sent)
            assert [i for i, _ in after] == [i for i, _ in before]
            for (cid, old), (_, new) in zip(before, after, strict=True):
                assert new == old or (cid in new and "read_tool_result" in new)
        assert validity_errors(fmt, out) == validity_errors(fmt, messages)
        # Built again, the same bytes: what left stays left, nothing more leaves.
        assert long.placed(messages, messages, tokens) == out
    # Every result a request left out comes back byte for byte.
    for result in turn_results(build(turn, pattern)):
        assert long.recall({"call_id": result.call_id}).startswith(result.text[:100])


def run(fmt: str) -> Any:
    @settings(
        max_examples=260,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(turn=steps, pattern=ids, window=st.sampled_from([4_096, 8_192, 32_768]))
    def prop(turn: list[Step], pattern: str, window: int) -> None:
        check(fmt, turn, pattern, window)

    prop()


def test_chat_turns() -> None:
    run("openai")


def test_responses_turns() -> None:
    run("responses")


def test_anthropic_turns() -> None:
    run("anthropic")


def test_langchain_turns() -> None:
    run("langchain")
