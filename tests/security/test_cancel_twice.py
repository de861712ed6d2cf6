"""A caller of ``evaluate_async`` cancelled twice (red team 2, 2026-12-02; SPEC 12: a run ends with
everything it started).

Cancelled once, ``evaluate_async`` cancels its run and waits (up to ``UNWIND_WAIT``) for it to end, then
retires its loop when it does not. A second cancel of the caller's task (a host's shutdown cancelling
every task, ``asyncio.wait_for`` around it) landed in that wait: the caller got its ``CancelledError`` at
once, while the run went on, and nothing retired a run that swallowed its cancel, so its host code kept
running on the session's loop after the caller had been told it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from interrupting import make_stubborn

from s2o_kernel.engine import Engine, Session, bare_settings

STARTED = threading.Event()
TICKS = {"n": 0}


stubborn = make_stubborn(STARTED, TICKS, 20)  # swallows every cancellation for 20 s


def test_a_caller_cancelled_twice_still_ends_with_its_run() -> None:
    STARTED.clear()
    s = Session(Engine(bare_settings({"allowlist": "len", "limits": {"time": 20}})), locals={"stubborn": stubborn})

    async def main() -> None:
        task = asyncio.ensure_future(s.evaluate_async("stubborn()"))
        await asyncio.get_running_loop().run_in_executor(None, STARTED.wait, 10)
        task.cancel()
        for _ in range(5):  # the first cancel reaches evaluate_async, which now waits for its run
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    ticks = TICKS["n"]
    time.sleep(0.2)  # a run still going ticks every 10 ms
    assert TICKS["n"] == ticks  # before: the run went on for 20 s after its caller was told it ended
    assert s.evaluate("len([1])") == 1
