"""``call``: run a function of the agent with arguments; ``result`` is its return value (SPEC 7).

A call of a function the agent does not define is ``unknown-function`` and functions calling
themselves, directly or through others, are ``recursion``, both at validation (the parser records
every call for that check). Arguments are checked against the function's declared types
(``argument``). ``call`` produces a result, so it may carry ``outputPath`` (SPEC 8).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..fragments.tree import Command, join
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel


class CallFields(FieldsModel):
    """``call``'s fields: ``function`` (a name) and ``args`` (name → dynamic value)."""

    function: str
    args: dict[str, Any] = Field(default_factory=dict)


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the arguments' values and record the call."""
    m = p.model(CallFields, fields, cmd.path)
    if m is None:
        return None
    for name, value in m.args.items():
        p.value(value, join(join(cmd.path, "args"), name), known)
    p.calls.setdefault(p.current, []).append((m.function, join(cmd.path, "function")))
    cmd.model = m
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Evaluate the arguments, run the function, set ``result``."""
    m = cmd.model
    fn = it.program.functions[m.function]
    args = {}
    for name, raw in m.args.items():
        args[name] = await it.value(raw, f"{cmd.path}.args.{name}")
    value = await it.call(fn, args, f"{cmd.path}.args", f"{cmd.path} ({m.function})")
    it.session.set_result(value)


CALL = CommandSpec("call", parse, run, fields=CallFields, produces_result=True)
