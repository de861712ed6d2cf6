"""One running worker as its parent sees it: the process, its pipes and its scratch folder (SPEC 12).

:class:`Channel` writes request lines to the worker's stdin and the answers to its outside calls, and reads its
messages with a :class:`~.framing.LineReader`, each under a deadline: a worker that reads nothing (its stdin pipe
full) or writes nothing holds the parent no longer than the request's time. :func:`death` names what a worker's
exit status means. :class:`~.client.IsolatedSession` owns one channel at a time.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...bounds import MEMORY_MARGIN, SELECT_POLL
from .. import confine
from ..errors import S2OError
from ..run.failures import INTERRUPTED
from . import launch, wire
from .framing import LineReader, Oversized
from .scratch import Scratch


class Channel:
    """One running worker: its process, the writer of its stdin, the reader of its stdout, and the
    scratch folder, the one place the confined worker may write (removed with the worker; :mod:`.scratch`)."""

    def __init__(self, proc: subprocess.Popen[bytes] | launch.ForkedWorker, scratch: Scratch) -> None:
        if proc.stdin is None or proc.stdout is None:  # pragma: no cover - Popen was given pipes
            raise OSError("the worker has no pipes")
        self.proc = proc
        self.scratch = scratch
        self.stdin = proc.stdin
        self._fd = proc.stdin.fileno()
        os.set_blocking(self._fd, False)  # written by :meth:`send` alone, under a deadline
        self.reader = LineReader(proc.stdout.fileno())
        #: The worker's address space after ``init``, in bytes (0 until measured).
        self.baseline = 0

    def cap_memory(self, limit: int) -> None:
        """Cap the worker's address space at its size after ``init`` + ``limit`` + :data:`MEMORY_MARGIN` bytes.

        The parent does it (``prlimit``), since the confined worker may not change its own limits
        (SPEC 12); the size is measured once, when the worker has loaded its settings and started its
        threads.
        """
        if not self.baseline:
            self.baseline = confine.vm_size(self.proc.pid)
        if self.baseline:
            with contextlib.suppress(OSError):  # the worker is gone: the next call restarts it
                confine.cap_address_space(self.proc.pid, self.baseline + limit + MEMORY_MARGIN)

    def in_step(self) -> bool:
        """The worker is alive and has sent nothing since its last reply."""
        return self.proc.poll() is None and not self.reader.readable()

    def send(self, line: bytes, deadline: float) -> None:
        """Write one line by ``deadline`` (``time.monotonic()`` seconds); raises ``TimeoutError`` when the worker has
        not read it all by then, ``OSError`` when the worker is gone."""
        with memoryview(line) as view:
            sent = 0
            while True:
                with contextlib.suppress(BlockingIOError):  # the pipe is full: wait until the worker reads
                    sent += os.write(self._fd, view[sent:])
                if sent >= len(view):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                select.select([], [self._fd], [], min(remaining, SELECT_POLL))

    def answer(self, request_id: int, make: Callable[[], Any], deadline: float,
               receipt: dict[str, Any] | None = None) -> None:
        """Write the answer to an ``outside`` event of request ``request_id`` by ``deadline``: what ``make()``
        returns, with ``receipt`` as ``make`` left it, or the ``S2OError`` it raises. Always exactly one line,
        even when ``make`` is interrupted (then ``stopped``, and the interrupt goes on); a worker gone meanwhile
        is found by the next read, one that does not read its answer by the deadline raises ``TimeoutError``."""
        try:
            result = make()
            line = wire.encode_outside_reply(request_id, result, receipt=receipt)
        except S2OError as exc:
            line = wire.encode_outside_reply(request_id, error=exc)
        except BaseException:
            with contextlib.suppress(OSError):
                self.send(wire.encode_outside_reply(request_id, error=S2OError("stopped", INTERRUPTED)), deadline)
            raise
        try:
            self.send(line, deadline)
        except TimeoutError:
            raise
        except OSError:
            pass

    def receive(self, request_id: int, deadline: float, wide: Sequence[tuple[bytes, int]] = ()
                ) -> wire.Event | wire.Reply:
        """The next message for request ``request_id``; a line that starts with one of the prefixes of ``wide`` may be
        as long as its cap (:meth:`.framing.LineReader.read_line`: output), any other
        :data:`~s2o_kernel.bounds.MAX_CONTROL_MESSAGE`.

        Raises ``TimeoutError`` at the deadline, ``EOFError`` when the worker is gone and ``S2OError``
        (``worker-protocol``, ``too-deep``) for a message over its cap, past the budgets or not of the protocol.
        """
        try:
            line = self.reader.read_line(deadline, wide)
        except Oversized as exc:
            raise wire.fault(f"a message of more than {exc.size / 2**20:.1f} MiB, over the cap of "
                             f"{exc.limit / 2**20:g} MiB") from None
        try:
            text = line.decode("ascii")
        except UnicodeDecodeError:
            raise wire.fault(f"a line that is not ASCII JSON: {wire.quote(line)}") from None
        del line  # the text alone is held while it is decoded
        return wire.decode_message(text, request_id)

    def exit_status(self, wait: float = 1.0) -> int | None:
        """The worker's exit status once it has ended (waiting up to ``wait`` seconds), else ``None``."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=wait)
        return None

    def close(self) -> None:
        """Kill the worker, close its pipes and remove its scratch folder."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.scratch.remove()


def death(status: int | None, partial: bool, cap: str = "") -> tuple[str, str]:
    """Code and message for a worker that ended during a request with exit ``status``
    (``partial``: in the middle of a message); ``cap`` names its memory cap (``limits.memory = 1 GiB``)."""
    if status in (-signal.SIGKILL, -signal.SIGSEGV):
        return "memory-limit", f"the evaluation worker ended during the run (out of memory?{' ' + cap if cap else ''})"
    if partial:
        return wire.FAULT_CODE, f"the evaluation worker ended in the middle of a message (exit status {status})"
    return "unexpected", f"the evaluation worker ended during the run (exit status {status})"
