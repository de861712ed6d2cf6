"""The worker's door to the outside world: it forwards each call to the parent (SPEC 7.1, 12).

The confined worker holds no credential and may not open a socket, so its session's
:class:`~..outside.call.Outside` is a :class:`Forwarder`: ``call`` sends the call as an ``outside``
event of the running request and waits, on the session's loop, for the parent's answer line
(``{"op": "outside_reply", …}``, :mod:`.wire`).

Reading stdin while a request runs: the worker's stdin has one reader, a thread started by
:func:`.server.main` (:class:`StdinRouter`). It routes each line that starts with
:data:`~.wire.OUTSIDE_REPLY_PREFIX` to :meth:`Forwarder.deliver` and every other line to the queue the
main thread serves requests from. The parent answers every ``outside`` event exactly once and in
order, before it reads anything else of that request, so answers are matched to waiting calls first in,
first out. A call whose run was stopped (time limit, interrupt) stays in the queue until its answer
arrives, which is then dropped. Calls of one run made at the same time (``parallel`` branches) are
served one after another by the parent.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
from typing import IO, TYPE_CHECKING, Any

from ..errors import S2OError
from ..outside.call import OutsideCall, StreamFn
from . import wire

if TYPE_CHECKING:
    from .server import Worker

Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[bytes]"]


class Forwarder:
    """The worker session's :class:`~..outside.call.Outside` (see the module doc)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._lock = threading.Lock()
        self._waiting: collections.deque[Waiter] = collections.deque()

    async def call(self, request: OutsideCall, on_stream: StreamFn | None = None) -> Any:
        """Send ``request`` to the parent and wait for its answer; raises the call's coded error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        request_id = self.worker.request_id
        if request_id is None:
            raise S2OError("unexpected", "an outside call outside a request")
        with self._lock:  # the event goes out in the order of the waiters
            self._waiting.append((loop, future))
            self.worker.send_line(wire.encode_outside(request_id, request))
        reply = wire.decode_outside_reply(await future, request_id)
        if reply.error is not None:
            raise reply.error
        return reply.result

    def deliver(self, line: bytes) -> None:
        """Hand an answer line to the oldest waiting call (from the stdin thread); dropped when that call
        was stopped meanwhile, or when no call waits."""
        with self._lock:
            waiter = self._waiting.popleft() if self._waiting else None
        if waiter is None:
            return
        loop, future = waiter

        def settle() -> None:
            if not future.done():
                future.set_result(line)

        if not loop.is_closed():
            loop.call_soon_threadsafe(settle)

    def close(self) -> None:
        """Nothing to release: the worker pools nothing."""


class StdinRouter:
    """The one reader of the worker's stdin (see the module doc): ``requests`` gets each request line,
    an ``S2OError`` for a line over the cap, and ``None`` at the end of input."""

    def __init__(self, stdin: IO[bytes], forwarder: Forwarder) -> None:
        self.requests: queue.Queue[bytes | S2OError | None] = queue.Queue()
        self._stdin = stdin
        self._forwarder = forwarder
        threading.Thread(target=self._run, name="s2o-worker-stdin", daemon=True).start()

    def _run(self) -> None:
        from .server import read_request

        while True:
            try:
                line = read_request(self._stdin)
            except S2OError as exc:
                self.requests.put(exc)
                continue
            if line is None:
                self.requests.put(None)
                return
            if line.startswith(wire.OUTSIDE_REPLY_PREFIX):
                self._forwarder.deliver(line)
            else:
                self.requests.put(line)
