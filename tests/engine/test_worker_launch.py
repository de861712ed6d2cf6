"""Workers forked from the calling process (``IsolatedSession(fork=True)``, the kernel's way; :mod:`~s2o_kernel.engine.worker.launch`).

A forked worker must be the same contained worker as one started as a new interpreter: confined
(no new privileges, seccomp, Landlock), its address space capped after ``init``, holding none of its
parent's files, restarted (forked again, confined again) after it is killed, and stopped at the time
limit by its parent. Each test starts real workers and looks at them in ``/proc``.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import containment as C
import pytest

from s2o_kernel.engine import IsolatedSession, S2OError, default_settings, make_settings
from s2o_kernel.engine.worker.launch import WORKER_NAME


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)


def _confinement(pid: int) -> tuple[str, str, str]:
    status = _status(pid)
    return status["NoNewPrivs"], status["Seccomp"], status["CapEff"]


@pytest.fixture
def forked() -> Iterator[IsolatedSession]:
    session = IsolatedSession(default_settings(), fork=True)
    try:
        yield session
    finally:
        session.close()


def test_a_forked_worker_is_confined_and_capped_as_a_new_interpreter_is(forked: IsolatedSession) -> None:
    assert forked.evaluate("1 + 1") == 2
    pid = forked.pid
    assert pid is not None
    assert C.comm(pid) == WORKER_NAME and C.is_worker(pid)
    reference = IsolatedSession(default_settings())
    try:
        assert reference.pid is not None
        assert _confinement(pid) == _confinement(reference.pid)
    finally:
        reference.close()
    assert _status(pid)["NoNewPrivs"] == "1"
    soft, _hard = resource.prlimit(pid, resource.RLIMIT_AS)
    assert soft != resource.RLIM_INFINITY
    assert soft > default_settings().limits.memory


def test_a_forked_worker_holds_none_of_its_parents_files() -> None:
    with tempfile.NamedTemporaryFile() as held:
        session = IsolatedSession(default_settings(), fork=True)
        try:
            pid = session.pid
            assert pid is not None
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert held.name not in links
            assert os.readlink(f"/proc/{pid}/fd/0").startswith("pipe:")
            assert os.readlink(f"/proc/{pid}/fd/1").startswith("pipe:")
        finally:
            session.close()


def test_a_killed_forked_worker_is_forked_again_with_the_last_good_state(forked: IsolatedSession) -> None:
    forked.set_vars(locals={"kept": 41}, agent={"visits": 3})
    first = forked.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    # killed between calls (a kill during a call is that call's error): wait until every thread of it has
    # ended, without reaping it (the session does)
    os.waitid(os.P_PID, first, os.WEXITED | os.WNOWAIT)
    assert forked.evaluate("kept + 1") == 42
    assert forked.agent_vars == {"visits": 3}
    second = forked.pid
    assert second is not None and second != first
    assert forked.restarts == 1
    assert C.comm(second) == WORKER_NAME
    assert _status(second)["NoNewPrivs"] == "1"
    assert resource.prlimit(second, resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY
    assert not os.path.exists(f"/proc/{first}") or C.comm(first) != WORKER_NAME  # reaped


def test_a_c_level_loop_in_a_forked_worker_is_killed_at_the_time_limit() -> None:
    session = IsolatedSession(make_settings({"allowlist": "collections\nitertools", "limits": {"time": 0.5}}),
                              fork=True)
    try:
        first = session.pid
        with pytest.raises(S2OError) as info:
            session.evaluate("collections.deque(itertools.count(), 0)")
        assert info.value.code == "timedOut"
        assert (info.value.details or {}).get("restarted")
        assert session.evaluate("1 + 1") == 2
        assert session.pid != first
    finally:
        session.close()


def test_a_c_level_loop_past_a_definitions_bounds_time_names_that_bound() -> None:
    session = IsolatedSession(make_settings({"allowlist": "collections\nitertools", "limits": {"time": 30}}))
    try:
        run = session.run_fragment({"functions": {"main": {"commands": [
            {"return": "{ collections.deque(itertools.count(), 0) }"}]}}, "bounds": {"time": 0.5}})
        assert run.code == "timedOut"
        assert run.error is not None and run.error.message == \
            "the run took longer than the time limit (bounds.time = 0.5 s)"
        with pytest.raises(S2OError) as info:  # the next run's own limit is back
            session.update_settings({"limits": {"time": 0.5}})
            session.evaluate("collections.deque(itertools.count(), 0)")
        assert info.value.message == "the run took longer than the time limit (limits.time = 0.5 s)"
    finally:
        session.close()


def test_a_module_the_allowlist_names_is_imported_by_the_worker_only(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s2o_fork_probe.py").write_text("def seven():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    session = IsolatedSession(make_settings({"allowlist": "s2o_fork_probe.seven as seven"}), fork=True)
    try:
        assert session.evaluate("seven()") == 7
        assert "s2o_fork_probe" not in sys.modules  # this unconfined process never ran its code
    finally:
        session.close()


def test_settings_a_forked_worker_refuses_leave_no_worker() -> None:
    before = {p for p in C.descendants() if C.is_worker(p)}
    with pytest.raises(S2OError) as info:
        IsolatedSession(make_settings({"allowlist": "inspect"}), fork=True)
    assert info.value.stage == "load"
    assert not C.wait_gone({p for p in C.descendants() if C.is_worker(p)} - before, timeout=2.0)


def test_a_worker_forked_after_its_parent_armed_a_deadline_has_a_watchdog_of_its_own():
    """Red team, 2026-12-04: the fork kept the parent's ``Watchdog`` with its thread (not in the child), so a
    worker forked after the parent had armed a deadline (the kernel evaluates profile fields; a restart forks
    again) started no watchdog: a run past its limit ran on until the parent killed the worker at the limit
    + 1 s and restarted it. The child now forgets the parent's watchdog and starts its own."""
    from s2o_kernel.engine.run.limits import WATCHDOG

    WATCHDOG.disarm(WATCHDOG.arm(10))  # this process's watchdog thread runs before the fork
    session = IsolatedSession(make_settings({"limits": {"time": 0.5}}), fork=True)
    try:
        for _ in range(2):
            run = session.run_fragment({"var": {"x": "{ len([i for i in range(10**7) for j in range(10)]) }"}})
            assert run.error is not None and run.error.code == "timedOut"
        assert session.restarts == 0  # stopped by the worker's own watchdog, not killed by this process
    finally:
        session.close()
