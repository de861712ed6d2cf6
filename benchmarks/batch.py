"""Batch section (issue 34, SPEC 15): replayed cases of the orders agent per second.

Three ways through the same cases, each a whole pass over them in this run: the floor (the cases one after
another in one in-process ``Session``, reset between cases, as a loop of your own would run them), the local
runner (``--workers 2``: two contained workers, ``batch.runner.Runner``) and Dask (``--dask`` on a local
cluster of two worker processes, started before the timing as a team's cluster would be). The suite is the
tests' (``tests/support/batch_suite.py``: the orders agent, its calls recorded into a cassette). Ratios are
each way's cases per second over the floor's. The runner's own memory (this process's RSS) is read after
its 1,000th and 10,000th case (without ``--quick``): it should stay flat.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Figure, Target, collect

SECTION = "batch"
CASES = 1_000


def _suite(folder: Path, count: int) -> tuple[dict[str, Any], list[Any], Path]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
    from batch_suite import make_suite

    from s2o_kernel.batch.cases import read_agent, read_cases

    make_suite(folder)
    lines = [{"id": f"c{i:05d}", "inputs": {"order_id": 7}, "cassette": "orders.cassette.json",
              "expect": {"value_contains": "Order 7 has shipped"}} for i in range(count)]
    (folder / "bench.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return read_agent(folder / "agent.json"), read_cases(folder / "bench.jsonl"), folder / "orders.cassette.json"


def _floor(agent: dict[str, Any], cases: list[Any], cassette: Path) -> float:
    from s2o_kernel.engine import Engine, Session, make_settings

    session = Session(Engine(make_settings({"replay": {"mode": "replay", "cassette": str(cassette)}})))
    started = time.perf_counter()
    for case in cases:
        session.reset()
        run = session.run_fragment(agent, inputs=case.run_inputs())
        if run.code != "success":
            raise RuntimeError(f"the floor's case failed: {run.error}")
    return time.perf_counter() - started


def _local(agent: dict[str, Any], cases: list[Any]) -> float:
    from s2o_kernel.batch.runner import Runner

    started = time.perf_counter()
    lines = list(Runner(agent, {}, 2).run(cases))
    if any(line["outcome"] != "pass" for line in lines):
        raise RuntimeError("a case of the local runner failed")
    return time.perf_counter() - started


def _dask(agent: dict[str, Any], cases: list[Any]) -> float:
    from distributed import LocalCluster

    from s2o_kernel.batch.cluster import run_on_dask

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        started = time.perf_counter()
        lines = list(run_on_dask(agent, {}, cases, cluster.scheduler_address, 2))
        seconds = time.perf_counter() - started
    if any(line["outcome"] != "pass" for line in lines):
        raise RuntimeError("a case on Dask failed")
    return seconds


def _rss() -> float:
    """This process's resident memory, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def _memory(agent: dict[str, Any], cases: list[Any]) -> tuple[float, float]:
    """The runner's RSS after its 1,000th and its last case (a run of all ``cases``)."""
    from s2o_kernel.batch.runner import Runner

    at: dict[int, float] = {}
    for n, _ in enumerate(Runner(agent, {}, 2).run(cases), start=1):
        if n in (1_000, len(cases)):
            at[n] = _rss()
    return at[1_000], at[len(cases)]


def measure(quick: bool) -> list[Figure]:
    """Cases per second of the floor, the local runner and Dask; the runner's memory at 1,000 and 10,000."""
    count = 200 if quick else CASES
    with tempfile.TemporaryDirectory() as tmp:
        agent, cases, cassette = _suite(Path(tmp), 10_000 if not quick else count)
        collect()
        floor = count / _floor(agent, cases[:count], cassette)
        collect()
        local = count / _local(agent, cases[:count])
        collect()
        dask = count / _dask(agent, cases[:count])
        out = [Figure(SECTION, f"orders-{count}", "floor: one Session, reset between cases", floor, "cases/s",
                      "floor: one Session, reset between cases", 1.0),
               Figure(SECTION, f"orders-{count}", "s2o batch --workers 2", local, "cases/s",
                      "floor: one Session, reset between cases", local / floor),
               Figure(SECTION, f"orders-{count}", "s2o batch --dask (local, 2 processes)", dask, "cases/s",
                      "s2o batch --workers 2", dask / local)]
        if not quick:
            collect()
            first, last = _memory(agent, cases)
            out.append(Figure(SECTION, "runner-memory", "RSS after 10,000 cases", last, "MiB",
                              "RSS after 1,000 cases", last / first, f"{first:.1f} MiB after 1,000"))
    return out


def _ratio(tool: str) -> Any:
    return lambda figs: next((f.ratio for f in figs if f.tool == tool), None)


TARGETS = [
    Target(SECTION, "batch-local", "local runner ≥ 1.3× the floor's cases per second", 1.3,
           _ratio("s2o batch --workers 2"), higher_is_better=True),
    Target(SECTION, "batch-dask", "Dask ≥ 0.8× the local runner's", 0.8,
           _ratio("s2o batch --dask (local, 2 processes)"), higher_is_better=True),
    Target(SECTION, "batch-memory", "the runner's memory flat from 1,000 to 10,000 cases (≤ 1.10×)", 1.10,
           _ratio("RSS after 10,000 cases")),
]
