"""The kernel's contained session: the engine's ``IsolatedSession`` plus printed text.

The engine's worker sends its replies on its stdout and points its own
``sys.stdout`` at its stderr, which it inherits from the kernel, so text that
host code prints (an allowlisted ``print``) would land in the kernel's log
instead of the notebook. :func:`make_isolated_session` returns a subclass of
``IsolatedSession`` that gives every worker its own stderr pipe, drains it in
a background thread (so a chatty run never blocks on a full pipe), and hands
what was printed to :attr:`on_print` in the kernel's thread: before each
output part of a fragment run and when each request to the worker ends. The
worker writes its printed text before its reply, so nothing printed during a
cell arrives after the cell's reply.

This relies on two private methods of ``IsolatedSession`` (``_spawn``, which
starts a worker, and ``_call``, one round trip). When the engine does not
have them, the plain ``IsolatedSession`` is used and printed text goes to the
kernel's log.
"""

from __future__ import annotations

import codecs
import os
import select
import subprocess
import sys
import threading
from typing import Any, Callable


class _StderrPump:
    """Drains one worker's stderr pipe into a shared buffer (see :class:`_Printed`)."""

    def __init__(self, fd: int, sink: _Printed) -> None:
        self.fd = fd
        self.sink = sink
        self.closed = False
        os.set_blocking(fd, False)
        self.thread = threading.Thread(target=self._run, name="s2o-worker-stderr", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.closed:
                try:
                    select.select([self.fd], [], [], 0.5)
                except (OSError, ValueError):
                    break
                if not self.read_available():
                    break
        finally:
            self.close()

    def read_available(self) -> bool:
        """Move what the pipe holds into the buffer; False at end of file."""
        with self.sink.lock:
            if self.closed:
                return False
            while True:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    return True
                except OSError:
                    return False
                if not chunk:
                    return False
                self.sink.add(chunk)

    def close(self) -> None:
        with self.sink.lock:
            if not self.closed:
                self.closed = True
                try:
                    os.close(self.fd)
                except OSError:
                    pass


class _Printed:
    """Text printed by workers, decoded as UTF-8, waiting to be shown."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.parts: list[str] = []

    def add(self, chunk: bytes) -> None:
        text = self.decoder.decode(chunk)
        if text:
            self.parts.append(text)

    def take(self) -> str:
        with self.lock:
            text, self.parts = "".join(self.parts), []
            return text


def make_isolated_session(api: Any, settings: Any) -> Any:
    """An ``IsolatedSession`` whose workers' printed text reaches :attr:`on_print`."""
    base = api.IsolatedSession
    if not (callable(getattr(base, "_spawn", None)) and callable(getattr(base, "_call", None))):
        return base(settings)
    return _subclass(base)(settings)


_SUBCLASSES: dict[type, type] = {}


def _subclass(base: type) -> type:
    cls = _SUBCLASSES.get(base)
    if cls is not None:
        return cls

    class KernelIsolatedSession(base):  # type: ignore[valid-type, misc]
        """``IsolatedSession`` that forwards what its worker prints (see the module doc)."""

        #: ``on_print(text)``: called in the caller's thread with printed text.
        on_print: Callable[[str], None] | None = None

        def __init__(self, settings: Any) -> None:
            self._printed = _Printed()
            self._pumps: list[_StderrPump] = []
            try:
                super().__init__(settings)
            except BaseException:
                # Settings the worker refuses: the caller keeps the error, not
                # this half-built session, so stop the worker now.
                self._kill()
                raise

        def _spawn(self) -> subprocess.Popen[bytes]:
            env = dict(os.environ)
            env.setdefault("MALLOC_ARENA_MAX", "2")
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            env["PYTHONUNBUFFERED"] = "1"  # print(..., end="") reaches the pipe at once
            proc = subprocess.Popen(
                [sys.executable, "-m", "s2o_kernel.engine.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                close_fds=True,
            )
            assert proc.stderr is not None
            fd = os.dup(proc.stderr.fileno())
            proc.stderr.close()
            proc.stderr = None  # the pump owns the pipe now
            self._pumps = [p for p in self._pumps if not p.closed]
            self._pumps.append(_StderrPump(fd, self._printed))
            return proc

        def take_printed(self) -> str:
            """What the worker printed since the last call (drains the pipe first)."""
            for pump in list(self._pumps):
                pump.read_available()
            return self._printed.take()

        def _deliver_printed(self) -> None:
            text = self.take_printed()
            callback = self.on_print
            if text and callback is not None:
                try:
                    callback(text)
                except Exception:  # never break a run because of the front end
                    pass

        def _call(self, request: dict[str, Any], *, timeout: float | None = None,
                  on_event: Any = None) -> Any:  # fmt: skip
            def event(reply: Any) -> None:
                self._deliver_printed()
                if on_event is not None:
                    on_event(reply)

            try:
                return super()._call(request, timeout=timeout, on_event=event)
            finally:
                self._deliver_printed()

    KernelIsolatedSession.__qualname__ = KernelIsolatedSession.__name__
    _SUBCLASSES[base] = KernelIsolatedSession
    return KernelIsolatedSession
