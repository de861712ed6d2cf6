"""The registry of fragment commands (SPEC 7): one module per command (or small family), one line each.

:data:`REGISTRY` maps a command's name to its :class:`~.spec.CommandSpec` (fields model, parser,
runner). The fragment parser and interpreter dispatch through it. Adding a command means adding its
module and one line below; the commands that reach outside systems (``api``, ``db``, ``llm``, ``ask``,
SPEC 7.1) are registered like the others.
"""

from __future__ import annotations

from . import api, ask, branch, call, db, flow, llm, log, loops, output, parallel, var
from .spec import CommandSpec

REGISTRY: dict[str, CommandSpec] = {spec.name: spec for spec in (
    var.VAR,
    branch.IF,
    loops.FOR,
    loops.WHILE,
    loops.BREAK,
    loops.CONTINUE,
    flow.RETURN,
    flow.FAIL,
    flow.END,
    output.OUTPUT,
    log.LOG,
    call.CALL,
    parallel.PARALLEL,
    api.API,
    db.DB,
    llm.LLM,
    ask.ASK,
)}

#: Every command name of SPEC 7.
COMMAND_NAMES = frozenset(REGISTRY)

#: Keys of function objects and agent definitions (SPEC 7).
STRUCTURE_WORDS = frozenset({"onError", "functions", "main", "args", "commands", "bounds"})


def fragment_words() -> frozenset[str]:
    """The words a fragment this version runs may use as keys: the names of the registered commands,
    their fields (by their JSON names, ``in`` and ``else`` included) and :data:`STRUCTURE_WORDS`."""
    words = set(REGISTRY) | STRUCTURE_WORDS
    for spec in REGISTRY.values():
        if spec.fields is not None:
            words.update(f.alias or name for name, f in spec.fields.model_fields.items())
    return frozenset(words)


__all__ = ["COMMAND_NAMES", "REGISTRY", "STRUCTURE_WORDS", "CommandSpec", "fragment_words"]
