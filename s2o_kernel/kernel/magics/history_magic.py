"""earlier cells of this and earlier sessions

%history                the cells this kernel ran, oldest first, each after its number
%history -n 5           the last 5 of them
%history -g PATTERN     cells of every session whose text holds PATTERN (a glob: * and ?
                        match any text; case sensitive), the latest of equal cells only;
                        with -n N, the last N matches
A cell of this kernel shows as `12: text`; one of an earlier kernel as `3/12: text`
(session 3, line 12). The history is kept in history.sqlite in Jupyter's data
directory ($S2O_HISTORY_FILE names another file); the up-arrow of jupyter console reads it too.
A cell joins the history when it ends, so %history does not list itself.
"""

from __future__ import annotations

import argparse

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.history import Entry
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser, Once
from s2o_kernel.kernel.magics.base import Magic, MagicCall

PARSER = MagicArgumentParser("history")
PARSER.add_argument("-n", dest="n", metavar="N", type=int, action=Once, help="the last N cells")
PARSER.add_argument("-g", dest="pattern", metavar="PATTERN", action=Once, help="search every session")


def format_entries(entries: list[Entry], session: int | None) -> str:
    """One line per entry, ``line: text`` (``session/line: text`` for another session's cell);
    a cell's further lines are indented under its first."""
    lines: list[str] = []
    for s, n, source in entries:
        label = f"{n}" if s == session else f"{s}/{n}"
        first, *rest = source.splitlines() or [""]
        lines.append(f"{label:>5}: {first}")
        lines.extend(f"{'':>5}  {more}" for more in rest)
    return "\n".join(lines)


def handle(call: MagicCall) -> None:
    """``%history``: this kernel's cells (``-n N``: the last N) or a search of every session (``-g``)
    on ``stdout``; ``magic`` for a negative N or when the kernel keeps no history."""
    words: argparse.Namespace = call.words()
    if words.n is not None and words.n < 0:
        raise S2OError("magic", f"%history: -n must be 0 or more, got {words.n}")
    history = call.ctx.history
    if history is None:
        raise S2OError("magic", "%history: this kernel keeps no history.")
    session = history.session
    if words.pattern is not None:
        entries = history.entries("search", pattern=f"*{words.pattern}*", n=words.n, unique=True)
    elif words.n == 0:
        entries = []
    else:
        entries = history.entries("range", session=0, start=0)
        if words.n is not None:
            entries = entries[-words.n :]
    text = format_entries(entries, session)
    call.ctx.emit_stream("stdout", call.ctx.redact(text) + "\n" if text else "")


MAGIC = Magic("history", __doc__, line=handle, parser=PARSER)
