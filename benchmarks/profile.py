"""Profile one hot path with pyinstrument: ``python -m benchmarks.profile TARGET``.

Targets: ``update`` (case 1), ``context`` (case 2), ``get`` (the read of case 3),
``hydrate`` (case 4), ``middleware`` (case 11: invokes of the agent with our middleware,
the channels in rotation). The set-up is the case's own; only the loop is profiled. The
text report goes to stdout and to ``benchmarks/results/profile-TARGET.txt``
(``pip install pyinstrument`` first; it is not a dependency of the library).
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .run import RESULTS


@contextmanager
def _target(name: str, root: Path, n: int) -> Iterator[Callable[[], Callable[[], None]]]:
    """Yields a factory: each call prepares (unprofiled) and returns the loop to run."""
    from . import context_latency, hydration, middleware_overhead, update_latency
    from ._fixtures import open_memory, summary_text

    rng = random.Random(9)
    if name in ("update", "get"):
        with open_memory(root) as mem:
            scope = update_latency.SCOPE
            update_latency.warm_scope(mem, scope, rng)
            args = {"summary": summary_text(rng, 600)}

            def update() -> Callable[[], None]:
                turns = [mem.begin_turn(scope) for _ in range(n)]  # not profiled

                def loop() -> None:
                    for turn in turns:
                        mem.update(turn, args)

                return loop

            def get() -> Callable[[], None]:
                def loop() -> None:
                    for _ in range(n):
                        mem.get(scope)

                return loop

            yield update if name == "update" else get
    elif name == "context":
        with open_memory(root) as mem:
            context_latency.populate(mem, rng)
            turn = mem.begin_turn(context_latency.SCOPE)

            def context() -> Callable[[], None]:
                def loop() -> None:
                    for _ in range(n):
                        mem.build_context(turn)

                return loop

            yield context
    elif name == "hydrate":
        rows = hydration.make_rows(10_000, rng)
        with open_memory(root, "setup") as mem:
            mem._store.put_rows(rows, rows[0].last_updated)
        caches = iter(range(1000))

        def hydrate() -> Callable[[], None]:
            # A fresh, empty cache each time (opened outside the profiled loop).
            mem = hydration._open(root / "setup.db", root / f"cache-{next(caches)}")

            def loop() -> None:
                mem._live.warm("server", hydration.SERVER)
                mem.close()

            return loop

        yield hydrate
    elif name == "middleware":
        with open_memory(root) as mem:
            middleware_overhead.populate(mem, rng)
            agent = middleware_overhead.build_agents(mem).with_mw
            made = [0]

            def middleware() -> Callable[[], None]:
                batch = middleware_overhead.turns(rng, n, made[0])  # not profiled
                made[0] += n

                def loop() -> None:
                    for state, config in batch:
                        agent.invoke(state, config)

                return loop

            yield middleware
    else:
        raise SystemExit(f"unknown target {name!r}")


def main() -> None:
    from pyinstrument import Profiler

    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile")
    parser.add_argument("target", choices=["update", "context", "get", "hydrate", "middleware"])
    parser.add_argument("-n", type=int, default=3000, help="operations to profile")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, _target(args.target, Path(tmp), args.n) as make:
        make()()  # warm-up: connections, compiled statements, OS page cache
        loop = make()
        profiler = Profiler(interval=0.0001)
        profiler.start()
        loop()
        profiler.stop()
    text = profiler.output_text(unicode=True, color=False, show_all=False)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"profile-{args.target}.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
