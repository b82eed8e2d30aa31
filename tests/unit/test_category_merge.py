"""The category merge (stm_memory.model.categories): what a write of category values
leaves in an entry."""

from __future__ import annotations

import pytest

from stm_memory.model.categories import merge_categories

ORDER = ["plot", "mood", "goals"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # a first write keeps the server's order, whatever order the model used
        ({}, {"goals": "win", "plot": "heist"}, {"plot": "heist", "goals": "win"}),
        # a category left out keeps its old value
        ({"plot": "heist", "mood": "tense"}, {"mood": "calm"}, {"plot": "heist", "mood": "calm"}),
        # an empty value leaves the old one alone; with no old one the slug is dropped
        ({"plot": "heist"}, {"plot": "", "mood": ""}, {"plot": "heist"}),
        # a slug whose category an admin removed keeps its value, after the current ones
        (
            {"weather": "rain", "plot": "heist"},
            {"mood": "tense"},
            {"plot": "heist", "mood": "tense", "weather": "rain"},
        ),
    ],
)
def test_merge(old: dict[str, str], new: dict[str, str], expected: dict[str, str]) -> None:
    merged = merge_categories(old, new, ORDER)
    assert merged == expected
    assert list(merged) == list(expected)  # order is part of the result (rendering)


def test_merge_does_not_touch_its_inputs() -> None:
    old, new = {"plot": "heist"}, {"mood": "calm"}
    merge_categories(old, new, ORDER)
    assert old == {"plot": "heist"} and new == {"mood": "calm"}
