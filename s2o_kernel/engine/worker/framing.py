"""Framing of the worker's pipe: one message per line, capped in size, read in linear time (SPEC 12).

A message is one line of ASCII JSON ended by ``\\n`` (``json.dumps`` escapes
every newline and every non-ASCII character inside strings, so a line is
exactly one message). Each line has a cap, in bytes, without its newline:

* a request of the parent, at most :data:`MAX_MESSAGE` (64 MiB);
* a message of the worker, which the parent does not trust, at most
  :data:`MAX_CONTROL_MESSAGE` (16 MiB), but for output: a line that starts as
  an ``output`` event (:func:`.wire.output_prefix`) may be as long as a part of
  ``limits.output_part_bytes`` written as JSON, and the reply of a run, which
  carries its log lines, as long as ``limits.output_bytes`` of them
  (:func:`.wire.output_cap`, at most :data:`MAX_MESSAGE`). Output parts travel
  one per message and a run's reply never carries them again, so a run's
  output never has to fit in one.

:class:`LineReader` reads lines from the worker's stdout. Its cost is linear
in the bytes read: bytes are appended to one ``bytearray``, the search for the
end of a line resumes where the last search stopped, and the consumed prefix
is dropped (the rest copied to a new buffer, so its memory is given back) only
when it is at least half of the buffer. A line is copied out once. It raises

* :class:`TimeoutError` when the deadline passes before a whole line arrived, or
  before the line is asked for (a worker that sends line after line, each of
  them costly to read, holds its reader no longer than the deadline either);
* :class:`EOFError` when the worker closed its end (it died);
  :attr:`LineReader.partial` then says whether a message was cut short;
* :class:`Oversized` as soon as a line grows past its cap, without reading the
  rest of it: the kernel's process holds at most one capped line (and one
  read) of a misbehaving worker.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Sequence

from ...bounds import MAX_CONTROL_MESSAGE, READ_CHUNK, SELECT_POLL


class Oversized(Exception):
    """A line longer than the reader's limit; ``size`` is how many bytes of it had arrived."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of more than {size} bytes, over the cap of {limit} bytes")
        self.size = size
        self.limit = limit


class LineReader:
    """Reads ``\\n``-ended lines from a file descriptor, each at most ``limit`` bytes long (but see
    :meth:`read_line`'s ``wide``).

    Bytes after a line stay buffered for the next call (:attr:`pending`).
    """

    def __init__(self, fd: int, limit: int = MAX_CONTROL_MESSAGE) -> None:
        self.fd = fd
        self.limit = limit
        self._buffer = bytearray()
        self._start = 0  # first byte not yet returned
        self._scanned = 0  # bytes before this offset hold no newline after _start

    @property
    def pending(self) -> bool:
        """Bytes have arrived that no returned line holds."""
        return len(self._buffer) > self._start

    @property
    def partial(self) -> bool:
        """Same as :attr:`pending`: after an :class:`EOFError`, the last message was cut short."""
        return self.pending

    def readable(self) -> bool:
        """Bytes (or the end of the pipe) wait to be read: buffered, or ready on the descriptor now."""
        if self.pending:
            return True
        ready, _, _ = select.select([self.fd], [], [], 0)
        return bool(ready)

    def read_line(self, deadline: float, wide: Sequence[tuple[bytes, int]] = ()) -> bytes:
        """The next line without its newline; waits until ``deadline`` (``time.monotonic()`` seconds).

        ``wide`` holds ``(prefix, cap)`` pairs: a line that starts with ``prefix`` may be up to ``cap`` bytes long
        instead of :attr:`limit` (an ``output`` event, a run's reply). Raises :class:`TimeoutError`,
        :class:`EOFError` or :class:`Oversized` (see the module docstring).
        """
        if time.monotonic() >= deadline:  # even with lines waiting: reading each one costs the reader time
            raise TimeoutError
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                return self._take(end, wide)
            self._scanned = len(self._buffer)
            self._check(self._scanned, wide)
            self._fill(deadline)

    def _check(self, end: int, wide: Sequence[tuple[bytes, int]]) -> None:
        """Raise :class:`Oversized` when the line from :attr:`_start` to ``end`` is past its cap."""
        size = end - self._start
        if size <= self.limit:
            return
        limit = max([self.limit, *(cap for prefix, cap in wide if self._buffer.startswith(prefix, self._start))])
        if size > limit:
            raise Oversized(size, limit)

    def _take(self, end: int, wide: Sequence[tuple[bytes, int]]) -> bytes:
        self._check(end, wide)
        with memoryview(self._buffer) as view:
            line = bytes(view[self._start:end])
        self._start = self._scanned = end + 1
        if self._start == len(self._buffer):
            self._buffer = bytearray()
            self._start = self._scanned = 0
        elif self._start >= READ_CHUNK and 2 * self._start >= len(self._buffer):
            self._buffer = self._buffer[self._start:]
            self._scanned -= self._start
            self._start = 0
        return line

    def _fill(self, deadline: float) -> None:
        """Append what the pipe has within the deadline (at least one byte); raises at the deadline or EOF."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], min(remaining, SELECT_POLL))
            if ready:
                break
        chunk = os.read(self.fd, READ_CHUNK)
        if not chunk:
            raise EOFError
        self._buffer += chunk
