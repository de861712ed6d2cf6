"""Run-time limits enforced from outside the evaluating code (SPEC 6).

An ``asyncio`` timeout cannot stop pure-Python work that never yields (a
comprehension over an endless generator, ``sum(endless())``). The
:class:`Watchdog` is one daemon thread per process that raises an exception
*inside* the evaluating thread when its deadline passes, using CPython's
``PyThreadState_SetAsyncExc``: the exception arrives at the next bytecode
boundary, so the run stops within the limit plus the watchdog's tick
(:data:`TICK`, 20 ms) and the session keeps its variables.

Every evaluation runs under it: one expression run in the calling thread is armed around its call,
a fragment run once for the whole run. What it cannot stop is a single C-level call that never returns
to bytecode (``max(itertools.count())``, a long ``sorted`` or ``str.replace``): beyond the bounded
operators of SPEC 6 and 12 (:mod:`.bounded`), that is the containment worker's job, which kills the
process at the limit and restores the session (SPEC 12).

Both exceptions derive from ``BaseException`` so host code's ``except
Exception`` cannot swallow them.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

from ...bounds import REFIRE, TICK


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
    """One deadline: the thread it is for, when, whether it fired, and its key in :attr:`Watchdog.armed`.

    ``refire``: once fired, the exception is sent again every :data:`REFIRE` seconds until the thread
    settles the deadline (:meth:`Watchdog.settle`). One sending can be lost: it arrives at whatever Python
    code the thread runs next, and that may be a finalizer or an unraisable hook, where an exception is
    printed and dropped (an un-awaited coroutine's warning, ``warnings._warn_unawaited_coroutine``, runs in
    the thread that frees it). On for a session's evaluations in the calling thread, whose code between
    the exception's arrival and the settle is the engine's own ``finally`` (microseconds); off for a run on
    the event loop, where a second exception could land in the loop's own code while the run unwinds,
    until the run is given up (:meth:`Watchdog.abandon`).
    """

    __slots__ = ("deadline", "fired", "key", "kind", "refire", "settled", "thread_id")

    def __init__(self, thread_id: int, deadline: float, *, refire: bool = False) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False
        self.kind: type[BaseException] = RunTimeout
        self.key = id(self)
        self.refire = refire
        self.settled = False  # set by Watchdog.settle (read by abandon; a reused entry never resets it)


class Watchdog:
    """Raises :class:`RunTimeout` in a thread whose deadline passed; one per process.

    :meth:`arm` (or :meth:`rearm`) returns a token (the armed entry itself) to hand to :meth:`disarm` in
    a ``finally``; see ``Execution.evaluate`` for the pattern that is safe against the exception arriving at
    any point.

    Ownership of a token is decided by one atomic ``dict.pop`` on :attr:`armed`: whoever pops it
    (the evaluating thread, or the watchdog when it fires) owns it. The watchdog pops, marks
    ``fired`` and sends the exception while holding its firing lock; so an evaluating thread whose
    pop finds nothing calls :meth:`settle`, which takes that lock (waiting out a firing in
    progress) and then clears the exception if it was not delivered yet. No exception ever lands
    outside the armed region, and waiting is never needed on the normal path.

    The hot path (``Execution``) reuses one :class:`Armed` per session and inlines the protocol, so
    a run of a cached expression pays three attribute stores and two dict operations, no call:
    ``thread_id``, ``deadline``, ``fired = False``, ``armed[entry.key] = entry``; at the end
    ``if armed.pop(entry.key, None) is None: WATCHDOG.settle(entry)``.
    """

    def __init__(self) -> None:
        #: armed entries by key: present = armed and owned by no one yet (see the class doc)
        self.armed: dict[int, Armed] = {}
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._fire_lock = threading.Lock()
        #: key -> (when, entry): interrupts asked for with :meth:`interrupt_soon`, fired by the watchdog's
        #: thread on that very entry only (a key is an ``id``, reused once its entry is freed)
        self.interrupting: dict[int, tuple[float, Armed]] = {}
        #: key -> (when, entry, thread): fired entries that are sent their exception again at ``when`` until
        #: settled (``Armed.refire``); ``thread``, when given, must still be alive (an abandoned run's)
        self.refiring: dict[int, tuple[float, Armed, threading.Thread | None]] = {}

    def arm(self, seconds: float, thread_id: int | None = None) -> Armed:
        """Start a deadline ``seconds`` from now for ``thread_id`` (default: this thread); returns a token."""
        entry = Armed(thread_id or threading.get_ident(), time.monotonic() + seconds)
        self.armed[entry.key] = entry
        if self._thread is None:
            self.start()
        return entry

    def rearm(self, entry: Armed, seconds: float) -> Armed:
        """Arm the reusable ``entry`` again for this thread, ``seconds`` from now; returns it (a token)."""
        entry.thread_id = threading.get_ident()
        entry.deadline = time.monotonic() + seconds
        entry.fired = False
        self.armed[entry.key] = entry
        if self._thread is None:
            self.start()
        return entry

    def start(self) -> None:
        """Start the watchdog's thread (idempotent); :meth:`arm` does it, the inlined hot path cannot."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="s2o-watchdog", daemon=True)
                self._thread.start()

    def disarm(self, token: Armed) -> bool:
        """End the deadline; returns whether it fired. Idempotent."""
        self.interrupting.pop(token.key, None)
        if self.armed.pop(token.key, None) is not None:
            return False
        return self.settle(token)

    def settle(self, token: Armed) -> bool:
        """After a pop of ``token`` found nothing: wait until a firing in progress has sent its exception,
        clear it if it has not been delivered yet, and return whether it fired. Idempotent."""
        with self._fire_lock:
            fired = token.fired
            token.settled = True
            if self.refiring.get(token.key, (0.0, None))[1] is token:
                del self.refiring[token.key]  # under the lock: no sending after this
        if fired:
            _raise_in_thread(token.thread_id, None)  # clear it if it was not delivered yet
        return fired

    def _fire(self, key: int, kind: type[BaseException], only: Armed | None = None) -> None:
        with self._fire_lock:
            if only is not None and self.armed.get(key) is not only:
                return  # that deadline ended; the key may be another's now (ids of freed entries are reused)
            entry = self.armed.pop(key, None)
            if entry is None:
                return
            entry.kind = kind
            entry.fired = True
            _raise_in_thread(entry.thread_id, kind)
            if entry.refire:
                self.refiring[key] = (time.monotonic() + REFIRE, entry, None)

    def abandon(self, token: Armed, thread: threading.Thread) -> None:
        """Give up on the run of ``token`` in ``thread`` (a retired event loop's): fire it now with
        :class:`RunInterrupt` if it has not fired, and send its exception again every :data:`REFIRE` seconds
        until it is settled or ``thread`` has ended, so an expression that never awaits and whose exception
        was dropped does not run on for good. Its loop is retired: an exception landing in the loop's own
        code there harms no run."""
        self.interrupting.pop(token.key, None)
        self._fire(token.key, RunInterrupt, only=token)
        with self._fire_lock:
            if token.fired and not token.settled:
                self.refiring[token.key] = (time.monotonic() + REFIRE, token, thread)

    def _refire(self, now: float) -> None:
        for key, (when, entry, thread) in list(self.refiring.items()):
            if when > now:
                continue
            with self._fire_lock:
                if self.refiring.get(key, (0.0, None))[1] is not entry:
                    continue  # settled meanwhile
                if thread is not None and not thread.is_alive():
                    del self.refiring[key]  # its thread ended (and its id may be another thread's soon)
                    continue
                self.refiring[key] = (now + REFIRE, entry, thread)
                _raise_in_thread(entry.thread_id, entry.kind)

    def interrupt(self, token: Armed) -> None:
        """Fire ``token`` now with :class:`RunInterrupt` (used when the user interrupts)."""
        self._fire(token.key, RunInterrupt)

    def interrupt_soon(self, token: Armed, delay: float) -> None:
        """Fire ``token`` with :class:`RunInterrupt` ``delay`` seconds from now (at the watchdog's next
        tick after it) unless it is disarmed first. A run on an event loop is cancelled first (it
        ends at its next ``await``, and its end disarms it); this exception is only for a run that
        does not reach one, so it never lands in the event loop's own code of a run that did."""
        if self.interrupting.get(token.key, (0.0, None))[1] is not token:  # asked again: the first time stands
            self.interrupting[token.key] = (time.monotonic() + delay, token)
        if self._thread is None:
            self.start()

    def withdraw(self, token: Armed) -> None:
        """Forget an interrupt asked for ``token`` with :meth:`interrupt_soon` that has not fired yet."""
        asked = self.interrupting.get(token.key)
        if asked is not None and asked[1] is token:
            self.interrupting.pop(token.key, None)

    def forget_after_fork(self) -> None:
        """In a forked child, where only the forking thread runs: forget the parent's watchdog thread (it is not
        there), its deadlines (each for a parent's thread) and its locks (another thread may have held one), so
        that the child's first :meth:`arm` starts a watchdog of its own. Registered with ``os.register_at_fork``
        for :data:`WATCHDOG`: without it, a worker forked after its parent armed a deadline has no watchdog, and a
        run past its limit runs on until the parent kills the worker."""
        self._thread = None
        self.armed, self.interrupting, self.refiring = {}, {}, {}
        self._start_lock, self._fire_lock = threading.Lock(), threading.Lock()

    def _loop(self) -> None:
        while True:
            time.sleep(TICK)
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        """Fire every deadline passed at ``now`` (``time.monotonic()`` seconds) and every interrupt asked for
        by then; the watchdog's thread calls it every :data:`TICK` seconds."""
        for key, entry in list(self.armed.items()):
            if entry.deadline <= now:
                self._fire(key, RunTimeout)
        for key, (when, asked) in list(self.interrupting.items()):
            if when <= now:
                self.interrupting.pop(key, None)
                self._fire(key, RunInterrupt, only=asked)  # nothing when that run has ended and disarmed it
        if self.refiring:
            self._refire(now)


#: The process-wide watchdog.
WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.forget_after_fork)


def time_limit_text(name: str, seconds: float) -> str:
    """The ``timedOut`` message for the limit ``name`` (``limits.time`` or ``bounds.time``) of ``seconds``."""
    return f"the run took longer than the time limit ({name} = {seconds:g} s)"


def memory_limit_setting(limit: int) -> str:
    """``limits.memory = 1 GiB``: the setting that caps a contained evaluation at ``limit`` bytes (SPEC 6)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size:
            return f"limits.memory = {limit / size:g} {unit}"
    return f"limits.memory = {limit} bytes"


def memory_limit_text(limit: int) -> str:
    """The ``memory-limit`` message of a contained evaluation whose cap is ``limit`` bytes:
    ``the evaluation ran out of memory (limits.memory = 1 GiB)``."""
    return f"the evaluation ran out of memory ({memory_limit_setting(limit)})"
