"""The worker's stdin (``s2o_kernel/engine/worker/forward.py``, :class:`StdinReader`): the main thread reads
its own requests; the answer thread reads only while an outside answer is owed.

Real pipes (``os.pipe``), a real :class:`~s2o_kernel.engine.worker.server.Worker` and its
:class:`~s2o_kernel.engine.worker.forward.Forwarder`, a real asyncio loop in its own thread standing for
the session's loop. The whole worker process answering outside calls end to end is in
``test_outside_bridge.py`` and ``test_ask.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import pytest

from s2o_kernel.engine.errors import S2OError
from s2o_kernel.engine.outside.call import OutsideCall
from s2o_kernel.engine.worker import forward, server, wire

WAIT = 10.0  # seconds any step may take before the test fails (never a measurement)


@dataclass
class Pipes:
    """The worker's side: ``reader`` on its stdin, ``worker`` writing to ``replies``; the test writes ``requests``."""

    requests: IO[bytes]
    replies: IO[bytes]
    worker: server.Worker
    reader: forward.StdinReader
    loop: asyncio.AbstractEventLoop

    def send(self, line: bytes) -> None:
        self.requests.write(line)
        self.requests.flush()

    def call(self, request_id: int) -> concurrent.futures.Future[Any]:
        """Start an outside call of request ``request_id`` on the loop (as a run does); its future."""
        self.worker.begin(request_id)
        call = OutsideCall("ask", None, {"message": "?", "inputs": []}, "commands[0].ask", 5.0)
        return asyncio.run_coroutine_threadsafe(self.worker.forwarder.call(call), self.loop)

    def event(self) -> bytes:
        """The next line the worker wrote (the ``outside`` event of a call)."""
        return self.replies.readline()


async def _cancel(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel the calls still waiting for their answers (as a stopped run's are)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    requests, stdin = os.fdopen(req_w, "wb"), os.fdopen(req_r, "rb")
    replies, stdout = os.fdopen(rep_r, "rb"), os.fdopen(rep_w, "wb")
    worker = server.Worker(stdout)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield Pipes(requests, replies, worker, forward.StdinReader(stdin, worker.forwarder), loop)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        loop.run_until_complete(_cancel(asyncio.all_tasks(loop)))
        loop.close()
        for f in (requests, replies, stdout):
            f.close()  # stdin stays open: the reader's daemon thread may still hold it


def _next(pipes: Pipes) -> Any:
    """``next_request`` on a thread of its own, so a reader that never returns fails the test."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(pipes.reader.next_request).result(WAIT)


def test_requests_are_read_by_the_thread_that_serves_them(pipes: Pipes, monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[str] = []
    real = forward.read_request

    def spy(stdin: IO[bytes]) -> bytes | None:
        readers.append(threading.current_thread().name)
        return real(stdin)

    monkeypatch.setattr(forward, "read_request", spy)
    for n in (1, 2, 3):
        pipes.send(wire.encode_request(n, "ping", {}))
    lines = [pipes.reader.next_request() for _ in range(3)]
    assert [wire.decode_request(line)[0] for line in lines if isinstance(line, bytes)] == [1, 2, 3]
    assert readers == [threading.current_thread().name] * 3  # the answer thread read nothing


def test_an_owed_answer_is_read_while_the_main_thread_serves_the_request(pipes: Pipes) -> None:
    pipes.send(wire.encode_request(7, "run_fragment", {}))
    assert wire.decode_request(_next(pipes))[0] == 7
    # the main thread now serves request 7 and reads nothing: the run's call gets its answer all the same
    future = pipes.call(7)
    assert b'"event": "outside"' in pipes.event()
    pipes.send(wire.encode_outside_reply(7, {"name": "Ada"}))
    assert future.result(WAIT) == {"name": "Ada"}
    pipes.worker.reply(wire.encode_result(7, None))
    pipes.send(wire.encode_request(8, "ping", {}))
    assert wire.decode_request(_next(pipes))[0] == 8


def test_calls_made_at_the_same_time_get_their_answers_in_order(pipes: Pipes) -> None:
    first, second = pipes.call(3), pipes.call(3)
    pipes.event(), pipes.event()
    pipes.send(wire.encode_outside_reply(3, "one") + wire.encode_outside_reply(3, "two"))
    assert (first.result(WAIT), second.result(WAIT)) == ("one", "two")


def test_an_error_answer_raises_its_coded_error(pipes: Pipes) -> None:
    future = pipes.call(4)
    pipes.event()
    pipes.send(wire.encode_outside_reply(4, error=S2OError("api-status", "404")))
    with pytest.raises(S2OError) as exc:
        future.result(WAIT)
    assert exc.value.code == "api-status"


def test_the_answer_to_a_stopped_call_is_dropped_before_the_next_request(pipes: Pipes) -> None:
    """A stopped run's call stays owed; its answer comes before the next request and is dropped,
    whichever thread reads it."""
    future = pipes.call(5)
    pipes.event()
    pipes.loop.call_soon_threadsafe(future.cancel)  # the run was stopped: nobody awaits the answer
    pipes.worker.reply(wire.encode_error_reply(5, S2OError("stopped", "interrupted")))
    pipes.send(wire.encode_outside_reply(5, "late") + wire.encode_request(6, "ping", {}))
    assert wire.decode_request(_next(pipes))[0] == 6
    assert not pipes.worker.forwarder.owed()


def test_a_request_read_by_the_answer_thread_waits_for_the_main_thread_in_order(pipes: Pipes) -> None:
    """The parent never sends a request while an answer is owed; if it did, nothing would be lost."""
    future = pipes.call(9)
    pipes.event()
    pipes.send(wire.encode_request(10, "ping", {}) + wire.encode_request(11, "ping", {}))
    pipes.send(wire.encode_outside_reply(9, "ok"))
    assert future.result(WAIT) == "ok"
    assert [wire.decode_request(_next(pipes))[0] for _ in range(2)] == [10, 11]


def test_a_line_over_the_cap_is_an_error_and_reading_goes_on(pipes: Pipes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forward, "MAX_MESSAGE", 100)
    pipes.send(b"x" * 500 + b"\n" + wire.encode_request(1, "ping", {}))
    error = _next(pipes)
    assert isinstance(error, S2OError) and error.code == wire.FAULT_CODE
    assert wire.decode_request(_next(pipes))[0] == 1


def test_the_end_of_input_ends_the_main_threads_reading(pipes: Pipes) -> None:
    pipes.send(wire.encode_request(1, "ping", {}))
    pipes.requests.close()
    assert wire.decode_request(_next(pipes))[0] == 1
    assert _next(pipes) is None


def test_the_end_of_input_while_an_answer_is_owed_reaches_the_main_thread(pipes: Pipes) -> None:
    """The parent gone while a call waits: the main thread gets the end of input, and the waiting call ends
    ``stopped`` at once (no answer will come), so its run ends instead of waiting for its time limit."""
    future = pipes.call(2)
    pipes.event()
    pipes.requests.close()  # the parent is gone: no answer, no request
    assert _next(pipes) is None
    with pytest.raises(S2OError) as raised:
        future.result(timeout=5)
    assert raised.value.code == "stopped" and "parent process is gone" in raised.value.message
