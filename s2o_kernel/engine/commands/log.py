"""``log``: a trace line, not part of the output (SPEC 7); each line counts against the run's
``limits.output_bytes`` (SPEC 12: the kernel shows log lines on ``stderr``), ``output-limit`` past it."""

from __future__ import annotations

import json
from typing import Any

from ..fragments.tree import Command
from ..policy.values import safe_repr
from ..policy.written import too_large_text, too_large_to_write
from ..run.scopes import masked_text
from .protocols import Interpreter
from .spec import CommandSpec, parse_text


async def run(it: Interpreter, cmd: Command) -> None:
    """Add the text (a non-string value as JSON, or its bounded ``repr`` when JSON cannot show it) to the logs."""
    keep(it, line(await it.value(cmd.fields, cmd.path)))


def run_sync(it: Interpreter, cmd: Command) -> None:
    """:func:`run` for a sync ``log``."""
    keep(it, line(it.value_sync(cmd.fields, cmd.path)))


def keep(it: Interpreter, text: str) -> None:
    """Charge ``text`` (a log line and its line break) to the run's output budget, then keep it."""
    it.output_budget.charge_text(text + "\n", "log lines")
    it.logs.append(text)


def line(text: Any) -> str:
    """The log line of a value: a string as it is, text holding a secret as it shows (``Bearer ***``, as
    ``output`` shows it), anything else as JSON, or its bounded ``repr``."""
    if isinstance(text, str):
        return text
    masked = masked_text(text)
    if masked is not None:
        return masked
    if too_large_to_write(text):  # its JSON (or repr) would never end (written.py)
        return too_large_text(text)
    try:
        return json.dumps(text, default=repr)
    except (ValueError, TypeError, RecursionError):  # an int too large to print, a value nested too deeply
        return safe_repr(text)


LOG = CommandSpec("log", parse_text, run, run_sync=run_sync)
