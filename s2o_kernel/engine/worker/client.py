"""Containment by process: :class:`IsolatedSession` runs a session in a supervised worker (SPEC 6, 12).

Some work cannot be stopped from inside the interpreter: a C-level loop (``max(itertools.count())``,
``collections.deque(itertools.count(), 0)``) or one huge allocation. ``IsolatedSession`` has the same interface as
:class:`~..session.Session`, but every run happens in a child process (:mod:`.server`) that

* caps its own address space at its start-up size plus ``limits.memory`` (a memory bomb ends as ``memory-limit``
  inside the child), and
* is killed by this parent when a run goes past ``limits.time`` plus :data:`KILL_GRACE` seconds (pure-Python work is
  already stopped in the child at the limit by its watchdog), then restarted from the last good state: agent and
  conversation variables and every JSON-serialisable local.

An interrupt (SIGINT to the kernel's process group, or :meth:`interrupt`) reaches the child, which ends the run with
``stopped``; a child that does not answer within :data:`~s2o_kernel.bounds.WORKER_INTERRUPT_GRACE` seconds (C code
the interrupt cannot reach), or ``UNWIND_WAIT`` more once it has said its run is ``stopping``, is killed and restarted.
The worker is not trusted (SPEC 7.1, 12): a ``stopping`` counts only after an interrupt, and no wait goes past the
request's deadline plus :data:`~s2o_kernel.bounds.STOPPING_GRACE`, so a call ends within its limit + 2 s.

The protocol is framed (:mod:`.framing`, :mod:`.wire`): every request has an id that every reply and event must echo,
every message has a size cap, and a message of the worker is decoded within budgets of values and depth. Writes to
the worker have the request's deadline too. An outside call the worker asks for is checked before any work is done
for it (:mod:`.calls`). Any fault while reading (a timeout, a dead worker, a message cut short, over the cap or past
the budgets, not JSON, of the wrong shape or for another request, a call the worker could not have made) kills the
worker, restarts it from the last good state and ends the call with a coded error whose ``details["restarted"]``
says so (``worker-protocol`` for the protocol's own faults, ``too-deep`` for a message nested past its bound; see
:meth:`IsolatedSession._fault_error`). A worker that has sent anything since its last reply is restarted
before the next request, so no call ever reads an earlier call's reply.

Each call is a row of the table of :mod:`.operations` (arguments, result codec); every message is type-checked
(:mod:`.wire`). A value that is not JSON round-tripping exactly comes back as a :class:`~..scopes.RemoteValue`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ...bounds import KILL_GRACE, STOPPING_GRACE, UNWIND_WAIT, WORKER_INTERRUPT_GRACE, WORKER_START_TIMEOUT
from ..errors import S2OError
from ..fragments.dataflow import Dataflow
from ..fragments.definition_bounds import requested_cost, requested_time
from ..fragments.depth import check_fragment_json
from ..outside.call import RECEIPT, OutsideCall
from ..outside.gateway import Gateway
from ..outside.llm import cost_limit_error
from ..outside.secrets import shared_masker, worker_settings
from ..run.budget import OutputBudget, text_bytes, text_limit_error
from ..run.codecache import CodeCache
from ..run.engine import Validation
from ..run.limits import memory_limit_setting, time_limit_text
from ..run.session import RunResult
from ..settings import Settings, bare_settings, merge
from . import launch, scratch, wire
from . import operations as ops
from .calls import check_call
from .channel import Channel, death
from .mirror import Mirror

#: ``details["restarted"]`` of an error after which the worker was restarted.
RESTARTED = ("the evaluation worker was stopped and restarted with the agent and conversation variables and "
             "every JSON local; locals that are not JSON (a set, a function, a granted object) are gone (SPEC 12)")
#: Message of an interrupted run (the kernel shows it as its evalue).
INTERRUPTED = "the run was interrupted; the session keeps its variables"


class _Interrupted(Exception):
    """An interrupted worker did not answer within :data:`WORKER_INTERRUPT_GRACE` seconds."""


OnEvent = Callable[[wire.Event], None]
T = TypeVar("T")


class IsolatedSession:
    """A :class:`~..session.Session` whose runs happen in a supervised child process.

    How to use it::

        with IsolatedSession(make_settings({"limits": {"time": 5}})) as session:
            run = session.run_fragment({"return": "{ sum(range(10)) }"})   # run.value == 45

    The methods are those of ``Session``; values come back as the worker shows them (a
    :class:`~..run.scopes.RemoteValue` when not JSON). A run past the time or memory limit is killed with
    its worker, which starts again with the session's last good state.

    ``IsolatedSession(settings)`` starts the worker at once; raises ``S2OError`` (stage ``load``) when the
    settings do not load. With ``fork=True`` every worker (the first and each restart) is a fork of this
    process instead of a new interpreter (:mod:`.launch`): it shares this process's pages and starts faster;
    the kernel uses it. ``code_cache``: a :class:`~..codecache.CodeCache` this process loads into each forked
    worker and writes what the worker compiled into, compiled again here (:class:`~.mirror.Mirror`).
    ``worker_main``: the function every worker runs instead of :func:`.server.main`, each worker then a fork
    of this process (:func:`.launch.fork_worker`; ``OSError`` where this process may not fork, having held a
    credential): a program that speaks the protocol in the worker's place, such as the tests' hostile worker
    (``tests/support/hostile_worker.py``, which lies). Only a caller of this constructor can give one.
    The public methods are those of ``Session``; each call is one round trip to the worker. Not
    thread-safe: one call at a time (``interrupt`` excepted).
    """

    def __init__(self, settings: Settings | None = None, *, fork: bool = False, code_cache: CodeCache | None = None,
                 worker_main: Callable[[], int] | None = None) -> None:
        self._settings = settings if settings is not None else Settings()
        self._fork = fork
        self._worker_main = worker_main
        self.mirror = Mirror(code_cache if fork else None)  #: keeps what the worker compiled (``.reported``: how many)
        self._state: dict[str, Any] = {"locals": {}, "agent": {}, "conv": {}}
        self._channel: Channel | None = None
        self._ids = itertools.count(1)
        #: The id of an ``init`` request sent to a restarted worker whose reply is not read yet.
        self._init_pending: int | None = None
        self.restarts = 0  #: how many times the worker was killed and started again
        self._outside: Gateway | None = None
        #: The running run's LLM spend (US dollars) as this process counted it, and its bound.
        self._spend, self._cost_bound, self._cost_name = 0.0, self._settings.limits.llm_cost, "limits.llm_cost"
        #: The running run's time limit, ``(name, seconds)``: ``bounds.time`` of a definition that sets it.
        self._time_limit: tuple[str, float] | None = None
        self._unwinding = 0.0  # until when the worker's interrupted run may still be unwinding (monotonic)
        #: An interrupt reached the worker during the exchange under way (:meth:`interrupt`, or SIGINT to the
        #: process group): only then may it say its run is ``stopping``.
        self._interrupted = False
        #: The latest the exchange under way may wait for its worker (monotonic): its deadline plus
        #: ``STOPPING_GRACE``, whatever the worker says (it ends within its time limit + 2 s, SPEC 12).
        self._hard_end = 0.0
        #: The operation under way carries its run's log lines in its reply (its row's ``logs``).
        self._logs = False
        self._printed = (0, 0)  # (request id, UTF-8 bytes it printed)
        #: ``on_print(text)``: called in the caller's thread with text that evaluated code printed,
        #: in order with the run's output parts; ``None`` drops it.
        self.on_print: Callable[[str], None] | None = None
        #: ``on_progress(PROGRESS)``: called in the caller's thread, twice a second, while a run that has
        #: gone on for 2 s goes on (``PROGRESS`` as :mod:`.wire` describes it); ``None`` drops it.
        self.on_progress: Callable[[dict[str, Any]], None] | None = None
        try:
            self.warnings = self._start()
        except BaseException:
            self._kill()  # refused settings: no worker is left behind
            raise

    # -- worker lifecycle ----------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The process id of the running worker, or ``None`` when there is none (after :meth:`close`)."""
        channel = self._channel
        return channel.proc.pid if channel is not None else None

    def _spawn(self) -> Channel:
        folder = scratch.make()
        try:
            fork = (self._fork or self._worker_main is not None) and launch.may_fork(self._settings)
            if self._worker_main is not None and not fork:
                raise OSError("a worker_main runs in a fork, and this process may not fork a worker")
            if fork:  # the child inherits the records loaded here
                self.mirror.prepare(self._settings)
            proc = launch.fork_worker(folder.path, self._worker_main) if fork else launch.exec_worker(folder.path)
            return Channel(proc, folder)
        except OSError:
            folder.remove()
            raise

    def _init_request(self, request_id: int) -> bytes:
        settings = worker_settings(self._settings.to_dict())  # no secret value, no credential (SPEC 7.1)
        return wire.encode_request(request_id, ops.INIT.name, ops.INIT.fields((settings, self._state), {}))

    def _start(self) -> list[str]:
        channel = self._channel = self._spawn()
        request_id = next(self._ids)
        result = self._exchange(channel, request_id, self._init_request(request_id),
                                time.monotonic() + WORKER_START_TIMEOUT, None)
        channel.cap_memory(self._settings.limits.memory)
        return ops.INIT.decode(result)[0]

    def _kill(self) -> None:
        channel, self._channel, self._init_pending = self._channel, None, None
        if channel is not None:
            channel.close()

    def _restart(self) -> None:
        """Kill the worker and start a new one from the last good state (:attr:`_state`).

        The new worker's ``init`` request is sent now and its reply read before the next request, so a
        killed run reports back without waiting for the new worker to start.
        """
        self._kill()
        self.restarts += 1
        channel = self._channel = self._spawn()
        request_id = next(self._ids)
        channel.send(self._init_request(request_id), time.monotonic() + WORKER_START_TIMEOUT)
        self._init_pending = request_id

    def _restart_quietly(self) -> None:
        try:
            self._restart()
        except OSError:  # TimeoutError included: a new worker that does not read its init
            self._kill()

    def _finish_init(self) -> None:
        """Read the reply to a restarted worker's ``init``; a worker that fails it is killed."""
        request_id, channel, self._init_pending = self._init_pending, self._channel, None
        if request_id is None or channel is None:
            return
        try:
            deadline = time.monotonic() + WORKER_START_TIMEOUT
            self._unwinding, self._interrupted, self._logs = 0.0, False, False
            reply: wire.Reply | None = self._read_until_reply(channel, request_id, deadline)
        except (TimeoutError, EOFError, S2OError):
            reply = None
        if reply is None or reply.error is not None:
            self._kill()
            return
        channel.cap_memory(self._settings.limits.memory)

    def _ready_channel(self) -> Channel:
        """The worker, in step: a dead worker, or one that sent what nobody asked for, is restarted."""
        if self._init_pending is not None:
            self._finish_init()
        channel = self._channel
        if channel is not None and channel.in_step():
            return channel
        self._restart_quietly()
        self._finish_init()
        if self._channel is None:
            raise S2OError("unexpected", "the evaluation worker could not be started")
        return self._channel

    def close(self) -> None:
        """Stop the worker and close the outside door's pooled connections."""
        self._kill()
        self._close_outside()

    def __enter__(self) -> IsolatedSession:
        """``with IsolatedSession(settings) as session:``: the session, closed (:meth:`close`) when the block ends."""
        return self

    def __exit__(self, *_exc_info: object) -> None:
        self.close()

    @property
    def result(self) -> Any:
        """See :attr:`Session.result` (a value that is not JSON comes back as :class:`~..scopes.RemoteValue`)."""
        try:
            return self.evaluate("result")
        except S2OError as exc:
            if exc.code == "not-set":
                return None
            raise

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self._kill()

    # -- protocol -------------------------------------------------------------
    def _call(self, op: ops.Operation[T], /, *values: Any, **named: Any) -> T:
        """The decoded result of ``op`` (a row of :data:`.operations.OPERATIONS`) called in the worker with ``values``
        and ``named`` (:meth:`~.operations.Operation.fields`: ``TypeError`` for others); see :meth:`_request`."""
        return self._request(op, op.fields(values, named))

    def _request(self, op: ops.Operation[T], fields: dict[str, Any], *, timeout: float | None = None,
                 on_event: OnEvent | None = None) -> T:
        """Send one request and return its decoded result; raises ``S2OError`` for an error reply or a fault. The
        reply must come within ``timeout`` seconds (default: ``op``'s, else ``limits.time`` + :data:`KILL_GRACE`);
        a ``STATE`` it carries becomes the last good state."""
        channel = self._ready_channel()
        request_id = next(self._ids)
        request = wire.encode_request(request_id, op.name, fields)
        wait = timeout or op.timeout or self._settings.limits.time + KILL_GRACE
        value, state = op.decode(self._exchange(channel, request_id, request, time.monotonic() + wait, on_event,
                                                op.logs))
        if state is not None:
            self._state = state
        return value

    if not TYPE_CHECKING:  # for mypy, only the methods written out below exist
        def __getattr__(self, name: str) -> Any:
            """A row of the table with no method here (one a library registered): a callable of :meth:`_call`."""
            op = ops.OPERATIONS.get(name)
            if op is None or name not in op.serves or name.startswith("_"):
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            return functools.partial(self._call, op)

    def _exchange(self, channel: Channel, request_id: int, request: bytes, deadline: float,
                  on_event: OnEvent | None, logs: bool = False) -> Any:
        """Send ``request`` and read up to its reply (``logs``: the reply carries a run's log lines). On any fault
        the worker is restarted from the last good state and a coded error is raised (see :meth:`_fault_error`)."""
        self._unwinding, self._interrupted, self._logs = 0.0, False, logs
        self._hard_end = deadline + STOPPING_GRACE
        try:
            channel.send(request, deadline)
            sent = True
        except TimeoutError:  # a worker that does not read its requests: as one that does not answer (below)
            sent = False
        except OSError:
            self._restart_quietly()
            raise S2OError("unexpected",
                           "the evaluation worker stopped; it was restarted with the last good state") from None
        try:
            if not sent:
                raise TimeoutError
            reply = self._receive_reply(channel, request_id, deadline, on_event)
        except BaseException as exc:
            error = self._fault_error(channel, exc)
            if error is None:
                raise
            raise error from None
        if reply.error is not None:
            raise reply.error
        return reply.result

    def _receive_reply(self, channel: Channel, request_id: int, deadline: float,
                       on_event: OnEvent | None) -> wire.Reply:
        try:
            return self._read_until_reply(channel, request_id, deadline, on_event)
        except KeyboardInterrupt:
            self._interrupted = True
        # the worker got the same SIGINT; give it a moment to answer 'stopped' (more once it says 'stopping')
        try:
            grace = min(time.monotonic() + WORKER_INTERRUPT_GRACE, self._hard_end)
            return self._read_until_reply(channel, request_id, grace, on_event)
        except (TimeoutError, EOFError, KeyboardInterrupt):
            raise _Interrupted from None

    def _read_until_reply(self, channel: Channel, request_id: int, deadline: float,
                          on_event: OnEvent | None = None) -> wire.Reply:
        """Hand each event to :attr:`on_print`, :attr:`on_progress` or ``on_event`` until the reply arrives;
        printed text past ``limits.output_bytes`` is a fault (the worker stops a run there, SPEC 12), and so is a
        ``stopping`` event when no interrupt reached the worker. The first ``stopping`` after an interrupt gives
        the run ``UNWIND_WAIT`` more, never past the exchange's deadline plus ``STOPPING_GRACE``."""
        limits = self._settings.limits
        wide = [(wire.output_prefix(request_id), wire.output_cap(limits.output_part_bytes))]
        if self._logs:
            wide.append((wire.reply_prefix(request_id), wire.output_cap(limits.output_bytes)))
        while True:
            message = channel.receive(request_id, max(deadline, self._unwinding), wide)
            if isinstance(message, wire.Reply):
                return message
            if message.kind == "stopping":  # its run is unwinding: it answers within UNWIND_WAIT (once)
                if not self._interrupted:
                    raise wire.fault("a stopping event, though no interrupt was sent")
                self._unwinding = self._unwinding or min(time.monotonic() + UNWIND_WAIT + WORKER_INTERRUPT_GRACE,
                                                         self._hard_end)
                continue
            if message.kind == "print":
                self._printed = (request_id, self._printed[1] * (self._printed[0] == request_id)
                                 + text_bytes(message.payload))
                if self._printed[1] > (cap := self._settings.limits.output_bytes):
                    raise wire.fault(f"printed text past the run's output caps ({text_limit_error(cap, 'it').message})")
            if message.kind in ("print", "progress"):
                handler = self.on_print if message.kind == "print" else self.on_progress
                if handler is not None:
                    handler(message.payload)
            elif message.kind == "outside":
                self._serve_outside(channel, request_id, message.payload, deadline, on_event)
            elif message.kind == "compiled":
                self.mirror.compile(self._settings, message.payload, request_id)
            elif on_event is not None:
                on_event(message)

    def _serve_outside(self, channel: Channel, request_id: int, call: OutsideCall, deadline: float,
                       on_event: OnEvent | None) -> None:
        """Make the worker's outside ``call`` with :attr:`outside` here, where the secrets are, and write the answer
        back by ``deadline`` (:meth:`.Channel.answer`). The call is checked first, before any work is done for it
        (:func:`.calls.check_call`: its profile, fields and sizes; a call that fails is a fault of the worker).
        It may use what is left until ``deadline`` and read no more than ``limits.db_rows`` rows; an ``llm`` call
        after the run's spend passed its cost bound is refused (``cost-limit``): the worker that should have
        stopped the run is not trusted (SPEC 7.1, 12)."""
        check_call(call, self._settings)
        call = dataclasses.replace(call, timeout=max(min(call.timeout, deadline - time.monotonic()), 0.001))
        if call.kind == "db" and type(call.fields.get("max_rows")) is int:  # never more than the settings allow
            call = dataclasses.replace(call, fields={
                **call.fields, "max_rows": min(call.fields["max_rows"], self._settings.limits.db_rows)})

        receipt: dict[str, Any] = {}

        def make() -> Any:
            if call.kind == "llm" and self._spend > self._cost_bound:
                raise cost_limit_error(self._spend, self._cost_bound, self._cost_name, call.path)
            token = RECEIPT.set(receipt)  # what the door tells of the call goes back with its result
            try:
                result = self.outside.call_sync(call, None if on_event is None else (
                    lambda part: on_event(wire.Event("streamed", part))))
            finally:
                RECEIPT.reset(token)
            if call.kind == "llm" and type(result) is dict and type(result.get("cost")) in (int, float) \
                    and 0 <= result["cost"] < float("inf"):
                self._spend += result["cost"]  # the gateway's own price of the turn (checked: never negative)
            return result

        channel.answer(request_id, make, deadline, receipt)

    @property
    def outside(self) -> Gateway:
        """The :class:`~..outside.gateway.Gateway` that makes the worker's outside calls here, with the settings'
        profiles and secrets; made on first use, closed by :meth:`reset`, :meth:`close` and a change of either."""
        if self._outside is None:
            self._outside = Gateway(self._settings)
        return self._outside

    def _close_outside(self) -> None:
        door, self._outside = self._outside, None
        if door is not None:
            door.close()

    def _fault_error(self, channel: Channel, exc: BaseException) -> S2OError | None:
        """Restart the worker after ``exc`` broke an exchange; the coded error that ends the call,
        or ``None`` to re-raise ``exc`` (an exception of a callback, not of the worker)."""
        status = channel.exit_status(min(1.0, max(self._hard_end - time.monotonic(), 0.05))) \
            if isinstance(exc, EOFError) else None
        partial = channel.reader.partial
        self._restart_quietly()
        if isinstance(exc, _Interrupted):
            code, message = "stopped", INTERRUPTED
        elif isinstance(exc, TimeoutError):
            code = "timedOut"
            message = time_limit_text(*(self._time_limit or ("limits.time", self._settings.limits.time)))
        elif isinstance(exc, EOFError):
            code, message = death(status, partial, memory_limit_setting(self._settings.limits.memory))
        elif isinstance(exc, S2OError) and exc.code in (wire.FAULT_CODE, "too-deep"):  # a message past its bounds
            code, message = exc.code, exc.message
        else:
            return None
        return S2OError(code, message, details={"restarted": RESTARTED})

    # -- the Session interface ----------------------------------------------
    @property
    def settings(self) -> Settings:
        """The settings in use."""
        return self._settings

    def settings_dict(self) -> dict[str, Any]:
        """The settings as a SPEC-10-shaped dict (secret values masked)."""
        return self._settings.masked_dict()

    def evaluate(self, expr: str) -> Any:
        """See :meth:`Session.evaluate`."""
        return self._call(ops.EVALUATE, expr)

    def evaluate_dynamic(self, text: str) -> Any:
        """See :meth:`Session.evaluate_dynamic`."""
        return self._call(ops.EVALUATE_DYNAMIC, text)

    async def evaluate_async(self, expr: str) -> Any:
        """See :meth:`Session.evaluate_async`; the round trip runs in a thread. A cancelled caller interrupts
        the run and gets its ``CancelledError`` once the exchange is over (one call at a time on a channel)."""
        import asyncio

        exchange = asyncio.get_running_loop().run_in_executor(None, self.evaluate, expr)
        try:
            return await asyncio.shield(exchange)
        except asyncio.CancelledError:
            if not exchange.done():
                self.interrupt()
                with contextlib.suppress(BaseException):
                    await exchange  # the worker answers stopped; a worker that cannot is killed
            raise

    def run_fragment(self, fragment: Any, *, on_output: Callable[[dict[str, Any]], None] | None = None,
                     inputs: dict[str, Any] | None = None, function: str | None = None,
                     on_print: Callable[[str], None] | None = None) -> RunResult:
        """See :meth:`Session.run_fragment`; a stopped or killed worker gives the matching result code.

        ``on_output`` is called with each output part as the worker produces it, and nothing keeps the parts;
        without it they are collected in ``RunResult.outputs``, as in-process. Each part is charged to the
        run's :class:`~..commands.output.OutputBudget` here too: the worker stops a run at the caps (SPEC 12),
        so a part past them is a ``worker-protocol`` fault. Printed text goes to ``on_print``, else to
        :attr:`on_print`, else into ``RunResult.printed``, as in-process.
        """
        budget = OutputBudget.of(self._settings.limits)
        kept: list[dict[str, Any]] = []

        def on_event(event: wire.Event) -> None:
            if event.kind not in ("output", "streamed"):
                return
            try:
                budget.charge(event.payload)
            except S2OError as exc:
                if event.kind == "streamed":  # a part this process streamed itself: the run's own output-limit
                    raise
                raise wire.fault(f"an output part past the run's output caps ({exc.message})") from None
            if on_output is not None:
                on_output(event.payload)
            else:
                kept.append(event.payload)

        printed: list[str] = []
        held_print = self.on_print
        self.on_print = on_print or held_print or printed.append
        try:
            check_fragment_json(fragment, self._settings.limits.definition_length)  # as in-process: JSON changes it
            bound = requested_time(fragment)  # bounds.time (SPEC 7.1)
            self._time_limit = ("limits.time", self._settings.limits.time) if bound is None else ("bounds.time", bound)
            wait = self._time_limit[1] + KILL_GRACE
            cost = requested_cost(fragment)  # bounds.cost (SPEC 7.1)
            self._spend, self._cost_bound = 0.0, self._settings.limits.llm_cost if cost is None else cost
            self._cost_name = "limits.llm_cost" if cost is None else "bounds.cost"
            run = self._request(ops.RUN_FRAGMENT, ops.RUN_FRAGMENT.fields((fragment, inputs, function), {}),
                                on_event=on_event, timeout=wait)
        except S2OError as exc:
            code = {"timedOut": "timedOut", "stopped": "stopped"}.get(exc.code, "errorInAgent")
            return RunResult(code=code, outputs=kept, error=exc, printed="".join(printed))
        finally:
            self._time_limit = None
            self.on_print = held_print
        run.outputs, run.printed = kept, "".join(printed)
        if run.trace_source is not None:  # the worker's, checked: every secret this side knows masked
            door = self._outside
            masker = door.masker if door is not None else shared_masker(self._settings.sensitive_texts())
            run.trace_source = run.trace_source.masked(masker.text if masker.texts else None)
        return run

    def validate(self, expr: str) -> Validation:
        """See :meth:`Session.validate`."""
        return self._call(ops.VALIDATE, expr)

    def dataflow(self, fragment: Any) -> Dataflow:
        """See :meth:`Session.dataflow`; raises the fragment's validation error."""
        check_fragment_json(fragment, self._settings.limits.definition_length)  # as in-process: JSON changes it
        return self._call(ops.DATAFLOW, fragment)

    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        """See :meth:`Session.update_settings` (all or nothing)."""
        new = bare_settings(merge(self._settings.to_dict(), patch))
        added = new.secrets.keys() - self._settings.secrets.keys() - (patch.get("secrets") or {}).keys()
        if added:  # secrets the new settings added themselves (a replay's stand-ins, SPEC 13): the worker's too
            patch = {**patch, "secrets": {**(patch.get("secrets") or {}), **{k: new.secrets[k] for k in added}}}
        warnings = self._call(ops.UPDATE_SETTINGS, worker_settings(patch))
        old, self._settings = self._settings, new
        if not old.same_outside(new):
            self._close_outside()
        if self._channel is not None:
            self._channel.cap_memory(new.limits.memory)
        self.warnings = list(warnings)
        return warnings

    def set_vars(self, *, locals: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
                 conv: dict[str, Any] | None = None) -> None:
        """Set locals, agent and conversation variables to the given values (JSON), taken literally."""
        self._call(ops.SET_VARS, locals=locals, agent=agent, conv=conv)

    def reset(self) -> None:
        """See :meth:`Session.reset`; the outside door's pooled connections close too."""
        self._call(ops.RESET)
        self._close_outside()

    @property
    def locals(self) -> dict[str, Any]:
        """Local variables (values that are not JSON come back as :class:`~..scopes.RemoteValue`)."""
        return self._request(ops.VARS, {})["locals"]

    @property
    def agent_vars(self) -> dict[str, Any]:
        """Agent variables."""
        return self._request(ops.VARS, {})["agent"]

    @property
    def conv_vars(self) -> dict[str, Any]:
        """Conversation variables."""
        return self._request(ops.VARS, {})["conv"]

    def completion_names(self) -> dict[str, str]:
        """See :meth:`Session.completion_names`."""
        return self._call(ops.COMPLETION_NAMES)

    def member_names(self, dotted: str) -> list[str]:
        """See :meth:`Session.member_names`."""
        return self._call(ops.MEMBER_NAMES, dotted)

    def describe(self, dotted: str) -> str | None:
        """See :meth:`Session.describe`."""
        return self._call(ops.DESCRIBE, dotted)

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        return self._settings.redact(text)

    def interrupt(self) -> None:
        """Stop the run in progress (from another thread): SIGINT to the worker."""
        channel = self._channel
        if channel is not None and channel.proc.poll() is None:
            self._interrupted = True  # before the signal: the worker's 'stopping' may come at once
            with contextlib.suppress(OSError):
                channel.proc.send_signal(signal.SIGINT)
