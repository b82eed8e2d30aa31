"""Scope resolution (pure) and the optional-import guards of stm_memory_langchain."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

import stm_memory_langchain
from stm_memory import Scope, ValidationError
from stm_memory_langchain import resolve_scope


@dataclass
class Ctx:
    user_id: str | None = None
    channel_id: str | None = None
    server_id: str | None = None
    persona_id: str | None = None


def runtime(context: Any = None) -> SimpleNamespace:
    return SimpleNamespace(context=context)


def conf(**configurable: Any) -> dict[str, Any]:
    return {"configurable": configurable}


@pytest.mark.parametrize(
    ("context", "config", "expected"),
    [
        (None, conf(thread_id="t", user_id="u"), Scope(channel_id="t", user_id="u")),
        (
            None,
            conf(thread_id="t", channel_id="c", user_id="u", server_id="g", persona_id="p"),
            Scope(channel_id="c", user_id="u", server_id="g", persona_id="p"),
        ),
        (
            {"user_id": "u", "server_id": "g"},
            conf(thread_id="t"),
            Scope(channel_id="t", user_id="u", server_id="g"),
        ),
        (
            Ctx(user_id="u", channel_id="c"),
            conf(thread_id="t", user_id="other", server_id="g"),
            Scope(channel_id="c", user_id="u", server_id="g"),
        ),
        (
            {"user_id": 123, "channel_id": 456, "channel_name": "general"},
            {},
            Scope(channel_id="456", user_id="123", channel_name="general"),
        ),
    ],
)
def test_context_over_configurable(context: Any, config: Any, expected: Scope) -> None:
    assert resolve_scope(None, runtime(context), config) == expected


@pytest.mark.parametrize(
    ("context", "config", "missing"),
    [
        (None, conf(thread_id="t"), "no user_id"),
        ({"user_id": "u"}, {}, "no channel_id"),
        (None, None, "no user_id and channel_id"),
    ],
)
def test_missing_ids_are_named(context: Any, config: Any, missing: str) -> None:
    with pytest.raises(ValidationError, match=missing):
        resolve_scope(None, runtime(context), config)


def test_malformed_ids_are_rejected() -> None:
    with pytest.raises(ValidationError):
        resolve_scope(None, runtime({"user_id": "", "channel_id": "c"}), None)
    with pytest.raises(ValidationError):
        resolve_scope(None, runtime({"user_id": True, "channel_id": "c"}), None)


def test_fixed_scope_and_resolver() -> None:
    fixed = Scope(channel_id="c", user_id="u")
    assert resolve_scope(fixed, runtime(), None) is fixed
    assert resolve_scope(lambda rt, cfg: fixed, runtime(), None) is fixed
    assert resolve_scope(lambda rt, cfg: None, runtime(), None) is None
    with pytest.raises(ValidationError, match="Scope or None"):
        resolve_scope(lambda rt, cfg: "c", runtime(), None)  # type: ignore[arg-type,return-value]


def test_public_surface() -> None:
    assert sorted(stm_memory_langchain.__all__) == stm_memory_langchain.__all__
    for name in stm_memory_langchain.__all__:
        assert getattr(stm_memory_langchain, name) is not None
    with pytest.raises(AttributeError):
        stm_memory_langchain.Nope  # noqa: B018


def _run_without(blocked: str, statement: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == {blocked!r} or name.startswith({blocked!r} + "."):
                    raise ImportError("No module named " + repr(name))
                return None

        sys.meta_path.insert(0, Block())
        import stm_memory_langchain
        try:
            {statement}
        except ImportError as exc:
            print("IMPORT-ERROR:", exc)
        else:
            print("OK")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )


def test_missing_langchain_names_the_extra() -> None:
    out = _run_without("langchain", "from stm_memory_langchain import ShortTermMemoryMiddleware")
    assert "IMPORT-ERROR: ShortTermMemoryMiddleware needs" in out.stdout
    assert 'pip install "stm-memory[langchain]"' in out.stdout


def test_missing_classic_names_the_extra_and_spares_the_middleware() -> None:
    out = _run_without(
        "langchain_classic", "from stm_memory_langchain import ShortTermMemoryBuffer"
    )
    assert 'pip install "stm-memory[classic]"' in out.stdout
    out = _run_without(
        "langchain_classic", "from stm_memory_langchain import ShortTermMemoryMiddleware"
    )
    assert out.stdout.strip() == "OK"
