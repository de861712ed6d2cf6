"""The worker's operations as one table (issue 29; :mod:`~s2o_kernel.engine.worker.operations`).

* An operation added through the table alone (a row registered here and a ``Session`` method) runs in a
  real forked worker through :class:`IsolatedSession`, its result decoded by the row's codec, its ``STATE``
  kept for a restart, its arguments type-checked by the worker;
* the table and the kernel's ``SessionLike`` name the same operations, and each row's arguments are its
  ``Session`` method's parameters;
* the worker refuses arguments it was not promised (a field of the wrong exact type, an unknown field,
  a missing one), the parent refuses results of the wrong shape, both with ``worker-protocol``.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import signal
from typing import Any

import pytest

from s2o_kernel.engine import IsolatedSession, S2OError, Session, default_settings
from s2o_kernel.engine.worker import launch, operations, server, wire
from s2o_kernel.kernel.contract import SessionLike

pytestmark = pytest.mark.timeout(120)

#: A row of the table that no module registers: this test's own.
SHOUT = operations.Operation("shout", {"text": (str,), "times": (int, operations.NULL)},
                             operations.Codec("[TEXT]", list, lambda data: tuple(wire.decode_strings(data))))
#: One that changes the variables: its reply carries ``STATE``.
REMEMBER = operations.Operation("remember", {"name": (str,), "value": operations.JSON}, operations.AS_NOTHING,
                                state=True)


def _shout(self: Session, text: str, times: int | None = None) -> list[str]:
    return [text.upper() + "!" * len(self.locals)] * (times or 1)


def _remember(self: Session, name: str, value: Any) -> None:
    self.set_local(name, value)


def _fault(exc: pytest.ExceptionInfo[S2OError], sender: str = wire.PARENT) -> None:
    assert exc.value.code == "worker-protocol" and exc.value.message.startswith(sender), exc.value.message


def test_an_operation_added_through_the_table_alone_runs_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Session, "shout", _shout, raising=False)
    monkeypatch.setattr(Session, "remember", _remember, raising=False)
    for row in (SHOUT, REMEMBER):
        monkeypatch.setitem(operations.OPERATIONS, row.name, row)
    # the forked worker inherits this process's table and Session; an earlier test's secrets would make it exec
    monkeypatch.setattr(launch, "_held_credentials", False)
    session = IsolatedSession(default_settings(), fork=True)
    try:
        assert session.shout("hi", times=2) == ("HI", "HI")  # decoded by the row's codec: a tuple
        assert session.shout(text="hey") == ("HEY",)
        with pytest.raises(S2OError) as exc:
            session.shout(5)  # the worker checks the exact type
        _fault(exc)
        assert "'text' of the request shout is int, not str" in exc.value.message
        with pytest.raises(S2OError) as exc:
            session.shout("hi", times=True)  # a bool is not an int
        _fault(exc)
        with pytest.raises(TypeError):
            session.shout()  # the parent binds the arguments as a call would
        with pytest.raises(TypeError):
            session.shout("a", loud=True)
        with pytest.raises(AttributeError):
            session.init  # noqa: B018 - a special row is not a method
        assert session.remember("kept", [1, {"a": 2}]) is None
        assert session.shout("x") == ("X!",)  # the worker's session has the local
        pid = session.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped (the session does)
        assert session.evaluate("kept") == [1, {"a": 2}]  # restarted from the STATE the row's reply carried
        assert session.restarts == 1 and session.pid != pid
    finally:
        session.close()


def _members(protocol: type) -> dict[str, Any]:
    return {name: value for name, value in vars(protocol).items()
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}


def test_the_table_and_session_like_name_the_same_operations() -> None:
    members = _members(SessionLike)
    served = [member for row in operations.OPERATIONS.values() for member in row.serves]
    assert len(served) == len(set(served)), "a member served by two rows"
    assert not set(served) & operations.PARENT_ONLY
    assert set(served) | operations.PARENT_ONLY == set(members)
    for row in operations.OPERATIONS.values():
        for member in row.serves:
            own = inspect.getattr_static(IsolatedSession, member)
            assert isinstance(own, property) if isinstance(members[member], property) else inspect.isfunction(own)
        if row.members is None:  # the worker calls the Session method of its name with its arguments
            parameters = list(inspect.signature(getattr(Session, row.name)).parameters)[1:]
            expected = parameters if not row.special else [p for p in parameters if p in row.args]
            assert list(row.args) == expected, row.name


def test_a_removed_row_is_missed() -> None:
    """The check above can fail: without ``describe``'s row, ``SessionLike.describe`` is served by nobody."""
    served = {m for row in operations.OPERATIONS.values() if row.name != "describe" for m in row.serves}
    assert set(_members(SessionLike)) - served - operations.PARENT_ONLY == {"describe"}


def _reply(worker: server.Worker, op: str, **fields: Any) -> wire.Reply:
    message = wire.decode_message(server.answer(worker, wire.encode_request(1, op, fields)), 1)
    assert isinstance(message, wire.Reply)
    return message


@pytest.mark.parametrize(("op", "fields", "reason"), [
    ("member_names", {"dotted": 5}, "'dotted' of the request member_names is int, not str"),
    ("member_names", {}, "'dotted' of the request member_names is NoneType, not str"),
    ("member_names", {"dotted": "a", "extra": 1}, "the request member_names with a field it does not take: 'extra'"),
    ("set_vars", {"locals": [1]}, "'locals' of the request set_vars is list, not dict or null"),
    ("update_settings", {"patch": None}, "'patch' of the request update_settings is NoneType, not dict"),
    ("run_fragment", {"fragment": {"return": 1}, "function": 1.5}, "'function' of the request run_fragment is float"),
    ("init", {"settings": {}, "state": {"agent": "x"}}, "'agent' of init's state is str, not dict or null"),
    ("init", {"settings": [], "state": None}, "'settings' of the request init is list, not dict"),
])
def test_the_worker_checks_every_argument(op: str, fields: dict[str, Any], reason: str) -> None:
    worker = server.Worker(io.BytesIO())
    worker.session = Session()
    worker.session.set_local("x", 1)
    reply = _reply(worker, op, **fields)
    assert reply.error is not None and reply.error.code == "worker-protocol"
    assert reason in reply.error.message and reply.error.message.startswith(wire.PARENT)
    assert worker.session.locals == {"x": 1}  # nothing ran


def test_results_of_the_wrong_shape_are_faults() -> None:
    bad: list[tuple[operations.Operation[Any], object]] = [
        (operations.RESET, None),  # no state beside it
        (operations.RESET, {"result": 1, "state": {"locals": {}, "agent": {}, "conv": {}}}),
        (operations.SET_VARS, {"result": None, "state": {"locals": {}, "agent": [], "conv": {}}}),
        (operations.DESCRIBE, 1),
        (operations.MEMBER_NAMES, ["a", 1]),
        (operations.COMPLETION_NAMES, {"a": 1}),
        (operations.VARS, {"locals": {"x": 1}, "agent": {}, "conv": {}}),  # a local is a DISPLAY
        (operations.EVALUATE, {"json": 1}),
    ]
    for row, data in bad:
        with pytest.raises(S2OError) as exc:
            row.decode(json.loads(json.dumps(data)))
        _fault(exc, wire.WORKER)


def test_every_codec_round_trips_what_the_session_returns() -> None:
    session = Session(locals={"x": {1, 2}, "y": [1]}, agent={"a": 1})
    values: dict[str, Any] = {
        "vars": {"locals": session.locals, "agent": session.agent_vars, "conv": session.conv_vars},
        "validate": session.validate("x + z"), "dataflow": session.dataflow({"var": {"q": "{ y }"}}),
        "completion_names": session.completion_names(), "member_names": session.member_names("agent"),
        "describe": session.describe("y"), "evaluate": session.evaluate("y"), "reset": None,
        "update_settings": ["a warning"], "ping": "pong",
    }
    state = {"locals": {"y": [1]}, "agent": {"a": 1}, "conv": {}}
    for name, value in values.items():
        row = operations.OPERATIONS[name]
        back, kept = row.decode(json.loads(json.dumps(row.encode(value, lambda: state))))
        assert kept == (state if row.state else None), name
        if name == "vars":
            assert back["locals"]["y"] == [1] and repr(back["locals"]["x"]) == "{1, 2}"
        elif name in ("validate", "dataflow"):
            assert repr(back) == repr(value), name
        else:
            assert back == value, name


def test_a_row_is_registered_once() -> None:
    with pytest.raises(ValueError, match="already"):
        operations.register(operations.Operation("evaluate", {}, operations.AS_NOTHING))
