"""The worker's door to the outside world: it forwards each call to the parent (SPEC 7.1, 12).

The confined worker holds no credential and may not open a socket, so its session's
:class:`~..outside.call.Outside` is a :class:`Forwarder`: ``call`` sends the call as an ``outside``
event of the running request and waits, on the session's loop, for the parent's answer line
(``{"op": "outside_reply", …}``, :mod:`.wire`). A call larger than its parent accepts
(:func:`.calls.check_size`) is refused here, with the code the parent would give it.

Reading stdin (:class:`StdinReader`): the worker's main thread reads its own request lines between
requests, so a request wakes the one thread that serves it (a separate reader thread handing each line
over cost a second cross-core wake-up per request; docs/performance.md, "Round trip"). While a run
waits for an outside answer the main thread is busy serving it, so a second thread reads stdin then,
and only then: it sleeps until :class:`Forwarder` owes an answer. A lock lets exactly one thread read
at a time. Both route a line the same way: one that starts with :data:`~.wire.OUTSIDE_REPLY_PREFIX` goes
to :meth:`Forwarder.deliver`, any other is a request for the main thread (a request the answer thread
reads, which the parent never sends while an answer is owed, is held for the main thread in order).

The parent answers every ``outside`` event exactly once and in order, before it reads anything else of
that request, so answers are matched to waiting calls first in, first out, and an answer always comes
before the next request. A call whose run was stopped (time limit, interrupt) stays owed until its answer
arrives, which is then dropped (read by either thread). Calls of one run made at the same time
(``parallel`` branches) are served one after another by the parent.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import IO, Any, Protocol, TypeGuard

from ...bounds import MAX_MESSAGE, READ_CHUNK
from ..errors import S2OError
from ..outside.call import RECEIPT, OutsideCall, StreamFn
from . import wire
from .calls import check_size

Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[bytes]"]


class Sender(Protocol):
    """What the forwarder needs of the worker (:class:`.server.Worker`): the request being answered and its
    pipe to the parent."""

    @property
    def request_id(self) -> int | None:
        """The id of the request being answered, ``None`` between requests."""

    def send_line(self, line: bytes) -> None:
        """Write one message line to the parent."""


class Forwarder:
    """The worker session's :class:`~..outside.call.Outside` (see the module doc)."""

    def __init__(self, worker: Sender) -> None:
        self.worker = worker
        #: Guards :attr:`_waiting`; notified when a call starts waiting (the answer thread wakes).
        self._owed = threading.Condition()
        self._waiting: collections.deque[Waiter] = collections.deque()
        #: Set once the parent is gone (the end of stdin): no answer will ever come.
        self._gone = False

    async def call(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Send ``request`` to the parent and wait for its answer; raises the call's coded error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        request_id = self.worker.request_id
        if request_id is None:
            raise S2OError("unexpected", "an outside call outside a request")
        try:
            check_size(request)  # as the parent checks it: a larger call would be taken for a lie
        except S2OError as exc:
            raise S2OError(exc.code, f"the outside call is too large to send ({exc.message})",
                           path=request.path) from None
        with self._owed:  # the event goes out in the order of the waiters
            if self._gone:
                raise S2OError("stopped", PARENT_GONE, path=request.path)
            self._waiting.append((loop, future))
            self.worker.send_line(wire.encode_outside(request_id, request))
            self._owed.notify()
        reply = wire.decode_outside_reply(await future, request_id)
        if reply.error is not None:
            raise reply.error
        receipt = RECEIPT.get()
        if receipt is not None and reply.receipt:
            receipt.update(reply.receipt)
        return reply.result

    def deliver(self, line: bytes) -> None:
        """Hand an answer line to the oldest waiting call (from either stdin reader); dropped when that
        call was stopped meanwhile, or when no call waits."""
        with self._owed:
            waiter = self._waiting.popleft() if self._waiting else None
        if waiter is None:
            return
        loop, future = waiter

        def settle() -> None:
            if not future.done():
                future.set_result(line)

        if not loop.is_closed():
            loop.call_soon_threadsafe(settle)

    def orphaned(self) -> None:
        """The parent is gone (stdin ended while an answer was owed): every waiting call, and every call after,
        ends ``stopped`` now, so the run ends at once instead of at its time limit and the worker exits."""
        with self._owed:
            self._gone = True
            waiters, self._waiting = list(self._waiting), collections.deque()
        for loop, future in waiters:
            def fail(future: asyncio.Future[bytes] = future) -> None:
                if not future.done():
                    future.set_exception(S2OError("stopped", PARENT_GONE))

            if not loop.is_closed():
                loop.call_soon_threadsafe(fail)

    def owed(self) -> bool:
        """Whether some call waits for its answer."""
        with self._owed:
            return bool(self._waiting)

    def awaited(self) -> bool:
        """Whether some call waits for its answer, read without :attr:`_owed`'s lock (one atomic read of
        the deque), so a caller holding the worker's write lock, which :meth:`call` takes inside that
        lock, cannot deadlock with it."""
        return bool(self._waiting)

    def wait_owed(self) -> None:
        """Block until some call waits for its answer."""
        with self._owed:
            self._owed.wait_for(lambda: bool(self._waiting))

    def close(self) -> None:
        """Nothing to release: the worker pools nothing."""


Line = bytes | S2OError | None

#: What a call waiting for the parent's answer ends with when the parent is gone.
PARENT_GONE = "the worker's parent process is gone: no answer will come"


def _is_answer(line: Line) -> TypeGuard[bytes]:
    return isinstance(line, bytes) and line.startswith(wire.OUTSIDE_REPLY_PREFIX)


class StdinReader:
    """The worker's stdin (see the module doc): :meth:`next_request` on the main thread, and the answer
    thread started here, which reads only while :class:`Forwarder` owes an answer.

    A line is ``bytes`` (with its newline), an ``S2OError`` (``worker-protocol``) for a line over the cap,
    or ``None`` at the end of input.
    """

    def __init__(self, stdin: IO[bytes], forwarder: Forwarder) -> None:
        self._stdin = stdin
        self._forwarder = forwarder
        #: Held by the one thread reading stdin.
        self._turn = threading.Lock()
        #: Request lines (or the end of input) the answer thread read, for the main thread, oldest first.
        self._held: collections.deque[Line] = collections.deque()
        threading.Thread(target=self._read_answers, name="s2o-worker-answers", daemon=True).start()

    def _read(self) -> Line:
        """The next line of stdin; the caller holds :attr:`_turn`."""
        try:
            return read_request(self._stdin)
        except S2OError as exc:
            return exc

    def next_request(self) -> Line:
        """The next request line for the main thread (answers read meanwhile go to the forwarder)."""
        while True:
            with self._turn:
                line = self._held.popleft() if self._held else self._read()
                if not _is_answer(line):
                    return line
                self._forwarder.deliver(line)  # the answer to a call whose run was stopped: dropped

    def _read_answers(self) -> None:
        """The answer thread: read stdin while an answer is owed (the main thread serves a request).

        A line is delivered while the thread holds :attr:`_turn`, so answers reach the forwarder in the
        order they were read whichever thread read them.
        """
        while True:
            self._forwarder.wait_owed()
            with self._turn:
                if not self._forwarder.owed():  # the main thread read it meanwhile
                    continue
                line = self._read()
                if _is_answer(line):
                    self._forwarder.deliver(line)
                    continue
                self._held.append(line)
                if line is None:
                    self._forwarder.orphaned()  # the parent is gone: the waiting call gets no answer
                    return  # the end of input: nothing more to read


def read_request(stdin: IO[bytes]) -> bytes | None:
    """The next request line (at most :data:`~.framing.MAX_MESSAGE` bytes), ``None`` at the end of input.

    A line over the cap is read to its end and dropped; raises ``worker-protocol`` for it.
    """
    line = stdin.readline(MAX_MESSAGE + 1)
    if line.endswith(b"\n"):
        return line
    if len(line) <= MAX_MESSAGE:
        return None  # stdin closed (a last line without its newline is not a request)
    size = len(line)
    while line and not line.endswith(b"\n"):
        line = stdin.readline(READ_CHUNK)
        size += len(line)
    raise wire.too_large("the request", size)
