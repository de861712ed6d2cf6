"""The time limit's exception is sent again until the run takes it (SPEC 6; red team).

The watchdog stops pure-Python work by raising an exception in the evaluating thread
(``PyThreadState_SetAsyncExc``); it arrives at whatever Python code that thread runs next. That
may be a finalizer or an unraisable hook, where an exception is printed and dropped: an un-awaited
coroutine, deallocated, runs ``warnings._warn_unawaited_coroutine``. With the teaching allowlist,
``sum(1 for c in map(slow_answer, …))`` makes one such coroutine per item, so the one exception the
watchdog sent was lost most of the time: the cell ran on to its end (forever over ``endless()``),
``Session.interrupt`` was lost the same way, and a fragment's run was reported ``timedOut`` after
``limits.time`` + 1 s while its retired loop thread kept running the expression for good.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings

import pytest
from interrupting import assert_interrupt_stops

from s2o_kernel.engine import Engine, S2OError, Session, default_settings

#: One un-awaited coroutine per item: most of the thread's Python time is in the warning hook.
PAYLOAD = "sum(1 for c in map(slow_answer, range(4 * 10**6)))"


@pytest.fixture
def quiet_hooks(monkeypatch):
    """Drop the payload's warnings and the exceptions its finalizers print (both are its own noise)."""
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def session(limit: float) -> Session:
    s = Session(Engine(default_settings()), locals={"kept": 1}, agent={"kept": 2})
    s.update_settings({"limits": {"time": limit}})
    return s


@pytest.mark.timeout(300, method="thread")
@pytest.mark.usefixtures("quiet_hooks")
def test_a_cell_whose_time_limit_exception_is_swallowed_still_stops():
    s = session(0.5)
    for _ in range(3):  # cold, then hot: each time the exception may be dropped first
        with pytest.raises(S2OError) as err:
            s.evaluate(PAYLOAD)
        assert err.value.code == "timedOut", err.value
    assert s.evaluate("kept + agent.kept") == 3


@pytest.mark.timeout(300, method="thread")
@pytest.mark.usefixtures("quiet_hooks")
def test_an_interrupt_whose_exception_is_swallowed_still_stops():
    s = session(60)
    assert_interrupt_stops(s, PAYLOAD)


def stray_loop_threads(s: Session) -> set[threading.Thread]:
    """Event-loop threads alive besides the session's own (a retired one whose run goes on)."""
    own = s.execution._loop_thread
    return {t for t in threading.enumerate()
            if t.name == "s2o-session-loop" and (own is None or t is not own.thread)}


@pytest.mark.timeout(300, method="thread")
@pytest.mark.usefixtures("quiet_hooks")
def test_a_fragment_whose_time_limit_exception_is_swallowed_leaves_no_thread_running():
    s = session(0.5)
    s.warm_up()
    before = stray_loop_threads(s)  # other tests' sessions
    run = s.run_fragment({"var": {"x": "{sum(1 for c in map(slow_answer, endless()))}"}})
    assert run.code == "timedOut", run
    deadline = time.monotonic() + 10  # a retired loop's thread ends once its expression has stopped
    while stray_loop_threads(s) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    left = stray_loop_threads(s) - before
    assert not left, f"a run's loop thread outlived it: {left}"
    assert s.evaluate("kept") == 1
