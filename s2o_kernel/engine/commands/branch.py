"""``if``: ``condition``, ``then`` and optional ``else`` command lists (SPEC 7)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..fragments.tree import Command, join
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel


class IfFields(FieldsModel):
    """``if``'s fields: ``condition`` (a dynamic value), ``then`` and ``else`` (command lists)."""

    condition: Any
    then: dict[str, Any] | list[Any]
    else_: dict[str, Any] | list[Any] | None = Field(default=None, alias="else")


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the condition and both branches."""
    m = p.model(IfFields, fields, cmd.path)
    if m is None:
        return None
    p.value(m.condition, join(cmd.path, "condition"), known)
    cmd.model = m
    cmd.children["then"] = p.commands(m.then, join(cmd.path, "then"), known, in_loop)
    cmd.children["else"] = p.commands(m.else_, join(cmd.path, "else"), known, in_loop) if m.else_ is not None else []
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Run ``then`` when the condition is true, else ``else``."""
    if await it.truth(cmd.model.condition, f"{cmd.path}.condition"):
        await it.block(cmd.children["then"])
    else:
        await it.block(cmd.children["else"])


def run_sync(it: Interpreter, cmd: Command) -> None:
    """:func:`run` for a sync ``if`` (the condition and both branches never await)."""
    branch = "then" if it.truth_sync(cmd.model.condition, f"{cmd.path}.condition") else "else"
    it.block_sync(cmd.children[branch])


IF = CommandSpec("if", parse, run, fields=IfFields, run_sync=run_sync)
