"""``log``: a trace line, not part of the output (SPEC 7)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..values import safe_repr
from .spec import CommandSpec, parse_text

if TYPE_CHECKING:
    from ..fragments.interpreter import Interpreter
    from ..fragments.tree import Command


async def run(it: Interpreter, cmd: Command) -> None:
    """Add the text (a non-string value as JSON, or its bounded ``repr`` when JSON cannot show it) to the logs."""
    text = await it.value(cmd.fields, cmd.path)
    if not isinstance(text, str):
        try:
            text = json.dumps(text, default=repr)
        except (ValueError, TypeError, RecursionError):  # an int too large to print, a value nested too deeply
            text = safe_repr(text)
    it.logs.append(text)


LOG = CommandSpec("log", parse_text, run)
