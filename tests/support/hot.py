"""What tests read of a session's expression functions (``Execution._functions``, ``s2o_kernel/engine/language/compiled.py``)."""

from __future__ import annotations

import types
from typing import Any

from s2o_kernel.engine import S2OError


def bound_functions(execution: Any) -> list[types.FunctionType]:
    """Every expression function ``execution`` has made and keeps."""
    return list(execution._functions.values())


def has_function(execution: Any, source: str) -> bool:
    """Whether ``execution`` keeps the function of ``source`` (it ran it before)."""
    return source in execution._functions


def outcome(session: Any, source: str) -> Any:
    """What evaluating ``source`` gives: ``("value", type, repr)`` or ``("error", code, message, line, col)``."""
    try:
        value = session.evaluate(source)
    except S2OError as exc:
        return ("error", exc.code, exc.message, exc.line, exc.col)
    return ("value", type(value), repr(value))
