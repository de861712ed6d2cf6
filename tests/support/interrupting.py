"""Interrupting a session from another thread, as a notebook's stop button does (``Session.interrupt``)."""

from __future__ import annotations

import threading
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
