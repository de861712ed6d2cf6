"""time many runs of an expression and show the time a run takes, as IPython's %timeit does

%timeit price * quantity              an expression
%timeit "{ f'Hello {name}' }"         a dynamic string
%timeit {"var": {"x": 1}}             a fragment (%%timeit with it in the body works too)
%timeit -n 1000 -r 3 price * 2        1000 loops a run, 3 runs
Prints one line on stdout, as IPython does, and shows no result:
  52.3 µs ± 1.2 µs per loop (mean ± std. dev. of 7 runs, 10,000 loops each)
Without -n, the loops of a run are the first of 1, 10, 100, ... that take 0.2 s; without -r,
7 runs. Each loop runs the text as a cell would (in the evaluation worker, the round trip
included), so the time is what it costs in a cell. It ends within limits.time (at most the loop
running then goes on to its own end): fewer runs are made when 7 would not fit, and -n loops that
do not fit in one run end with timedOut. A fragment's output parts show for its first loop only.
An error of the text ends it with that error, and no time is shown.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from s2o_kernel.bounds import TIMEIT_MOST_LOOPS, TIMEIT_RUN, TIMEIT_RUNS
from s2o_kernel.engine import S2OError
from s2o_kernel.kernel import cells
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.time_magic import format_time

#: A leading ``-n N`` or ``-r N`` (``-n1000`` too), as IPython writes them.
_OPTION = re.compile(r"\s*-(?P<flag>[nr])\s*(?P<value>\d+)(?=\s)")


class _OutOfTime(Exception):
    """The runs reached the end of ``limits.time``."""


def options(text: str) -> tuple[int | None, int | None, str]:
    """``(loops, runs, rest)`` of ``%timeit [-n LOOPS] [-r RUNS] TEXT``; ``None`` for an option not given.
    ``magic`` for a count below 1."""
    found: dict[str, int] = {}
    while (option := _OPTION.match(text)) is not None:
        value = int(option.group("value"))
        if value < 1:
            raise S2OError("magic", f"%timeit -{option.group('flag')} needs a count of 1 or more.")
        found[option.group("flag")] = value
        text = text[option.end():]
    return found.get("n"), found.get("r"), text.strip()


def _loop(call: MagicCall, cell: cells.Cell) -> Callable[[], None]:
    """One loop: the cell's text run as a cell runs it, its value dropped; raises the run's error."""
    ctx = call.ctx
    session = ctx.require_session()
    evaluate = session.evaluate if cell.kind == cells.EXPRESSION else session.evaluate_dynamic
    text = cell.text

    def expression() -> None:
        evaluate(text)

    if cell.kind != cells.FRAGMENT:
        return expression
    shown = False

    def fragment() -> None:
        nonlocal shown
        if shown:  # its output parts once: thousands of loops would flood the front end
            run = session.run_fragment(cell.data, on_output=lambda part: None)
        else:
            run, shown = ctx.run_fragment(cell.data), True
        if run.code != "success" or run.error is not None:
            ctx.show_run(run)  # raises the run's error

    return fragment


def _timed(loop: Callable[[], None], loops: int, deadline: float) -> float:
    """Seconds ``loops`` loops take; :class:`_OutOfTime` when ``deadline`` (a ``perf_counter`` time) passes
    with loops still to run."""
    clock = time.perf_counter
    start = clock()
    for _ in range(loops - 1):
        loop()
        if clock() > deadline:
            raise _OutOfTime
    loop()
    return clock() - start


def _calibrate(loop: Callable[[], None], deadline: float) -> tuple[int, float]:
    """``(loops, seconds)``: the first of 1, 10, 100, ... loops that take :data:`TIMEIT_RUN` seconds
    (IPython's rule), or the most that ran whole before ``deadline``."""
    loops, took = 1, _timed(loop, 1, deadline)
    while took < TIMEIT_RUN and loops < TIMEIT_MOST_LOOPS:
        try:
            took = _timed(loop, loops * 10, deadline)
        except _OutOfTime:
            break
        loops *= 10
    return loops, took


def report(runs: list[float], loops: int) -> str:
    """IPython's ``%timeit`` line for ``runs`` (seconds of ``loops`` loops each): the mean time of a loop and
    its standard deviation over the runs (of the population, as IPython computes it)."""
    each = [took / loops for took in runs]
    mean = math.fsum(each) / len(each)
    std = math.sqrt(math.fsum((t - mean) ** 2 for t in each) / len(each))
    return (f"{format_time(mean)} \u00b1 {format_time(std)} per loop (mean \u00b1 std. dev. of {len(runs)} "
            f"run{'s' if len(runs) != 1 else ''}, {loops:,} loop{'s' if loops != 1 else ''} each)\n")


def handle(call: MagicCall) -> None:
    """``%timeit [-n LOOPS] [-r RUNS] TEXT``: run ``TEXT`` (an expression, a dynamic string or a fragment;
    SPEC 9.1) ``RUNS`` times ``LOOPS`` times, each loop as a cell runs it, and show IPython's line on
    ``stdout`` (module docstring). Stops within ``limits.time``: no run starts that would end past it.

    ``magic`` when there is nothing to run, ``TEXT`` is a magic or a help request, or a count is below 1;
    ``timedOut`` when not one run of ``LOOPS`` loops fits in ``limits.time``; the text's own error (a loop's
    ``timedOut`` or ``stopped`` included) otherwise.
    """
    loops, repeat, text = options(call.text)
    cell = cells.classify(text, call.ctx.fragment_kind)
    if cell.kind == cells.EMPTY:
        raise S2OError("magic", "%timeit needs something to run: %timeit EXPRESSION or %timeit FRAGMENT.")
    if cell.kind not in (cells.EXPRESSION, cells.DYNAMIC, cells.FRAGMENT):
        raise S2OError("magic", "%timeit runs an expression, a dynamic string or a fragment, not a magic or help.")
    limit = float(call.ctx.require_session().settings_dict()["limits"]["time"])
    loop = _loop(call, cell)
    deadline = time.perf_counter() + limit
    runs: list[float] = []
    if loops is None:
        loops, took = _calibrate(loop, deadline)  # IPython times its runs after this one
    else:
        try:
            took = _timed(loop, loops, deadline)
        except _OutOfTime:
            raise S2OError("timedOut", f"%timeit: {loops:,} loops took longer than the time limit "
                           f"(limits.time = {limit:g} s); give fewer with -n.") from None
        runs.append(took)
    try:
        while len(runs) < (repeat or TIMEIT_RUNS) and time.perf_counter() + took <= deadline:
            took = _timed(loop, loops, deadline)
            runs.append(took)
    except _OutOfTime:
        pass  # the runs that ended before limits.time
    call.ctx.emit_stream("stdout", report(runs or [took], loops))  # no room after the calibration: its run


MAGIC = Magic("timeit", __doc__, line=handle, cell=handle)
