"""``return``, ``end`` and ``fail``: commands that end a function or the run (SPEC 7).

``return`` ends the function with its (dynamic) value; ``end`` ends the run with success; ``fail``
ends the run with result code ``failCommand`` and its message, which ``onError`` does not handle.
"""

from __future__ import annotations

from typing import Any

from ..errors import S2OError
from ..fragments.tree import Command, End, Fail, Return
from ..policy.values import cut, safe_repr
from ..policy.written import too_large_text, too_large_to_write
from .protocols import Interpreter, Parser
from .spec import CommandSpec, parse_no_fields, parse_text


def parse_return(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """``return``'s value may be any dynamic value."""
    p.value(fields, cmd.path, known)
    return cmd


async def run_return(it: Interpreter, cmd: Command) -> None:
    """End the function with the value."""
    raise Return(await it.value(cmd.fields, cmd.path))


def return_sync(it: Interpreter, cmd: Command) -> None:
    """:func:`run_return` for a sync ``return``."""
    raise Return(it.value_sync(cmd.fields, cmd.path))


def run_end(it: Interpreter, cmd: Command) -> None:
    """End the run with success."""
    raise End


async def run_fail(it: Interpreter, cmd: Command) -> None:
    """End the run with ``failCommand``; the message is the value's text, cut to ``values.MAX_TEXT``."""
    raise failure(await it.value(cmd.fields, cmd.path), cmd.path)


def fail_sync(it: Interpreter, cmd: Command) -> None:
    """:func:`run_fail` for a sync ``fail``."""
    raise failure(it.value_sync(cmd.fields, cmd.path), cmd.path)


def failure(message: Any, path: str) -> Fail:
    """The :class:`~..fragments.tree.Fail` signal of a ``fail`` at ``path`` whose value is ``message``."""
    if not isinstance(message, str):
        if too_large_to_write(message):  # its str would never end (written.py)
            return Fail(S2OError("failCommand", too_large_text(message), path=path))
        try:
            message = str(message)
        except S2OError:  # a secret has no text
            raise
        except Exception:  # an int too large to print, a value nested too deeply, a failing __str__
            message = safe_repr(message)
    return Fail(S2OError("failCommand", cut(message), path=path))


RETURN = CommandSpec("return", parse_return, run_return, run_sync=return_sync)
END = CommandSpec("end", parse_no_fields, None, run_sync=run_end)
FAIL = CommandSpec("fail", parse_text, run_fail, run_sync=fail_sync)
