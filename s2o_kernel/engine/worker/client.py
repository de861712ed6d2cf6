"""Containment by process: :class:`IsolatedSession` runs a session in a supervised worker (SPEC 6, 12).

Some work cannot be stopped from inside the interpreter: a C-level loop
(``max(itertools.count())``, ``collections.deque(itertools.count(), 0)``) or
one huge allocation. ``IsolatedSession`` has the same interface as
:class:`~..evaluation.Session`, but every run happens in a child process
(:mod:`.server`) that

* caps its own address space at its start-up size plus ``limits.memory``
  (a memory bomb ends as ``memory-limit`` inside the child), and
* is killed by this parent when a run goes past ``limits.time`` plus
  :data:`KILL_GRACE` seconds (pure-Python work is already stopped in the
  child at the limit by its watchdog), then restarted from the last good
  state: agent and conversation variables and every JSON-serialisable local.

An interrupt (SIGINT to the kernel's process group, or :meth:`interrupt`)
reaches the child, which ends the run with ``stopped``; a child that does not
answer within :data:`INTERRUPT_GRACE` seconds is killed and restarted.

Values come back as JSON: a JSON value that round-trips exactly is returned
as is; anything else is a :class:`~..scopes.RemoteValue` holding its ``repr``
and JSON form. Every message is decoded and type-checked by :mod:`.wire`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from ..errors import S2OError
from ..evaluation import RunResult, Validation
from ..settings import Settings, make_settings, merge
from . import wire

#: Seconds past ``limits.time`` before a silent worker is killed.
KILL_GRACE = 1.0
#: Seconds an interrupted worker has to answer before it is killed.
INTERRUPT_GRACE = 1.0
#: ``details["restarted"]`` of an error after which the worker was restarted.
RESTARTED = ("the evaluation worker was stopped and restarted with the agent and conversation variables "
             "and every JSON-serialisable local")
#: Seconds a new worker has to start and load the settings.
START_TIMEOUT = 30.0


class _WorkerGone(Exception):
    """The worker died or was killed."""


OnEvent = Callable[[wire.Event], None]


class IsolatedSession:
    """A :class:`~..evaluation.Session` whose runs happen in a supervised child process.

    ``IsolatedSession(settings)`` starts the worker at once; raises
    ``S2OError`` (stage ``load``) when the settings do not load. The public
    methods are those of ``Session``; each call is one round trip to the
    worker. Not thread-safe: one call at a time (``interrupt`` excepted).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings if settings is not None else Settings()
        self._state: dict[str, Any] = {"locals": {}, "agent": {}, "conv": {}}
        self._proc: subprocess.Popen[bytes] | None = None
        #: How many times the worker was killed and started again.
        self.restarts = 0
        self._init_pending = False
        self._buffer = b""
        #: ``on_print(text)``: called in the caller's thread with text that evaluated code printed,
        #: in order with the run's output parts; ``None`` drops it.
        self.on_print: Callable[[str], None] | None = None
        try:
            self.warnings = self._start()
        except BaseException:
            self._kill()  # refused settings: no worker is left behind
            raise

    # -- worker lifecycle ----------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The process id of the running worker, or ``None`` when there is none (after :meth:`close`)."""
        proc = self._proc
        return proc.pid if proc is not None else None

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.setdefault("MALLOC_ARENA_MAX", "2")
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return subprocess.Popen(
            [sys.executable, "-m", "s2o_kernel.engine.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=env, close_fds=True,
        )

    def _init_request(self) -> bytes:
        return wire.encode_request("init", {"settings": self._settings.to_dict(), "state": self._state})

    def _start(self) -> list[str]:
        self._proc = self._spawn()
        return wire.decode_warnings(self._call_line(self._init_request(), timeout=START_TIMEOUT))

    def _kill(self) -> None:
        proc = self._proc
        self._proc = None
        self._buffer = b""
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)

    def _restart(self) -> None:
        """Kill the worker and start a new one from the last good state.

        The new worker's ``init`` request is sent now and its reply read
        before the next request, so a killed run reports back without
        waiting for the new worker to start.
        """
        self._kill()
        self.restarts += 1
        self._proc = self._spawn()
        assert self._proc.stdin is not None
        self._proc.stdin.write(self._init_request())
        self._proc.stdin.flush()
        self._init_pending = True

    def _finish_init(self) -> None:
        self._init_pending = False
        try:
            message = wire.decode_message(self._read_line(time.monotonic() + START_TIMEOUT))
        except (TimeoutError, _WorkerGone, S2OError):
            self._kill()
            return
        if not isinstance(message, wire.Reply) or message.error is not None:
            self._kill()

    def close(self) -> None:
        """Stop the worker."""
        self._kill()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self._kill()

    # -- protocol -------------------------------------------------------------
    def _read_line(self, deadline: float) -> bytes:
        """One line from the worker; bytes after it stay buffered for the next call."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise _WorkerGone
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _call(self, op: str, fields: dict[str, Any] | None = None, *, timeout: float | None = None,
              on_event: OnEvent | None = None) -> Any:
        """Send one request and return its result; raises ``S2OError`` for an error reply."""
        if self._init_pending:
            self._finish_init()
        if self._proc is None or self._proc.poll() is not None:
            self._proc = None
            self._restart_quietly()
            self._finish_init()
            if self._proc is None:
                raise S2OError("unexpected", "the evaluation worker could not be started")
        return self._call_line(wire.encode_request(op, fields or {}), timeout=timeout, on_event=on_event)

    def _call_line(self, request: bytes, *, timeout: float | None = None, on_event: OnEvent | None = None) -> Any:
        limit = self._settings.limits.time
        deadline = time.monotonic() + (timeout if timeout is not None else limit + KILL_GRACE)
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
        except OSError:
            self._restart_quietly()
            raise S2OError("unexpected",
                           "the evaluation worker stopped; it was restarted with the last good state") from None
        try:
            line = self._read_line(deadline)
        except KeyboardInterrupt:
            # the worker got the same SIGINT; give it a moment to answer 'stopped'
            try:
                line = self._read_line(time.monotonic() + INTERRUPT_GRACE)
            except (TimeoutError, _WorkerGone, KeyboardInterrupt):
                self._restart_quietly()
                raise S2OError("stopped", "the run was interrupted; the session keeps its variables",
                               details={"restarted": RESTARTED}) from None
        except TimeoutError:
            self._restart_quietly()
            raise S2OError("timedOut", f"the run took longer than the time limit (limits.time = {limit:g} s)",
                           details={"restarted": RESTARTED}) from None
        except _WorkerGone:
            code = self._proc.poll() if self._proc else None
            self._restart_quietly()
            raise S2OError("memory-limit" if code in (-signal.SIGKILL, -signal.SIGSEGV) else "unexpected",
                           "the evaluation worker ended during the run (out of memory?)",
                           details={"restarted": RESTARTED}) from None
        message = wire.decode_message(line)
        while isinstance(message, wire.Event):
            if message.kind == "print":
                if self.on_print is not None:
                    self.on_print(message.payload)
            elif on_event is not None:
                on_event(message)
            message = wire.decode_message(self._read_line(deadline))
        if message.error is not None:
            raise message.error
        return message.result

    def _restart_quietly(self) -> None:
        try:
            self._restart()
        except OSError:
            self._proc = None

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
        return wire.decode_value(self._call("evaluate", {"expr": expr}))

    def evaluate_dynamic(self, text: str) -> Any:
        """See :meth:`Session.evaluate_dynamic`."""
        return wire.decode_value(self._call("evaluate_dynamic", {"text": text}))

    async def evaluate_async(self, expr: str) -> Any:
        """See :meth:`Session.evaluate_async`; the round trip runs in a thread."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.evaluate, expr)

    def run_fragment(self, fragment: Any, *, on_output: Callable[[dict[str, Any]], None] | None = None,
                     inputs: dict[str, Any] | None = None, function: str | None = None) -> RunResult:
        """See :meth:`Session.run_fragment`; a stopped or killed worker gives the matching result code.

        ``on_output`` is called with each output part as the worker produces it.
        """
        def on_event(event: wire.Event) -> None:
            if on_output is not None and event.kind == "output":
                on_output(event.payload)

        try:
            data = self._call("run_fragment", {"fragment": fragment, "inputs": inputs, "function": function},
                              on_event=on_event)
            run, self._state = wire.decode_run(data)
        except S2OError as exc:
            code = {"timedOut": "timedOut", "stopped": "stopped"}.get(exc.code, "errorInAgent")
            return RunResult(code=code, error=exc)
        return run

    def validate(self, expr: str) -> Validation:
        """See :meth:`Session.validate`."""
        return wire.decode_validation(self._call("validate", {"expr": expr}))

    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        """See :meth:`Session.update_settings` (all or nothing)."""
        new = make_settings(merge(self._settings.to_dict(), patch))
        warnings = wire.decode_warnings(self._call("update_settings", {"patch": patch}))
        self._settings = new
        self.warnings = list(warnings)
        return warnings

    def set_vars(self, *, locals: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
                 conv: dict[str, Any] | None = None) -> None:
        """Set locals, agent and conversation variables to the given values (JSON), taken literally."""
        result = self._call("set_vars", {"locals": locals, "agent": agent, "conv": conv})
        self._state = wire.decode_state(wire.decode_object(result).get("state"))

    def reset(self) -> None:
        """See :meth:`Session.reset`."""
        self._state = wire.decode_state(wire.decode_object(self._call("reset")).get("state"))

    def _vars(self) -> dict[str, Any]:
        return wire.decode_vars(self._call("vars"))

    @property
    def locals(self) -> dict[str, Any]:
        """Local variables (values that are not JSON come back as :class:`~..scopes.RemoteValue`)."""
        return {k: wire.decode_value(v) for k, v in self._vars()["locals"].items()}

    @property
    def agent_vars(self) -> dict[str, Any]:
        """Agent variables."""
        agent: dict[str, Any] = self._vars()["agent"]
        return agent

    @property
    def conv_vars(self) -> dict[str, Any]:
        """Conversation variables."""
        conv: dict[str, Any] = self._vars()["conv"]
        return conv

    def completion_names(self) -> dict[str, str]:
        """See :meth:`Session.completion_names`."""
        return wire.decode_names(self._call("completion_names", timeout=5))

    def member_names(self, dotted: str) -> list[str]:
        """See :meth:`Session.member_names`."""
        return wire.decode_strings(self._call("member_names", {"dotted": dotted}, timeout=5))

    def describe(self, dotted: str) -> str | None:
        """See :meth:`Session.describe`."""
        return wire.decode_text(self._call("describe", {"dotted": dotted}, timeout=5))

    def take_printed(self) -> str:
        """Printed text not yet handed to :attr:`on_print` (always empty: it is delivered as it comes)."""
        return ""

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        return self._settings.redact(text)

    def interrupt(self) -> None:
        """Stop the run in progress (from another thread): SIGINT to the worker."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGINT)
