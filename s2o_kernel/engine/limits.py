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


class Armed:
    """One deadline: the thread it is for, when, and whether it fired."""

    __slots__ = ("deadline", "done", "fired", "kind", "thread_id")

    def __init__(self, thread_id: int, deadline: float) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False
        self.done = False
        self.kind: type[BaseException] = RunTimeout


class Watchdog:
    """Raises :class:`RunTimeout` in a thread whose deadline passed; one per process.

    :meth:`arm` returns a token (the armed entry itself) to hand to
    :meth:`disarm` in a ``finally``; see ``Session._run_sync`` for the pattern
    that is safe against the exception arriving at any point.

    Ownership of a token is decided by one atomic ``dict.pop``: whoever pops
    it (the evaluating thread in :meth:`disarm`, or the watchdog when it
    fires) owns it. When the watchdog owns it, :meth:`disarm` waits until the
    exception is sent and then clears it if it was not yet delivered, so no
    exception ever lands outside the armed region. Arming and disarming cost
    one small object and two dict operations, no lock.
    """

    def __init__(self) -> None:
        self._armed: dict[int, Armed] = {}
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def arm(self, seconds: float, thread_id: int | None = None) -> Armed:
        """Start a deadline ``seconds`` from now for ``thread_id`` (default: this thread); returns a token."""
        entry = Armed(thread_id or threading.get_ident(), time.monotonic() + seconds)
        self._armed[id(entry)] = entry
        if self._thread is None:
            self._start()
        return entry

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="s2o-watchdog", daemon=True)
                self._thread.start()

    def rearm(self, entry: Armed, seconds: float) -> Armed:
        """Arm a reusable ``entry`` (one per session) for this thread: :meth:`arm` without allocating."""
        entry.thread_id = threading.get_ident()
        entry.deadline = time.monotonic() + seconds
        entry.fired = entry.done = False
        entry.kind = RunTimeout
        self._armed[id(entry)] = entry
        if self._thread is None:
            self._start()
        return entry

    def disarm(self, token: Armed) -> bool:
        """End the deadline; returns whether it fired. Idempotent."""
        if self._armed.pop(id(token), None) is not None:
            token.done = True
            return False
        while not token.done:  # the watchdog owns it and is sending the exception
            time.sleep(0)
        if token.fired:
            _raise_in_thread(token.thread_id, None)  # clear it if it was not delivered yet
        return token.fired

    def _fire(self, key: int, kind: type[BaseException]) -> None:
        entry = self._armed.pop(key, None)
        if entry is None:
            return
        entry.kind = kind
        entry.fired = True
        _raise_in_thread(entry.thread_id, kind)
        entry.done = True

    def interrupt(self, token: Armed) -> None:
        """Fire ``token`` now with :class:`RunInterrupt` (used when the user interrupts)."""
        self._fire(id(token), RunInterrupt)

    def _loop(self) -> None:
        while True:
            time.sleep(TICK)
            now = time.monotonic()
            for key, entry in list(self._armed.items()):
                if entry.deadline <= now:
                    self._fire(key, RunTimeout)


#: The process-wide watchdog.
WATCHDOG = Watchdog()
