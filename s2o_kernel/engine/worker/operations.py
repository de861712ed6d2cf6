"""The worker's operations, one table (issue 29): each session operation is described here once.

An :class:`Operation` is a row of :data:`OPERATIONS`: its ``name`` (the request's ``op`` and, for most, the
:class:`~..session.Session` method the worker calls), its argument schema ``args`` (field → the exact JSON types
accepted), and its result :class:`Codec` (``encode`` in the worker, ``decode`` with type checks in the parent).
From the table come the worker's dispatch (:meth:`.server.Worker.handle`), the requests and decoded results of
:class:`~.client.IsolatedSession` (``_call``; an operation it has no method of its own for is served by its
``__getattr__``) and, in ``tests/engine/test_operations_table.py``, the check that the table and the kernel's
``SessionLike`` name the same operations. Adding an operation is one :func:`register` call here and one
``Session`` method.

Arguments are untrusted on the worker's side: :meth:`Operation.checked` accepts exactly the fields of ``args``
(``id`` and ``op`` aside), each of one of its types (``type(x) is t``, so ``True`` is not an ``int``); a field
left out is ``null``; anything else is a ``worker-protocol`` error naming the parent as the sender. :data:`JSON`
accepts any JSON value, for arguments the session checks itself (``evaluate(5)`` is a ``syntax`` error, as
in-process). The request line itself is capped (:data:`~.framing.MAX_MESSAGE`), so nothing read is unbounded.

Flags of a row: ``special`` (the worker calls it through a handler of its own, :data:`.server.SPECIAL`:
``init``, ``ping``, ``run_fragment`` with its ``output`` events, ``vars``), ``run`` (an interruptible run with
``progress`` reports), ``state`` (the result travels as ``{"result": RESULT, "state": STATE}``, and the parent
keeps ``STATE`` as its last good state for a restart), ``needs_session`` (refused before ``init``),
``timeout`` (seconds the parent waits; ``None``: ``limits.time`` + the kill grace), ``logs`` (its reply carries
the run's log lines, output that ``limits.output_bytes`` caps: the reply's line may be as long as that much output
written as JSON, :func:`.wire.output_cap`, where any other reply is capped at
:data:`~s2o_kernel.bounds.MAX_CONTROL_MESSAGE`) and ``members`` (the ``SessionLike`` members it serves: by default
its name). :data:`PARENT_ONLY` lists the members the parent
answers alone. Result shapes (``DISPLAY``, ``STATE``, ``ERROR``) are those of :mod:`.wire`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..fragments.dataflow import Dataflow
from . import wire

T = TypeVar("T")
Schema = Mapping[str, tuple[type, ...]]
NULL = type(None)
#: Any JSON value, by the exact types ``json.loads`` makes.
JSON: tuple[type, ...] = (str, int, float, bool, list, dict, NULL)
#: A JSON object or ``null``.
OBJECT_OR_NULL: tuple[type, ...] = (dict, NULL)
#: Fields of every request that are not arguments.
ENVELOPE = frozenset({"id", "op"})
#: ``SessionLike`` members the parent answers from its own copy of the settings, without the worker.
PARENT_ONLY = frozenset({"settings_dict", "redact"})


def check_fields(schema: Schema, message: Mapping[str, Any], what: str, ignore: frozenset[str] = frozenset()
                 ) -> dict[str, Any]:
    """``{field: value}`` for each field of ``schema`` in ``message`` (``null`` when left out), from the worker's
    side. Raises ``worker-protocol`` (sender: the parent) for a field ``schema`` does not name (``ignore``
    aside) or a value of none of its field's exact types; ``what`` names the message in the error."""
    unknown = message.keys() - schema.keys() - ignore
    if unknown:
        raise wire.fault(f"{what} with a field it does not take: {wire.quote(min(map(str, unknown)))}", wire.PARENT)
    out: dict[str, Any] = {}
    for field, types in schema.items():
        value = message.get(field)
        if type(value) not in types:
            kinds = " or ".join("null" if t is NULL else t.__name__ for t in types)
            raise wire.fault(f"{field!r} of {what} is {type(value).__name__}, not {kinds}", wire.PARENT)
        out[field] = value
    return out


@dataclass(frozen=True, slots=True)
class Codec(Generic[T]):
    """How a result crosses the pipe. ``shape`` describes its JSON; ``encode(value)`` is the worker's (the
    session's value → JSON; a reply that is not JSON or too large becomes an error reply, :func:`.wire.encode_result`);
    ``decode(data)`` is the parent's: the value, every field type-checked, raising ``worker-protocol``."""

    shape: str
    encode: Callable[[Any], Any]
    decode: Callable[[object], T]


def _as_is(value: Any) -> Any:
    return value


def _nothing(data: object) -> None:
    if data is not None:
        raise wire.fault("a result that should be null")


def _encode_vars(found: dict[str, Any]) -> dict[str, Any]:
    return {"locals": {k: wire.encode_value(v) for k, v in found["locals"].items()}, "agent": found["agent"],
            "conv": found["conv"]}


def _decode_vars(data: object) -> dict[str, dict[str, Any]]:
    found = wire.decode_state(data)
    return {**found, "locals": {k: wire.decode_value(v) for k, v in found["locals"].items()}}


#: The result codecs of the table: shape of the JSON, worker's encoder, parent's decoder.
AS_VALUE = Codec("DISPLAY", wire.encode_value, wire.decode_value)
AS_RUN = Codec("{code, value: DISPLAY or null, logs: [TEXT], error: ERROR or null, result: DISPLAY or null, "
               "trace: TRACE (flat form) or null}", wire.encode_run, wire.decode_run)
AS_VALIDATION = Codec("{errors: [ERROR], allowlist_names: [TEXT], local_names: [TEXT], secrets: [TEXT]}",
                      wire.encode_validation, wire.decode_validation)
AS_DATAFLOW = Codec("{reads, writes, accesses: [ACCESS]} (SPEC 8)", Dataflow.to_dict, wire.decode_dataflow)
AS_VARS = Codec("{locals: {NAME: DISPLAY}, agent: {…}, conv: {…}}", _encode_vars, _decode_vars)
AS_STRINGS = Codec("[TEXT]", _as_is, wire.decode_strings)
AS_NAMES = Codec("{NAME: KIND}", _as_is, wire.decode_names)
AS_TEXT = Codec("TEXT or null", _as_is, wire.decode_text)
AS_NOTHING = Codec("null", _as_is, _nothing)


@dataclass(frozen=True, slots=True)
class Operation(Generic[T]):
    """One operation of the worker (see the module doc for the fields)."""

    name: str
    args: Schema
    result: Codec[T]
    special: bool = False
    run: bool = False
    state: bool = False
    needs_session: bool = True
    timeout: float | None = None
    logs: bool = False
    members: tuple[str, ...] | None = None

    @property
    def serves(self) -> tuple[str, ...]:
        """The ``SessionLike`` members this operation serves."""
        return (self.name,) if self.members is None else self.members

    def fields(self, values: tuple[Any, ...], named: Mapping[str, Any]) -> dict[str, Any]:
        """The parent's request fields for a call with positional ``values`` and keywords ``named``, bound
        to ``args`` in order. Raises ``TypeError`` (a caller's mistake, as a Python call would) for too many
        values, a name ``args`` lacks, a field given twice, or a field left out that may not be ``null``."""
        if len(values) > len(self.args):
            raise TypeError(f"{self.name}() takes {len(self.args)} arguments but {len(values)} were given")
        bound = dict(zip(self.args, values, strict=False))
        for name, value in named.items():
            if name not in self.args or name in bound:
                raise TypeError(f"{self.name}() got an unexpected or repeated argument {name!r}")
            bound[name] = value
        missing = [f for f, types in self.args.items() if f not in bound and NULL not in types]
        if missing:
            raise TypeError(f"{self.name}() is missing the argument {missing[0]!r}")
        return {field: bound.get(field) for field in self.args}

    def checked(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The worker's side: the arguments of ``request`` (:func:`check_fields`; raises ``worker-protocol``)."""
        return check_fields(self.args, request, f"the request {self.name}", ENVELOPE)

    def encode(self, value: Any, state: Callable[[], dict[str, Any]]) -> Any:
        """The worker's side: the reply's ``RESULT`` for the session's ``value`` (with ``state()``, a flagged
        operation's)."""
        encoded = self.result.encode(value)
        return {"result": encoded, "state": state()} if self.state else encoded

    def decode(self, data: object) -> tuple[T, dict[str, Any] | None]:
        """The parent's side: the value a reply's ``RESULT`` stands for, and the ``STATE`` it carries (``None``
        unless the operation is flagged ``state``); raises ``worker-protocol`` for a result of the wrong shape."""
        if not self.state:
            return self.result.decode(data), None
        if type(data) is not dict or data.keys() != {"result", "state"}:
            raise wire.fault(f"a result of {self.name} without its state")
        return self.result.decode(data["result"]), wire.decode_state(data["state"])


#: The table: ``op`` → :class:`Operation`, in the order of :func:`register`.
OPERATIONS: dict[str, Operation[Any]] = {}


def register(operation: Operation[T]) -> Operation[T]:
    """Add ``operation`` to :data:`OPERATIONS` and return it; raises ``ValueError`` for a name already there."""
    if operation.name in OPERATIONS:
        raise ValueError(f"the operation {operation.name!r} is in the table already")
    OPERATIONS[operation.name] = operation
    return operation


# The table. Arguments are the ``Session`` method's (keywords); results as each codec's ``shape`` says.
INIT = register(Operation("init", {"settings": (dict,), "state": OBJECT_OR_NULL}, AS_STRINGS,
                          special=True, needs_session=False, members=()))  # settings: SPEC 10; STATE
PING = register(Operation("ping", {}, AS_TEXT, special=True, needs_session=False, members=()))  # "pong"
EVALUATE = register(Operation("evaluate", {"expr": JSON}, AS_VALUE, run=True))
EVALUATE_DYNAMIC = register(Operation("evaluate_dynamic", {"text": JSON}, AS_VALUE, run=True))
RUN_FRAGMENT = register(Operation("run_fragment", {"fragment": JSON, "inputs": OBJECT_OR_NULL, "function": (str, NULL)},
                                  AS_RUN, special=True, run=True, state=True, logs=True))  # parts: ``output`` events
VALIDATE = register(Operation("validate", {"expr": JSON}, AS_VALIDATION))
DATAFLOW = register(Operation("dataflow", {"fragment": JSON}, AS_DATAFLOW))
UPDATE_SETTINGS = register(Operation("update_settings", {"patch": (dict,)}, AS_STRINGS))  # the new warnings
SET_VARS = register(Operation("set_vars", {"locals": OBJECT_OR_NULL, "agent": OBJECT_OR_NULL, "conv": OBJECT_OR_NULL},
                              AS_NOTHING, state=True))
RESET = register(Operation("reset", {}, AS_NOTHING, state=True))
VARS = register(Operation("vars", {}, AS_VARS, special=True, members=("locals", "agent_vars", "conv_vars")))
COMPLETION_NAMES = register(Operation("completion_names", {}, AS_NAMES, timeout=5))
MEMBER_NAMES = register(Operation("member_names", {"dotted": (str,)}, AS_STRINGS, timeout=5))
DESCRIBE = register(Operation("describe", {"dotted": (str,)}, AS_TEXT, timeout=5))

#: ``STATE`` as ``init`` takes it (the worker checks it as it checks arguments).
STATE_FIELDS: Schema = {"locals": OBJECT_OR_NULL, "agent": OBJECT_OR_NULL, "conv": OBJECT_OR_NULL}
