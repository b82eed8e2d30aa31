"""The category merge: what a write of category values leaves in an entry. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["merge_categories"]


def merge_categories(
    old: Mapping[str, str], new: Mapping[str, str], order: Sequence[str]
) -> dict[str, str]:
    """``old`` with the non-empty values of ``new`` written over it, in the server's
    category ``order``; empty values are dropped.

    A category the model left out keeps its old value: a write names only what changed.
    Slugs whose category an admin removed keep their value too (rendered with a
    humanised label) until the next write replaces them, so removing a category never
    silently deletes what the model wrote under it.
    """
    merged = {s: new.get(s) or old.get(s, "") for s in order}
    merged = {s: v for s, v in merged.items() if v}
    merged.update({s: v for s, v in old.items() if s not in merged})
    return merged
