"""Framing of the worker's pipe: one message per line, capped in size, read in linear time (SPEC 12).

A message is one line of ASCII JSON ended by ``\\n`` (``json.dumps`` escapes
every newline and every non-ASCII character inside strings, so a line is
exactly one message). No line may be longer than :data:`MAX_MESSAGE` bytes.

:data:`MAX_MESSAGE` is 64 MiB, so the kernel process never holds more than
one capped line of a misbehaving worker. Output parts travel one per message
(at most ``limits.output_part_bytes``, itself at most 8 MiB, SPEC 12) and a
run's reply never carries them again, so a run's output never has to fit in
one message.

:class:`LineReader` reads lines from the worker's stdout. Its cost is linear
in the bytes read: bytes are appended to one ``bytearray``, the search for the
end of a line resumes where the last search stopped, and the consumed prefix
is dropped only when it is at least half of the buffer. It raises

* :class:`TimeoutError` when the deadline passes before a whole line arrived;
* :class:`EOFError` when the worker closed its end (it died);
  :attr:`LineReader.partial` then says whether a message was cut short;
* :class:`Oversized` as soon as a line grows past :data:`MAX_MESSAGE`, without
  reading the rest of it.
"""

from __future__ import annotations

import os
import select
import time

from ...bounds import MAX_MESSAGE, READ_CHUNK, SELECT_POLL


class Oversized(Exception):
    """A line longer than the reader's limit; ``size`` is how many bytes of it had arrived."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of more than {size} bytes, over the cap of {limit} bytes")
        self.size = size
        self.limit = limit


class LineReader:
    """Reads ``\\n``-ended lines from a file descriptor, each at most ``limit`` bytes long.

    Bytes after a line stay buffered for the next call (:attr:`pending`).
    """

    def __init__(self, fd: int, limit: int = MAX_MESSAGE) -> None:
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

    def read_line(self, deadline: float) -> bytes:
        """The next line without its newline; waits until ``deadline`` (``time.monotonic()`` seconds).

        Raises :class:`TimeoutError`, :class:`EOFError` or :class:`Oversized` (see the module docstring).
        """
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                return self._take(end)
            self._scanned = len(self._buffer)
            if self._scanned - self._start > self.limit:
                raise Oversized(self._scanned - self._start, self.limit)
            self._fill(deadline)

    def _take(self, end: int) -> bytes:
        if end - self._start > self.limit:
            raise Oversized(end - self._start, self.limit)
        line = bytes(self._buffer[self._start:end])
        self._start = self._scanned = end + 1
        if self._start == len(self._buffer):
            self._buffer.clear()
            self._start = self._scanned = 0
        elif self._start >= READ_CHUNK and 2 * self._start >= len(self._buffer):
            del self._buffer[:self._start]
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
