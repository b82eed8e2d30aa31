"""What ``writer=``'s model is asked, and how its answer is read (``kit/writer.py``, pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from stm_memory import ConfigurationError
from stm_memory.kit.writer import (
    ChatModelWriter,
    FunctionWriter,
    WriteRequest,
    as_writer,
    write_request,
    written_arguments,
)
from stm_memory.model import Category, MemoryEntry, StoredMessage
from stm_memory.testing import OfflineChatModel

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def said(minutes: int, role: str, text: str, name: str | None = None) -> StoredMessage:
    at = T0 + timedelta(minutes=minutes)
    return StoredMessage(role=role, content=text, timestamp=at, name=name, user_id="u1")  # type: ignore[arg-type]


def entry(**fields: object) -> MemoryEntry:
    base = MemoryEntry(key="k", kind="server", channel_id="garden", channel_name="garden")
    return base.evolve(fields)


SUMMARY = (Category("Summary"),)
CATEGORIES = (
    Category("Plan", "what is planted when", slug="plan"),
    Category("Codes", slug="codes"),
)


def test_the_request_holds_the_memory_the_kept_details_and_the_dialogue_since() -> None:
    old = said(0, "user", "The old plan was peas.", "Ann")
    request = write_request(
        entry(
            summary="Peas in bed 1.",
            kept=(said(1, "user", "The shed code is 4821.", "Bo"),),
            messages=(old, said(10, "user", "Tomatoes go in on May 3.", "Ann")),
            refreshed_at=T0 + timedelta(minutes=5),
        ),
        SUMMARY,
        summary_mode=True,
        limit=1500,
    )
    assert request is not None and request.categories == ()
    prompt = request.prompt
    assert "#garden" in prompt and "at most 1500 characters" in prompt
    assert "Peas in bed 1." in prompt  # the current memory
    assert "4821" in prompt  # kept beside it: the writer can carry it
    assert 'Ann: "Tomatoes go in on May 3."' in prompt  # said since the write
    assert "The old plan was peas." not in prompt  # covered by the memory already
    assert request.messages() == [{"role": "user", "content": prompt}]


def test_nothing_said_since_the_last_write_asks_nothing() -> None:
    written = entry(messages=(said(0, "user", "hi"),), refreshed_at=T0 + timedelta(minutes=1))
    assert write_request(written, SUMMARY, summary_mode=True, limit=1500) is None
    assert write_request(entry(), SUMMARY, summary_mode=True, limit=1500) is None


def test_category_mode_asks_for_a_json_object_of_the_slugs() -> None:
    request = write_request(
        entry(messages=(said(0, "user", "Tomatoes on May 3."),)),
        CATEGORIES,
        summary_mode=False,
        limit=1500,
    )
    assert request is not None and request.categories == ("plan", "codes")
    assert "- plan: Plan. what is planted when" in request.prompt
    assert "- codes: Codes." in request.prompt and "JSON object" in request.prompt


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tomatoes on May 3.", {"summary": "Tomatoes on May 3."}),
        ("  \n```\nTomatoes on May 3.\n```\n", {"summary": "Tomatoes on May 3."}),
        ("```markdown\nTomatoes.\nShed 4821.\n```", {"summary": "Tomatoes.\nShed 4821."}),
        ("   ", None),
    ],
)
def test_a_summary_is_the_answer_without_its_fence(
    text: str, expected: dict[str, str] | None
) -> None:
    assert written_arguments(text, WriteRequest(prompt="p")) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps({"plan": "May 3", "codes": "4821"}), {"plan": "May 3", "codes": "4821"}),
        # Prose around it, a fence, an unknown key: the object's known keys.
        (
            'Here you go: ```json\n{"plan": "May 3", "mood": "happy"}\n```',
            {"plan": "May 3"},
        ),
        ('{not json} then {"codes": "4821"}', {"codes": "4821"}),
        ("Tomatoes on May 3.", None),
    ],
)
def test_category_values_are_the_first_json_object(
    text: str, expected: dict[str, str] | None
) -> None:
    request = WriteRequest(prompt="p", categories=("plan", "codes"))
    assert written_arguments(text, request) == expected


def test_a_writer_is_taken_in_the_forms_an_entry_point_takes() -> None:
    def function(request: WriteRequest) -> str:
        return "notes"

    assert as_writer(None) is None
    assert isinstance(as_writer(function), FunctionWriter)
    chat = as_writer(OfflineChatModel())
    assert isinstance(chat, ChatModelWriter)
    assert chat.write(WriteRequest(prompt="Summarize: the shed code is 4821.")).startswith(
        "Understood"
    )
    writer = FunctionWriter(function)
    assert as_writer(writer) is writer
    with pytest.raises(ConfigurationError, match="writer must be"):
        as_writer("gpt-4o-mini")  # type: ignore[arg-type]
