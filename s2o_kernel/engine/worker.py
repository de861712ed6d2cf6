"""The containment worker: a child process that runs a :class:`Session` for an :class:`IsolatedSession` (SPEC 12).

``python -m s2o_kernel.engine.worker`` reads one JSON request per line on
stdin and writes one JSON reply per line on stdout. Before it reads the first
request it confines itself (:mod:`.confine`: no processes, programs, sockets
or writes outside its scratch folder, no change of its limits); its ``init``
reply's warnings say which mechanism is unavailable. The parent caps its
address space with ``RLIMIT_AS`` (its size after start-up plus
``limits.memory``), so a memory bomb ends in ``MemoryError`` (code
``memory-limit``) inside the worker and never takes the parent over the
limit. Work that Python cannot interrupt in-process is stopped by the
parent killing this process (see :mod:`.isolated`). Only JSON crosses the
pipe, never pickles: a compromised worker cannot make the parent run code.

Requests are ``{"op": NAME, ...}``; replies are ``{"ok": true, "result": …}``
or ``{"ok": false, "error": {code, message, line, col, path, stage, errors?}}``.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

#: Longest ``repr`` sent back, in characters.
MAX_REPR = 1_000_000


def display(value: Any) -> dict[str, Any]:
    """``{"repr": text, "json": JSON or null}`` for a value, never raising."""
    from .scopes import as_json

    try:
        text = repr(value)
    except Exception as exc:  # e.g. an int too large to convert to text
        text = f"<{type(value).__name__} object: repr failed with {type(exc).__name__}>"
    if len(text) > MAX_REPR:
        return {"repr": text[:MAX_REPR] + " … (truncated)", "json": None}
    data = as_json(value)
    if data is not None:
        try:
            json.dumps(data)
        except (ValueError, TypeError):
            data = None
    return {"repr": text, "json": data}


def error_dict(exc: Any) -> dict[str, Any]:
    """An :class:`S2OError` (or group) as JSON for the pipe."""
    out = {"code": exc.code, "message": exc.message, "line": exc.line, "col": exc.col, "path": exc.path,
           "stage": exc.stage, "source": exc.source, "details": exc.details, "python_type": exc.python_type}
    errors = getattr(exc, "errors", None)
    if errors:
        out["errors"] = [error_dict(e) for e in errors]
    return out


class Worker:
    """Serves requests for one session in this process."""

    def __init__(self, stdout: Any = None) -> None:
        import threading

        self.session: Any = None
        #: What the OS confinement could not put in force (:attr:`.confine.Report.warnings`).
        self.confinement_warnings: list[str] = []
        self.stdout = stdout
        self.write_lock = threading.Lock()
        self.pending_print: list[str] = []

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON line to the parent (thread-safe: output events come from the loop thread).

        Printed text waiting for its end of line goes first, so the parent sees
        everything in the order it happened.
        """
        try:
            data = json.dumps(message)
        except (TypeError, ValueError) as exc:
            data = json.dumps({"ok": False, "error": {"code": "unexpected", "stage": "run",
                                                      "message": f"the reply could not be sent: {exc}"}})
        with self.write_lock:
            self._flush_printed()
            self.stdout.write(data.encode() + b"\n")
            self.stdout.flush()

    def printed(self, text: str) -> None:
        """Text printed by evaluated code: sent as a ``print`` event at each end of line."""
        with self.write_lock:
            self.pending_print.append(text)
            if "\n" in text:
                self._flush_printed()
                self.stdout.flush()

    def _flush_printed(self) -> None:
        if self.pending_print:
            text = "".join(self.pending_print)
            self.pending_print = []
            self.stdout.write(json.dumps({"event": "print", "text": text}).encode() + b"\n")

    def state(self) -> dict[str, Any]:
        """Agent, conversation and the JSON-serialisable locals: what survives a restart."""
        from .scopes import as_json

        s = self.session
        locs = {}
        for name, value in s.locals.items():
            data = as_json(value)
            if data is not None or value is None:
                locs[name] = data
        return {"locals": locs, "agent": s.agent_vars, "conv": s.conv_vars}

    def handle(self, req: dict[str, Any]) -> Any:
        op = req["op"]
        if op == "init":
            from .evaluation import Engine, Session
            from .settings import make_settings

            settings = make_settings(req["settings"])
            state = req.get("state") or {}
            self.session = Session(Engine(settings), locals=state.get("locals"), agent=state.get("agent"),
                                   conv=state.get("conv"))
            # start the threads a run uses before the parent measures: the memory cap is for the evaluation alone
            self.session.warm_up()
            return {"warnings": [*self.confinement_warnings, *self.session.engine.warnings]}
        s = self.session
        if op == "evaluate":
            return display(self._interruptible(s.evaluate, req["expr"]))
        if op == "evaluate_dynamic":
            return display(self._interruptible(s.evaluate_dynamic, req["text"]))
        if op == "run_fragment":
            def on_output(part: dict[str, Any]) -> None:
                self.send({"event": "output", "part": part})

            run = self._interruptible(lambda: s.run_fragment(req["fragment"], on_output=on_output,
                                                             inputs=req.get("inputs"), function=req.get("function")))
            return {"code": run.code, "value": display(run.value) if run.value is not None else None,
                    "outputs": run.outputs, "logs": run.logs,
                    "error": error_dict(run.error) if run.error is not None else None, "state": self.state()}
        if op == "validate":
            v = s.validate(req["expr"])
            return {"errors": [error_dict(e) for e in v.errors], "allowlist_names": sorted(v.allowlist_names),
                    "local_names": sorted(v.local_names), "secrets": sorted(v.secrets)}
        if op == "update_settings":
            return {"warnings": s.update_settings(req["patch"])}
        if op == "set_vars":
            for name, value in (req.get("locals") or {}).items():
                s.set_local(name, value)
            for name, value in (req.get("agent") or {}).items():
                s.set_agent(name, value)
            for name, value in (req.get("conv") or {}).items():
                s.set_conv(name, value)
            return {"state": self.state()}
        if op == "reset":
            s.reset()
            return {"state": self.state()}
        if op == "vars":
            return {"locals": {k: display(v) for k, v in s.locals.items()}, "agent": s.agent_vars,
                    "conv": s.conv_vars}
        if op == "completion_names":
            return s.completion_names()
        if op == "member_names":
            return s.member_names(req["dotted"])
        if op == "describe":
            return s.describe(req["dotted"])
        if op == "ping":
            return "pong"
        raise ValueError(f"unknown op {op!r}")

    def _interruptible(self, fn: Any, *args: Any) -> Any:
        """Run ``fn`` with SIGINT raising ``KeyboardInterrupt`` (the engine turns it into ``stopped``)."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return fn(*args)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


class _PrintEvents:
    """``sys.stdout`` of the worker: what host code prints becomes ``print`` events on the reply pipe,
    in order with the other events of the request, so it can never corrupt the protocol."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, worker: "Worker") -> None:
        self.worker = worker

    def write(self, text: str) -> int:
        if text:
            self.worker.printed(str(text))
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


def main() -> int:
    """Serve requests until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kernel's process group gets every interrupt
    from . import confine
    from .errors import S2OError

    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    worker = Worker(stdout)
    worker.confinement_warnings = confine.apply(confine.scratch_folder()).warnings  # before the first request
    sys.stdout = _PrintEvents(worker)  # printed text travels as events, never as raw bytes
    while True:
        line = stdin.readline()
        if not line:
            return 0
        try:
            req = json.loads(line)
            reply = {"ok": True, "result": worker.handle(req)}
        except S2OError as exc:
            reply = {"ok": False, "error": error_dict(exc)}
        except MemoryError:
            reply = {"ok": False, "error": {"code": "memory-limit", "message": "the evaluation ran out of memory",
                                            "stage": "run"}}
        except KeyboardInterrupt:
            reply = {"ok": False, "error": {"code": "stopped", "stage": "run",
                                            "message": "the run was interrupted; the session keeps its variables"}}
        except BaseException as exc:  # never let the worker die on one request
            reply = {"ok": False, "error": {"code": "unexpected", "stage": "run",
                                            "message": f"{type(exc).__name__}: {exc}"}}
        worker.send(reply)


if __name__ == "__main__":
    sys.exit(main())
