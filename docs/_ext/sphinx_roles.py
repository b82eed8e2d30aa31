"""A griffe extension for the API reference: the docstrings' Sphinx roles
(``:class:`~stm_memory.Limits```) become cross-references mkdocstrings renders.

Why here and not in the docstrings: they are read in editors and by ``help()`` too,
where the roles are the common notation; the site alone renders Markdown. Each role
becomes an *optional* autorefs reference: a link where the target is in the reference,
its name in code where it is not (a private module), never a broken link.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

# :role:`target`, :role:`~target` (shown by its last part), :role:`title <target>`.
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`([^`]+)`")


def _reference(match: re.Match[str]) -> str:
    body = match[1].strip()
    titled = re.fullmatch(r"(.+?)\s*<([^>]+)>", body)
    if titled:
        shown, target = titled[1], titled[2]
    else:
        target = body.lstrip("~!")
        shown = target.rsplit(".", 1)[-1] if body.startswith("~") else target
    target = target.lstrip("~!.")
    return (
        f'<autoref identifier="{html.escape(target)}" optional>'
        f"<code>{html.escape(shown)}</code></autoref>"
    )


def convert(text: str) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs reference."""
    return _ROLE.sub(_reference, text)


class SphinxRoles(griffe.Extension):
    """Rewrites each loaded object's docstring (before mkdocstrings parses it)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
