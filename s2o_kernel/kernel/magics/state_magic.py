"""write / restore agent and conversation variables as a JSON file

%state save FILE      write {"agent": {...}, "conv": {...}} to FILE
%state load FILE      set the variables of FILE (others stay; all or nothing)
Locals are not saved: they are the notebook's own cells.
"""

from __future__ import annotations

import json
import math
from typing import Any

from s2o_kernel.bounds import QUOTE
from s2o_kernel.engine import S2OError, parse_target
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import read_json, write_text

PARSER = MagicArgumentParser("state")
PARSER.add_argument("action", choices=("save", "load"), metavar="save|load")
PARSER.add_argument("file", metavar="FILE")

SCOPES = ("agent", "conv")


def _quote(name: str) -> str:
    text = repr(name)
    return text if len(text) <= QUOTE else text[:QUOTE] + "…"


def check_strict_json(state: dict[str, dict[str, Any]]) -> None:
    """Raise ``not-json`` naming the first variable (and the place inside it) that holds a float strict
    JSON cannot hold (``NaN``, ``Infinity``, ``-Infinity``); ``path`` is that place, e.g. ``agent.t[2]``."""
    stack: list[tuple[Any, str]] = [(value, f"{scope}.{name}") for scope in SCOPES
                                    for name, value in reversed(list(state[scope].items()))]
    while stack:
        value, at = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise S2OError("not-json", f"{at} holds {value!r}, which JSON cannot hold", path=at)
        if isinstance(value, list):
            stack.extend((item, f"{at}[{i}]") for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, dict):
            stack.extend((item, f"{at}[{key!r}]") for key, item in reversed(list(value.items())))


def check_names(state: dict[str, dict[str, Any]]) -> None:
    """Raise the engine's code (``fragment``, ``underscore``) for the first name that is not a
    ``var`` target of its scope as the engine reads one (``agent.NAME``, ``conv.NAME``: SPEC 7)."""
    for scope in SCOPES:
        for name in state[scope]:
            code = "fragment"
            try:
                ok = type(name) is str and name.isidentifier() and parse_target(f"{scope}.{name}") == (scope, name, [])
            except S2OError as exc:
                ok, code = False, exc.code
            if not ok:
                raise S2OError(code, f'{_quote(name)} in "{scope}" is not a variable a var command can set '
                               f"as {scope}.NAME", path=scope)


def _json_text(state: dict[str, dict[str, Any]]) -> str:
    """Strict JSON text of ``state`` (no ``NaN``): UTF-8 readable, or ASCII with ``\\u`` escapes when a
    text holds a lone surrogate, which UTF-8 cannot carry."""
    text = json.dumps(state, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(state, indent=2, allow_nan=False) + "\n"
    return text


def _save(call: MagicCall, path: str) -> None:
    session = call.ctx.require_session()
    state = {"agent": session.agent_vars, "conv": session.conv_vars}
    try:
        check_strict_json(state)
    except S2OError as exc:
        exc.add_note(f"Nothing was saved to {path}.")
        raise
    write_text(path, _json_text(state))
    call.ctx.emit_stream("stdout", f"Saved {len(state['agent'])} agent and {len(state['conv'])} conversation "
                                   f"variables to {path}.\n")


def _saved_state(path: str) -> dict[str, dict[str, Any]]:
    """The ``{"agent": {...}, "conv": {...}}`` in ``path``; ``magic`` when it has another shape."""
    state = read_json(path)
    if not isinstance(state, dict) or not set(state) <= set(SCOPES):
        raise S2OError(
            "magic",
            f'{path} is not a saved state: expected {{"agent": {{...}}, "conv": {{...}}}} (as %state save writes it).',
        )
    for scope in SCOPES:
        if not isinstance(state.get(scope, {}), dict):
            raise S2OError("magic", f'{path}: "{scope}" must be a JSON object of variables.')
    return {scope: state.get(scope) or {} for scope in SCOPES}


def _load(call: MagicCall, path: str) -> None:
    state = _saved_state(path)
    session = call.ctx.require_session()
    try:
        check_names(state)
        check_strict_json(state)
        session.set_vars(agent=state["agent"], conv=state["conv"])
    except S2OError as exc:
        exc.add_note(f"Nothing was loaded from {path}.")
        raise
    call.ctx.emit_stream(
        "stdout",
        f"Loaded {len(state['agent'])} agent and {len(state['conv'])} conversation variables from {path}.\n",
    )


def handle(call: MagicCall) -> None:
    """``%state save FILE`` / ``%state load FILE``: keep agent and conversation variables (SPEC 5).

    Saving writes strict UTF-8 JSON, all or nothing: a value JSON cannot hold (``NaN``, ``Infinity``)
    is ``not-json`` naming the variable, and nothing is written. Loading sets the file's variables
    literally with the session's ``set_vars`` (variables not in the file stay), all or nothing:
    ``syntax`` (line and column, never the file's text) for a file that is not JSON, ``magic`` for
    one of another shape, the engine's ``var``-target code (``fragment``, ``underscore``) for a name
    a ``var`` command could not set, ``not-json`` for ``NaN`` or ``Infinity``, and the engine's error
    for a name or value it refuses; each with the note "Nothing was loaded".
    """
    words = call.words()
    if words.action == "save":
        _save(call, words.file)
    else:
        _load(call, words.file)


MAGIC = Magic("state", __doc__, line=handle, parser=PARSER)
