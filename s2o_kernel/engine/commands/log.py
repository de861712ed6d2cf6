"""``log``: a trace line, not part of the output (SPEC 7)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .spec import CommandSpec, parse_text

if TYPE_CHECKING:
    from ..fragments.interpreter import Interpreter
    from ..fragments.tree import Command


async def run(it: Interpreter, cmd: Command) -> None:
    """Add the text (a non-string value as JSON) to the run's logs."""
    text = await it.value(cmd.fields, cmd.path)
    it.logs.append(text if isinstance(text, str) else json.dumps(text, default=repr))


LOG = CommandSpec("log", parse_text, run)
