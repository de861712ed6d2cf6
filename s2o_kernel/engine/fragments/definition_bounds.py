"""An agent definition's ``bounds`` (SPEC 7.1): ``{"time": seconds, "cost": dollars}`` for its runs.

``"bounds"`` sits beside ``"functions"`` in an agent definition. ``time`` (seconds, > 0) replaces
``limits.time`` and ``cost`` (US dollars, ≥ 0) replaces ``limits.llm_cost`` for a run of that
definition: a definition cell, ``%run`` of it, or ``Session.run_fragment`` of it. A bound may be
larger or smaller than the limit it replaces. Any other key, or a value that is not a number, is
refused at validation (code ``fragment``, path ``bounds.<key>``).

:func:`applied` puts the bounds in force for one run by giving the session's evaluator a twin of its
engine whose limits hold them (:meth:`~..engine.Engine.bounded`); errors then name ``bounds.time`` /
``bounds.cost`` instead of the limits. :func:`requested_time` is the forgiving read the worker's
parent uses to know how long to wait for such a run before killing the worker.

Not to be confused with :mod:`s2o_kernel.bounds`, where every numeric bound of the package is defined.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import S2OError
from .tree import join

if TYPE_CHECKING:
    from ..run.execution import Execution

#: Bound → the ``limits`` field it replaces.
LIMIT_OF = {"time": "time", "cost": "llm_cost"}


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def parse_bounds(raw: Any, path: str = "bounds") -> tuple[dict[str, float], list[S2OError]]:
    """``(bounds, errors)`` of a definition's ``bounds`` value: bound name → number, and every problem
    (code ``fragment`` with its JSON path)."""
    if type(raw) is not dict:
        return {}, [S2OError("fragment", "bounds is expected to be an object such as {\"time\": 10, \"cost\": 0.05}",
                             path=path, stage="validate")]
    bounds: dict[str, float] = {}
    errors = []
    for key, value in raw.items():
        where = join(path, key)
        if key not in LIMIT_OF:
            errors.append(S2OError("fragment", f"unknown bound '{key}'; bounds are time (seconds) and cost "
                                   "(US dollars)", path=where, stage="validate"))
        elif not _number(value):
            errors.append(S2OError("fragment", f"bounds.{key} is expected to be a number, got "
                                   f"{type(value).__name__}", path=where, stage="validate"))
        elif (key == "time" and value <= 0) or value < 0:
            least = "greater than 0" if key == "time" else "0 or more"
            errors.append(S2OError("fragment", f"bounds.{key} must be {least}", path=where, stage="validate"))
        else:
            bounds[key] = float(value)
    return bounds, errors


def requested_time(fragment: Any) -> float | None:
    """``bounds.time`` of an agent definition when it is a valid number, else ``None`` (never raises)."""
    return _requested(fragment, "time", lambda v: v > 0)


def requested_cost(fragment: Any) -> float | None:
    """``bounds.cost`` (US dollars) of an agent definition when it is a valid number, else ``None`` (never
    raises); the worker's parent holds a run's LLM spend to it (or to ``limits.llm_cost``)."""
    return _requested(fragment, "cost", lambda v: v >= 0)


def _requested(fragment: Any, key: str, valid: Callable[[float], bool]) -> float | None:
    if type(fragment) is not dict or type(fragment.get("functions")) is not dict:
        return None
    raw = fragment.get("bounds")
    value: Any = raw.get(key) if type(raw) is dict else None
    if not _number(value) or not valid(value):
        return None
    return float(value)


@contextlib.contextmanager
def applied(execution: Execution, bounds: dict[str, float]) -> Iterator[None]:
    """Put ``bounds`` in force on ``execution`` for the duration of the block (see the module doc)."""
    if not bounds:
        yield
        return
    engine = execution.engine
    execution.use_engine(engine.bounded({LIMIT_OF[k]: (f"bounds.{k}", v) for k, v in bounds.items()}))
    try:
        yield
    finally:
        execution.use_engine(engine.with_guard() if execution.engine.guarded else engine)
