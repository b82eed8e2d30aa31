"""Soak across hosts (issue 17): several processes acting as hosts over PostgreSQL and
a 3-node Redis Cluster, with a Redis node stopped and restarted mid-run and a database
outage. At the end every live entry equals its row, the counters are exact and
nothing deleted survives.

Opt-in (``STM_SOAK=1 pytest -m soak tests/hardening/test_soak_hosts.py``): it starts a
cluster of its own (loopback ports 7201–7203, so stopping a node never disturbs the
suite's cluster) and runs for a minute or two.

Each round, every scope takes one turn on one host (the hosts run at once; a scope
moves between hosts from round to round), so the expected state is exact: a refresh
sets the channel's counter to 0, any other turn adds one, a channel clear or user
erasure starts the channel afresh.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.deployment import OpenMem
from helpers.host import Host, HostFactory
from helpers.memory import scope_dict
from helpers.proxy import Proxied

from stm_memory import Scope, ShortTermMemory

PORTS = (7201, 7202, 7203)
HOSTS = 3
ROUNDS = 40
SCOPES = 30

pytestmark = [
    pytest.mark.soak,
    pytest.mark.skipif(not os.environ.get("STM_SOAK"), reason="soak: STM_SOAK=1 pytest -m soak"),
]


def _cli(*args: str) -> str:
    return subprocess.run(
        ["redis-cli", *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout


@dataclass
class Cluster:
    """A 3-node Redis Cluster of this test's own, each node stoppable."""

    root: Path
    ports: tuple[int, ...] = PORTS
    nodes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start_node(self, port: int) -> None:
        data = self.root / str(port)
        data.mkdir(parents=True, exist_ok=True)
        self.nodes[port] = subprocess.Popen(
            [
                "redis-server",
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(data / "nodes.conf"),
                "--cluster-node-timeout", "1000",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(data),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._wait(lambda: _cli("-p", str(port), "ping").strip() == "PONG")

    def stop_node(self, port: int) -> None:
        proc = self.nodes.pop(port)
        proc.terminate()
        proc.wait(timeout=30)

    def create(self) -> None:
        for port in self.ports:
            self.start_node(port)
        _cli(
            "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
            "--cluster-replicas", "0", "--cluster-yes",
        )  # fmt: skip
        self.wait_ok()

    def wait_ok(self) -> None:
        for port in self.ports:
            self._wait(
                lambda port=port: "cluster_state:ok" in _cli("-p", str(port), "cluster", "info")
            )

    @staticmethod
    def _wait(check: object, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():  # type: ignore[operator]
                    return
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.1)
        raise TimeoutError("the soak's Redis Cluster did not come up")

    def close(self) -> None:
        for port in list(self.nodes):
            self.stop_node(port)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail("the cross-host soak needs redis-server and redis-cli")
    with tempfile.TemporaryDirectory(prefix="stm-soak-cluster-") as root:
        made = Cluster(Path(root))
        try:
            made.create()
            yield made
        finally:
            made.close()


def make_scopes() -> list[Scope]:
    scopes = []
    for i in range(SCOPES):
        user = f"u{i % 6}"
        if i % 5 == 4:
            scopes.append(Scope(channel_id=f"dm-{i}", user_id=user))
        else:
            scopes.append(Scope(channel_id=f"ch-{i}", user_id=user, server_id=f"g{i % 3}"))
    return scopes


def test_soak_across_hosts_with_a_redis_node_and_the_database_down(
    hosts: HostFactory,
    open_mem: OpenMem,
    pg_proxy: Proxied,
    postgres_url: str,
    cluster: Cluster,
    tmp_path: Path,
) -> None:
    rng = random.Random(17)
    scopes = make_scopes()
    workers: list[Host] = [
        hosts(
            database_url=pg_proxy.url,
            redis_url=cluster.url,
            outbox_path=tmp_path / f"outbox-{i}.sqlite3",
            timeout=1,
            retry_after=0.5,
            check_every=0.2,
            settings_ttl=3600,
        )
        for i in range(HOSTS)
    ]
    # Reads what every host would see (the cache) and what SQL holds, mid-run too: a
    # divergence right after the outage would otherwise heal by the next refreshes.
    check = open_mem(postgres_url, redis_url=cluster.url)
    counters: dict[str, int] = {}  # live key → expected turns_since_refresh
    deleted: set[str] = set()  # keys deleted and not written since
    node_down = db_down = False
    degraded_seen = False
    for round_no in range(ROUNDS):
        if round_no == 10:
            cluster.stop_node(PORTS[1])
            node_down = True
            time.sleep(1.5)  # past the node timeout: the cluster reports the failure
        if round_no == 20:
            cluster.start_node(PORTS[1])
            cluster.wait_ok()
            node_down = False
        if round_no == 26:
            pg_proxy.proxy.stop()
            db_down = True
        if round_no == 31:
            pg_proxy.proxy.start()
            db_down = False
            for worker in workers:
                worker.call("flush")
        order = list(range(SCOPES))
        rng.shuffle(order)
        plans: list[list[dict[str, object]]] = [[] for _ in workers]
        for n, index in enumerate(order):
            scope = scopes[index]
            mode = "refresh" if rng.random() < 0.25 else "count"
            plans[n % HOSTS].append({"scope": scope_dict(scope), "mode": mode})
            refreshed = mode == "refresh"
            counters[scope.live_key] = 0 if refreshed else counters.get(scope.live_key, 0) + 1
            # A refresh writes every key of the scope; a counted turn only the live one.
            deleted.difference_update(
                k for k in scope.keys if k and (refreshed or k == scope.live_key)
            )
        for worker, plan in zip(workers, plans, strict=True):
            worker.send("workload", plan=plan, rounds=1)
        for worker in workers:
            worker.receive()
        if node_down:
            degraded_seen = degraded_seen or any(w.call("degraded") for w in workers)
        if round_no in (21, 34):  # the node back and drained; the database back
            _verify(check, counters, deleted)
        if round_no in (15, 22, 35) and not db_down:
            victim = scopes[rng.randrange(SCOPES)]
            worker = workers[round_no % HOSTS]
            if victim.server_id is not None:
                worker.call("clear_channel", channel_id=victim.channel_id)
                gone = [k for s in scopes if s.channel_id == victim.channel_id for k in s.keys if k]
            else:
                worker.call("clear_user", user_id=victim.user_id)
                gone = [s.user_key for s in scopes if s.user_id == victim.user_id]
            for key in gone:
                counters.pop(key, None)
                deleted.add(key)
    assert degraded_seen, "the stopped node should have put the hosts in degraded mode"
    for worker in workers:
        worker.call("flush")
        assert worker.call("outbox") == 0
        worker.call("turn", scope=scope_dict(scopes[0]))  # a call after the outage: drained
        counters[scopes[0].live_key] += 1
    for worker in workers:
        assert not worker.call("degraded")

    _verify(check, counters, deleted)


def _verify(mem: ShortTermMemory, counters: dict[str, int], deleted: set[str]) -> None:
    wrong = {}
    for key, expected in counters.items():
        live = mem.get_key(key)
        stored = mem._store.load_many([key]).get(key)
        got = (
            None if live is None else live.turns_since_refresh,
            None if stored is None else stored.turns_since_refresh,
        )
        if got != (expected, expected):
            wrong[key] = (expected, got)
        elif live is not None and stored is not None:
            assert (live.summary, dict(live.categories), live.rev) == (
                stored.summary,
                dict(stored.categories),
                stored.rev,
            ), key
    assert wrong == {}
    for key in deleted:
        assert mem.get_key(key) is None, key
        assert mem._store.load_many([key]).get(key) is None, key
    seen = {k for k in mem._cache.iter_keys("shortterm:") if not k.startswith("shortterm:index:")}
    assert not seen & deleted
