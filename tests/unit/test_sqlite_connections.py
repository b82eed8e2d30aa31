"""Per-thread, per-process sqlite3 connections (``stm_memory._sqlite.connections``), as
used by the raw row writer and the diskcache table access."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from stm_memory._sqlite.connections import ThreadConnections


def open_connections(tmp_path: Path, setups: list[sqlite3.Connection]) -> ThreadConnections:
    return ThreadConnections(str(tmp_path / "db.sqlite3"), timeout=5, setup=setups.append)


def test_one_connection_per_thread_set_up_once(tmp_path: Path) -> None:
    setups: list[sqlite3.Connection] = []
    conns = open_connections(tmp_path, setups)
    mine = conns.get()
    assert conns.get() is mine
    other: list[sqlite3.Connection] = []
    thread = threading.Thread(target=lambda: other.append(conns.get()))
    thread.start()
    thread.join()
    assert other[0] is not mine
    assert setups == [mine, other[0]]


def test_close_closes_every_thread_s_connection_and_get_reopens(tmp_path: Path) -> None:
    setups: list[sqlite3.Connection] = []
    conns = open_connections(tmp_path, setups)
    mine = conns.get()
    thread = threading.Thread(target=conns.get)
    thread.start()
    thread.join()
    conns.close()
    for con in setups:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            con.execute("SELECT 1")
    again = conns.get()
    assert again is not mine and again.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    setups: list[sqlite3.Connection] = []
    conns = open_connections(tmp_path, setups)
    parent = conns.get()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's cleanup
        try:
            child = conns.get()
            ok = child is not parent and child.execute("SELECT 1").fetchone() == (1,)
            os.write(write, b"new" if ok else b"shared")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"new"
    os.close(read)
    assert conns.get() is parent
