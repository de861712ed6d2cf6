"""Interrupting a session from another thread, as a notebook's stop button does (``Session.interrupt``),
and host code that will not be interrupted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from s2o_kernel.engine import S2OError


def assert_interrupt_stops(session: Any, source: str, *, after: float = 0.3, times: int = 2) -> None:
    """Evaluate ``source`` ``times`` times, each interrupted from a timer thread ``after`` seconds in, and
    check each ends ``stopped`` (the session goes on after the first)."""
    for _ in range(times):
        timer = threading.Timer(after, session.interrupt)
        timer.start()
        try:
            with pytest.raises(S2OError) as err:
                session.evaluate(source)
        finally:
            timer.cancel()
        assert err.value.code == "stopped", err.value


def make_stubborn(started: threading.Event, ticks: dict[str, int], seconds: float) -> Callable[[], Awaitable[str]]:
    """A host coroutine function that sets ``started``, then swallows every cancellation for ``seconds``
    (a retry loop catching too much), counting its passes in ``ticks["n"]``; it returns ``"late"``."""

    async def stubborn() -> str:
        started.set()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.01)
                ticks["n"] += 1
            except asyncio.CancelledError:
                continue
        return "late"

    return stubborn
