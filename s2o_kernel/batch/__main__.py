"""``python -m s2o_kernel.batch AGENT CASES [--results FILE] [--junit FILE] [--workers N] [--dask ADDRESS]
[--settings FILE] [--resume | --rerun-failed] [--no-progress]``: an agent over many cases (SPEC 15).

``AGENT`` is an agent definition (JSON); ``CASES`` a JSONL file or a folder of them (:mod:`.cases`). Each
case's result line goes to ``--results`` (default ``batch-results.jsonl``) as it ends; ``--resume`` skips the
cases already there, ``--rerun-failed`` runs only those whose outcome there is ``fail`` or ``error``. A
progress bar shows on standard error; the summary (:func:`.results.summary`) on standard output, and JUnit
XML in ``--junit``. ``--settings`` is a TOML file merged over the embedded default, under each case's own.
``--dask ADDRESS`` runs the cases on a Dask cluster (``local``: a local one of ``--workers`` processes;
:mod:`.cluster`).
Exit status: 0 when every case passed, 1 when one failed or erred, 2 on bad input (the file and line named).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from s2o_kernel.engine import S2OError, read_toml

from .cases import Case, read_agent, read_cases
from .cluster import run_on_dask
from .results import ResultsFile, read_results, summary, write_junit
from .runner import Runner


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    p = argparse.ArgumentParser(prog="python -m s2o_kernel.batch", description="Run an agent over many cases.")
    p.add_argument("agent", type=Path, help="the agent definition (JSON)")
    p.add_argument("cases", type=Path, help="a JSONL file of cases, or a folder of them")
    p.add_argument("--results", type=Path, default=Path("batch-results.jsonl"), help="the results file (JSONL)")
    p.add_argument("--junit", type=Path, help="write JUnit XML here")
    p.add_argument("--workers", type=int, default=1, help="contained workers run in parallel (default 1); with "
                   "--dask local, the local cluster's worker processes")
    p.add_argument("--dask", metavar="ADDRESS", help="run the cases on the Dask cluster at ADDRESS (local: start one)")
    p.add_argument("--settings", type=Path, help="a settings file (TOML) under each case's settings")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="skip the cases already in the results file")
    again.add_argument("--rerun-failed", action="store_true", help="run only the cases that failed or erred")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line (see the module doc); the exit status."""
    args = parser().parse_args(argv)
    if args.workers < 1:
        print("error: --workers takes a count of at least 1", file=sys.stderr)
        return 2
    try:
        agent, cases, base, records = _load(args)
        results = ResultsFile(args.results)
    except S2OError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    try:
        return _run(args, agent, cases, base, records, results)
    except S2OError as exc:  # the cluster could not be reached
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, agent: dict[str, Any], cases: list[Case], base: dict[str, Any],
         records: dict[str, dict[str, Any]], results: ResultsFile) -> int:
    """Run ``cases``, each result written to ``results`` and kept in ``records``; the summary, the JUnit XML;
    the exit status."""
    try:
        from tqdm import tqdm

        with tqdm(total=len(cases), unit="case", disable=args.no_progress, file=sys.stderr) as bar:
            ran = Runner(agent, base, args.workers).run(cases) if args.dask is None else \
                run_on_dask(agent, base, cases, args.dask, args.workers)
            for record in ran:
                results.write(record)
                records[record["id"]] = {k: v for k, v in record.items() if k != "trace"}  # the file keeps it
                bar.update(1)
    finally:
        results.close()
    ordered = [records[i] for i in sorted(records)]
    print(summary(ordered))
    if args.junit is not None:
        try:
            write_junit(ordered, args.junit, args.agent.stem)
        except S2OError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 2
    return 0 if all(r.get("outcome") == "pass" for r in ordered) else 1


def _load(args: argparse.Namespace) -> tuple[dict[str, Any], list[Case], dict[str, Any], dict[str, dict[str, Any]]]:
    """The agent, the cases to run (all, those not in the results with ``--resume``, those that failed there
    with ``--rerun-failed``), the runner's settings, and the results kept from before (none for a new run,
    whose results file starts empty). Raises ``batch`` or ``settings`` for bad input."""
    agent = read_agent(args.agent)
    cases = read_cases(args.cases)
    base: dict[str, Any] = read_toml(args.settings) if args.settings is not None else {}
    earlier = read_results(args.results)
    if args.resume:
        return agent, [c for c in cases if c.id not in earlier], base, earlier
    if args.rerun_failed:
        return agent, [c for c in cases if earlier.get(c.id, {}).get("outcome") in ("fail", "error")], base, earlier
    if args.results.exists():
        try:
            args.results.unlink()  # a new run: a new results file
        except OSError as exc:
            raise S2OError("batch", f"{args.results}: cannot start the results anew: {exc.strerror}") from None
    return agent, cases, base, {}


if __name__ == "__main__":
    sys.exit(main())
