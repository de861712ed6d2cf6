"""A worker that lies, and the fresh process that measures what it costs its parent (issue 30, SPEC 7.1, 12).

**The hostile worker** (:func:`main`) is a real process on the worker's pipes: a fork of its parent
(``IsolatedSession(worker_main=main)``, :func:`s2o_kernel.engine.worker.launch.fork_worker`) that speaks the
protocol as the real worker does: one request per line read as :func:`~s2o_kernel.engine.worker.forward.read_request`
reads it, every request served by the real :class:`~s2o_kernel.engine.worker.server.Worker`, one line per message.
Its language rules have failed, so it sends what it likes: a request ``evaluate`` of ``"attack: NAME"`` (or
``run_fragment`` of ``{"attack": NAME}``, for a row whose name starts ``run-``) is answered by the forgery
:data:`FORGERIES` ``[NAME]`` instead (huge lines, amplifying and deep JSON, forged
``outside`` calls, an unsolicited ``stopping``, replies for other requests, bytes that are not the protocol, a pipe
it never reads), written as the real worker writes (``json.dumps`` lines) or as raw bytes where the row is about
bytes. A restarted worker is forked again and serves honestly until the next attack.

**The measure** (``python hostile_worker.py measure [--limit SECONDS] NAME …``, one fresh interpreter) makes one
contained session of this worker with variables to keep (and a time limit of :data:`LIMIT`, or ``SECONDS``), then for each row sends its attack and prints one JSON line: what the
session reported (the error's code and whether it says the worker was restarted, or the value), the seconds the
call took, the bytes the process grew by while it ran (``VmHWM`` after the row less ``VmRSS`` before it: the
freed memory given back and the peak reset to the resident size first, so every byte the row makes resident
counts, Python's or not), whether the kernel's door outside was opened (work done for an outside call), and
whether the session then answered for itself with its variables restored. ``tests/security/test_hostile_worker.py``
holds the table of rows and judges them.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from s2o_kernel.engine import IsolatedSession, S2OError, make_settings
from s2o_kernel.engine.worker import forward, server, wire

#: The time limit of the session the measure makes (``--limit`` sets another): short, so rows the parent must
#: time out are quick.
LIMIT = 2.0
#: What the session holds before every row, and must hold after it (the last good state, SPEC 12).
KEPT = {"locals": {"kept": 41}, "agent": {"visits": 3}, "conv": {"turns": 2}}
#: A request is an attack when its text starts so.
ATTACK = "attack: "
#: Seconds after which the measure interrupts the run of a row that waits for an interrupt.
INTERRUPT_AFTER = 0.3
MIB = 1 << 20


class Forger:
    """What a forgery writes with: the attacked request's id, the reply pipe, the request pipe."""

    def __init__(self, request_id: int, out: IO[bytes], stdin: IO[bytes]) -> None:
        self.id = request_id
        self.out = out
        self.stdin = stdin

    def write(self, data: bytes) -> None:
        """Write ``data`` now; a parent that has stopped reading (it killed this worker) ends the process."""
        try:
            self.out.write(data)
            self.out.flush()
        except OSError:
            os._exit(0)

    def line(self, message: Any) -> None:
        """One message, framed as the real worker frames it (``json.dumps``, ASCII, one line)."""
        self.write(json.dumps(message).encode() + b"\n")

    def long_line(self, head: bytes, unit: bytes, size: int, tail: bytes) -> None:
        """A line of about ``size`` bytes: ``head``, ``unit`` over and over, ``tail`` and its newline, written a
        mebibyte at a time (the parent may stop reading at its cap: then this process ends)."""
        self.write(head)
        chunk = unit * max(1, MIB // len(unit))
        for _ in range(max(1, size // len(chunk))):
            self.write(chunk)
        self.write(tail + b"\n")

    def outside(self, call: dict[str, Any]) -> None:
        """An ``outside`` event asking the parent to make ``call`` (an ``api`` call to ``echo`` unless it says)."""
        self.line({"id": self.id, "event": "outside", "call": {
            "kind": "api", "profile": "echo", "fields": {"method": "POST", "path": "/x", "has_body": True},
            "path": "commands[0].api", "timeout": 20, "secrets_used": [], **call}})

    def value(self, value: Any) -> None:
        """The honest reply to the attacked ``evaluate``: ``value``."""
        self.write(wire.encode_result(self.id, wire.encode_value(value)))

    def hang(self) -> None:
        """Say nothing more; the parent kills this process."""
        time.sleep(60)
        os._exit(0)


def _deep(levels: int) -> Any:
    value: Any = [1]
    for _ in range(levels - 1):
        value = [value]
    return value


def _interrupted(forger: Forger) -> None:
    """Say ``stopping`` when the parent's interrupt comes, then nothing more."""
    signal.signal(signal.SIGINT, lambda *_: forger.line({"id": forger.id, "event": "stopping"}))
    forger.hang()


def _served_then(forger: Forger) -> None:
    """Read the parent's answer to the forged call, then reply as an honest worker would."""
    forger.stdin.readline()
    forger.value("served")


def _never_ending(forger: Forger) -> None:
    while True:
        forger.write(b"x" * 1000)
        time.sleep(0.05)


def _progress_flood(forger: Forger) -> None:
    line = wire.encode_progress(forger.id, {"elapsed": 2.5, "time_limit": 2.0, "passes": 1, "longest": 1,
                                            "loop_limit": 10})
    while True:
        forger.write(line * 200)


def _print_flood(forger: Forger) -> None:
    while True:
        forger.write(wire.encode_print(forger.id, "x" * MIB))


def _closes_its_end(forger: Forger) -> None:
    os.close(1)
    forger.hang()


#: The forgeries, by row name (see the module doc). Sizes are the issue's: 60 MiB lines; lines just under the
#: 16 MiB cap for what the parent must decode to judge.
FORGERIES: dict[str, Callable[[Forger], None]] = {
    # -- lines too long, JSON that amplifies, JSON too deep ------------------------------------------------------
    "huge-reply": lambda f: f.long_line(b'{"id": %d, "ok": true, "result": [' % f.id, b"[],", 60 * MIB, b"[]]}"),
    "run-huge-reply": lambda f: f.long_line(b'{"id": %d, "ok": true, "result": [' % f.id, b"[],", 60 * MIB, b"[]]}"),
    "amplifying-reply": lambda f: f.long_line(b'{"id": %d, "ok": true, "result": [' % f.id, b"[],", 15 * MIB,
                                              b"[]]}"),
    "amplifying-with-strings": lambda f: f.long_line(b'{"id": %d, "ok": true, "result": [' % f.id, b'[],"",',
                                                     15 * MIB, b"[]]}"),
    "dense-within-budget": lambda f: f.line({"id": f.id, "ok": True, "result": {
        "repr": "dense", "json": [{"k": {}} for _ in range(64_000)]}}),
    "deep-reply": lambda f: f.line({"id": f.id, "ok": True, "result": {"repr": "deep", "json": _deep(300)}}),
    "deep-unclosed": lambda f: f.long_line(b'{"id": %d, "ok": true, "result": ' % f.id, b"[", 10 * MIB, b""),
    "huge-output-event": lambda f: f.long_line(
        b'{"id": %d, "event": "output", "part": {"type": "text", "text": "' % f.id, b"x", 60 * MIB, b'"}}'),
    "huge-print-event": lambda f: f.long_line(b'{"id": %d, "event": "print", "text": "' % f.id, b"x", 60 * MIB,
                                              b'"}'),
    # -- forged outside calls ---------------------------------------------------------------------------------------
    "outside-huge-body": lambda f: f.long_line(
        b'{"id": %d, "event": "outside", "call": {"kind": "api", "profile": "echo", "path": "commands[0].api", '
        b'"timeout": 20, "secrets_used": [], "fields": {"method": "POST", "path": "/x", "has_body": true, '
        b'"body": "' % f.id, b"x", 60 * MIB, b'"}}}'),
    "outside-amplifying-body": lambda f: f.long_line(
        b'{"id": %d, "event": "outside", "call": {"kind": "api", "profile": "echo", "path": "commands[0].api", '
        b'"timeout": 20, "secrets_used": [], "fields": {"method": "POST", "path": "/x", "has_body": true, '
        b'"body": [' % f.id, b"[],", 15 * MIB, b"[]]}}}"),
    "outside-too-many-values": lambda f: f.outside({"fields": {"method": "POST", "has_body": True,
                                                               "body": list(range(20_000))}}),
    "outside-deep-fields": lambda f: f.outside({"fields": {"method": "POST", "has_body": True, "body": _deep(202)}}),
    "outside-unknown-profile": lambda f: f.outside({"profile": "nope"}),
    "outside-no-profile": lambda f: f.outside({"profile": None}),
    "outside-unknown-field": lambda f: f.outside({"fields": {"method": "GET", "url": "http://127.0.0.1:9/"}}),
    "outside-wrong-field-type": lambda f: f.outside({"kind": "db", "profile": "demo", "fields": {
        "sql": ["SELECT 1"], "params": {}, "max_rows": 10}}),
    "outside-wrong-shape": lambda f: f.outside({"timeout": "soon"}),
    "outside-unknown-secret": lambda f: f.outside({"secrets_used": ["NOT_A_SECRET"]}),
    "outside-long-path": lambda f: f.outside({"path": "commands[0]." + "x" * 70_000}),
    "outside-at-the-caps": lambda f: (f.outside({"fields": {"method": "POST", "has_body": True,
                                                            "body": list(range(16_000))}}), _served_then(f)),
    "outside-never-reads-its-answer": lambda f: (f.outside({"fields": {"method": "POST", "has_body": True,
                                                                       "body": "y" * MIB}}), f.hang()),
    # -- events out of turn ---------------------------------------------------------------------------------------
    "unsolicited-stopping": lambda f: (f.line({"id": f.id, "event": "stopping"}), f.hang()),
    "stopping-after-interrupt": _interrupted,
    "reply-for-another-request": lambda f: f.write(wire.encode_result(f.id + 7, wire.encode_value(7))),
    "event-for-another-request": lambda f: f.write(wire.encode_print(f.id - 1, "earlier\n")),
    "compiled-long-source": lambda f: f.line({"id": f.id, "event": "compiled", "sources": [["x" * 5000, None]]}),
    "progress-flood": _progress_flood,
    "print-flood": _print_flood,
    # -- bytes that are not the protocol, silence ---------------------------------------------------------------------
    "garbage": lambda f: f.write(bytes(range(256)).replace(b"\n", b"") * 4 + b"\n"),
    "not-utf8": lambda f: f.write(b'{"id": %d, "ok": true, "result": {"repr": "\xff\xfe", "json": null}}\n' % f.id),
    "not-ascii": lambda f: f.write(b'{"id": %d, "ok": true, "result": {"repr": "%s", "json": null}}\n'
                                   % (f.id, "\u00e9t\u00e9".encode())),
    "never-ending-line": _never_ending,
    "silence": lambda f: f.hang(),
    "closes-its-end": _closes_its_end,
}


def _attack(line: bytes) -> str | None:
    """The row a request line attacks with, or ``None`` for a request to serve: an ``evaluate`` of
    ``"attack: NAME"``, or a ``run_fragment`` of ``{"attack": NAME}`` (a row whose name starts ``run-``)."""
    if ATTACK.strip(": ").encode() not in line:
        return None
    request = json.loads(line)
    if request.get("op") == "run_fragment" and isinstance(request.get("fragment"), dict):
        name = request["fragment"].get("attack")
        return name if isinstance(name, str) else None
    expr = request.get("expr") if request.get("op") == "evaluate" else None
    return expr[len(ATTACK):] if isinstance(expr, str) and expr.startswith(ATTACK) else None


def main() -> int:
    """The hostile worker (see the module doc): the real worker's loop, but for the attacks."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the real worker, between requests
    out = sys.stdout.buffer
    worker = server.Worker(out)
    sys.stdout = server.PrintEvents(worker)  # type: ignore[assignment]
    stdin = sys.stdin.buffer
    while True:
        try:
            line = forward.read_request(stdin)
        except S2OError as exc:
            worker.reply(wire.encode_error_reply(None, exc))
            continue
        if line is None:
            return 0
        name = _attack(line)
        if name is None:
            worker.reply(server.answer(worker, line))
        else:
            FORGERIES[name](Forger(json.loads(line)["id"], out, stdin))


# -- the measure (a fresh process) -----------------------------------------------------------------------------------


def _status(field: str) -> int:
    """A field of ``/proc/self/status`` in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def _run(session: IsolatedSession, name: str) -> dict[str, Any]:
    """Send row ``name``'s attack; what the session reported."""
    timer = threading.Timer(INTERRUPT_AFTER, session.interrupt) if name == "stopping-after-interrupt" else None
    if timer is not None:
        timer.start()
    try:
        if name.startswith("run-"):
            run = session.run_fragment({"attack": name})
            if run.error is not None:
                raise run.error
            value = run.value
        else:
            value = session.evaluate(ATTACK + name)
    except S2OError as exc:
        return {"code": exc.code, "message": exc.message, "restarted": "restarted" in (exc.details or {})}
    finally:
        if timer is not None:
            timer.cancel()
    return {"value": value if isinstance(value, (str, int)) else repr(value)[:40]}


def _trim() -> None:
    """Give the memory the process has freed back to the system, so the next row's growth is measured from a
    tight ``VmRSS`` (memory kept for reuse would hide what a row allocates again)."""
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)


def measure(names: list[str], limit: float = LIMIT) -> None:
    """Print one JSON line per row of ``names`` (see the module doc), in a session of time limit ``limit``."""
    session = IsolatedSession(make_settings({"limits": {"time": limit}}), worker_main=main)
    try:
        for name in names:
            session.set_vars(**KEPT)
            session._close_outside()  # the door is opened by an outside call the parent serves, and only then
            _trim()
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")  # VmHWM back to VmRSS (Linux 4.0)
            before = _status("VmRSS")
            start = time.monotonic()
            row = _run(session, name)
            row["elapsed"] = time.monotonic() - start
            row["grown"] = _status("VmHWM") - before
            row["door_opened"] = session._outside is not None
            row["usable"] = (session.evaluate("kept + 1"), session.agent_vars, session.conv_vars) == (
                42, KEPT["agent"], KEPT["conv"])
            print(json.dumps({"name": name, **row}), flush=True)
    finally:
        session.close()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] != ["measure"]:
        sys.exit("usage: hostile_worker.py measure [--limit SECONDS] NAME …")
    limit = float(arguments[2]) if arguments[1:2] == ["--limit"] else LIMIT
    with contextlib.suppress(BrokenPipeError):
        measure(arguments[3:] if arguments[1:2] == ["--limit"] else arguments[1:], limit)
