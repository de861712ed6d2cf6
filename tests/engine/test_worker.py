"""The containment worker package (``s2o_kernel.engine.worker``): framing, wire format, server and client.

* :mod:`~s2o_kernel.engine.worker.framing`: the line reader on a real pipe (split and joined
  lines, the size cap, a worker gone in the middle of a message, the deadline);
* :mod:`~s2o_kernel.engine.worker.wire`: every decoder refuses what is not the protocol
  (wrong id, wrong type, lying ``str`` subclasses) with the coded error ``worker-protocol``,
  and an error code the registry does not know becomes ``unexpected``;
* :mod:`~s2o_kernel.engine.worker.server`: the handlers of the table's special operations, ids on
  every message, nothing sent between requests;
* :class:`IsolatedSession` with a real worker: a flood of log lines and a worker that breaks
  the protocol (a granted ``os`` writes to the reply pipe, as a compromised worker would) end
  the call with a coded error, and the next calls answer for themselves with the variables kept
  (SPEC 12).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from s2o_kernel.bounds import MAX_OUTPUT_PART
from s2o_kernel.engine import (
    IsolatedSession,
    RunResult,
    S2OError,
    Validation,
    bare_settings,
    make_settings,
)
from s2o_kernel.engine.codes import CODES
from s2o_kernel.engine.errors import ErrorGroup
from s2o_kernel.engine.run.scopes import RemoteValue
from s2o_kernel.engine.worker import forward, framing, operations, server, wire

pytestmark = pytest.mark.timeout(120)


# -- framing -------------------------------------------------------------------------------------


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    try:
        yield r, w
    finally:
        for fd in (r, w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _soon() -> float:
    return time.monotonic() + 5


def test_reader_splits_joined_lines_and_joins_split_ones(pipe: tuple[int, int]) -> None:
    r, w = pipe
    reader = framing.LineReader(r)
    os.write(w, b"one\ntwo\nthr")
    assert reader.read_line(_soon()) == b"one"
    assert reader.read_line(_soon()) == b"two"
    assert reader.pending
    os.write(w, b"ee\n\n")
    assert reader.read_line(_soon()) == b"three"
    assert reader.read_line(_soon()) == b""
    assert not reader.pending


def test_reader_reads_many_lines_larger_than_its_chunk(pipe: tuple[int, int]) -> None:
    r, w = pipe
    lines = [bytes([65 + i % 26]) * (framing.READ_CHUNK // 3 + i) for i in range(40)]
    writer = threading.Thread(target=lambda: [os.write(w, line + b"\n") for line in lines])
    writer.start()
    reader = framing.LineReader(r)
    try:
        assert [reader.read_line(_soon()) for _ in lines] == lines
    finally:
        writer.join()


@pytest.mark.parametrize("ending", [b"", b"\n"])
def test_reader_refuses_a_line_over_its_limit(pipe: tuple[int, int], ending: bytes) -> None:
    r, w = pipe
    reader = framing.LineReader(r, limit=100)
    os.write(w, b"x" * 100 + b"\n")
    assert reader.read_line(_soon()) == b"x" * 100
    os.write(w, b"y" * 101 + ending)
    with pytest.raises(framing.Oversized):
        reader.read_line(_soon())


def test_reader_stops_at_the_cap_without_reading_the_rest(pipe: tuple[int, int]) -> None:
    """An endless line is refused once it passes the cap: the reader holds at most the cap and a chunk."""
    r, w = pipe
    stop = threading.Event()

    def flood() -> None:
        block = b"z" * 65536
        try:
            while not stop.is_set():
                os.write(w, block)
        except OSError:
            pass

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    reader = framing.LineReader(r, limit=4 * framing.READ_CHUNK)
    with pytest.raises(framing.Oversized) as info:
        reader.read_line(time.monotonic() + 30)
    assert 4 * framing.READ_CHUNK < info.value.size <= 5 * framing.READ_CHUNK
    stop.set()
    os.close(r)
    writer.join(timeout=5)


def test_reader_reports_a_message_cut_short(pipe: tuple[int, int]) -> None:
    r, w = pipe
    reader = framing.LineReader(r)
    os.write(w, b'{"id": 1, "ok": tr')
    os.close(w)
    with pytest.raises(EOFError):
        reader.read_line(_soon())
    assert reader.partial


def test_reader_reports_a_closed_pipe_between_messages(pipe: tuple[int, int]) -> None:
    r, w = pipe
    reader = framing.LineReader(r)
    os.write(w, b"last\n")
    os.close(w)
    assert reader.read_line(_soon()) == b"last"
    with pytest.raises(EOFError):
        reader.read_line(_soon())
    assert not reader.partial


def test_reader_times_out(pipe: tuple[int, int]) -> None:
    r, w = pipe
    reader = framing.LineReader(r)
    os.write(w, b"no end")
    with pytest.raises(TimeoutError):
        reader.read_line(time.monotonic() + 0.05)
    assert reader.readable()


# -- the wire format -----------------------------------------------------------------------------


def _fault(exc: pytest.ExceptionInfo[S2OError]) -> None:
    assert exc.value.code == "worker-protocol"


def test_request_round_trip() -> None:
    line = wire.encode_request(7, "evaluate", {"expr": "1 + 1"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert wire.decode_request(line) == (7, "evaluate", {"expr": "1 + 1", "id": 7, "op": "evaluate"})


@pytest.mark.parametrize("line", [b"nope", b"[1]", b'{"op": "ping"}', b'{"id": "1", "op": "ping"}',
                                  b'{"id": true, "op": "ping"}', b'{"id": 1, "op": 5}'])
def test_a_request_that_is_not_one_is_a_coded_error(line: bytes) -> None:
    with pytest.raises(S2OError) as exc:
        wire.decode_request(line)
    _fault(exc)


def test_reply_and_events_round_trip() -> None:
    assert wire.decode_message(wire.encode_result(3, {"a": [1]}), 3) == wire.Reply({"a": [1]}, None)
    reply = wire.decode_message(wire.encode_error_reply(3, S2OError("runtime", "boom", line=1, col=2)), 3)
    assert isinstance(reply, wire.Reply) and reply.error is not None
    assert (reply.error.code, reply.error.message, reply.error.line, reply.error.col) == ("runtime", "boom", 1, 2)
    part = {"type": "text", "text": "hello"}
    assert wire.decode_message(wire.encode_output(3, part, 1 << 20), 3) == wire.Event("output", part)
    assert wire.decode_message(wire.encode_print(3, "hi\n"), 3) == wire.Event("print", "hi\n")
    progress = {"elapsed": 2.5, "time_limit": 30.0, "passes": 7, "longest": 3, "loop_limit": 10000}
    assert wire.decode_message(wire.encode_progress(3, progress), 3) == wire.Event("progress", progress)
    assert wire.decode_message(wire.encode_stopping(3), 3) == wire.Event("stopping", None)


@pytest.mark.parametrize("message", [
    {"id": 4, "ok": True, "result": 1},  # another request's reply
    {"id": True, "ok": True, "result": 1},  # True == 1, but not an int
    {"id": "1", "ok": True, "result": 1},
    {"ok": True, "result": 1},
    {"id": 1, "ok": True},  # no result
    {"id": 1, "ok": "yes", "result": 1},
    {"id": 1, "event": "print", "text": 5},
    {"id": 1, "event": "output", "part": "text"},
    {"id": 1, "event": "output", "part": {"type": "text", "text": ["not", "text"]}},
    {"id": 1, "event": "output", "part": {"text": "no type"}},
    {"id": 1, "event": "bell"},
    {"id": 1, "event": "progress", "progress": "2.5 s"},
    {"id": 1, "event": "progress", "progress": {"elapsed": 2.5}},  # fields missing
    {"id": 1, "event": "progress", "progress": {"elapsed": 2, "time_limit": 30.0, "passes": 7, "longest": 3,
                                                "loop_limit": 10000}},  # an int where a float belongs
    {"id": 1, "event": "progress", "progress": {"elapsed": 2.5, "time_limit": 30.0, "passes": True, "longest": 3,
                                                "loop_limit": 10000}},  # True is no count
    {"id": 1, "event": "progress", "progress": {"elapsed": 2.5, "time_limit": 30.0, "passes": 7, "longest": 3,
                                                "loop_limit": 10000, "more": 1}},
    {"id": 1, "event": "stopping", "why": "no fields"},
    {"id": 1, "ok": False, "error": "boom"},
    [1, 2],
])
def test_a_message_that_breaks_the_protocol_is_a_coded_error(message: Any) -> None:
    with pytest.raises(S2OError) as exc:
        wire.decode_message(json.dumps(message).encode(), 1)
    _fault(exc)


@pytest.mark.parametrize("line", [b"garbage", b"\xff\xfe", b'{"id": 1, "ok": tr', b""])
def test_a_line_that_is_not_json_is_a_coded_error(line: bytes) -> None:
    with pytest.raises(S2OError) as exc:
        wire.decode_message(line, 1)
    _fault(exc)


@pytest.mark.parametrize("line", [b"[" * 100_000, b"[" * 300 + b"]" * 300,
                                  b'{"id": 1, "x": "]", "y": ' + b"[" * 300 + b"]" * 300 + b"}"])
def test_a_line_nested_past_the_bound_is_too_deep_whether_json_or_not(line: bytes) -> None:
    with pytest.raises(S2OError) as exc:
        wire.decode_message(line, 1)
    assert exc.value.code == "too-deep" and "broke the protocol" in exc.value.message


def _error(**fields: Any) -> dict[str, Any]:
    return {"code": "runtime", "message": "boom", "stage": "run", **fields}


def test_an_unregistered_code_becomes_unexpected() -> None:
    assert "no-such-code" not in CODES
    err = wire.decode_error(_error(code="no-such-code"))
    assert err.code == "unexpected"
    assert "no-such-code" in err.message and err.message.startswith("boom")


@pytest.mark.parametrize("fields", [
    {"code": 5}, {"code": None}, {"message": None}, {"message": ["boom"]}, {"stage": "later"}, {"stage": ["run"]},
    {"line": "1"}, {"line": True}, {"col": 1.5}, {"path": 3}, {"source": {}}, {"details": []},
    {"python_type": 1}, {"errors": "many"}, {"errors": [5]},
])
def test_an_error_field_of_the_wrong_type_is_a_coded_error(fields: dict[str, Any]) -> None:
    with pytest.raises(S2OError) as exc:
        wire.decode_error(_error(**fields))
    _fault(exc)


def test_decoders_refuse_lying_str_subclasses() -> None:
    """Guards never trust the type of what they are handed (SPEC 12): a ``str`` subclass that
    claims to equal a registered code is not a code."""

    class Lying(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    with pytest.raises(S2OError) as exc:
        wire.decode_error(_error(code=Lying("runtime")))
    _fault(exc)
    with pytest.raises(S2OError) as exc:
        wire.decode_value({"repr": Lying("1"), "json": 1})
    _fault(exc)
    with pytest.raises(S2OError) as exc:
        wire.decode_value({"repr": "x", "json": None, "shown": ["x"]})
    _fault(exc)
    with pytest.raises(S2OError) as exc:
        wire.decode_strings(["a", Lying("b")])
    _fault(exc)


def test_error_groups_round_trip_and_are_bounded_in_depth() -> None:
    group = ErrorGroup([S2OError("underscore", "no _", line=1, col=0, stage="validate"),
                        S2OError("lambda", "no lambda", line=1, col=5, stage="validate")])
    back = wire.decode_error(json.loads(json.dumps(wire.encode_error(group))))
    assert isinstance(back, ErrorGroup)
    assert [(e.code, e.col) for e in back.errors] == [("underscore", 0), ("lambda", 5)]
    assert (back.code, back.message, back.stage) == (group.code, group.message, "validate")
    deep: dict[str, Any] = _error()
    for _ in range(wire.MAX_ERROR_DEPTH + 1):
        deep = _error(errors=[deep])
    with pytest.raises(S2OError) as exc:
        wire.decode_error(deep)
    _fault(exc)


def test_values_round_trip() -> None:
    for value in [1, "text", [1, {"a": None}], 2.5, True, None]:
        assert wire.decode_value(json.loads(json.dumps(wire.encode_optional_value(value)))) == value
    remote = wire.decode_value(wire.encode_value((1, 2)))
    assert remote == RemoteValue("(1, 2)", [1, 2])
    assert wire.decode_value(wire.encode_value({1, 2})) == RemoteValue("{1, 2}", None)
    # a long container: the text a result shows comes beside the repr, cut as IPython cuts it
    pairs = [(i,) for i in range(1500)]
    remote = wire.decode_value(json.loads(json.dumps(wire.encode_value(pairs))))
    assert type(remote) is RemoteValue and remote.text == repr(pairs)
    assert remote.shown == repr(pairs[:1000])[:-1] + ", ...]"
    assert wire.decode_value(wire.encode_value(list(range(1500)))) == list(range(1500))  # JSON: the value
    assert "shown" not in wire.encode_value(list(range(999)))


def test_run_results_round_trip_and_unknown_result_codes_become_unexpected() -> None:
    run = RunResult(code="failCommand", value=[1], outputs=[{"type": "text", "text": "x"}], logs=["a"],
                    error=S2OError("failCommand", "stop", path="fail"))
    state = {"locals": {"x": 1}, "agent": {}, "conv": {"c": "d"}}
    encoded = operations.RUN_FRAGMENT.encode(run, lambda: state)
    assert "outputs" not in encoded["result"]  # parts travel as events while the run goes on, never again
    back, back_state = operations.RUN_FRAGMENT.decode(json.loads(json.dumps(encoded)))
    assert (back.code, back.value, back.outputs, back.logs, back_state) == (run.code, [1], [], ["a"], state)
    assert back.error is not None and (back.error.code, back.error.path) == ("failCommand", "fail")
    data = json.loads(json.dumps(wire.encode_run(run)))
    data["code"] = "runtime"  # a registered code, but not a result code
    assert wire.decode_run(data).code == "unexpected"
    for field, bad in [("logs", [1]), ("value", "x")]:
        with pytest.raises(S2OError) as exc:
            wire.decode_run({**data, field: bad})
        _fault(exc)
    for bad_reply in [{"result": data, "state": {"locals": []}}, {"result": data}, data]:
        with pytest.raises(S2OError) as exc:
            operations.RUN_FRAGMENT.decode(bad_reply)
        _fault(exc)


def test_validations_round_trip() -> None:
    v = Validation([S2OError("underscore", "no _", stage="validate")], {"len"}, {"x"}, {"KEY"})
    back = wire.decode_validation(json.loads(json.dumps(wire.encode_validation(v))))
    assert [e.code for e in back.errors] == ["underscore"]
    assert (back.allowlist_names, back.local_names, back.secrets) == ({"len"}, {"x"}, {"KEY"})


def test_a_reply_over_the_cap_becomes_a_coded_error_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_CONTROL_MESSAGE", 1000)
    monkeypatch.setattr(wire, "MAX_MESSAGE", 4000)
    reply = wire.decode_message(wire.encode_result(2, "x" * 2000), 2)
    assert isinstance(reply, wire.Reply) and reply.error is not None
    assert reply.error.code == "worker-protocol" and "too large" in reply.error.message
    with pytest.raises(S2OError) as exc:
        wire.encode_output(2, {"type": "text", "text": "x" * 5000}, 1 << 20)
    _fault(exc)


def test_the_lines_of_output_start_as_their_parent_looks_for() -> None:
    """The parent lets an ``output`` event's line, and a run's reply, grow past the cap of other messages when it
    starts so (:meth:`.framing.LineReader.read_line`): the encoders write exactly those prefixes."""
    part = {"type": "text", "text": "x"}
    assert wire.encode_output(12, part, 1 << 20).startswith(wire.output_prefix(12))
    assert wire.encode_result(12, {"result": None, "state": {}}).startswith(wire.reply_prefix(12))
    assert not wire.encode_error_reply(12, S2OError("runtime", "boom")).startswith(wire.reply_prefix(12))
    assert wire.output_cap(1 << 20) == wire.MAX_CONTROL_MESSAGE
    assert wire.output_cap(MAX_OUTPUT_PART) <= wire.MAX_MESSAGE


def test_printed_text_is_cut_into_events() -> None:
    text = "é" * (2 * wire.PRINT_CHUNK + 10)
    lines = wire.encode_print(1, text).splitlines()
    assert len(lines) == 3
    assert all(len(line) <= wire.MAX_CONTROL_MESSAGE for line in lines)
    events = [wire.decode_message(line, 1) for line in lines]
    assert "".join(e.payload for e in events if isinstance(e, wire.Event)) == text


# -- the server ----------------------------------------------------------------------------------


def test_every_special_operation_has_a_handler_and_every_handler_a_special_operation() -> None:
    special = {name for name, op in operations.OPERATIONS.items() if op.special}
    assert set(server.SPECIAL) == special == {"init", "ping", "run_fragment", "vars"}
    handlers = {name for name in vars(server.Worker) if name.startswith("do_")}
    assert {f"do_{op}" for op in server.SPECIAL} == handlers
    assert all(server.SPECIAL[name[3:]] is getattr(server.Worker, name) for name in handlers)


def _reply(worker: server.Worker, request_id: int, op: str, **fields: Any) -> wire.Reply:
    message = wire.decode_message(server.answer(worker, wire.encode_request(request_id, op, fields)), request_id)
    assert isinstance(message, wire.Reply)
    return message


def test_unknown_operations_and_requests_before_init_are_coded_errors() -> None:
    worker = server.Worker(io.BytesIO())
    for op in ("evaluate", "no-such-op"):
        reply = _reply(worker, 5, op, expr="1")
        assert reply.error is not None and reply.error.code == "worker-protocol", reply
    assert _reply(worker, 6, "ping").result == "pong"


def test_a_request_that_cannot_be_read_gets_a_reply_without_an_id() -> None:
    worker = server.Worker(io.BytesIO())
    line = server.answer(worker, b"garbage\n")
    assert json.loads(line)["id"] is None
    with pytest.raises(S2OError) as exc:
        wire.decode_message(line, 1)
    _fault(exc)


def test_a_request_over_the_cap_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forward, "MAX_MESSAGE", 100)
    stdin = io.BytesIO(b"x" * 500 + b"\n" + wire.encode_request(1, "ping", {}))
    with pytest.raises(S2OError) as exc:
        forward.read_request(stdin)
    _fault(exc)
    assert wire.decode_request(forward.read_request(stdin) or b"") == (1, "ping", {"id": 1, "op": "ping"})
    assert forward.read_request(stdin) is None


def test_nothing_is_sent_between_requests() -> None:
    """Printed text that arrives between requests waits for the next one; output parts are dropped."""
    out = io.BytesIO()
    worker = server.Worker(out)
    worker.printed("late\n")
    worker.send_output({"type": "text", "text": "late"})
    assert out.getvalue() == b""
    worker.begin(9)
    worker.printed("now\n")
    worker.send_output({"type": "text", "text": "part"})
    worker.reply(wire.encode_result(9, "done"))
    messages = [wire.decode_message(line, 9) for line in out.getvalue().splitlines()]
    assert messages == [wire.Event("print", "late\nnow\n"), wire.Event("output", {"type": "text", "text": "part"}),
                        wire.Reply("done", None)]


def test_progress_is_reported_only_for_a_run_past_two_seconds_of_its_request() -> None:
    """The reporter sends nothing before PROGRESS_AFTER, between requests, or for another request."""
    from s2o_kernel.engine import Engine, Session

    out = io.BytesIO()
    worker = server.Worker(out)
    worker.session = Session(Engine(make_settings({"limits": {"time": 7, "loop_iterations": 50}})))
    worker.report_progress(100.0)  # no run
    worker.begin(5)
    worker.running = (5, 100.0, True)
    worker.session.progress.note_pass(1)
    worker.session.progress.note_pass(2)
    worker.session.progress.note_pass(1)
    worker.report_progress(100.0 + server.PROGRESS_AFTER - 0.01)  # too soon
    assert out.getvalue() == b""
    worker.printed("waiting text")  # printed text without its end of line goes first
    worker.report_progress(100.0 + server.PROGRESS_AFTER + 0.5)
    worker.running = (5, 100.0, False)  # an expression: no loop counts
    worker.report_progress(103.0)
    worker.running = (4, 100.0, False)  # a run of another request: nothing
    worker.report_progress(103.0)
    worker.reply(wire.encode_result(5, "done"))
    messages = [wire.decode_message(line, 5) for line in out.getvalue().splitlines()]
    assert messages == [
        wire.Event("print", "waiting text"),
        wire.Event("progress", {"elapsed": 2.5, "time_limit": 7.0, "passes": 3, "longest": 2, "loop_limit": 50}),
        wire.Event("progress", {"elapsed": 3.0, "time_limit": 7.0, "passes": 0, "longest": 0, "loop_limit": 50}),
        wire.Reply("done", None)]


# -- IsolatedSession with a real worker ----------------------------------------------------------

#: Settings of a worker that grants ``os`` so a cell can write to the reply pipe, as a compromised worker could.
UNSAFE = {"allowlist": "os\nlen\nrange", "allow_unsafe_entries": True, "limits": {"time": 5}}


@pytest.fixture
def unsafe() -> Iterator[IsolatedSession]:
    session = IsolatedSession(bare_settings(UNSAFE))
    session.set_vars(locals={"kept": 41}, agent={"visits": 3}, conv={"turns": 2})
    try:
        yield session
    finally:
        session.close()


def _answers_for_itself(session: IsolatedSession) -> None:
    """The next three calls show their own results, with the variables of the last good state."""
    assert [session.evaluate(f"kept + {i}") for i in range(1, 4)] == [42, 43, 44]
    assert (session.agent_vars, session.conv_vars) == ({"visits": 3}, {"turns": 2})


@pytest.mark.parametrize("forged", [
    "os.write(1, b'garbage\\n')",
    "os.write(1, b'{\"id\": 0, \"ok\": true, \"result\": {\"repr\": \"7\", \"json\": 7}}\\n')",
    "os.write(1, b'{\"id\": 0, \"event\": \"print\", \"text\": \"7\"}\\n')",
    "os.write(1, b'[' * 100000 + b'\\n')",
    "os.write(1, b'x' * (65 << 20))",
    "(os.write(1, b'{\"id\": 1, \"ok\": tr'), os.kill(os.getpid(), 15))",
], ids=["garbage", "wrong-id", "wrong-id-event", "deep", "oversized", "cut-short"])
def test_a_worker_that_breaks_the_protocol_is_restarted(unsafe: IsolatedSession, forged: str) -> None:
    pid, restarts = unsafe.pid, unsafe.restarts
    with pytest.raises(S2OError) as exc:
        unsafe.evaluate(forged)
    assert exc.value.code == ("too-deep" if "b'['" in forged else "worker-protocol"), exc.value
    assert exc.value.details is not None and "restarted" in exc.value.details
    assert unsafe.restarts == restarts + 1 and unsafe.pid != pid
    _answers_for_itself(unsafe)


def test_a_fragment_that_breaks_the_protocol_ends_with_errorInAgent(unsafe: IsolatedSession) -> None:
    run = unsafe.run_fragment([{"output": "one"}, {"var": {"x": "{ os.write(1, b'garbage\\n') }"}}])
    assert run.code == "errorInAgent"
    assert run.error is not None and run.error.code == "worker-protocol"
    _answers_for_itself(unsafe)


def _flood(n: int) -> list[Any]:
    """A fragment with one output and ``n`` log lines of 10,000 characters."""
    return [{"output": "one"}, {"for": {"item": "k", "in": f"{{ range({n}) }}",
                                        "commands": [{"log": "{ 'x' * 10000 }"}]}}, {"return": "{ 5 }"}]


def test_a_long_run_reports_its_progress_to_on_progress() -> None:
    settings = make_settings({"allowlist": "s2o_kernel.examples.slow_answer as slow_answer", "limits": {"time": 9}})
    session = IsolatedSession(settings)
    reports: list[dict[str, Any]] = []
    session.on_progress = reports.append
    try:
        run = session.run_fragment({"for": {"item": "i", "in": "{ [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] }",
                                            "commands": [{"var": {"w": "{ await slow_answer(0.25) }"}}]}})
        assert run.code == "success", run.error
        assert reports, "a 3 s run reports its progress"
        assert all(r["elapsed"] >= server.PROGRESS_AFTER and r["time_limit"] == 9.0 for r in reports)
        assert [r["passes"] for r in reports] == sorted(r["passes"] for r in reports)
        assert all(0 < r["longest"] == r["passes"] <= 12 for r in reports)
        reports.clear()
        assert session.evaluate("await slow_answer(0.5)") == "done"
        assert reports == []  # a quick run reports nothing
    finally:
        session.close()


def test_no_progress_is_reported_while_the_run_waits_for_an_outside_answer() -> None:
    """The parent serves an outside call (an ``ask`` here) before it reads anything else, so a report
    sent meanwhile would be read only after the answer, long past; reports resume after the answer."""
    settings = make_settings({"allowlist": "s2o_kernel.examples.slow_answer as slow_answer", "limits": {"time": 20}})
    session = IsolatedSession(settings)
    reports: list[dict[str, Any]] = []
    answered: list[float] = []

    def answer(message: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
        time.sleep(3.5)  # a person taking their time: the run passes PROGRESS_AFTER while waiting
        answered.append(time.monotonic())
        return {"name": "Ada"}

    session.on_progress = reports.append
    session.outside.answer = answer
    try:
        start = time.monotonic()
        run = session.run_fragment([{"ask": {"inputs": [{"name": "name"}]}},
                                    {"var": {"w": "{ await slow_answer(1.5) }"}}])
        assert run.code == "success", run.error
        waited = answered[0] - start
        assert reports, "the run goes on 1.5 s after the answer, past PROGRESS_AFTER"
        stale = [r["elapsed"] for r in reports if r["elapsed"] < waited - 1.0]
        assert stale == [], f"reports made while the answer was awaited (answered after {waited:.1f} s)"
    finally:
        session.close()


def test_a_flood_of_log_lines_leaves_the_next_cells_their_own_results() -> None:
    """Issue 8: 30 MB of log lines under a 2 s limit once left the reply half-read (log lines count against
    ``limits.output_bytes``, raised here past them)."""
    session = IsolatedSession(make_settings({"limits": {"time": 2, "output_bytes": 1 << 30}}))
    try:
        session.set_vars(locals={"kept": 41}, agent={"visits": 3}, conv={"turns": 2})
        parts: list[dict[str, Any]] = []
        run = session.run_fragment(_flood(3000), on_output=parts.append)
        assert parts == [{"type": "text", "text": "one"}]
        if run.code == "success":
            assert run.value == 5 and len(run.logs) == 3000
        else:  # a slow machine: the run may pass its limit, but it ends with a code
            assert run.code == "timedOut", run
        _answers_for_itself(session)
    finally:
        session.close()


def test_a_reply_over_the_cap_is_a_coded_error_and_keeps_the_worker() -> None:
    session = IsolatedSession(make_settings({"limits": {"time": 20, "output_bytes": 1 << 30}}))
    try:
        session.set_vars(locals={"kept": 41}, agent={"visits": 3}, conv={"turns": 2})
        pid = session.pid
        run = session.run_fragment(_flood(7000))  # 70 MB of logs: over the 64 MiB cap
        assert run.code == "errorInAgent"
        assert run.error is not None and run.error.code == "worker-protocol" and "too large" in run.error.message
        assert session.pid == pid and session.restarts == 0
        _answers_for_itself(session)
    finally:
        session.close()


def test_only_the_first_stopping_event_of_a_request_extends_the_wait() -> None:
    """A worker whose interrupted run is unwinding says ``stopping`` and gets ``UNWIND_WAIT`` more; a
    compromised worker that keeps saying it gets no more than that, so the parent's kill still comes (an
    unsolicited ``stopping``: ``tests/security/test_hostile_worker.py``)."""
    from s2o_kernel.engine.run.loop import UNWIND_WAIT

    class Channel:
        def __init__(self) -> None:
            self.deadlines: list[float] = []
            self.messages = [wire.Event("stopping", None)] * 3 + [wire.Reply(1, None)]

        def receive(self, request_id: int, deadline: float, wide: Any) -> Any:
            self.deadlines.append(deadline)
            time.sleep(0.05)
            return self.messages.pop(0)

    session = IsolatedSession.__new__(IsolatedSession)
    session._settings = make_settings({})
    session._unwinding, session._logs = 0.0, False
    session._interrupted = True  # the parent sent an interrupt
    channel = Channel()
    start = time.monotonic()
    session._hard_end = start + 60
    assert session._read_until_reply(channel, 1, start + 0.5, None) == wire.Reply(1, None)  # type: ignore[arg-type]
    first, *later = channel.deadlines
    assert first == start + 0.5
    assert later[0] > start + UNWIND_WAIT and later[0] == later[1] == later[2]
