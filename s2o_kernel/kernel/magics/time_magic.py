"""run once and show the value and the wall time

%time price * quantity              an expression
%time "{ f'Hello {name}' }"         a dynamic string
%time {"var": {"x": 1}}             a fragment (%%time with it in the body works too)
Prints `Wall time: 1.2 ms` on stdout, then shows the value as the cell's result.
The time covers the whole run as the kernel sees it (the round trip to the
evaluation worker included). A cell that fails shows its error and no time.
"""

from __future__ import annotations

import math
import time
from typing import Any

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel import cells
from s2o_kernel.kernel.magics.base import Magic, MagicCall

_UNITS = (("s", 1.0), ("ms", 1e3), ("\u00b5s", 1e6), ("ns", 1e9))


def format_time(seconds: float) -> str:
    """A duration as IPython's ``%time`` writes it: three significant digits in s, ms, µs or ns
    (``1.23 ms``); a minute or more as ``2min 5.3s``."""
    if seconds >= 60.0:
        minutes, rest = divmod(seconds, 60.0)
        return f"{int(minutes)}min {rest:.3g}s"
    order = 3 if seconds <= 0.0 else min(max(-(math.floor(math.log10(seconds)) // 3), 0), 3)
    if order > 0 and float(f"{seconds * _UNITS[order][1]:.3g}") >= 1000:
        order -= 1  # 999.96 µs is 1 ms, not "1e+03 µs"
    unit, scale = _UNITS[order]
    return f"{seconds * scale:.3g} {unit}"


def _run(call: MagicCall, cell: cells.Cell) -> Any:
    """Run an expression, dynamic string or fragment cell; a fragment's result is its RunResult."""
    ctx = call.ctx
    if cell.kind == cells.FRAGMENT:
        return ctx.run_fragment(cell.data)
    session = ctx.require_session()
    if cell.kind == cells.DYNAMIC:
        return session.evaluate_dynamic(cell.text)
    return session.evaluate(cell.text)


def handle(call: MagicCall) -> None:
    """``%time TEXT``: run ``TEXT`` once (an expression, a dynamic string or a fragment; SPEC 9.1),
    then show ``Wall time: …`` on ``stdout`` and the value as the result.

    ``magic`` when there is nothing to run or ``TEXT`` is a magic or a help request; the run's own
    error otherwise (no time is shown then).
    """
    cell = cells.classify(call.text, call.ctx.fragment_kind)
    if cell.kind == cells.EMPTY:
        raise S2OError("magic", "%time needs something to run: %time EXPRESSION or %time FRAGMENT.")
    if cell.kind not in (cells.EXPRESSION, cells.DYNAMIC, cells.FRAGMENT):
        raise S2OError("magic", "%time runs an expression, a dynamic string or a fragment, not a magic or help.")
    start = time.perf_counter()
    outcome = _run(call, cell)
    elapsed = time.perf_counter() - start
    if cell.kind == cells.FRAGMENT and outcome.code != "success":
        call.ctx.show_run(outcome)  # raises the run's error
    call.ctx.emit_stream("stdout", f"Wall time: {format_time(elapsed)}\n")
    if cell.kind == cells.FRAGMENT:
        call.ctx.show_run(outcome)
    else:
        call.ctx.show_value(outcome)


MAGIC = Magic("time", __doc__, line=handle, cell=handle)
