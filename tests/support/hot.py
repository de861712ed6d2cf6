"""What tests read of a session's expression functions (``Execution._unwatched`` and ``_plain``, :mod:`s2o_kernel.engine.functions`)."""

from __future__ import annotations

import types
from typing import Any

from s2o_kernel.engine import S2OError


def only_armed(execution: Any) -> None:
    """Drop the unwatched functions ``execution`` made: each expression it ran runs under the time limit."""
    execution._unwatched = dict.fromkeys(execution._plain)
    execution._widened = {}


def bound_functions(execution: Any) -> list[types.FunctionType]:
    """Every function ``execution`` has made and keeps."""
    return [f for table in (execution._unwatched, execution._plain) for f in table.values() if f is not None]


def has_functions(execution: Any, source: str) -> bool:
    """Whether ``execution`` runs ``source`` as functions (it ran it before, and it does not await)."""
    return source in execution._plain


def outcome(session: Any, source: str) -> Any:
    """What evaluating ``source`` gives: ``("value", type, repr)`` or ``("error", code, message, line, col)``."""
    try:
        value = session.evaluate(source)
    except S2OError as exc:
        return ("error", exc.code, exc.message, exc.line, exc.col)
    return ("value", type(value), repr(value))


class Meta(type):
    """A metaclass whose ``__hash__`` and ``__eq__`` are Python code: a type test by hash or ``==`` would
    run them with no time limit armed. ``calls`` counts them (reset it before a check)."""

    calls = 0

    def __hash__(cls) -> int:
        Meta.calls += 1
        return 1

    def __eq__(cls, other: object) -> bool:
        Meta.calls += 1
        return False


class Odd(metaclass=Meta):
    """A value whose type is of :class:`Meta`."""
