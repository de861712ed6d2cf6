"""The outside calls a worker asks its parent to make, checked as untrusted before any work (SPEC 7.1, 12).

A contained run makes its outside calls through its parent (:mod:`.forward`): an ``outside`` event carries an
:class:`~..outside.call.OutsideCall`, whose shape :meth:`~..outside.call.OutsideCall.from_json` has checked. The
worker's language rules may have failed, so before the parent does any work for a call (makes its gateway, imports
a kind's module, evaluates a profile's credentials, walks a field) :func:`check_call` holds it to what an honest
worker sends:

* the profile: the name of a profile of the call's kind in the parent's settings (none for ``ask``);
* the fields: only those its kind's command sends (:data:`FIELDS`), each one the command fixes of its exact JSON
  type; the others, evaluated from the fragment, may be any JSON value (the kind's handler checks them, as
  in-process);
* ``secrets_used``: names of secrets the settings hold, each once;
* sizes (:func:`check_size`, which the worker applies too before it sends a call): at most
  :data:`~s2o_kernel.bounds.MAX_CALL_ITEMS` values in the fields, nested as deep as the worker's own check lets a
  call be (:func:`~..outside.call.json_fields`: :data:`~s2o_kernel.bounds.MAX_JSON_DEPTH`), and a path of at most
  :data:`~s2o_kernel.bounds.MAX_CALL_PATH` characters.

A call that breaks any of these is a lie of the worker: ``worker-protocol`` (``too-deep`` for the depth), and the
parent restarts it (:class:`~.client.IsolatedSession`).
"""

from __future__ import annotations

from typing import Any

from ...bounds import MAX_CALL_ITEMS, MAX_CALL_PATH, MAX_JSON_DEPTH
from ..errors import S2OError
from ..outside.call import OutsideCall
from ..settings import Settings
from . import wire
from .operations import JSON

#: The fields each kind's command sends (``commands/api.py``, ``db.py``, ``llm.py``, ``ask.py``) and the exact
#: JSON types each may have: those the command fixes, or :data:`~.operations.JSON` for an evaluated field.
FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "api": {"method": JSON, "path": JSON, "query": JSON, "headers": JSON, "body": JSON, "has_body": (bool,)},
    "db": {"sql": (str,), "params": (dict,), "max_rows": (int,)},
    "llm": {"messages": (list,), "tools": (list,), "stream": (bool,)},
    "ask": {"message": (str,), "inputs": (list,)},
}


def check_call(call: OutsideCall, settings: Settings) -> None:
    """The parent's check of a ``call`` its worker asked for under ``settings`` (see the module doc); raises
    ``worker-protocol`` (``too-deep``) naming the worker as the sender of what it does not accept."""
    problem = _problem(call, settings)
    if problem is not None:
        raise wire.fault(f"an outside call {problem}")
    try:
        check_size(call)
    except S2OError as exc:
        raise S2OError(exc.code, f"{wire.WORKER} broke the protocol: an outside call is too large ({exc.message})"
                       ) from None


def check_size(call: OutsideCall) -> None:
    """Raise ``worker-protocol`` when ``call``'s path or fields are larger than a call may be, ``too-deep`` when a
    field nests deeper (the message says which, as ``its fields hold …``); both sides apply it (the module doc)."""
    if len(call.path) > MAX_CALL_PATH:
        raise S2OError(wire.FAULT_CODE, f"its path is longer than {MAX_CALL_PATH:,} characters")
    left = MAX_CALL_ITEMS
    stack: list[tuple[Any, int]] = [(value, 0) for value in call.fields.values()]
    while stack:
        value, depth = stack.pop()
        left -= 1
        items = value if type(value) is list else value.values() if type(value) is dict else ()
        if left < len(items):
            raise S2OError(wire.FAULT_CODE, f"its fields hold more than {MAX_CALL_ITEMS:,} values")
        if items and depth >= MAX_JSON_DEPTH:
            raise S2OError("too-deep", f"its fields nest deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((item, depth + 1) for item in items)


def _problem(call: OutsideCall, settings: Settings) -> str | None:
    """What is wrong with ``call`` under ``settings`` (but its size), or ``None``."""
    if call.kind == "ask":
        if call.profile is not None:
            return "for ask, which has no profile"
    elif call.profile not in getattr(settings.profiles, call.kind):
        return f"to the {call.kind} profile {wire.quote(call.profile)}, which the settings do not define"
    fields = FIELDS[call.kind]
    for name, value in call.fields.items():
        types = fields.get(name)
        if types is None:
            return f"with the field {wire.quote(name)}, which a {call.kind} command does not send"
        if type(value) not in types:
            return f"whose field {name!r} is {type(value).__name__}"
    used = call.secrets_used
    if len(set(used)) != len(used) or not set(used) <= settings.secrets.keys():
        return "naming secrets the settings do not hold"
    return None
