"""A run ends with everything it started (SPEC 12, issue 8): tasks are cancelled, loops do not leak."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings

TICKS = {"n": 0}


async def burn() -> None:
    """Host work that keeps going for seconds unless cancelled."""
    for _ in range(500):
        TICKS["n"] += 1
        await asyncio.sleep(0.01)


async def fail() -> None:
    await asyncio.sleep(0.02)
    raise ValueError("boom")


STARTED: list[asyncio.Future[None]] = []


async def spawn() -> str:
    """Host code that starts a task and returns before it ends."""
    STARTED.append(asyncio.ensure_future(burn()))
    return "started"


def _session() -> Session:
    return Session(Engine(bare_settings({"allowlist": "asyncio.gather"})),
                   locals={"burn": burn, "fail": fail, "spawn": spawn})


def _ticks_after(seconds: float) -> int:
    before = TICKS["n"]
    time.sleep(seconds)
    return TICKS["n"] - before


def test_gather_children_are_cancelled_when_a_sibling_fails() -> None:
    session = _session()
    with pytest.raises(S2OError) as err:
        session.evaluate("await asyncio.gather(fail(), burn())")
    assert err.value.code == "runtime" and "ValueError" in err.value.message
    assert _ticks_after(0.3) == 0


def test_tasks_a_host_function_starts_end_with_the_run() -> None:
    session = _session()
    assert session.evaluate("spawn()") == "started"
    assert _ticks_after(0.3) == 0


def test_tasks_started_in_a_fragment_end_with_the_run() -> None:
    session = _session()
    run = session.run_fragment({"var": {"x": "{ spawn() }"}})
    assert run.code == "success" and session.locals["x"] == "started"
    assert _ticks_after(0.3) == 0


def test_a_session_that_is_gone_leaves_no_loop_thread() -> None:
    def loops() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "s2o-session-loop")

    before = loops()
    for _ in range(5):
        session = _session()
        session.evaluate("spawn()")
        del session
    gc.collect()
    deadline = time.monotonic() + 2
    while loops() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert loops() <= before
