"""Running a batch's cases (SPEC 15): each case one run in a contained session, ``workers`` at a time.

Each of the ``workers`` threads holds one :class:`~s2o_kernel.engine.IsolatedSession` (a worker process of
its own) and runs its cases one after another: before each case the session is reset (no case sees another's
variables) and given the case's starting ``agent`` and ``conv`` variables and its cassette. A case whose own
``settings`` differ from the runner's gets a session (a worker) of its own, made for it and closed after it,
so no setting of one case reaches another. The runner's default replay mode is ``replay`` (SPEC 13, 15):
a case with no cassette that makes an outside call fails with ``cassette`` unless its settings turn replay
``off``. A case that kills its worker (memory, a crash) ends with that code; the session starts a new
worker for the next case.

Outcome ``error`` is for a case that could not run as written: settings refused, a cassette that cannot be
read (``cassette``, ``replay-mode``), or a fault of the engine (``unexpected``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from s2o_kernel.bounds import BATCH_IN_FLIGHT
from s2o_kernel.engine import IsolatedSession, RunResult, S2OError, make_settings
from s2o_kernel.engine.settings import merge

from .cases import Case
from .judge import ERROR, judge, run_cost

#: Error codes that mean the case could not run as written (outcome ``error``, not ``fail``).
SETUP_CODES = frozenset({"settings", "allowlist", "refused-entry", "cassette", "replay-mode", "unexpected", "batch"})


class Runner:
    """Runs cases of ``agent`` over ``base`` settings (a dict merged over the embedded default) on ``workers``
    threads, each with a contained session of its own; :meth:`run` yields each case's result line as it ends."""

    def __init__(self, agent: dict[str, Any], base: dict[str, Any], workers: int = 1) -> None:
        self.agent, self.base, self.workers = agent, base, max(1, workers)
        self._local = threading.local()
        self._sessions: list[IsolatedSession] = []
        self._lock = threading.Lock()

    def run(self, cases: Iterable[Case]) -> Iterator[dict[str, Any]]:
        """Each case's result line (:mod:`.results`), in the order the cases end. At most
        :data:`~s2o_kernel.bounds.BATCH_IN_FLIGHT` cases a worker are under way at once, and nothing keeps a
        line once it is handed on: the runner's memory does not grow with the number of cases."""
        waiting = iter(cases)
        with ThreadPoolExecutor(self.workers, thread_name_prefix="s2o-batch") as pool:
            running: set[Future[dict[str, Any]]] = set()
            try:
                while True:
                    while len(running) < BATCH_IN_FLIGHT * self.workers:
                        case = next(waiting, None)
                        if case is None:
                            break
                        running.add(pool.submit(self.run_case, case))
                    if not running:
                        break
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            finally:
                for future in running:
                    future.cancel()
        self.close()

    def close(self) -> None:
        """Stop every worker the runner started."""
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    def run_case(self, case: Case) -> dict[str, Any]:
        """One case run and judged: its result line."""
        started = time.monotonic()
        try:
            run, seconds = self._run(case)
        except S2OError as exc:  # refused before it ran (its settings)
            return error_line(case, exc.code, exc.message, time.monotonic() - started)
        except Exception as exc:  # a fault outside the run (a worker that cannot start): this case's error only
            self._drop_session()
            return error_line(case, "unexpected", f"{type(exc).__name__}: {exc}", time.monotonic() - started)
        outcome, diff = judge(case.expect, run, seconds)
        if run.error is not None and run.error.code in SETUP_CODES and case.expect.error != run.error.code:
            outcome = ERROR
        return _line(case, outcome, diff, run.code, run.error.code if run.error else None, seconds, run)

    def _run(self, case: Case) -> tuple[RunResult, float]:
        replay = {"replay": {"mode": "replay", "cassette": case.cassette}}
        if case.settings:  # settings of its own: a session of its own, so nothing of them stays
            session = IsolatedSession(make_settings(merge(merge(self.base, replay), case.settings)))
            try:
                return self._start(session, case)
            finally:
                session.close()
        session = self._session()
        session.reset()  # no variable of the case before; the cassette answers from its first entry again
        if getattr(self._local, "cassette", None) != case.cassette:  # a new engine in the worker: only on a change
            session.update_settings(replay)
            self._local.cassette = case.cassette
        return self._start(session, case)

    def _start(self, session: IsolatedSession, case: Case) -> tuple[RunResult, float]:
        if case.agent or case.conv:
            session.set_vars(agent=case.agent or None, conv=case.conv or None)
        started = time.monotonic()
        run = session.run_fragment(self.agent, inputs=case.run_inputs())
        return run, time.monotonic() - started

    def _drop_session(self) -> None:
        """Close this thread's session (after a fault): the next case starts a new one."""
        session = getattr(self._local, "session", None)
        self._local.session = None
        if session is not None:
            with self._lock:
                if session in self._sessions:
                    self._sessions.remove(session)
            with contextlib.suppress(Exception):  # closing what a fault left: nothing more to do
                session.close()

    def _session(self) -> IsolatedSession:
        """This thread's session, made on first use over the runner's settings."""
        session: IsolatedSession | None = getattr(self._local, "session", None)
        if session is None:
            session = IsolatedSession(make_settings(self.base))
            self._local.session, self._local.cassette = session, object()  # no cassette set yet
            with self._lock:
                self._sessions.append(session)
        return session


def error_line(case: Case, code: str, message: str, seconds: float) -> dict[str, Any]:
    """The result line of ``case`` ending in ``error`` with ``code`` before or outside its run."""
    return _line(case, ERROR, [f"{code}: {message[:500]}"], code, code, seconds, None)


def _line(case: Case, outcome: str, diff: list[str], code: str, error: str | None, seconds: float,
          run: RunResult | None) -> dict[str, Any]:
    trace = run.trace if run is not None else None
    return {"id": case.id, "outcome": outcome, "diff": diff, "code": code, "error": error,
            "duration": round(seconds, 6), "cost": run_cost(trace), "trace": trace}
