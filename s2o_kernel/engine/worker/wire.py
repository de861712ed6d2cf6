"""The worker's wire format: the one place that knows the JSON shapes crossing the pipe (SPEC 12).

Only JSON crosses between :class:`~.client.IsolatedSession` (the parent) and :class:`~.server.Worker` (the child),
never pickles, so a compromised worker cannot make the parent run code. Every message is one line of ASCII JSON,
capped in bytes (see :mod:`.framing`): a request at :data:`~s2o_kernel.bounds.MAX_MESSAGE`, a message of the worker at
:data:`~s2o_kernel.bounds.MAX_CONTROL_MESSAGE`, an ``output`` event at :func:`output_cap`.

Messages (``ID`` is the request's id, an integer the parent never reuses)::

    request   {"id": ID, "op": NAME, FIELD: …}                  parent → worker
    reply     {"id": ID, "ok": true,  "result": RESULT}         worker → parent; ends request ID
              {"id": ID, "ok": false, "error": ERROR}
    event     {"id": ID, "event": "print",  "text": TEXT}       worker → parent, before the reply
              {"id": ID, "event": "output", "part": PART}
              {"id": ID, "event": "outside", "call": CALL}      the run asks the parent to make a call
    outside   {"op": "outside_reply", "id": ID, "ok": true, "result": JSON}     parent → worker, one per
    reply     {"op": "outside_reply", "id": ID, "ok": false, "error": ERROR}    ``outside`` event, in order
              {"id": ID, "event": "progress", "progress": PROGRESS}   a run past 2 s, twice a second
              {"id": ID, "event": "stopping"}    an interrupt reached the run, which is unwinding (ends
                                                 within ``loop.UNWIND_WAIT``)
              {"id": ID, "event": "compiled", "sources": [[TEXT, [TEXT, …] or null], …]}  ..codecache.Recorder

    ERROR     {"code", "message", "line", "col", "path", "stage", "source",
               "details", "python_type", "errors"?: [ERROR, …]}
    DISPLAY   {"repr": TEXT, "json": JSON or null[, "shown": TEXT]}  a value
    STATE     {"locals": {NAME: JSON}, "agent": {…}, "conv": {…}}
    PART      {"type": "text" | "html" | "image", FIELD: TEXT, …}    an output part (text fields only)
    CALL      {"kind", "profile", "fields", "path", "timeout", "secrets_used"}   an
              :class:`~..outside.call.OutsideCall` (SPEC 7.1), checked by ``OutsideCall.from_json``
    PROGRESS  {"elapsed": S, "time_limit": S, "passes": N, "longest": N, "loop_limit": N}  (..progress)

An ``outside reply`` line always starts with :data:`OUTSIDE_REPLY_PREFIX` (``op`` is its first key), so
the worker's stdin reader routes it to the waiting call without decoding it (:mod:`.forward`).

The operations, their arguments and their ``RESULT`` shapes are the table of :mod:`.operations` (an operation
that changes the variables answers ``{"result": RESULT, "state": STATE}``). Printed text is cut into events of
at most :data:`PRINT_CHUNK` characters.

Decoding trusts nothing. A message of the worker is read as ASCII (what ``json.dumps`` writes) by
:func:`~..run.bounded_json.loads`, within :data:`~s2o_kernel.bounds.MAX_MESSAGE_ITEMS` values and
:data:`~s2o_kernel.bounds.MAX_MESSAGE_DEPTH` levels (past them ``worker-protocol`` and ``too-deep``), so no line
makes the parent build more than a few times its bytes; every field of every message is checked for its exact JSON
type, a message must carry the id of the request being answered, and a message that does not fit raises
:func:`fault`, an :class:`~..errors.S2OError` with code ``worker-protocol``. An error's ``code`` goes through the
code registry (:mod:`..codes`): a code the registry does not know becomes ``unexpected``, so a compromised worker
can neither crash the parent nor make it show a code that does not exist.

Encoding never writes a line the other side would refuse: over its cap, or (the worker's) past the budgets of values
and levels. :func:`encode_result` turns such a reply into a ``worker-protocol`` error reply, and :func:`encode_output`
and :func:`encode_outside` raise that error for an output part or an outside call.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ...bounds import (
    JSON_ESCAPE,
    MAX_CACHED_SOURCE,
    MAX_CONTROL_MESSAGE,
    MAX_ERROR_DEPTH,
    MAX_MESSAGE,
    MAX_MESSAGE_DEPTH,
    MAX_MESSAGE_ITEMS,
    MAX_REPORTED,
    MAX_REPR,
    MESSAGE_SLACK,
    PRINT_CHUNK,
    QUOTE,
    SHOWN_ITEMS,
    WRITTEN_LIMIT,
)
from ..codes import CODES, RESULT, STAGES
from ..errors import ErrorGroup, S2OError
from ..fragments import trace
from ..fragments.dataflow import VIAS, WHENS, Access, Dataflow
from ..outside.call import OutsideCall
from ..policy.written import shown_text, too_large_text, written_size
from ..run import bounded_json
from ..run.engine import Validation
from ..run.scopes import RemoteValue, as_json
from ..run.session import RunResult

#: The code of an error that stands for a message which breaks the protocol (or would).
FAULT_CODE = "worker-protocol"

JSONDict = dict[str, Any]

#: How every outside reply line starts (the parent writes ``op`` first).
OUTSIDE_REPLY_PREFIX = b'{"op": "outside_reply"'


WORKER = "the evaluation worker"
PARENT = "the parent of the evaluation worker"


def fault(reason: str, sender: str = WORKER) -> S2OError:
    """The coded error for a message that breaks the protocol: ``reason`` says how, ``sender`` who sent it."""
    return S2OError(FAULT_CODE, f"{sender} broke the protocol: {reason}")


def too_large(what: str, size: int, cap: int = MAX_MESSAGE) -> S2OError:
    """The coded error for a message that would be over its cap of ``cap`` bytes (``size`` bytes)."""
    return S2OError(FAULT_CODE, f"{what} is too large to send: {size / 2**20:.1f} MiB, over the worker's "
                                f"message cap of {cap / 2**20:g} MiB")


def quote(value: object) -> str:
    """``repr(value)``, cut at :data:`QUOTE` characters: a faulty message quoted in an error (a long text is cut
    before its ``repr`` is made, so quoting a capped line costs nothing)."""
    if isinstance(value, (str, bytes, bytearray)) and len(value) > QUOTE:
        return repr(value[:QUOTE]) + "…"
    text = repr(value)
    return text if len(text) <= QUOTE else text[:QUOTE] + "…"


def output_prefix(request_id: int) -> bytes:
    """How the line of an ``output`` event of request ``request_id`` starts (:func:`encode_output` writes it so):
    the parent lets such a line grow to :func:`output_cap` of ``limits.output_part_bytes``
    (:meth:`.framing.LineReader.read_line`)."""
    return b'{"id": %d, "event": "output", "part": ' % request_id


def reply_prefix(request_id: int) -> bytes:
    """How a successful reply to request ``request_id`` starts (:func:`encode_result` writes it so): the reply of
    an operation whose row says ``logs`` may grow to :func:`output_cap` of ``limits.output_bytes``."""
    return b'{"id": %d, "ok": true, "result": ' % request_id


def output_cap(output_bytes: int) -> int:
    """The cap, in bytes, of a line that carries up to ``output_bytes`` bytes of a run's output (an output part,
    a run's log lines) written as JSON; never less than any other message's, never more than a request's."""
    return min(MAX_MESSAGE, max(MAX_CONTROL_MESSAGE, JSON_ESCAPE * output_bytes + MESSAGE_SLACK))


# -- encoding (either side) -----------------------------------------------------------------


def _line(message: JSONDict, what: str, cap: int = MAX_MESSAGE) -> bytes:
    data = json.dumps(message).encode()  # ASCII: json.dumps escapes newlines and non-ASCII characters
    if len(data) > cap:
        raise too_large(what, len(data), cap)
    return data + b"\n"


def _worker_line(message: JSONDict, what: str, cap: int | None = None) -> bytes:
    """A line of the worker: :func:`_line` at ``cap`` (default :data:`~s2o_kernel.bounds.MAX_CONTROL_MESSAGE`), and
    within the budgets its parent reads it with (a line past them is ``worker-protocol`` here, never a line the
    parent refuses and restarts the worker for)."""
    line = _line(message, what, MAX_CONTROL_MESSAGE if cap is None else cap)
    opened = line.count(b"[") + line.count(b"{")
    if opened > MAX_MESSAGE_DEPTH or 1 + line.count(b",") + opened > MAX_MESSAGE_ITEMS:  # else within both
        try:
            bounded_json.loads(line.decode("ascii"), items=MAX_MESSAGE_ITEMS, depth=MAX_MESSAGE_DEPTH,
                               code=FAULT_CODE, what="it")
        except S2OError as exc:
            raise S2OError(FAULT_CODE, f"{what} is too large to send: {exc.message}") from None
    return line


def encode_request(request_id: int, op: str, fields: JSONDict) -> bytes:
    """One request line: ``{"id": request_id, "op": op, **fields}``; raises ``worker-protocol`` when too large,
    ``not-json`` for a field JSON cannot write (an integer of over 4,300 digits, an object)."""
    try:
        return _line({**fields, "id": request_id, "op": op}, "the request")
    except (TypeError, ValueError, RecursionError) as exc:
        raise S2OError("not-json", f"the request is not JSON: {str(exc)[:200]}") from None


def encode_result(request_id: int | None, result: Any, cap: int | None = None) -> bytes:
    """A successful reply line (it starts with :func:`reply_prefix`), at most ``cap`` bytes (default
    :data:`~s2o_kernel.bounds.MAX_CONTROL_MESSAGE`); a result not JSON is an ``unexpected`` error reply, one too
    large or past the budgets ``worker-protocol``."""
    try:
        return _worker_line({"id": request_id, "ok": True, "result": result}, "the reply", cap)
    except S2OError as exc:
        return encode_error_reply(request_id, exc)
    except (TypeError, ValueError, RecursionError) as exc:
        return encode_error_reply(request_id, S2OError("unexpected", f"the reply could not be sent: {exc}"))


def encode_error_reply(request_id: int | None, exc: S2OError) -> bytes:
    """A failed reply line carrying ``exc`` (an error too large to send is cut to its code and message)."""
    try:
        return _worker_line({"id": request_id, "ok": False, "error": encode_error(exc)}, "the error")
    except (S2OError, TypeError, ValueError, RecursionError):
        short = S2OError(exc.code, exc.message[:PRINT_CHUNK], stage=exc.stage)
        return _worker_line({"id": request_id, "ok": False, "error": encode_error(short)}, "the error")


def encode_print(request_id: int | None, text: str) -> bytes:
    """``print`` event lines for text printed by evaluated code, :data:`PRINT_CHUNK` characters each."""
    return b"".join(_worker_line({"id": request_id, "event": "print", "text": text[i:i + PRINT_CHUNK]},
                                 "printed text") for i in range(0, len(text), PRINT_CHUNK))


def encode_output(request_id: int | None, part: JSONDict, part_bytes: int) -> bytes:
    """An ``output`` event line (it starts with :func:`output_prefix`): one output part of a running fragment
    whose parts may hold ``part_bytes`` bytes (``limits.output_part_bytes``); raises ``worker-protocol`` when the
    line is over :func:`output_cap` of it."""
    return _worker_line({"id": request_id, "event": "output", "part": part}, "an output part", output_cap(part_bytes))


def encode_compiled(request_id: int | None, sources: list[tuple[str, list[str] | None]]) -> bytes:
    """A ``compiled`` event line: ``(source, command fields or None)`` its engine compiled cold."""
    return _worker_line({"id": request_id, "event": "compiled", "sources": sources}, "compiled sources")


def encode_outside(request_id: int | None, call: OutsideCall) -> bytes:
    """An ``outside`` event line: the run of request ``request_id`` asks the parent to make ``call``."""
    return _worker_line({"id": request_id, "event": "outside", "call": call.to_json()}, "an outside call")


def encode_outside_reply(request_id: int, result: Any = None, error: S2OError | None = None,
                         receipt: dict[str, Any] | None = None) -> bytes:
    """The parent's answer to an ``outside`` event: ``result`` (JSON), or ``error``; with a result, the door's
    ``receipt`` (:data:`~..outside.call.RECEIPT`: whether a cassette answered) when it has one. A result too large
    for one message (or not JSON) becomes an error answer, so the worker always gets its line."""
    if error is None:
        try:
            return _line({"op": "outside_reply", "id": request_id, "ok": True, "result": result,
                          **({"receipt": receipt} if receipt else {})}, "the call's result")
        except S2OError as exc:
            error = exc
        except (TypeError, ValueError, RecursionError) as exc:
            error = S2OError("unexpected", f"the call's result could not be sent: {type(exc).__name__}")
    try:
        return _line({"op": "outside_reply", "id": request_id, "ok": False, "error": encode_error(error)}, "the error")
    except (S2OError, TypeError, ValueError, RecursionError):
        short = S2OError(error.code, error.message[:PRINT_CHUNK], stage=error.stage, path=error.path)
        return _line({"op": "outside_reply", "id": request_id, "ok": False, "error": encode_error(short)}, "the error")


def decode_outside_reply(line: bytes, request_id: int) -> Reply:
    """The :class:`Reply` in an outside reply line for request ``request_id``; :func:`fault` otherwise."""
    message = _loads(line, PARENT)
    if message.get("op") != "outside_reply" or type(message.get("id")) is not int or message["id"] != request_id:
        raise fault("an outside reply for another request", PARENT)
    if message.get("ok") is True and "result" in message:
        receipt = message.get("receipt")
        if receipt is not None and not _is_receipt(receipt):
            raise fault("an outside reply whose receipt is not {replayed, recorded}", PARENT)
        return Reply(message["result"], None, receipt)
    if message.get("ok") is False:
        return Reply(None, decode_error(message.get("error")))
    raise fault("an outside reply that is neither a result nor an error", PARENT)


def _is_receipt(data: Any) -> bool:
    """Whether ``data`` is a door's receipt: ``{"replayed": true|false, "recorded": SECONDS}``, both optional."""
    if type(data) is not dict or set(data) - {"replayed", "recorded"}:
        return False
    recorded = data.get("recorded", 0.0)
    return type(data.get("replayed", False)) is bool and type(recorded) in (int, float) \
        and math.isfinite(recorded) and recorded >= 0


def encode_progress(request_id: int | None, progress: JSONDict) -> bytes:
    """A ``progress`` event line: how far the running request has got (:meth:`..progress.RunProgress.report`)."""
    return _worker_line({"id": request_id, "event": "progress", "progress": progress}, "progress")


def encode_stopping(request_id: int | None) -> bytes:
    """A ``stopping`` event line: an interrupt reached the running request's run, which is unwinding."""
    return _worker_line({"id": request_id, "event": "stopping"}, "stopping")


def encode_error(exc: S2OError) -> JSONDict:
    """An :class:`S2OError` (or :class:`ErrorGroup`) as ``ERROR``."""
    out: JSONDict = {"code": exc.code, "message": exc.message, "line": exc.line, "col": exc.col, "path": exc.path,
                     "stage": exc.stage, "source": exc.source, "details": exc.details,
                     "python_type": exc.python_type}
    errors = getattr(exc, "errors", None)
    if errors:
        out["errors"] = [encode_error(e) for e in errors]
    return out


def _cut(text: str) -> str:
    return text[:MAX_REPR] + " … (truncated)" if len(text) > MAX_REPR else text


def encode_value(value: Any) -> JSONDict:
    """``DISPLAY`` of a value, never raising: its ``repr`` (cut at :data:`MAX_REPR`) and JSON form, and
    for a value with a container of more than :data:`SHOWN_ITEMS` items the text a result shows of it
    (``shown``: :func:`~..written.shown_text`, cut as IPython cuts it); for a value too large to write
    out (:func:`~..written.written_size`), a placeholder and no JSON. The JSON form goes only when it fits a
    reply beside the ``repr`` (half the values and a quarter of the bytes a message of the worker may hold);
    otherwise the parent gets the ``repr`` alone (a :class:`~..scopes.RemoteValue`)."""
    size = written_size(value)
    if size > WRITTEN_LIMIT:
        return {"repr": too_large_text(value), "json": None}
    try:
        text = repr(value)
    except Exception as exc:  # e.g. an int too large to convert to text
        text = f"<{type(value).__name__} object: repr failed with {type(exc).__name__}>"
    shown = shown_text(value) if size > SHOWN_ITEMS else text
    if len(text) > MAX_REPR:
        return {"repr": _cut(text), "json": None, "shown": _cut(shown)}
    data = as_json(value) if size <= MAX_MESSAGE_ITEMS // 2 else None
    if data is not None:
        try:
            if len(json.dumps(data)) > MAX_CONTROL_MESSAGE // 4:
                data = None
        except (ValueError, TypeError, RecursionError):
            data = None
    if shown != text:
        return {"repr": text, "json": data, "shown": _cut(shown)}
    return {"repr": text, "json": data}


def encode_optional_value(value: Any) -> JSONDict | None:
    """``DISPLAY`` of a value, or ``null`` for ``None``."""
    return None if value is None else encode_value(value)


def encode_run(run: RunResult) -> JSONDict:
    """The result of ``run_fragment``: the run's code, value, logs and error (its ``STATE`` goes beside it,
    :mod:`.operations`).

    Output parts are not in it: they went out as ``output`` events while the run went on, and the
    reply never carries them again (SPEC 12: a run may output up to ``limits.output_bytes``).
    """
    return {"code": run.code, "value": encode_optional_value(run.value), "logs": run.logs,
            "error": encode_error(run.error) if run.error is not None else None,
            "result": encode_optional_value(run.result),
            "trace": trace.flatten(run.trace) if run.trace is not None else None}


def encode_validation(v: Validation) -> JSONDict:
    """The result of ``validate``."""
    return {"errors": [encode_error(e) for e in v.errors], "allowlist_names": sorted(v.allowlist_names),
            "local_names": sorted(v.local_names), "secrets": sorted(v.secrets)}


# -- decoding -------------------------------------------------------------------------------


def decode_request(line: bytes) -> tuple[int, str, JSONDict]:
    """``(id, op, fields)`` of a request line; raises :func:`fault` for anything else."""
    message = _loads(line, PARENT)
    request_id, op = message.get("id"), message.get("op")
    if type(request_id) is not int or type(op) is not str:
        raise fault("a request without an integer id or an op", PARENT)
    return request_id, op, message


@dataclass(frozen=True, slots=True)
class Event:
    """An event: ``kind`` is ``print`` (``payload`` a str), ``output`` (``payload`` a ``PART``; ``streamed`` for a
    part the parent's gateway streamed itself, never read from the pipe),
    ``progress`` (``payload`` a ``PROGRESS``), ``outside`` (``payload`` an
    :class:`~..outside.call.OutsideCall`), ``stopping`` (``payload`` ``None``) or ``compiled``
    (``payload`` a list of ``(source, command fields or None)``)."""

    kind: str
    payload: Any


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply: ``error`` is ``None`` for success, when ``result`` holds the op's result; an outside reply's
    ``receipt`` is what the door told of the call (:data:`~..outside.call.RECEIPT`), ``None`` when nothing."""

    result: Any
    error: S2OError | None
    receipt: dict[str, Any] | None = field(default=None)


def _loads(line: bytes | str, sender: str = WORKER) -> JSONDict:
    """The JSON object of one line. The parent's lines are read as they are; the worker's (``sender`` is
    :data:`WORKER`) as ASCII within the budgets of values and levels (see the module doc)."""
    try:
        if sender != WORKER:
            message = json.loads(line)
        else:
            text = line if isinstance(line, str) else line.decode("ascii")
            message = bounded_json.loads(text, items=MAX_MESSAGE_ITEMS, depth=MAX_MESSAGE_DEPTH, code=FAULT_CODE,
                                         what="a message")
    except S2OError as exc:
        raise S2OError(exc.code, f"{sender} broke the protocol: {exc.message}") from None
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise fault(f"a line that is not ASCII JSON: {quote(line)}", sender) from None
    if type(message) is not dict:
        raise fault(f"a message that is not a JSON object: {quote(message)}", sender)
    return message


def decode_message(line: bytes | str, request_id: int) -> Event | Reply:
    """An :class:`Event` or :class:`Reply` for request ``request_id`` from one line; raises
    :func:`fault` for anything else, a message for another request included."""
    message = _loads(line)
    got = message.get("id")
    if type(got) is not int or got != request_id:
        raise fault(f"a message for request {quote(got)} while request {request_id} was waiting")
    if "event" in message:
        kind = message["event"]
        if kind == "print" and type(message.get("text")) is str:
            return Event("print", message["text"])
        if kind == "output" and _is_part(message.get("part")):
            return Event("output", message["part"])
        if kind == "outside":
            try:
                return Event("outside", OutsideCall.from_json(message.get("call")))
            except ValueError as exc:
                raise fault(f"an outside call of the wrong shape: {exc}") from None
        if kind == "progress" and _is_progress(message.get("progress")):
            return Event("progress", message["progress"])
        if kind == "stopping" and message.keys() == {"id", "event"}:
            return Event("stopping", None)
        if kind == "compiled" and _is_sources(message.get("sources")):
            return Event("compiled", [(source, fields) for source, fields in message["sources"]])
        raise fault(f"an event of unknown kind or shape: {quote(kind)}")
    ok = message.get("ok")
    if ok is True and "result" in message:
        return Reply(message["result"], None)
    if ok is False:
        return Reply(None, decode_error(message.get("error")))
    raise fault("a message that is neither an event nor a reply")


#: ``PROGRESS``'s fields and their exact types.
_PROGRESS_FIELDS: dict[str, type] = {"elapsed": float, "time_limit": float, "passes": int, "longest": int,
                                     "loop_limit": int}


def _is_progress(data: object) -> bool:
    """``data`` is a ``PROGRESS``: exactly its fields, each of its exact type."""
    return (type(data) is dict and data.keys() == _PROGRESS_FIELDS.keys()
            and all(type(data[k]) is t for k, t in _PROGRESS_FIELDS.items()))


def _is_sources(data: object) -> bool:
    """``data`` is a ``compiled`` event's ``sources``: at most ``MAX_REPORTED`` [text, null or [text, …]], each
    text at most ``MAX_CACHED_SOURCE`` characters (a longer one is never reported)."""
    return type(data) is list and len(data) <= MAX_REPORTED and all(
        type(pair) is list and len(pair) == 2 and type(pair[0]) is str and len(pair[0]) <= MAX_CACHED_SOURCE
        and (pair[1] is None or (type(pair[1]) is list and all(type(f) is str for f in pair[1]))) for pair in data)


def _object(data: object, what: str) -> JSONDict:
    if type(data) is not dict:
        raise fault(f"{what} is not a JSON object")
    return data


def _strings(data: object, what: str) -> list[str]:
    if type(data) is not list or any(type(item) is not str for item in data):
        raise fault(f"{what} is not a list of strings")
    return data


def _is(value: object, kind: type) -> bool:
    """``value`` is ``None`` or exactly of ``kind`` (``bool`` is not an ``int``)."""
    return value is None or type(value) is kind


#: The optional fields of ``ERROR`` and their types.
_ERROR_FIELDS: dict[str, type] = {"line": int, "col": int, "path": str, "source": str, "details": dict,
                                  "python_type": str}


def _is_part(data: object) -> bool:
    """``data`` is a ``PART``: a JSON object of text fields, one of them its ``type``."""
    return type(data) is dict and type(data.get("type")) is str and all(type(v) is str for v in data.values())


def decode_error(data: object, depth: int = 0) -> S2OError:
    """An :class:`S2OError` (an :class:`ErrorGroup` when ``errors`` is given) from ``ERROR``.

    A ``code`` the registry does not know becomes ``unexpected`` and the message names it;
    any field of the wrong type raises :func:`fault`.
    """
    d = _object(data, "an error")
    code, message, stage = d.get("code"), d.get("message", ""), d.get("stage") or "run"
    if type(code) is not str or type(message) is not str:
        raise fault("an error whose code or message is not text")
    if stage not in STAGES:
        raise fault(f"an error of an unknown stage: {quote(stage)}")
    for name, kind in _ERROR_FIELDS.items():
        if not _is(d.get(name), kind):
            raise fault(f"an error whose {name} is not {kind.__name__} or null")
    if code not in CODES:
        message = f"{message} (the worker sent the unregistered code {quote(code)})"
        code = "unexpected"
    errors = d.get("errors")
    if errors:
        if type(errors) is not list or depth >= MAX_ERROR_DEPTH:
            raise fault("an error group that is not a list or is nested too deep")
        group = ErrorGroup([decode_error(e, depth + 1) for e in errors])
        group.code, group.message, group.stage = code, message, stage
        group.path, group.line, group.col = d.get("path"), d.get("line"), d.get("col")
        return group
    return S2OError(code, message, line=d.get("line"), col=d.get("col"), path=d.get("path"), stage=stage,
                    source=d.get("source"), details=d.get("details"), python_type=d.get("python_type"))


def decode_value(data: object) -> Any:
    """The value a ``DISPLAY`` (or ``null``) stands for: a JSON value that round-trips exactly,
    ``None``, or a :class:`~..scopes.RemoteValue` holding the ``repr`` and JSON form."""
    if data is None:
        return None
    d = _object(data, "a value")
    text, value, shown = d.get("repr"), d.get("json"), d.get("shown")
    if type(text) is not str or not (shown is None or type(shown) is str):
        raise fault("a value without its repr text")
    if value is not None and repr(value) == text:
        return value
    if text == "None":
        return None
    return RemoteValue(text, value, shown)


def decode_state(data: object) -> JSONDict:
    """``STATE``: locals, agent and conversation variables, each a JSON object."""
    d = _object(data, "the state")
    return {key: _object(d.get(key), f"the state's {key}") for key in ("locals", "agent", "conv")}


def decode_run(data: object) -> RunResult:
    """The :class:`RunResult` of a ``run_fragment`` result (without outputs: they came as events); its trace is
    the worker's, checked (:func:`~..fragments.trace.check`) and not masked: the caller masks it
    (``trace_source.masked``).

    A result code the registry does not list as a result becomes ``unexpected``.
    """
    d = _object(data, "a run's result")
    code = d.get("code")
    if type(code) is not str or code not in CODES or RESULT not in CODES[code].stages:
        code = "unexpected"
    logs = _strings(d.get("logs"), "a run's logs")
    error = decode_error(d["error"]) if d.get("error") is not None else None
    try:
        flat = trace.check(d["trace"]) if d.get("trace") is not None else None
    except ValueError as exc:
        raise fault(f"a run's trace is not a trace: {exc}") from None
    run = RunResult(code=code, value=decode_value(d.get("value")), logs=logs, error=error,
                    result=decode_value(d.get("result")))
    if flat is not None:
        run.trace_source = trace.TraceSource(lambda: flat)
    return run


def decode_validation(data: object) -> Validation:
    """The :class:`Validation` of a ``validate`` result."""
    d = _object(data, "a validation")
    errors = d.get("errors")
    if type(errors) is not list:
        raise fault("a validation's errors are not a list")
    return Validation([decode_error(e) for e in errors], set(_strings(d.get("allowlist_names"), "allowlist names")),
                      set(_strings(d.get("local_names"), "local names")), set(_strings(d.get("secrets"), "secrets")))


def decode_dataflow(data: object) -> Dataflow:
    """The :class:`~..fragments.dataflow.Dataflow` of a ``dataflow`` result: ``accesses``, a list of objects
    whose ``mode``, ``via`` and ``when`` are among the known words and whose paths are text."""
    accesses = _object(data, "a data flow").get("accesses")
    if type(accesses) is not list:
        raise fault("a data flow's accesses are not a list")
    out: list[Access] = []
    for item in accesses:
        d = _object(item, "an access")
        fields = [d.get(key) for key in ("mode", "data", "command", "field", "via", "when")]
        texts = [f for f in fields if type(f) is str]
        if len(texts) != len(fields):
            raise fault("an access whose fields are not text")
        mode, data_path, command, field_path, via, when = texts
        if mode not in ("read", "write") or via not in VIAS or when not in WHENS:
            raise fault("an access with an unknown mode, via or when")
        out.append(Access(mode, data_path, command, field_path, via, when))
    return Dataflow(out)


def decode_names(data: object) -> dict[str, str]:
    """The result of ``completion_names``: name → kind."""
    d = _object(data, "completion names")
    if any(type(v) is not str for v in d.values()):
        raise fault("completion names whose kinds are not text")
    return d


def decode_strings(data: object) -> list[str]:
    """A result that is a list of strings (``member_names``, the warnings of ``init`` and ``update_settings``)."""
    return _strings(data, "a result")


def decode_text(data: object) -> str | None:
    """A result that is a string or ``null`` (``describe``)."""
    if not _is(data, str):
        raise fault("a result that is not text")
    return data  # type: ignore[return-value]
