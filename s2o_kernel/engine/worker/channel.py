"""One running worker as its parent sees it: the process, its pipes and its scratch folder (SPEC 12).

:class:`Channel` writes request lines to the worker's stdin and reads its messages with a
:class:`~.framing.LineReader` under a deadline, and writes the answers to its outside calls; :func:`death`
names what a worker's exit status means.
:class:`~.client.IsolatedSession` owns one channel at a time.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable
from typing import Any

from ...bounds import MEMORY_MARGIN
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

    def send(self, line: bytes) -> None:
        """Write one request line; raises ``OSError`` when the worker is gone."""
        self.stdin.write(line)
        self.stdin.flush()

    def answer(self, request_id: int, make: Callable[[], Any]) -> None:
        """Write the answer to an ``outside`` event of request ``request_id``: what ``make()`` returns, or the
        ``S2OError`` it raises. Always exactly one line, even when ``make`` is interrupted (then ``stopped``, and
        the interrupt goes on); a worker gone meanwhile is found by the next read."""
        try:
            line = wire.encode_outside_reply(request_id, make())
        except S2OError as exc:
            line = wire.encode_outside_reply(request_id, error=exc)
        except BaseException:
            with contextlib.suppress(OSError):
                self.send(wire.encode_outside_reply(request_id, error=S2OError("stopped", INTERRUPTED)))
            raise
        with contextlib.suppress(OSError):
            self.send(line)

    def receive(self, request_id: int, deadline: float) -> wire.Event | wire.Reply:
        """The next message for request ``request_id``.

        Raises ``TimeoutError`` at the deadline, ``EOFError`` when the worker is gone and
        ``S2OError`` (``worker-protocol``) for a message over the cap or not of the protocol.
        """
        try:
            line = self.reader.read_line(deadline)
        except Oversized as exc:
            raise wire.fault(f"a message of more than {exc.size / 2**20:.1f} MiB, over the cap of "
                             f"{exc.limit / 2**20:g} MiB") from None
        return wire.decode_message(line, request_id)

    def exit_status(self) -> int | None:
        """The worker's exit status once it has ended (waiting up to a second), else ``None``."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=1)
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
