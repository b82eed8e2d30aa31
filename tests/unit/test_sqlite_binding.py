"""The raw SQLite write path binds parameters itself (``stm_memory._sqlite.raw``): each
value must be exactly what SQLAlchemy's own SQLite bind processor would send, or rows
written on the hot path would read back differently from rows written through
SQLAlchemy."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite

from stm_memory._sqlite.raw import CompiledSql, _converter
from stm_memory.store.schema import memories

DIALECT = sqlite.dialect()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


# The column types the rows use (JSON columns are NOT NULL: only objects and lists).
STAMP = memories.c.last_updated.type
JSON = memories.c.categories.type


def sqlalchemy_binds(type_: sa.types.TypeEngine[Any], value: Any) -> Any:
    process = type_.dialect_impl(DIALECT).bind_processor(DIALECT)
    return value if process is None else process(value)


@given(st.none() | st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_datetimes_bind_as_sqlalchemy_binds_them(value: datetime | None) -> None:
    assert _converter(STAMP)(value) == sqlalchemy_binds(STAMP, value)


@given(st.lists(json_values, max_size=3) | st.dictionaries(st.text(max_size=8), json_values))
def test_json_binds_as_sqlalchemy_binds_it(value: Any) -> None:
    assert _converter(JSON)(value) == sqlalchemy_binds(JSON, value)


def test_parameters_come_in_statement_order_with_defaults_for_missing_ones() -> None:
    table = sa.table("t", sa.column("a"), sa.column("b", sa.DateTime()), sa.column("c"))
    stmt = sa.insert(table).values(
        a=sa.bindparam("a"), b=sa.bindparam("b", type_=sa.DateTime()), c=sa.bindparam("c", 7)
    )
    compiled = CompiledSql.of(stmt)
    stamp = datetime(2026, 11, 30, 8, 0, 0, 5)
    assert compiled.params({"a": 1, "b": stamp, "c": 3}) == [1, "2026-11-30 08:00:00.000005", 3]
    # Missing names take the statement's own values (the slower path).
    assert compiled.params({"b": None, "a": "x"}) == ["x", None, 7]
