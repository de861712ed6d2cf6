"""Guarded versions of granted helpers that take names or values at run time (SPEC 3.1, 12).

A literal attribute is checked at validation; a name built at run time
(``getattr(x, '_' + '_class__')``) is checked here, with the same rules
(:func:`denylist.name_violation`), and no attribute at all may be read on
frames, tracebacks, code objects, generators, coroutines and async
generators. When an allowlist grants ``getattr``, ``hasattr``, ``pow``,
``range`` or ``asyncio.gather``, the name is bound to the guarded version
here instead of the real one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .bounded import bounded_pow, bounded_range
from .denylist import OPAQUE_TYPES, name_violation
from .errors import S2OError

_MISSING = object()


def check_attribute(obj: Any, name: Any) -> None:
    """Raise ``S2OError`` when reading ``obj.<name>`` breaks a name rule (stage ``run``)."""
    if not isinstance(name, str):
        raise S2OError("runtime", f"TypeError: attribute name must be a string, not '{type(name).__name__}'")
    bad = name_violation(name)
    if bad is not None:
        raise S2OError(bad[0], bad[1])
    if isinstance(obj, OPAQUE_TYPES):
        raise S2OError("attribute", f"attributes of {type(obj).__name__} objects are not allowed")


def guarded_getattr(obj: Any, name: Any, default: Any = _MISSING) -> Any:
    """``getattr`` that applies the name rules to ``name`` first (SPEC 3.1).

    Raises ``S2OError`` (``underscore``, ``format``, ``attribute``) for a
    refused name, ``not-allowed`` for a member a granted module does not
    give; otherwise behaves like ``getattr``.
    """
    check_attribute(obj, name)
    if default is _MISSING:
        return getattr(obj, name)
    return getattr(obj, name, default)


def guarded_hasattr(obj: Any, name: Any) -> bool:
    """``hasattr`` that applies the name rules to ``name`` first (SPEC 3.1).

    A member that a granted module does not give counts as absent.
    """
    check_attribute(obj, name)
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    except S2OError as exc:
        if exc.code == "not-allowed":
            return False
        raise
    return True


def guard_kwargs(mapping: Any) -> Any:
    """Check the keys of a ``**mapping`` call argument against the name rules."""
    try:
        keys = list(mapping.keys())
    except AttributeError:
        raise S2OError("runtime", "TypeError: argument after ** must be a mapping") from None
    for key in keys:
        if isinstance(key, str):
            bad = name_violation(key)
            if bad is not None and bad[0] == "underscore":
                raise S2OError(bad[0], bad[1])
    return mapping


def refused_import(name: Any, *args: Any, **kwargs: Any) -> Any:
    """Stands in for ``__import__`` inside expressions: C code that imports fails cleanly."""
    raise S2OError("not-allowed", f"importing '{name}' is not allowed inside an expression")


async def guarded_gather(*aws: Any, return_exceptions: bool = False) -> list[Any]:
    """``asyncio.gather`` without ``return_exceptions``: exceptions never become values (SPEC 12)."""
    if return_exceptions:
        raise S2OError("not-allowed", "asyncio.gather(..., return_exceptions=True) is not allowed: "
                       "errors cannot become values")
    return await asyncio.gather(*aws)


#: Real object → guarded stand-in used when an allowlist grants it.
GUARDED_REPLACEMENTS: dict[int, Any] = {
    id(getattr): guarded_getattr,
    id(hasattr): guarded_hasattr,
    id(pow): bounded_pow,
    id(range): bounded_range,
    id(asyncio.gather): guarded_gather,
}
