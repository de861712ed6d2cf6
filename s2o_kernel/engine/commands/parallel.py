"""``parallel``: run command lists concurrently, gathering their errors (SPEC 7).

Branches run as tasks on the session's loop, so their awaited calls overlap. Errors of every branch
are gathered into one :class:`~..errors.ErrorGroup` in branch order, whatever finished first; a
``fail``, a limit or an interrupt in one branch cancels the others and ends the run.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ErrorGroup, S2OError
from ..fragments.tree import UNHANDLED, Command
from .protocols import Interpreter, Parser
from .spec import CommandSpec


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Parse each branch (``break``/``continue`` cannot cross into a branch)."""
    if not isinstance(fields, list) or not fields:
        p.error("fragment", "parallel takes a list of command lists", cmd.path)
        return None
    cmd.branches = [p.commands(branch, f"{cmd.path}[{i}]", known, False) for i, branch in enumerate(fields)]
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Run the branches as tasks; raise the gathered errors."""
    it.parallel_depth += 1
    tasks = [asyncio.ensure_future(it.branch(i, f"{cmd.path}[{i}]", branch)) for i, branch in enumerate(cmd.branches)]
    for task in tasks:  # read by this command or not (a second failure, a branch cancelled), never logged
        task.add_done_callback(_retrieved)
    try:
        failed: dict[int, S2OError] = {}
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=tasks.index):
                exc = task.exception()
                if exc is None:
                    continue
                if isinstance(exc, S2OError) and exc.code not in UNHANDLED:
                    failed[tasks.index(task)] = exc
                    continue
                for other in pending:
                    other.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                raise exc
        errors = [failed[i] for i in sorted(failed)]
        if errors:
            if len(errors) == 1:
                raise errors[0]
            group = ErrorGroup(errors)
            group.message = f"{len(errors)} branches failed: " + "; ".join(
                f"{e.path}: {e.code}: {e.message}" for e in errors)
            group.path = cmd.path
            raise group
    finally:
        it.parallel_depth -= 1
        for task in tasks:
            if not task.done():
                task.cancel()


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Marks ``task``'s exception as retrieved: asyncio would log the exception of a branch this command did
    not raise, with the engine's traceback, when the task is freed."""
    if not task.cancelled():
        task.exception()


PARALLEL = CommandSpec("parallel", parse, run)
