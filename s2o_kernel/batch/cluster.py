"""A batch's cases on a Dask cluster (SPEC 15): ``--dask ADDRESS``, or ``--dask local``.

Each case is one Dask task (:func:`run_case`), named after the case, never merged with another
(``pure=False``) and retried elsewhere when the Dask worker running it dies (the scheduler's own
rescheduling, and ``retries`` for a task that raised). On the Dask worker a case runs exactly as it does
locally: through a :class:`~.runner.Runner` kept by that worker process for the batch's agent and settings,
in a contained session (a worker process of the Dask worker's own) reset between cases. Results come back to
the caller, which writes the one results file: where a case ran changes nothing about it.

``--dask local`` starts a :class:`distributed.LocalCluster` of ``workers`` processes with one thread each,
and closes it at the end. Dask (``dask[distributed]``) is the ``dask`` extra; nothing else needs it.
"""

from __future__ import annotations

import atexit
import json
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from s2o_kernel.bounds import BATCH_DASK_IN_FLIGHT, BATCH_RETRIES
from s2o_kernel.engine import S2OError

from .cases import Case
from .runner import Runner, error_line

#: The runners of this process (a Dask worker's), by the batch's agent and settings as JSON.
_RUNNERS: dict[str, Runner] = {}
_LOCK = threading.Lock()


def run_case(agent: dict[str, Any], base: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """Run one case (``Case`` as a dict) on this process's runner for ``agent`` and ``base``: its result line.
    Runs on a Dask worker."""
    key = json.dumps([agent, base], sort_keys=True)
    with _LOCK:
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = Runner(agent, base, 1)
    return runner.run_case(Case.model_validate(case))


def _close_runners() -> None:
    """A Dask worker that exits stops the contained workers its runners started."""
    with _LOCK:
        runners = list(_RUNNERS.values())
        _RUNNERS.clear()
    for runner in runners:
        runner.close()


atexit.register(_close_runners)


def run_on_dask(agent: dict[str, Any], base: dict[str, Any], cases: Iterable[Case], address: str,
                workers: int) -> Iterator[dict[str, Any]]:
    """Each case's result line, in the order the cases end, the cases run on the Dask cluster at ``address``
    (``local``: a local cluster of ``workers`` processes, started and closed here). Raises ``batch`` when Dask
    is not installed or the cluster cannot be reached."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise S2OError("batch", "--dask needs Dask: pip install 's2o-kernel[dask]'") from None
    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster if cluster is not None else address, timeout=30)
    except (OSError, TimeoutError, ValueError) as exc:
        if cluster is not None:
            cluster.close()
        raise S2OError("batch", f"cannot reach the Dask cluster at {address}: {type(exc).__name__}: {exc}") from None
    try:
        waiting = enumerate(cases)
        cases_of: dict[str, Case] = {}

        def submit() -> Any:
            found = next(waiting, None)
            if found is None:
                return None
            i, case = found
            cases_of[f"s2o-case-{i}"] = case
            return client.submit(run_case, agent, base, case.model_dump(exclude_unset=True),  # as the case says
                                 key=f"s2o-case-{i}", pure=False, retries=BATCH_RETRIES)
        first = [f for f in (submit() for _ in range(BATCH_DASK_IN_FLIGHT * max(workers, 1))) if f is not None]
        running = as_completed(first)
        for future in running:  # a case ends, the next is submitted: the caller's memory stays flat
            case = cases_of.pop(future.key)
            try:
                yield future.result()
            except Exception as exc:  # the task failed on every try (a worker that could not run it)
                yield error_line(case, "unexpected", f"Dask: {type(exc).__name__}: {exc}", 0.0)
            future.release()
            following = submit()
            if following is not None:
                running.add(following)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
