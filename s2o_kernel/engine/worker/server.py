"""The containment worker: a child process that runs a :class:`Session` for an :class:`IsolatedSession` (SPEC 12).

``python -m s2o_kernel.engine.worker`` reads one request per line on stdin
and writes its events and one reply per line on stdout, in the shapes of
:mod:`.wire`. It caps its own address space with ``RLIMIT_AS`` (its size
after start-up plus ``limits.memory``), so a memory bomb ends in
``MemoryError`` (code ``memory-limit``) inside the worker and never takes the
parent over the limit. Work that Python cannot interrupt in-process is
stopped by the parent killing this process (see :mod:`.client`).

Operations are the rows of :data:`.operations.OPERATIONS`, one table for both sides of the pipe (the way
ipykernel maps ``msg_type`` to ``do_*``): :meth:`Worker.handle` checks a request's arguments against its row's
schema (untrusted: exact types, no other field), calls the session method of that name (or a handler of
:data:`SPECIAL`: ``init``, ``ping``, ``run_fragment``, ``vars``) and encodes the result with the row's codec.
An unknown ``op``, an operation before ``init`` or an argument of the wrong type is a ``worker-protocol``
error reply. ``run_fragment`` sends each output part as an ``output`` event while it runs, never kept nor
sent again.

A run's outside calls (``api``, ``db``, …) go to the parent as ``outside`` events, answered by
``outside_reply`` lines on stdin (not operations: whichever thread reads stdin routes them to the
waiting call, see :mod:`.forward`). The worker's settings hold no secret value and no profile credential
(:func:`..outside.secrets.worker_settings`).

Every reply and event carries the id of its request (see :mod:`.wire`);
text that evaluated code prints travels as ``print`` events, in order with
the other events of the request (see :class:`PrintEvents`). A run (``evaluate``,
``evaluate_dynamic``, ``run_fragment``) that has gone on for
:data:`PROGRESS_AFTER` seconds gets a ``progress`` event every
:data:`PROGRESS_EVERY` seconds from a reporter thread (:meth:`Worker.report_progress`),
so a front end can show how far it has got; a run that ends sooner sends none, and none is sent
while the run waits for an outside answer (see :meth:`Worker.report_progress`). A request line
over the cap, or one that is not a request, gets a ``worker-protocol`` error
reply without an id.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from ...bounds import MAX_MESSAGE, PRINT_CHUNK, PROGRESS_AFTER, PROGRESS_EVERY
from ..errors import S2OError
from ..run.budget import text_bytes, text_limit_error
from ..run.codecache import Recorder
from ..run.engine import Engine
from ..run.progress import RunProgress
from ..run.scopes import as_json
from ..run.session import Session
from ..settings import Limits, bare_settings
from . import wire
from .forward import Forwarder, StdinReader
from .operations import OPERATIONS, STATE_FIELDS, check_fields

Request = dict[str, Any]
#: A request's arguments, checked (:meth:`.operations.Operation.checked`).
Args = dict[str, Any]


class Worker:
    """Serves requests for one session in this process; ``stdout`` is the binary reply pipe.

    :attr:`request_id` is the id of the request being answered, ``None`` between
    requests. Every event and reply carries it; output parts that arrive between
    requests are dropped (their run is over) and printed text is held (at most
    :data:`~.PRINT_CHUNK` characters) until the next request, so the
    parent never reads a message it did not ask for.
    """

    def __init__(self, stdout: IO[bytes]) -> None:
        self.session: Any = None
        #: What the OS confinement could not put in force (:attr:`..confine.Report.warnings`).
        self.confinement_warnings: list[str] = []
        self.stdout = stdout
        self.write_lock = threading.Lock()
        self.request_id: int | None = None
        self.pending_print: list[str] = []
        self.pending_chars = 0
        #: UTF-8 bytes printed during the current request (capped by ``limits.output_bytes``).
        self.printed_bytes = 0
        #: The session's door outside: calls go to the parent (:mod:`.forward`).
        self.forwarder = Forwarder(self)
        #: ``(request id, start, loops counted)`` of the run being served, ``None`` between runs.
        self.running: tuple[int, float, bool] | None = None
        #: Set by the first SIGINT of a run (:meth:`on_sigint`): the reporter thread tells the parent.
        self.wake = threading.Event()
        self.interrupted = False
        #: The sources this worker's engines compiled cold since the last reply.
        self.recorder = Recorder()

    # -- the reply pipe ----------------------------------------------------------------------
    def begin(self, request_id: int) -> None:
        """Start answering request ``request_id``."""
        with self.write_lock:
            self.request_id = request_id
            self.printed_bytes = 0

    def reply(self, line: bytes) -> None:
        """Write the encoded reply that ends the current request (printed text waiting goes first, then the
        sources compiled cold for it: the parent compiles them again for its cache, :mod:`..codecache`)."""
        with self.write_lock:
            self._flush_printed()
            cold = self.recorder.take()
            if cold and self.request_id is not None:
                self.stdout.write(wire.encode_compiled(self.request_id, cold))
            self.stdout.write(line)
            self.stdout.flush()
            self.request_id = None

    def send_line(self, line: bytes) -> None:
        """Write an event line of the current request (an ``outside`` call), printed text first."""
        with self.write_lock:
            self._flush_printed()
            self.stdout.write(line)
            self.stdout.flush()

    def send_output(self, part: dict[str, Any]) -> None:
        """Send an ``output`` event for the current request (thread-safe: it comes from the loop thread).

        Printed text waiting for its end of line goes first, so the parent sees
        everything in the order it happened. Raises ``worker-protocol`` for a
        part over its message's cap (:func:`.wire.output_cap`), which ends the run.
        """
        with self.write_lock:
            if self.request_id is None:
                return
            limits = self.session.settings.limits if self.session is not None else Limits()
            line = wire.encode_output(self.request_id, part, limits.output_part_bytes)
            self._flush_printed()
            self.stdout.write(line)
            self.stdout.flush()

    def printed(self, text: str) -> None:
        """Text printed by evaluated code: sent as ``print`` events at each end of line.

        What one request prints counts against ``limits.output_bytes`` (SPEC 12): text past it is not
        sent, and the printing code gets ``output-limit`` (raised out of ``print``, which ends the run)."""
        with self.write_lock:
            if self.request_id is None and self.pending_chars >= PRINT_CHUNK:
                return  # printed between requests by work that outlived its run: the rest is dropped
            if self.request_id is not None:
                cap = self.session.settings.limits.output_bytes if self.session is not None else MAX_MESSAGE
                size = text_bytes(text)
                if self.printed_bytes + size > cap:
                    raise text_limit_error(cap, "printed text")
                self.printed_bytes += size
            self.pending_print.append(text)
            self.pending_chars += len(text)
            if "\n" in text or self.pending_chars >= PRINT_CHUNK:
                self._flush_printed()
                self.stdout.flush()

    def _flush_printed(self) -> None:
        if self.pending_print and self.request_id is not None:
            text = "".join(self.pending_print)
            self.pending_print, self.pending_chars = [], 0
            self.stdout.write(wire.encode_print(self.request_id, text))

    def report_progress(self, now: float) -> None:
        """Send a ``progress`` event for the run being served when it has gone on for
        :data:`PROGRESS_AFTER` seconds (the loop counts for a fragment run only).

        None while the run waits for an outside answer (an ``ask``, a model, an API): the parent serves
        that call before it reads anything else, so a report sent then would be read only after the
        answer, about a moment long past, and shown as if it were now (``jupyter console`` prints only
        the first report of a display). Reports resume, fresh, once the answer has come."""
        running = self.running
        if running is None or now - running[1] < PROGRESS_AFTER:
            return
        request_id, start, loops = running
        limits = self.session.settings.limits
        counts = self.session.progress if loops else RunProgress()
        line = wire.encode_progress(request_id, counts.report(now - start, limits.time, limits.loop_iterations))
        with self.write_lock:  # checked under the lock that orders the ``outside`` event with this line
            if self.request_id == request_id and self.running is running and not self.forwarder.awaited():
                self._flush_printed()
                self.stdout.write(line)
                self.stdout.flush()

    def report_stopping(self) -> None:
        """Send a ``stopping`` event for the run being served: an interrupt reached it (the parent
        then waits for its unwinding, up to ``loop.UNWIND_WAIT``, before it would kill this worker)."""
        running = self.running
        if running is None:
            return
        line = wire.encode_stopping(running[0])
        with self.write_lock:
            if self.request_id == running[0] and self.running is running:
                self._flush_printed()
                self.stdout.write(line)
                self.stdout.flush()

    def on_sigint(self, _signum: int, _frame: Any) -> None:
        """SIGINT during a run: raise ``KeyboardInterrupt`` (the engine turns it into ``stopped``), the
        first time after waking the reporter thread to send ``stopping``. It runs only when the main
        thread runs bytecode, so a run stuck in C code (which nothing but a kill ends) never says so.
        The flag is set before the wake-up, so a second SIGINT inside ``Event.set`` does not re-enter it."""
        if not self.interrupted:
            self.interrupted = True
            self.wake.set()
        raise KeyboardInterrupt

    def _run(self, fn: Callable[[], Any], *, loops: bool = False) -> Any:
        """``fn()``, interruptible (:meth:`on_sigint`), as the run whose progress is reported.

        An evaluation (not ``loops``: a fragment run checks its own time) that returns after ``limits.time``
        is ``timedOut``: C work the watchdog's exception cannot land in (no call or backward jump; the
        watchdog's thread does not even get the GIL) ends within the parent's kill at the limit + 1 s or
        as if the kill had come, never with a value computed past the limit (SPEC 6)."""
        self.interrupted = False
        started = time.monotonic()
        self.running = (self.request_id or 0, started, loops)
        signal.signal(signal.SIGINT, self.on_sigint)
        try:
            value = fn()
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.running = None
        session = self.session
        if not loops and session is not None and time.monotonic() - started > session.engine.settings.limits.time:
            raise session.timeout_error(None)
        return value

    # -- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """``STATE``: agent, conversation and the JSON-serialisable locals (what survives a restart)."""
        s = self.session
        locs = {}
        for name, value in s.locals.items():
            data = as_json(value)
            if data is not None or value is None:
                locs[name] = data
        return {"locals": locs, "agent": s.agent_vars, "conv": s.conv_vars}

    # -- dispatch ----------------------------------------------------------------------------
    def handle(self, op: str, req: Request) -> Any:
        """The ``RESULT`` of one request, as its row of the table says; raises ``S2OError``."""
        operation = OPERATIONS.get(op)
        if operation is None:
            raise wire.fault(f"an unknown operation {wire.quote(op)}", wire.PARENT)
        if self.session is None and operation.needs_session:
            raise wire.fault(f"the operation {op!r} before init", wire.PARENT)
        args = operation.checked(req)
        if operation.special:
            special = SPECIAL.get(op)
            if special is None:
                raise wire.fault(f"the operation {op!r}, which this worker has no handler for", wire.PARENT)
            value = special(self, args)
        else:
            method = getattr(self.session, op)
            value = self._run(lambda: method(**args)) if operation.run else method(**args)
        return operation.encode(value, self.state)

    def do_init(self, args: Args) -> list[str]:
        """Make the session from the settings (SPEC 10) and ``STATE`` (each part checked); its warnings."""
        state = check_fields(STATE_FIELDS, args["state"] or {}, "init's state")
        settings = bare_settings(args["settings"])
        Engine.memory_capped = True  # the parent caps this process at limits.memory (SPEC 12)
        self.session = Session(Engine(settings, code_cache=self.recorder), locals=state["locals"],
                               agent=state["agent"], conv=state["conv"])
        self.session.outside = self.forwarder  # outside calls are made by the parent (SPEC 7.1, 12)
        # start the threads a run uses before the parent measures: the memory cap is for the evaluation alone
        self.session.warm_up()
        return [*self.confinement_warnings, *self.session.engine.warnings]

    def do_run_fragment(self, args: Args) -> Any:
        """Run the fragment, each output part sent as an ``output`` event (:meth:`send_output`) and its printed
        text as ``print`` events (:meth:`printed`)."""
        return self._run(lambda: self.session.run_fragment(
            args["fragment"], on_output=self.send_output, inputs=args["inputs"], function=args["function"],
            on_print=self.printed),
            loops=True)

    def do_vars(self, _args: Args) -> dict[str, Any]:
        """The session's locals, agent and conversation variables."""
        s = self.session
        return {"locals": s.locals, "agent": s.agent_vars, "conv": s.conv_vars}

    def do_ping(self, _args: Args) -> str:
        """``"pong"``."""
        return "pong"


#: The handlers of the operations the table flags ``special``: ``op`` → handler(worker, arguments).
SPECIAL: dict[str, Callable[[Worker, Args], Any]] = {
    "init": Worker.do_init,
    "run_fragment": Worker.do_run_fragment,
    "vars": Worker.do_vars,
    "ping": Worker.do_ping,
}


class PrintEvents:
    """``sys.stdout`` of the worker: what host code prints becomes ``print`` events on the reply pipe,
    in order with the other events of the request, so it can never corrupt the protocol."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def write(self, text: str) -> int:
        """Queue ``text`` for a ``print`` event; returns its length."""
        if text:
            self.worker.printed(str(text))
        return len(text)

    def flush(self) -> None:
        """Nothing to do: events are sent at each end of line and before every reply."""

    def isatty(self) -> bool:
        """Never a terminal."""
        return False


def _memory_text(worker: Worker) -> str:
    """The ``memory-limit`` message, naming the cap this worker runs under (SPEC 6, 12)."""
    session = worker.session
    return session.engine.out_of_memory_text() if session is not None else "the evaluation ran out of memory"


def answer(worker: Worker, line: bytes) -> bytes:
    """The encoded reply to one request line; never raises (every failure becomes an error reply)."""
    try:
        request_id, op, req = wire.decode_request(line)
    except S2OError as exc:
        return wire.encode_error_reply(None, exc)
    worker.begin(request_id)
    try:
        result = worker.handle(op, req)
        operation = OPERATIONS[op]  # handle raised for an op not in the table
        cap = wire.output_cap(worker.session.settings.limits.output_bytes) if operation.logs else None
        return wire.encode_result(request_id, result, cap)
    except S2OError as exc:
        return wire.encode_error_reply(request_id, exc)
    except MemoryError:
        return wire.encode_error_reply(request_id, S2OError("memory-limit", _memory_text(worker)))
    except KeyboardInterrupt:
        return wire.encode_error_reply(
            request_id, S2OError("stopped", "the run was interrupted; the session keeps its variables"))
    except BaseException as exc:  # never let the worker die on one request
        return wire.encode_error_reply(request_id, S2OError("unexpected", f"{type(exc).__name__}: {exc}"))


def _report_progress(worker: Worker) -> None:
    """The reporter thread: every :data:`PROGRESS_EVERY` seconds, a ``progress`` event for a long run;
    at once, a ``stopping`` event for a run an interrupt has reached."""
    while True:
        try:
            if worker.wake.wait(PROGRESS_EVERY):
                worker.wake.clear()
                worker.report_stopping()
            worker.report_progress(time.monotonic())
        except Exception:  # a report that cannot be sent is skipped; the run goes on
            continue


def main() -> int:
    """Serve requests until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kernel's process group gets every interrupt
    from .. import confine

    worker = Worker(sys.stdout.buffer)
    worker.confinement_warnings = confine.apply(confine.scratch_folder()).warnings  # before the first request
    sys.stdout = PrintEvents(worker)  # printed text travels as events, never as raw bytes
    stdin = StdinReader(sys.stdin.buffer, worker.forwarder)  # requests read here, outside answers routed
    threading.Thread(target=_report_progress, args=(worker,), name="s2o-progress", daemon=True).start()
    while True:
        line = stdin.next_request()
        if isinstance(line, S2OError):
            worker.reply(wire.encode_error_reply(None, line))
            continue
        if line is None:
            return 0
        worker.reply(answer(worker, line))
