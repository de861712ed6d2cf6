"""The session's event-loop thread and the runs submitted to it (SPEC 6, 12).

"The shared event loop" of SPEC 6 is a :class:`LoopThread`: an asyncio loop in a daemon thread of its
own, one per session (and one for a :class:`~.outside.gateway.Gateway`). A whole fragment run, or
an expression's coroutine, is a :class:`Submitted` task on it, which the calling thread waits for; an
interrupt cancels the task and the caller hears of it only when the task has ended, so a run never
outlives the call that reported it (:func:`end_leftovers` ends what the run itself started).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ...bounds import UNWIND_POLL, UNWIND_WAIT

#: Loop threads retired with a run that would not end (:meth:`LoopThread.retire`): kept, never resumed.
_RETIRED: list[LoopThread] = []


class LoopThread:
    """A session's event loop, running in its own daemon thread."""

    def __init__(self) -> None:
        self.retired = False
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="s2o-session-loop", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        while not self.loop.is_closed():
            try:
                self.loop.run_forever()
                break
            except BaseException:  # a limit exception that landed in the loop itself: keep serving
                continue
        if self.retired:  # its tasks stay as they are, never resumed, never collected (no finally runs late)
            return
        with contextlib.suppress(RuntimeError):
            self.loop.close()

    def stop(self) -> None:
        """End the loop and its thread (when the session that owns it is gone)."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)

    def retire(self) -> None:
        """End the loop's thread after the step it is in, leaving its tasks suspended for good: for a run
        that did not end :data:`UNWIND_WAIT` seconds after its cancel (host code that swallows
        ``CancelledError``), so that nothing of it runs on after it was reported stopped. The owner makes
        a new loop thread for the next run."""
        self.retired = True
        _RETIRED.append(self)
        self.stop()


class Submitted:
    """One coroutine running as a task on a :class:`LoopThread`, as other threads see it.

    ``future`` settles with the task's outcome (``CancelledError`` when it was cancelled) only when the
    task has ended, and ``ended`` is set then: its ``finally`` blocks have run and the state its
    commands restore is restored. :meth:`cancel` cancels the task, never the future, so a caller woken
    by an interrupt never reports a run that is still unwinding (``asyncio.run_coroutine_threadsafe``'s
    future, cancelled from outside, woke its waiter at once).

    ``on_cancel`` is called on the loop thread when the cancel is delivered to the task, which is then
    suspended at an ``await`` (the loop runs callbacks only between a task's steps): the watchdog's
    exception is then not needed, and would land in the run's unwinding or in the event loop's own code.

    Made unstarted, so that whoever may cancel it can hold it before its coroutine runs (an interrupt
    from another thread that read the previous run was lost when the new run was already running);
    :meth:`start` schedules it, and raises ``RuntimeError`` when the loop is closed.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, on_cancel: Callable[[], None] | None = None) -> None:
        self.loop = loop
        self._on_cancel = on_cancel
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.ended = threading.Event()
        self._task: asyncio.Task[Any] | None = None
        self._cancel_asked = False
        #: when :meth:`cancel` was first called (``time.monotonic()``), else ``None``
        self.cancelled_at: float | None = None

    def start(self, coro: Coroutine[Any, Any, Any], *inner: Coroutine[Any, Any, Any]) -> Submitted:
        """Schedule ``coro`` as the task (once); returns ``self``. ``inner`` are coroutines ``coro`` awaits:
        when it is cancelled before it began, they are closed with it, never run ("never awaited")."""
        self.loop.call_soon_threadsafe(self._begin, coro, inner)
        return self

    def _begin(self, coro: Coroutine[Any, Any, Any], inner: tuple[Coroutine[Any, Any, Any], ...]) -> None:
        if self._cancel_asked:  # cancelled before it began: it never runs
            for each in (coro, *inner):
                each.close()
            self.future.cancel()
            self.ended.set()
            return
        self._task = self.loop.create_task(coro)
        self._task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task[Any]) -> None:
        exc = None if task.cancelled() else task.exception()  # read even when no one waits: never logged
        if not self.future.done():  # a caller awaiting through asyncio.wrap_future may have cancelled it
            if task.cancelled():
                self.future.cancel()
            elif exc is not None:
                self.future.set_exception(exc)
            else:
                self.future.set_result(task.result())
        self.ended.set()

    def outlived(self) -> bool:
        """Whether the task has not ended :data:`UNWIND_WAIT` seconds after it was cancelled."""
        at = self.cancelled_at
        return at is not None and not self.ended.is_set() and time.monotonic() - at >= UNWIND_WAIT

    def result(self, timeout: float) -> Any:
        """The task's outcome, waited for up to ``timeout`` seconds (``TimeoutError`` after). Raises
        ``concurrent.futures.CancelledError`` for a cancelled task, and also when it has :meth:`outlived`
        its cancel: the caller then reports it stopped (and retires its loop) instead of waiting on."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.future.result(min(max(deadline - time.monotonic(), 0.0), UNWIND_POLL))
            except concurrent.futures.TimeoutError:
                if self.future.done():  # the task's own TimeoutError (its time limit), not the wait's
                    raise
                if self.outlived():
                    raise concurrent.futures.CancelledError from None
                if time.monotonic() >= deadline:
                    raise

    def cancel(self) -> None:
        """Cancel the task from any thread: it ends at its next ``await`` (code that never awaits is the
        watchdog's to interrupt). Only the first cancel is delivered: a second one (a second interrupt)
        would land in the task's unwinding, its ``finally`` blocks that await, and cut them short."""
        if self.cancelled_at is None:
            self.cancelled_at = time.monotonic()
        if not self.ended.is_set():
            with contextlib.suppress(RuntimeError):  # the loop has closed: the task is gone with it
                self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:  # on the loop thread: so the task is at an await, where the cancel lands
        if self._cancel_asked:  # delivered once (see cancel)
            return
        self._cancel_asked = True
        if self._task is not None:
            self._task.cancel()
        if self._on_cancel is not None:
            self._on_cancel()


async def end_leftovers(grace: float = 1.0) -> None:
    """Cancel every task on the running loop but the caller's, and wait up to ``grace`` seconds for them.

    A run ends with everything it started (SPEC 12): the children of a granted ``asyncio.gather``
    whose sibling failed, tasks a granted host function created, and their callbacks.
    """
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left, timeout=grace)
