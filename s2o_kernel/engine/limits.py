"""Run-time limits enforced from outside the evaluating code (SPEC 6).

An ``asyncio`` timeout cannot stop pure-Python work that never yields (a
comprehension over an endless generator, ``sum(endless())``). The
:class:`Watchdog` is one daemon thread per process that raises an exception
*inside* the evaluating thread when its deadline passes, using CPython's
``PyThreadState_SetAsyncExc``: the exception arrives at the next bytecode
boundary, so the run stops within the limit plus the watchdog's tick
(:data:`TICK`, 20 ms) and the session keeps its variables.

What this cannot stop is a single C-level call that never returns to
bytecode (``max(itertools.count())``): that is the containment worker's job
(SPEC 12).

Both exceptions derive from ``BaseException`` so host code's ``except
Exception`` cannot swallow them.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time

#: How often the watchdog checks deadlines, in seconds.
TICK = 0.02


class RunTimeout(BaseException):
    """Raised inside an evaluation whose time limit passed (becomes code ``timedOut``)."""


class RunInterrupt(BaseException):
    """Raised inside an evaluation that was asked to stop (becomes code ``stopped``)."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_set_async_exc.restype = ctypes.c_int


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    if exc_type is None:
        _set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object())  # clears a pending one
    else:
        _set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))


class _Armed:
    __slots__ = ("thread_id", "deadline", "fired", "kind")

    def __init__(self, thread_id: int, deadline: float) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False
        self.kind: type[BaseException] = RunTimeout


class Watchdog:
    """Raises :class:`RunTimeout` in a thread whose deadline passed; one per process.

    Use :meth:`arm` before the work and :meth:`disarm` after it (in a
    ``finally``); see :func:`Session.evaluate` for the pattern that is safe
    against the exception arriving at any point. Each armed token fires at
    most once, and :meth:`disarm` clears an exception that was raised but not
    yet delivered, so no exception ever lands outside the armed region.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[int, _Armed] = {}
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="s2o-watchdog", daemon=True)
            self._thread.start()

    def arm(self, seconds: float, thread_id: int | None = None) -> int:
        """Start a deadline ``seconds`` from now for ``thread_id`` (default: this thread); returns a token."""
        token = next(self._ids)
        entry = _Armed(thread_id or threading.get_ident(), time.monotonic() + seconds)
        with self._lock:
            self._armed[token] = entry
            self._ensure_thread()
        return token

    def disarm(self, token: int) -> bool:
        """End the deadline; returns whether it fired. Idempotent."""
        with self._lock:
            entry = self._armed.pop(token, None)
            if entry is not None and entry.fired:
                _raise_in_thread(entry.thread_id, None)
        return bool(entry and entry.fired)

    def interrupt(self, token: int) -> None:
        """Fire ``token`` now with :class:`RunInterrupt` (used when the user interrupts)."""
        with self._lock:
            entry = self._armed.get(token)
            if entry is not None and not entry.fired:
                entry.fired = True
                entry.kind = RunInterrupt
                _raise_in_thread(entry.thread_id, RunInterrupt)

    def _loop(self) -> None:
        while True:
            time.sleep(TICK)
            now = time.monotonic()
            with self._lock:
                for entry in self._armed.values():
                    if not entry.fired and entry.deadline <= now:
                        entry.fired = True
                        _raise_in_thread(entry.thread_id, entry.kind)


#: The process-wide watchdog.
WATCHDOG = Watchdog()
