"""Running one compiled expression under the limits: the engine's one evaluator (SPEC 2, 6, 12).

An :class:`Execution` is the run state of one session: its globals dict (locals, the runtime
namespaces and the engine's builtins), its event-loop thread ("the shared event loop" of SPEC 6) and
the time limit's watchdog entry. Every expression runs through it, in its function form
(:mod:`.compiled`) and under the time limit, whoever asks:

* :meth:`Execution.evaluate` — a cell or a library call, in the calling thread: the expression's function
  (made once per session and source) called with the watchdog armed around it; a coroutine it returns
  driven on the loop thread and waited for here;
* :meth:`Execution.evaluate_async` — the same for a caller that is itself on an event loop;
* :meth:`Execution.run_on_loop` / :meth:`Execution.run_now` — an expression inside a fragment run, already
  on the loop thread, where the watchdog is armed once for the whole run (:meth:`Execution.submit`).

They differ only in where awaiting happens and where the limit is armed; a second run of an expression is
the first one's function called again, so it behaves as the first by construction. Errors are mapped in
one place, :mod:`.failures`: Python exceptions become ``runtime`` (message starting with the exception's
type name, secret values scrubbed, the failing operation's line and column), limits become ``timedOut`` /
``stopped`` / ``memory-limit``. A name the expression reads that no one set is ``unknown-name`` for a cell
(validated against the session's locals as it runs) and ``not-set`` in a fragment (validated as a whole:
set on a path the run did not take).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
import types
import weakref
from _thread import get_ident
from collections.abc import Coroutine
from time import monotonic
from typing import Any

from ...bounds import CACHE_SIZE, INTERRUPT_GRACE, UNWIND_POLL, UNWIND_WAIT
from ..errors import ErrorGroup, S2OError
from ..language.compiled import Compiled
from ..language.parsing import not_text
from ..policy.values import check_value
from . import failures
from .engine import Engine
from .failures import INTERRUPTED
from .limits import WATCHDOG, Armed, RunInterrupt, RunTimeout
from .loop import LoopThread, Submitted, end_leftovers

#: Result types that cannot hold anything: no scan needed.
PLAIN_RESULTS = frozenset({str, int, float, bool, type(None), bytes, complex})


async def _noop() -> None:
    return None


class Execution:
    """The run state of one session and the one way a compiled expression runs (see the module doc).

    Attributes:
        engine: the :class:`Engine` in use; the session replaces it when settings change.
        globals: the globals dict every expression of the session runs against.
    """

    def __init__(self, engine: Engine) -> None:
        self.globals: dict[str, Any] = {}
        self._loop_thread: LoopThread | None = None
        self._pending: Submitted | None = None
        self._deadline = Armed(0, 0.0, refire=True)  # reused by every time limit armed in the calling thread
        self._armed = WATCHDOG.armed
        self._token: Any = None
        #: The JSON path of the command a fragment run was running when it was interrupted (its ``stopped``),
        #: and that run's trace (SPEC 14), which its caller reports since the run itself never returned.
        self.stopped_at: str | None = None
        self.stopped_trace: Any = None  # a fragments.trace.Tracer: the run module is below the fragments
        self.use_engine(engine)
        WATCHDOG.start()

    @property
    def engine(self) -> Engine:
        """The :class:`Engine` in use; the session replaces it when settings change."""
        return self._engine

    def use_engine(self, engine: Engine) -> None:
        """Run with ``engine`` from now on (settings, a fragment's bounds): its compile cache and time limit,
        and no function made before (a function keeps the builtins it was made with)."""
        self._engine = engine
        self._compiled = engine.compiled  # source -> Compiled, of what this engine compiled
        self._limit = engine.settings.limits.time
        #: source -> the expression's function bound to :attr:`globals` (:meth:`_function_of`). Every local
        #: the expression reads is set while its function is here: removing a local empties the table.
        self._functions: dict[str, types.FunctionType] = {}

    # -- in the calling thread ---------------------------------------------------------------
    def evaluate(self, expr: str) -> Any:
        """Run one expression in the calling thread and return its value (SPEC 2, 6).

        Raises :class:`S2OError`: a validation code (stage ``validate``; ``syntax`` for an ``expr`` that
        is not a ``str``), a run-time code (``runtime``, ``not-set``, ``not-allowed``, ``not-awaited``, …),
        ``timedOut`` when ``limits.time`` (seconds) passes, or ``stopped`` when interrupted
        (``KeyboardInterrupt`` or :meth:`interrupt`). The session keeps its variables either way.

        The expression's function (:meth:`_function_of`: compiled once per engine, bound once per session)
        is called with the time limit armed around it. The watchdog's protocol is inlined here, the one
        place it is (three stores and two dict operations, see :class:`~.limits.Watchdog`): its exception
        may arrive anywhere up to the disarm, even inside the ``finally``, so the outer handler settles again
        (idempotent) and maps it, and it never escapes raw. A deadline that fired while the expression ran C
        work the exception could not land in (no call or backward jump) ends the run as if it had landed:
        ``timedOut`` (or ``stopped``), never a value computed past the limit; so does one that passed while C work
        kept the interpreter lock and the watchdog's thread never ran (read once more at the end). A value of
        :data:`PLAIN_RESULTS` holds nothing to check; any other is settled (:meth:`_settled`: awaited, or
        checked).
        """
        try:
            function = self._functions[expr]
        except (KeyError, TypeError):  # not run in this session yet, or not text
            function = None
        if function is None:  # compiled, checked and bound outside the handler: no chained KeyError
            function = self._function_of(expr)
        entry = self._deadline
        entry.thread_id = get_ident()
        entry.deadline = (start := monotonic()) + self._limit
        entry.fired = False
        armed = self._armed
        armed[entry.key] = entry
        try:
            try:
                value = function()
            finally:
                fired = armed.pop(entry.key, None) is None and WATCHDOG.settle(entry)
            if fired:  # its exception fired but never landed: C work with no call or jump to check at
                raise entry.kind
            if monotonic() > entry.deadline:  # passed, but the watchdog's thread never ran: C work kept the GIL
                raise RunTimeout
        except BaseException as exc:
            if armed.pop(entry.key, None) is None:
                WATCHDOG.settle(entry)
            raise self._failed(exc, self._compiled_of(expr), start) from None
        if type(value) in PLAIN_RESULTS:
            return value
        return self._settled(self._compiled_of(expr), value, start)

    def _function_of(self, source: str) -> Any:
        """The function of ``source`` over :attr:`globals`: compiled by the engine (a validation error raised
        here, before anything runs), its locals checked (``unknown-name``), kept for the next run when the
        globals hold this engine's builtins (a function keeps the builtins it was made with)."""
        if type(source) is not str:
            raise not_text(source)
        compiled = self._engine.compile(source)
        g = self.globals
        if not compiled.local_names <= g.keys():
            self._unknown_names(compiled)
        function = compiled.bind(g)
        if g.get("__builtins__") is self._engine.builtins:
            if len(self._functions) >= CACHE_SIZE:
                self._functions.clear()
            self._functions[source] = function
        return function

    def forget_functions(self) -> None:
        """Drop every expression function made (a local was removed): a function runs until it reads a name,
        where a first run refuses the expression (``unknown-name``) before anything in it runs."""
        self._functions.clear()

    def _compiled_of(self, source: str) -> Compiled:
        """The compiled ``source`` (compiled again if this engine's cache dropped it since)."""
        return self._compiled.get(source) or self.engine.compile(source)

    def _settled(self, compiled: Compiled, value: Any, start: float) -> Any:
        """The value :meth:`evaluate` returns for ``value`` (not of :data:`PLAIN_RESULTS`) of ``compiled``:
        a coroutine awaited on the loop thread (or ``not-awaited``), anything else checked (:meth:`finish`)."""
        coro = self._coroutine_of(compiled, value)
        if coro is not None:
            return self._await_here(coro, compiled, start)
        return self.finish(compiled, value)

    async def evaluate_async(self, expr: str) -> Any:
        """Like :meth:`evaluate`, for callers on an event loop: awaiting happens off their loop."""
        start = time.monotonic()
        function = self._function_of(expr)
        compiled = self._compiled_of(expr)
        value = self._call_limited(function, compiled, start)
        coro = self._coroutine_of(compiled, value)
        if coro is None:
            return self.finish(compiled, value)
        submitted = self.submit(coro, start)
        run = asyncio.wrap_future(submitted.future)
        try:
            while not (await asyncio.wait({run}, timeout=UNWIND_POLL))[0]:  # never cancels the run's future
                if submitted.outlived():  # interrupted, and it does not end: report it, retire its loop
                    self._stop_and_wait()
                    raise S2OError("stopped", INTERRUPTED, source=compiled.source)
            value = run.result()
        except asyncio.CancelledError:
            if run.cancelled():  # the run was interrupted (Session.interrupt), not the caller's task
                raise S2OError("stopped", INTERRUPTED, source=compiled.source) from None
            self.interrupt_async()  # the caller's task was cancelled: so is the run, which ends first
            deadline = time.monotonic() + UNWIND_WAIT  # cancelled again meanwhile: the run is stopping already
            while not run.done() and time.monotonic() < deadline:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({run}, timeout=max(deadline - time.monotonic(), 0.0))
            if not run.done():
                self._retire()
            raise
        except S2OError:
            raise
        except BaseException as exc:
            raise self.map_error(exc, compiled, start) from None
        return self.finish(compiled, value)

    # -- on the session's loop (fragments) ---------------------------------------------------
    async def run_on_loop(self, compiled: Compiled, start: float, namespace: dict[str, Any] | None = None) -> Any:
        """Run ``compiled`` inside a fragment run (already on the session's loop) and await its value.

        ``namespace`` is the globals dict of the agent function call it belongs to (default: :attr:`globals`).
        The run's watchdog and ``asyncio.timeout`` (armed by :meth:`submit`) bound it. A name
        not set at this point of the run is ``not-set``; ``asyncio.CancelledError`` passes through.
        """
        try:
            value = compiled.bind(self.globals if namespace is None else namespace)()
            if compiled.is_coroutine_code or (type(value) is types.CoroutineType and compiled.top_call):
                value = await value
            return self.finish(compiled, value)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            raise self.fragment_error(exc, compiled, start) from None

    def run_now(self, compiled: Compiled, start: float, namespace: dict[str, Any]) -> Any:
        """:meth:`run_on_loop` for an expression that never awaits (a sync command's, ``Command.sync``):
        its function over ``namespace`` called and the result checked, with no coroutine. The run's watchdog
        bounds it.

        Raises what :meth:`run_on_loop` raises; ``unexpected`` if the expression awaits after all (the
        parser decided it does not: a coroutine it returns is closed unstarted, never run).
        """
        try:
            value = compiled.bind(namespace)()
            if type(value) is types.CoroutineType and (compiled.is_coroutine_code or compiled.top_call):
                value.close()
                raise S2OError("unexpected", "an expression of a sync command awaited")
            return self.finish(compiled, value) if compiled.may_hold_objects else value
        except BaseException as exc:
            raise self.fragment_error(exc, compiled, start) from None

    def fragment_error(self, exc: BaseException, compiled: Compiled, start: float) -> S2OError:
        """:meth:`map_error` inside a fragment run: a name not set at this point is ``not-set``."""
        err = self.map_error(exc, compiled, start)
        if isinstance(exc, NameError) and err.code == "runtime":
            err.code = "not-set"
            err.message = f"'{exc.name}' has not been set at this point of the run"
        return err

    def run_coroutine(self, coro: Coroutine[Any, Any, Any], start: float) -> Any:
        """Run ``coro`` (a whole fragment run) on the session's loop under the time limit; wait for it here.
        Raises ``S2OError`` ``timedOut`` or ``stopped`` (:meth:`_outcome`); other exceptions of ``coro`` propagate."""
        return self._outcome(coro, None, start)

    # -- the loop thread and interrupts --------------------------------------------------------
    def submit(self, coro: Coroutine[Any, Any, Any], start: float) -> Submitted:
        """Schedule ``coro`` on the session's loop thread with what is left of the time limit; its future
        settles once its task has ended (:class:`Submitted`)."""
        if self._loop_thread is None or self._loop_thread.loop.is_closed():
            self._loop_thread = LoopThread()
            weakref.finalize(self, self._loop_thread.stop)
        remaining = max(self.engine.settings.limits.time - (time.monotonic() - start), 0.0)
        self.stopped_at, self.stopped_trace = None, None

        async def step() -> Any:
            token = WATCHDOG.arm(remaining + 0.1)
            self._token = token
            try:
                async with asyncio.timeout(remaining):  # in this task: no inner task whose end goes unseen
                    value = await coro
            finally:
                self._token = None
                fired = WATCHDOG.disarm(token)
                with contextlib.suppress(BaseException):  # the run's own outcome is already decided
                    await end_leftovers()
            if fired:  # fired but never landed (see :meth:`evaluate`): the run ends as if it had
                raise token.kind
            return value

        run = self._pending = Submitted(self._loop_thread.loop, self._cancel_delivered)  # held before it runs
        return run.start(step(), coro)

    def warm_up(self) -> None:
        """Start the threads a run uses (event loop, watchdog) with a trivial expression and coroutine, so that
        memory measured afterwards is the session's resting size."""
        self.evaluate("[1 for x in [1]]")
        self.submit(_noop(), time.monotonic()).future.result(5)

    def interrupt(self) -> None:
        """Stop the evaluation in progress (from another thread); it ends with code ``stopped``.

        A run on the loop thread (a fragment, an awaiting expression) is cancelled as well
        (:meth:`interrupt_async`): the watchdog's exception alone is taken by whatever code the loop
        thread runs when it arrives, and that is often the event loop's own (the thread that
        interrupts gets the GIL while the loop polls, which a fragment's loop does every 32 passes);
        the loop keeps serving after it, so the run would go on to its time limit."""
        self.interrupt_async()
        WATCHDOG.interrupt(self._deadline)  # does nothing unless an expression is running under it

    def interrupt_async(self) -> None:
        """Cancel the coroutine running on the loop thread; the watchdog interrupts it if the cancel has not
        reached it :data:`INTERRUPT_GRACE` seconds later (an expression that never awaits). Once per run: a
        second call would re-arm the watchdog after the first cancel withdrew it."""
        run = self._pending
        if run is not None and not run.ended.is_set() and run.cancelled_at is None:
            token = self._token
            if token is not None:  # asked before the cancel, which withdraws it once delivered
                WATCHDOG.interrupt_soon(token, INTERRUPT_GRACE)
            run.cancel()

    def _cancel_delivered(self) -> None:
        """On the loop thread, when the run's task got its cancel at an ``await``: the watchdog's
        ``RunInterrupt`` is withdrawn (it would land in the run's unwinding, its ``finally`` blocks that
        await, or in the event loop's own code, and lose the cancellation)."""
        token = self._token
        if token is not None:
            WATCHDOG.withdraw(token)

    # -- results and errors ------------------------------------------------------------------
    def finish(self, compiled: Compiled, value: Any) -> Any:
        """``value``, after checking it holds nothing forbidden when the expression could put objects in it."""
        if compiled.may_hold_objects and value is not None:
            try:
                check_value(value, "the result of an expression")
            except S2OError as exc:
                exc.source = compiled.source
                raise
        return value

    def timeout_error(self, compiled: Compiled | None) -> S2OError:
        """The ``timedOut`` error naming ``limits.time`` (or the definition's ``bounds.time``)."""
        return failures.timeout_error(self.engine, compiled)

    def map_error(self, exc: BaseException, compiled: Compiled, start: float) -> S2OError:
        """Turn anything raised while running ``compiled`` into an :class:`S2OError` with a position
        (:func:`.failures.map_error`)."""
        return failures.map_error(exc, self.engine, compiled, start)

    # -- inside ---------------------------------------------------------------------------------
    def _call_limited(self, function: Any, compiled: Compiled, start: float) -> Any:
        """``function()`` (of ``compiled``) in the calling thread under what is left of the time limit since
        ``start``, for :meth:`evaluate_async`; errors become ``S2OError``. The watchdog's protocol as in
        :meth:`evaluate`, through :meth:`~.limits.Watchdog.rearm` of the same entry (so :meth:`interrupt`
        reaches it)."""
        remaining = max(self._limit - (time.monotonic() - start), 0.0)
        token = WATCHDOG.rearm(self._deadline, remaining)
        try:
            try:
                value = function()
            finally:
                fired = WATCHDOG.disarm(token)
            if fired:  # fired but never landed (see :meth:`evaluate`)
                raise token.kind
            return value
        except BaseException as exc:
            WATCHDOG.disarm(token)
            raise self._failed(exc, compiled, start) from None

    def _failed(self, exc: BaseException, compiled: Compiled, start: float) -> S2OError:
        """The coded error for ``exc`` raised by ``compiled``: ``unknown-name`` when a local it reads is unset."""
        if isinstance(exc, NameError) and not compiled.local_names <= self.globals.keys():
            self._unknown_names(compiled)
        return self.map_error(exc, compiled, start)

    def _await_here(self, coro: Any, compiled: Compiled, start: float) -> Any:
        """Drive ``coro`` on the session's loop thread and wait for it in this thread."""
        try:
            value = self._outcome(coro, compiled, start)
        except S2OError:
            raise
        except BaseException as exc:
            raise self.map_error(exc, compiled, start) from None
        return self.finish(compiled, value)

    def _outcome(self, coro: Coroutine[Any, Any, Any], compiled: Compiled | None, start: float) -> Any:
        """The result of ``coro`` run on the loop thread (:meth:`submit`), waited for in this thread.

        Raises ``S2OError`` ``stopped`` for every way a run is interrupted: ``KeyboardInterrupt`` here (a
        SIGINT), its task cancelled (:meth:`interrupt`: the future's ``CancelledError``), the watchdog's
        ``RunInterrupt`` landed outside anything that codes it; ``timedOut`` for ``RunTimeout`` likewise
        and when the run outlives its time limit by a second. Each returns only once the run's task has
        ended (:meth:`_stop_and_wait`), or has not :data:`~.loop.UNWIND_WAIT` seconds after its cancel (its
        loop is retired then). Other exceptions of the run propagate.
        """
        limit = self.engine.settings.limits.time
        source = compiled.source if compiled is not None else None
        try:
            run = self.submit(coro, start)  # inside: a SIGINT may land while it is scheduled
            return run.result(max(limit - (time.monotonic() - start), 0) + 1.0)
        except concurrent.futures.TimeoutError:
            self._stop_and_wait()
            raise self.timeout_error(compiled) from None
        except RunTimeout:  # the watchdog's, landed on the loop thread outside anything that codes it
            self._stop_and_wait()
            raise self.timeout_error(compiled) from None
        except (KeyboardInterrupt, concurrent.futures.CancelledError, asyncio.CancelledError, RunInterrupt):
            self._stop_and_wait()  # a fragment run has ended: where it stopped is known
            raise S2OError("stopped", INTERRUPTED, source=source, path=self.stopped_at) from None

    def _stop_and_wait(self) -> None:
        """Cancel the run on the loop thread and wait (at most :data:`UNWIND_WAIT`) for its task to end; its own outcome
        is not reported. A further interrupt meanwhile (a second SIGINT) changes nothing: the run is stopping
        already (its ``finally`` blocks may await), and the caller never reports a run that is still unwinding."""
        run = self._pending
        if run is None:
            return
        deadline = time.monotonic() + UNWIND_WAIT
        cancelled = False
        while True:
            try:  # the whole step: a SIGINT lands at any bytecode
                if not cancelled:
                    self.interrupt_async()
                    cancelled = True
                end = min(deadline, (run.cancelled_at or deadline) + UNWIND_WAIT)
                if not run.ended.wait(max(end - time.monotonic(), 0.0)):
                    self._retire()
                return
            except KeyboardInterrupt:
                pass

    def _retire(self) -> None:
        """The run did not end after its cancel (host code swallows ``CancelledError``, or an expression that
        never awaits dropped the watchdog's exception): its loop thread is retired (:meth:`.LoopThread.retire`),
        so nothing of it runs on, and its deadline abandoned (:meth:`.Watchdog.abandon`: interrupted again
        until the expression stops and the thread ends); the next run gets a new loop thread."""
        token, self._token = self._token, None
        loop_thread, self._loop_thread = self._loop_thread, None
        if loop_thread is not None:
            loop_thread.retire()
        if token is not None:
            if loop_thread is not None:
                WATCHDOG.abandon(token, loop_thread.thread)
            else:
                WATCHDOG.disarm(token)

    def _unknown_names(self, compiled: Compiled) -> None:
        errors = []
        for name in sorted(compiled.local_names - self.globals.keys(),
                           key=lambda n: compiled.name_positions.get(n, (0, 0))):
            line, col = compiled.name_positions.get(name, (None, None))
            errors.append(S2OError("unknown-name", f"'{name}' is not an argument, a variable set earlier, "
                                   "a runtime namespace or an allowlist name", line=line, col=col,
                                   stage="validate", source=compiled.source))
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)

    @staticmethod
    def _coroutine_of(compiled: Compiled, value: Any) -> Any:
        if compiled.is_coroutine_code:
            return value
        if type(value) is types.CoroutineType:
            if compiled.top_call:
                return value
            value.close()
            raise S2OError("not-awaited", "the result holds a coroutine that was never awaited: "
                           "put 'await' before the async call", source=compiled.source)
        return None
