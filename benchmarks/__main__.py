"""``python -m benchmarks [--quick] [--sections engine,fragments,kernel,scale] [--out build/bench]``.

Runs each section module (``benchmarks/<section>.py``, see :mod:`benchmarks.common` for the
interface), prints one table per section and the issue-12 targets with met / missed, and writes
``<out>/results.json`` and ``<out>/bench.png`` (ratios per case per tool, log scale). Outside the test
suite (pytest's ``testpaths`` are ``tests`` and ``notebooks``); nothing here is a test.

Before measuring it byte-compiles ``s2o_kernel`` and ``benchmarks`` into their ``__pycache__``
folders (:func:`precompile`), as ``pip install`` does for an installed package: with
``PYTHONDONTWRITEBYTECODE`` set (as on this project's machines) an editable checkout is otherwise
compiled from source by every process that imports it, ~100 ms more for each kernel's engine
import than a user's kernel pays, while the floors' libraries come compiled from ``pip``.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import json
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from .common import Figure, Target, machine
from .report import render_chart, render_tables, render_targets

#: Every section, in the order they run and print.
SECTIONS = ("engine", "fragments", "kernel", "scale", "batch")


def _load(section: str) -> object | None:
    try:
        return importlib.import_module(f"benchmarks.{section}")
    except ModuleNotFoundError as exc:
        if exc.name == f"benchmarks.{section}":
            print(f"[{section}] not available in this checkout: skipped", file=sys.stderr)
            return None
        raise


def precompile() -> None:
    """Write the bytecode of ``s2o_kernel`` and ``benchmarks`` (``compileall``, which writes even when
    ``PYTHONDONTWRITEBYTECODE`` is set; a no-op for files already compiled). Raises ``RuntimeError``
    when a file does not compile."""
    root = Path(__file__).resolve().parents[1]
    for package in ("s2o_kernel", "benchmarks"):
        if not compileall.compile_dir(root / package, quiet=1):
            raise RuntimeError(f"compileall failed for {package}")


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the sections, print and write the results; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1])
    parser.add_argument("--quick", action="store_true", help="short samples and fewer rounds (a smoke run)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--out", default="build/bench", help="folder for results.json and bench.png")
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")

    precompile()
    info = machine()
    print(f"# s2o-kernel benchmarks — {info['cpu']}, {info['cores']} cores, Python {info['python']}, "
          f"{info['date']} (load {info['load']}){' --quick' if args.quick else ''}", flush=True)
    figures: list[Figure] = []
    targets: list[Target] = []
    failed: list[str] = []
    for section in wanted:
        module = _load(section)
        if module is None:
            continue
        t0 = time.perf_counter()
        print(f"[{section}] measuring…", file=sys.stderr, flush=True)
        try:
            got: list[Figure] = module.measure(args.quick)  # type: ignore[attr-defined]
        except Exception:  # one broken section must not lose the others' figures
            traceback.print_exc()
            failed.append(section)
            continue
        figures.extend(got)
        targets.extend(getattr(module, "TARGETS", []))
        print(f"[{section}] done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        print(render_tables([f for f in got if f.section == section]), flush=True)

    print(render_targets(targets, figures))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    verdicts = []
    for t in targets:
        observed, verdict = t.verdict(figures)
        verdicts.append({"section": t.section, "name": t.name, "description": t.description, "limit": t.limit,
                         "unit": t.unit, "higher_is_better": t.higher_is_better, "observed": observed,
                         "verdict": verdict})
    results = {"machine": info, "quick": args.quick, "sections": wanted, "failed": failed,
               "figures": [asdict(f) for f in figures], "targets": verdicts}
    (out / "results.json").write_text(json.dumps(results, indent=1, allow_nan=True) + "\n", encoding="utf-8")
    chart = render_chart(figures, info, out / "bench.png")
    print(f"wrote {out / 'results.json'}" + (f" and {chart}" if chart else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
