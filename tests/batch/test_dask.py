"""The batch runner on a Dask cluster (SPEC 15, issue 34): the same results as locally, whatever dies.

200 cases of every kind of expectation, passing and failing (the shared suite's cases over and over, and
each limit case once), give the same results file, ordered by id, through ``--workers 2`` and through
``--dask local`` with two worker processes: outcomes, differences, codes, costs and traces but for their
times (and for how many passes the run stopped by its time limit made). A Dask worker process killed (SIGKILL) while the cases run loses none: every case comes back exactly
once, passed, its tasks rescheduled on the worker the nanny starts again; and the contained worker it had
started ends too (its answer from the parent never comes: it stops at once, not at its time limit).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from batch_suite import CASES, make_suite

from s2o_kernel.batch.__main__ import main
from s2o_kernel.batch.cases import read_agent, read_cases
from s2o_kernel.batch.cluster import run_on_dask

pytestmark = pytest.mark.timeout(300)

#: The per-run times a results line holds (a case's duration, its trace's offsets and its start).
TIMES = ("duration", "start", "started", "recorded")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_suite(tmp_path_factory.mktemp("suite"))


def without_times(value: Any) -> Any:
    """``value`` without the times of a run (and the time a ``max_time`` difference names)."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    if isinstance(value, str) and value.startswith("max_time: the run took "):
        return "max_time: the run took longer"
    return value


def many_cases(suite: Path, count: int) -> Path:
    """``count`` cases: the suite's quick ones over and over (new ids), its limit cases once."""
    lines = [json.loads(line) for line in (suite / "cases.jsonl").read_text().splitlines()]
    limits = [case for case in lines if "settings" in case]
    quick = [case for case in lines if "settings" not in case]
    out = list(limits)
    n = 0
    while len(out) < count:
        case = dict(quick[n % len(quick)])
        case["id"] = f"{case['id']}-{n:03d}"
        out.append(case)
        n += 1
    path = suite / f"many-{count}.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in out))
    return path


def results_of(suite: Path, cases: Path, name: str, *more: str) -> tuple[int, list[dict[str, Any]]]:
    results = suite / name
    status = main([str(suite / "agent.json"), str(cases), "--results", str(results), "--no-progress", *more])
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    return status, sorted((without_times(line) for line in lines), key=lambda line: line["id"])


def test_two_hundred_cases_give_the_same_results_locally_and_on_dask(suite: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    cases = many_cases(suite, 200)
    local_status, local = results_of(suite, cases, "local.jsonl", "--workers", "2")
    dask_status, on_dask = results_of(suite, cases, "dask.jsonl", "--dask", "local", "--workers", "2")
    assert local_status == dask_status == 1
    assert len(local) == 200 and [line["id"] for line in local] == sorted({line["id"] for line in local})
    untimed = [line for line in local if line["id"] != "slow"]  # the passes a run makes before its time is up
    assert [{**line, "trace": None} for line in on_dask] == [{**line, "trace": None} for line in local]
    assert [line for line in on_dask if line["id"] != "slow"] == untimed  # traces too, but for the timed-out run
    outcomes = {line["outcome"] for line in local}
    assert outcomes == {"pass", "fail", "error"}
    by_id = {line["id"]: line for line in local}
    assert (by_id["loop-limit"]["error"], by_id["memory"]["error"], by_id["slow"]["code"]) == (
        "loop-limit", "memory-limit", "timedOut")
    assert all(by_id[i]["outcome"] == outcome for i, (_, outcome) in CASES.items() if i in by_id)


def test_a_dask_worker_killed_mid_run_loses_no_case(suite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil
    from distributed import LocalCluster

    monkeypatch.delenv("S2O_REPLAY", raising=False)
    busy = suite / "busy.jsonl"
    busy.write_text("".join(json.dumps({"id": f"busy-{i:02d}", "inputs": {"order_id": 7, "mode": "busy"},
                                        "cassette": "orders.cassette.json"}) + "\n" for i in range(40)))
    agent, cases = read_agent(suite / "agent.json"), read_cases(busy)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        workers = [p for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())]
        assert len(workers) == 2, [p.cmdline() for p in psutil.Process().children()]  # the Dask worker processes
        seen: list[str] = []
        for line in run_on_dask(agent, {}, cases, cluster.scheduler_address, 2):
            seen.append(line["id"])
            assert line["outcome"] == "pass", line["diff"]
            if len(seen) == 5:
                orphans = workers[0].children(recursive=True)  # its contained worker, mid-case
                os.kill(workers[0].pid, signal.SIGKILL)  # one Dask worker, mid-run: its nanny starts another
    assert sorted(seen) == sorted(case.id for case in cases)  # every case, exactly once
    assert orphans and not psutil.wait_procs(orphans, timeout=10)[1]  # nothing it started outlives it
