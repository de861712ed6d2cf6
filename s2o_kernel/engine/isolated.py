"""Containment by process: :class:`IsolatedSession` runs a session in a supervised worker (SPEC 6, 12).

Some work cannot be stopped from inside the interpreter: a C-level loop
(``max(itertools.count())``, ``collections.deque(itertools.count(), 0)``) or
one huge allocation. ``IsolatedSession`` has the same interface as
:class:`~.evaluation.Session`, but every run happens in a child process
(:mod:`.worker`) that

* is confined by the operating system (:mod:`.confine`: no processes,
  programs, sockets or writes outside a scratch folder this parent makes and
  removes),
* has its address space capped by this parent at its start-up size plus
  ``limits.memory`` (a memory bomb ends as ``memory-limit`` inside the
  child; the confined child cannot change its own limits), and
* is killed by this parent when a run goes past ``limits.time`` plus
  :data:`KILL_GRACE` seconds (pure-Python work is already stopped in the
  child at the limit by its watchdog), then restarted from the last good
  state: agent and conversation variables and every JSON-serialisable local.

An interrupt (SIGINT to the kernel's process group, or :meth:`interrupt`)
reaches the child, which ends the run with ``stopped``; a child that does not
answer within :data:`INTERRUPT_GRACE` seconds is killed and restarted.

Values come back as JSON: a JSON value that round-trips exactly is returned
as is; anything else is a :class:`~.scopes.RemoteValue` holding its ``repr``
and JSON form.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from . import confine
from .errors import ErrorGroup, S2OError
from .evaluation import RunResult, Validation
from .scopes import RemoteValue
from .settings import Settings, make_settings, merge

#: Seconds past ``limits.time`` before a silent worker is killed.
KILL_GRACE = 1.0
#: Seconds an interrupted worker has to answer before it is killed.
INTERRUPT_GRACE = 1.0
#: ``details["restarted"]`` of an error after which the worker was restarted.
RESTARTED = ("the evaluation worker was stopped and restarted with the agent and conversation variables "
             "and every JSON-serialisable local")
#: Seconds a new worker has to start and load the settings.
START_TIMEOUT = 30.0
#: Address space allowed beyond ``limits.memory`` for the worker's own bookkeeping, in bytes
#: (its threads and their stacks exist before the size is measured).
MEMORY_MARGIN = 64 << 20


def _error_from(data: dict[str, Any]) -> S2OError:
    errors = data.get("errors")
    if errors:
        group = ErrorGroup([_error_from(e) for e in errors])
        group.code = data.get("code", group.code)
        group.message = data.get("message", group.message)
        group.path = data.get("path")
        group.stage = data.get("stage") or group.stage
        group.line, group.col = data.get("line"), data.get("col")
        return group
    return S2OError(data.get("code", "unexpected"), data.get("message", ""), line=data.get("line"),
                    col=data.get("col"), path=data.get("path"), stage=data.get("stage") or "run",
                    source=data.get("source"), details=data.get("details"), python_type=data.get("python_type"))


def _value_from(data: dict[str, Any] | None) -> Any:
    if data is None:
        return None
    value = data.get("json")
    if value is not None and repr(value) == data["repr"]:
        return value
    if data["repr"] == "None":
        return None
    return RemoteValue(data["repr"], value)


class _WorkerGone(Exception):
    """The worker died or was killed."""


class IsolatedSession:
    """A :class:`~.evaluation.Session` whose runs happen in a supervised child process.

    ``IsolatedSession(settings)`` starts the worker at once; raises
    ``S2OError`` (stage ``load``) when the settings do not load. The public
    methods are those of ``Session``; each call is one round trip to the
    worker. Not thread-safe: one call at a time (``interrupt`` excepted).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings if settings is not None else Settings()
        self._state: dict[str, Any] = {"locals": {}, "agent": {}, "conv": {}}
        self._proc: subprocess.Popen[bytes] | None = None
        self._scratch: str | None = None
        self._baseline = 0
        self._lock = threading.Lock()
        self.restarts = 0
        self._init_pending = False
        self._buffer = b""
        #: ``on_print(text)``: called in the caller's thread with text that evaluated code printed,
        #: in order with the run's output parts; ``None`` drops it.
        self.on_print: Any = None
        try:
            self.warnings = self._start()
        except BaseException:
            self._kill()  # refused settings: no worker is left behind
            raise

    # -- worker lifecycle ----------------------------------------------------
    def _spawn(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.setdefault("MALLOC_ARENA_MAX", "2")
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # the one folder the confined worker may write to; removed when it ends (_kill)
        self._scratch = env[confine.SCRATCH_ENV] = tempfile.mkdtemp(prefix="s2o-worker-")
        self._baseline = 0
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "s2o_kernel.engine.worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=env, close_fds=True,
            )
        except OSError:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
            raise

    def _start(self) -> list[str]:
        self._proc = self._spawn()
        reply = self._call({"op": "init", "settings": self._settings_data(), "state": self._state},
                           timeout=START_TIMEOUT)
        self._cap_memory()
        return reply["warnings"]

    def _cap_memory(self) -> None:
        """Cap the worker's address space at its size after ``init`` + ``limits.memory`` + :data:`MEMORY_MARGIN`.

        The parent does it (``prlimit``), since the confined worker may not
        change its own limits (SPEC 12); the size is measured once per worker,
        when it has loaded its settings and started its threads.
        """
        proc = self._proc
        if proc is None:
            return
        if not self._baseline:
            self._baseline = confine.vm_size(proc.pid)
        if self._baseline:
            with contextlib.suppress(OSError):  # the worker is gone: the next call restarts it
                confine.cap_address_space(proc.pid, self._baseline + self._settings.limits.memory + MEMORY_MARGIN)

    def _settings_data(self) -> dict[str, Any]:
        return self._settings.to_dict()

    def _kill(self) -> None:
        proc = self._proc
        self._proc = None
        self._buffer = b""
        if proc is None:
            return
        try:
            proc.kill()
        except OSError:
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

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
        init = {"op": "init", "settings": self._settings_data(), "state": self._state}
        self._proc.stdin.write(json.dumps(init).encode() + b"\n")
        self._proc.stdin.flush()
        self._init_pending = True

    def _finish_init(self) -> None:
        self._init_pending = False
        try:
            line = self._read_line(time.monotonic() + START_TIMEOUT)
        except (TimeoutError, _WorkerGone):
            self._kill()
            return
        reply = json.loads(line)
        if not reply.get("ok"):
            self._kill()
            return
        self._cap_memory()

    def close(self) -> None:
        """Stop the worker."""
        self._kill()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self._kill()
        except Exception:
            pass

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

    def _call(self, request: dict[str, Any], *, timeout: float | None = None,
              on_event: Any = None) -> Any:
        """Send one request and return its result; raises ``S2OError`` for an error reply."""
        if self._init_pending:
            self._finish_init()
        if self._proc is None or self._proc.poll() is not None:
            self._proc = None
            self._restart_quietly()
            self._finish_init()
            if self._proc is None:
                raise S2OError("unexpected", "the evaluation worker could not be started")
        limit = self._settings.limits.time
        deadline = time.monotonic() + (timeout if timeout is not None else limit + KILL_GRACE)
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._restart_quietly()
            raise S2OError("unexpected", "the evaluation worker stopped; it was restarted with the last good state")
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
        reply = json.loads(line)
        while "event" in reply:
            if reply["event"] == "print":
                if self.on_print is not None:
                    self.on_print(reply["text"])
            elif on_event is not None:
                on_event(reply)
            line = self._read_line(deadline)
            reply = json.loads(line)
        if reply.get("ok"):
            return reply["result"]
        raise _error_from(reply["error"])

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
        return _value_from(self._call({"op": "evaluate", "expr": expr}))

    def evaluate_dynamic(self, text: str) -> Any:
        """See :meth:`Session.evaluate_dynamic`."""
        return _value_from(self._call({"op": "evaluate_dynamic", "text": text}))

    async def evaluate_async(self, expr: str) -> Any:
        """See :meth:`Session.evaluate_async`; the round trip runs in a thread."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.evaluate, expr)

    def run_fragment(self, fragment: Any, *, on_output: Any = None, inputs: dict[str, Any] | None = None,
                     function: str | None = None) -> RunResult:
        """See :meth:`Session.run_fragment`; a stopped or killed worker gives the matching result code.

        ``on_output`` is called with each output part as the worker produces it.
        """
        def on_event(event: dict[str, Any]) -> None:
            if on_output is not None and event.get("event") == "output":
                on_output(event["part"])

        try:
            data = self._call({"op": "run_fragment", "fragment": fragment, "inputs": inputs, "function": function},
                              on_event=on_event)
        except S2OError as exc:
            code = {"timedOut": "timedOut", "stopped": "stopped"}.get(exc.code, "errorInAgent")
            return RunResult(code=code, error=exc)
        self._state = data["state"]
        return RunResult(code=data["code"], value=_value_from(data["value"]), outputs=data["outputs"],
                         logs=data["logs"], error=_error_from(data["error"]) if data["error"] else None)

    def validate(self, expr: str) -> Validation:
        """See :meth:`Session.validate`."""
        data = self._call({"op": "validate", "expr": expr})
        return Validation([_error_from(e) for e in data["errors"]], set(data["allowlist_names"]),
                          set(data["local_names"]), set(data["secrets"]))

    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        """See :meth:`Session.update_settings` (all or nothing)."""
        new = make_settings(merge(self._settings.to_dict(), patch))
        result = self._call({"op": "update_settings", "patch": patch})
        self._settings = new
        self._cap_memory()
        self.warnings = list(result["warnings"])
        return result["warnings"]

    def set_vars(self, *, locals: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
                 conv: dict[str, Any] | None = None) -> None:
        """Set locals, agent and conversation variables to the given values (JSON), taken literally."""
        self._state = self._call({"op": "set_vars", "locals": locals, "agent": agent, "conv": conv})["state"]

    def reset(self) -> None:
        """See :meth:`Session.reset`."""
        self._state = self._call({"op": "reset"})["state"]

    def _vars(self) -> dict[str, Any]:
        return self._call({"op": "vars"})

    @property
    def locals(self) -> dict[str, Any]:
        """Local variables (values that are not JSON come back as :class:`RemoteValue`)."""
        return {k: _value_from(v) for k, v in self._vars()["locals"].items()}

    @property
    def agent_vars(self) -> dict[str, Any]:
        """Agent variables."""
        return self._vars()["agent"]

    @property
    def conv_vars(self) -> dict[str, Any]:
        """Conversation variables."""
        return self._vars()["conv"]

    def completion_names(self) -> dict[str, str]:
        """See :meth:`Session.completion_names`."""
        return self._call({"op": "completion_names"}, timeout=5)

    def member_names(self, dotted: str) -> list[str]:
        """See :meth:`Session.member_names`."""
        return self._call({"op": "member_names", "dotted": dotted}, timeout=5)

    def describe(self, dotted: str) -> str | None:
        """See :meth:`Session.describe`."""
        return self._call({"op": "describe", "dotted": dotted}, timeout=5)

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
            try:
                proc.send_signal(signal.SIGINT)
            except OSError:
                pass
