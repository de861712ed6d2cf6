"""write / restore agent and conversation variables as a JSON file

%state save FILE      write {"agent": {...}, "conv": {...}} to FILE
%state load FILE      set the variables of FILE (others stay; all or nothing)
Locals are not saved: they are the notebook's own cells.
"""

from __future__ import annotations

import json
from typing import Any

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import read_json, write_text

PARSER = MagicArgumentParser("state")
PARSER.add_argument("action", choices=("save", "load"), metavar="save|load")
PARSER.add_argument("file", metavar="FILE")

SCOPES = ("agent", "conv")


def _save(call: MagicCall, path: str) -> None:
    session = call.ctx.require_session()
    agent, conv = session.agent_vars, session.conv_vars
    write_text(path, json.dumps({"agent": agent, "conv": conv}, indent=2, ensure_ascii=False) + "\n")
    call.ctx.emit_stream("stdout", f"Saved {len(agent)} agent and {len(conv)} conversation variables to {path}.\n")


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

    Saving writes UTF-8 JSON, all or nothing. Loading sets the file's variables literally with the
    session's ``set_vars`` (variables not in the file stay); ``magic`` for a file of another
    shape, ``syntax`` for one that is not JSON, the engine's error (with the note "Nothing was
    loaded") for a name or value the engine refuses.
    """
    words = call.words()
    if words.action == "save":
        _save(call, words.file)
    else:
        _load(call, words.file)


MAGIC = Magic("state", __doc__, line=handle, parser=PARSER)
