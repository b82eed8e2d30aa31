"""Run the benchmark suite: ``python -m benchmarks.run [--quick] [--only NAME ...]``.

A full run writes ``benchmarks/results/latest.json`` and ``latest.md``, the plots
``docs/assets/tokens.png`` and ``cost.png``, and refreshes the table in
``benchmarks/README.md``. ``--quick`` (smaller sizes, a smoke test) and ``--only`` write
``partial.json`` / ``partial.md`` / ``tokens-partial.png`` / ``cost-partial.png`` in
``benchmarks/results`` instead, so a partial run never replaces the committed numbers.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._harness import CaseResult, Config, Metric, environment, loadavg

RESULTS = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent / "README.md"
PLOTS = Path(__file__).resolve().parents[1] / "docs" / "assets"  # the site shows them

#: Case name → module, in run order.
CASES: dict[str, str] = {
    "update": "benchmarks.update_latency",
    "context": "benchmarks.context_latency",
    "peers": "benchmarks.peers",
    "hydrate": "benchmarks.hydration",
    "tokens": "benchmarks.token_growth",
    "cost": "benchmarks.cost",
    "scale": "benchmarks.scale",
    "multiprocess": "benchmarks.multiprocess",
    "erasure": "benchmarks.erasure",
    "bulk": "benchmarks.bulk",
    "middleware": "benchmarks.middleware_overhead",
    "long_turn": "benchmarks.long_turn",
}

README_START = "<!-- bench:table:start -->"
README_END = "<!-- bench:table:end -->"
#: The docs site's benchmarks page: the keys with a target, from the last full run.
DOCS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "evaluate" / "benchmarks.md"
TARGETS_START = "<!-- bench:targets:start -->"
TARGETS_END = "<!-- bench:targets:end -->"


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def _status(metric: Metric) -> str:
    passed = metric.passed
    return "—" if passed is None else ("pass" if passed else "**FAIL**")


def markdown_table(results: Sequence[CaseResult], env: dict[str, Any], quick: bool) -> str:
    lines = [
        "| case | key | value | target | result |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for case in results:
        if "error" in case.details:
            lines.append(f"| {case.name} | (error) | — | — | **ERROR** |")
            continue
        if "skipped" in case.details:
            lines.append(f"| {case.name} | (skipped: {case.details['skipped']}) | — | — | — |")
            continue
        for m in case.metrics:
            value = _fmt(m.value) + (f" {m.unit}" if m.unit else "")
            lines.append(f"| {case.name} | `{m.key}` | {value} | {m.target} | {_status(m)} |")
    packages = env["packages"]
    footer = (
        f"\n{'Quick (smoke) run' if quick else 'Run'} of {env['when']} on commit "
        f"`{env['commit']}`: Python {env['python']}, SQLite {env['sqlite']}, "
        f"{env['cpu_count']} × {env['cpu']}; diskcache {packages['diskcache']}, "
        f"SQLAlchemy {packages['sqlalchemy']}; load average at start "
        f"{env.get('loadavg_at_start')}. Ratios are medians of per-round ratios measured in "
        "the same run; absolute times are for orientation only."
    )
    return "\n".join(lines) + "\n" + footer + "\n"


def _summary(results: Sequence[CaseResult]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for case in results:
        for m in case.metrics:
            flat[m.key] = m.value
    return flat


def write_outputs(
    results: Sequence[CaseResult], env: dict[str, Any], *, stem: str, quick: bool
) -> tuple[Path, Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "environment": env,
        "quick": quick,
        "metrics": _summary(results),
        "cases": {
            case.name: {
                "seconds": round(case.seconds, 2),
                "metrics": {m.key: m.to_dict() for m in case.metrics},
                "details": case.details,
            }
            for case in results
        },
    }
    json_path = RESULTS / f"{stem}.json"
    json_path.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    md = "# Benchmark results\n\n" + markdown_table(results, env, quick)
    md_path = RESULTS / f"{stem}.md"
    md_path.write_text(md)
    return json_path, md_path


def targets_table(payload: Mapping[str, Any]) -> str:
    """Every key with a target, from a run's JSON (``latest.json``): what the docs'
    benchmarks page shows, misses included, so the page never holds a figure by hand."""
    lines = ["| case | key | value | target | result |", "| --- | --- | ---: | --- | --- |"]
    for case, data in payload["cases"].items():
        for key, m in data["metrics"].items():
            if m.get("passed") is None:
                continue
            value = _fmt(m["value"]) + (f" {m['unit']}" if m.get("unit") else "")
            aim = f" ({m['note']})" if str(m.get("note", "")).startswith("aim") else ""
            result = "pass" if m["passed"] else "**miss**"
            lines.append(f"| {case} | `{key}` | {value} | {m['target']}{aim} | {result} |")
    env = payload["environment"]
    footer = (
        f"\nFrom `benchmarks/results/latest.json`: the run of {env['when']} on commit "
        f"`{env['commit']}`, {env['cpu_count']} × {env['cpu']}."
    )
    return "\n".join(lines) + "\n" + footer + "\n"


def replace_between(path: Path, start: str, end: str, table: str) -> None:
    """Replace what is between the markers ``start`` and ``end`` of ``path``."""
    if not path.exists():
        return
    text = path.read_text()
    if start not in text or end not in text:
        return
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{table}{end}{tail}")


def run_case(name: str, cfg: Config) -> CaseResult:
    module = importlib.import_module(CASES[name])
    start = time.perf_counter()
    try:
        result: CaseResult = module.run(cfg)
    except Exception as exc:
        traceback.print_exc()
        result = CaseResult(name, [], {"error": f"{type(exc).__name__}: {exc}"})
    result.seconds = time.perf_counter() - start
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a fast smoke run")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(CASES),
        metavar="NAME",
        help=f"run only this case (repeatable): {', '.join(CASES)}",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    parser.add_argument("--workdir", type=Path, help="where cases put their files")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    names = [n for n in CASES if not args.only or n in args.only]
    partial = args.quick or bool(args.only)
    stem = "partial" if partial else "latest"
    workdir = Path(tempfile.mkdtemp(prefix="stm-bench-", dir=args.workdir))
    cfg = Config(
        quick=args.quick,
        workdir=workdir,
        out_dir=RESULTS,
        png_path=(RESULTS / "tokens-partial.png") if partial else (PLOTS / "tokens.png"),
    )
    env = environment()
    load = env["loadavg_at_start"]
    if load and load[0] > 0.5 * (env["cpu_count"] or 1):
        print(f"[bench] warning: the machine is busy (load {load[0]}): expect noisy numbers")
    results: list[CaseResult] = []
    total = time.perf_counter()
    try:
        for name in names:
            print(f"[bench] {name} …", flush=True)
            result = run_case(name, cfg)
            results.append(result)
            if "skipped" in result.details:
                print(f"[bench]   skipped: {result.details['skipped']}")
            for m in result.metrics:
                print(f"[bench]   {m.key} = {_fmt(m.value)} {m.unit} {m.target} {_status(m)}")
            print(f"[bench]   ({result.seconds:.1f} s)", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"[bench] work directory kept: {workdir}")
    env["loadavg_at_end"] = loadavg()
    env["seconds_total"] = round(time.perf_counter() - total, 1)
    json_path, md_path = write_outputs(results, env, stem=stem, quick=args.quick)
    if not partial:
        replace_between(README, README_START, README_END, markdown_table(results, env, quick=False))
        payload = json.loads(json_path.read_text())
        replace_between(DOCS_PAGE, TARGETS_START, TARGETS_END, targets_table(payload))
    print(f"[bench] wrote {json_path} and {md_path} in {env['seconds_total']} s")
    failed = [r.name for r in results if "error" in r.details]
    if failed:
        print(f"[bench] cases that crashed: {', '.join(failed)}", file=sys.stderr)
        return 1
    skipped = [r.name for r in results if "skipped" in r.details]
    if skipped and not args.quick:
        # A full run compares against every peer: one it could not run is a failed run,
        # not a table with a hole in it (make bench installs the bench extra).
        print(f"[bench] cases skipped in a full run: {', '.join(skipped)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
