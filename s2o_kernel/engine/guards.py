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

from .bounded import BOUNDED_REPLACEMENTS, SIZED_METHODS, bounded_format, sized_attribute
from .denylist import OPAQUE_TYPES, name_violation
from .errors import S2OError
from .scopes import Secret, SecretText, reveal

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
    if name in SIZED_METHODS:
        return sized_attribute(obj, name) if default is _MISSING or hasattr(obj, name) else default
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


#: Modules that C code of granted functions may import while an expression runs
#: (``datetime.strftime`` imports ``time``; an unawaited coroutine's warning imports ``warnings``).
C_IMPORTS = frozenset({"time", "warnings", "_strptime", "locale", "encodings", "unicodedata", "calendar",
                       "_datetime", "datetime", "re", "_decimal", "decimal", "_pydecimal", "numbers"})


def guarded_import(name: Any, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """Stands in for ``__import__`` inside expressions (which cannot name it: underscore rule).

    Only C code of granted functions imports through it; it may import the
    few harmless modules in :data:`C_IMPORTS`, anything else fails cleanly.
    """
    if level == 0 and isinstance(name, str) and name.split(".")[0] in C_IMPORTS:
        import importlib

        module = importlib.import_module(name)
        return module if fromlist else importlib.import_module(name.split(".")[0])
    raise S2OError("not-allowed", f"importing '{name}' is not allowed inside an expression")


async def guarded_gather(*aws: Any, return_exceptions: bool = False) -> list[Any]:
    """``asyncio.gather`` without ``return_exceptions``: exceptions never become values (SPEC 12)."""
    if return_exceptions:
        raise S2OError("not-allowed", "asyncio.gather(..., return_exceptions=True) is not allowed: "
                       "errors cannot become values")
    return await asyncio.gather(*aws)


#: Hidden global that every f-string is rewritten to call (see :func:`format_string`).
FSTRING_HELPER = "__s2o_fstring"

_CONVERSIONS = {115: str, 114: repr, 97: ascii}


def format_string(*parts: Any) -> Any:
    """Build an f-string: ``parts`` are literal ``str`` pieces and ``(value, conversion, spec)`` tuples.

    Every f-string is rewritten to a call of this function, so that format
    widths and precisions are bounded (``f'{1:{10**10}}'`` is refused before
    it allocates) and a secret formatted into the text keeps the whole result
    secret: the result is then a :class:`SecretText` whose ``repr`` shows
    ``***`` in place of each secret.
    """
    out: list[str] = []
    for part in parts:
        if type(part) is str:
            out.append(part)
            continue
        value, conversion, spec = part
        kind = type(value)
        if kind is Secret or kind is SecretText:
            return _format_with_secrets(parts)
        if conversion != -1:
            value = _CONVERSIONS[conversion](value)
        out.append(bounded_format(value, spec) if spec else format(value))
    return "".join(out)


def _format_with_secrets(parts: tuple[Any, ...]) -> SecretText:
    out: list[str] = []
    masked: list[str] = []
    for part in parts:
        if type(part) is str:
            out.append(part)
            masked.append(part)
            continue
        value, conversion, spec = part
        if type(spec) is SecretText or type(spec) is Secret:
            raise S2OError("not-allowed", "a secret cannot be used as a format specification")
        if type(value) is Secret or type(value) is SecretText:
            text = bounded_format(reveal(value), spec or "") if conversion in (-1, 115) else repr(value)
            out.append(text)
            masked.append("***" if type(value) is Secret else value._masked)
            continue
        if conversion != -1:
            value = _CONVERSIONS[conversion](value)
        text = bounded_format(value, spec) if spec else format(value)
        out.append(text)
        masked.append(text)
    return SecretText("".join(out), "".join(masked))


class SafeIterator:
    """What a granted generator function returns: iteration only (SPEC 3.1, 12).

    A host generator object exposes ``gi_frame``, ``gi_code`` and a ``repr``
    with the host function's address; this wrapper has none of them.
    """

    __slots__ = ("_it", "_name")

    def __init__(self, it: Any, name: str) -> None:
        self._it = it
        self._name = name

    def __iter__(self) -> "SafeIterator":
        return self

    def __next__(self) -> Any:
        return next(self._it)

    def __repr__(self) -> str:
        return f"<iterator {self._name}>"


class SafeAsyncIterator:
    """What a granted async generator function returns: ``async for`` and ``anext`` only."""

    __slots__ = ("_it", "_name")

    def __init__(self, it: Any, name: str) -> None:
        self._it = it
        self._name = name

    def __aiter__(self) -> "SafeAsyncIterator":
        return self

    def __anext__(self) -> Any:
        return self._it.__anext__()

    def __repr__(self) -> str:
        return f"<async iterator {self._name}>"


def wrap_generator_function(fn: Any) -> Any:
    """Grant a (async) generator function so that it returns a safe iterator instead of a generator."""
    import inspect

    name = getattr(fn, "__name__", "generator")
    if inspect.isasyncgenfunction(fn):
        def granted_async(*args: Any, **kwargs: Any) -> SafeAsyncIterator:
            return SafeAsyncIterator(fn(*args, **kwargs), name)

        granted_async.__doc__ = fn.__doc__
        return granted_async

    def granted(*args: Any, **kwargs: Any) -> SafeIterator:
        return SafeIterator(fn(*args, **kwargs), name)

    granted.__doc__ = fn.__doc__
    return granted


#: Real object → guarded stand-in used when an allowlist grants it.
GUARDED_REPLACEMENTS: dict[int, Any] = {
    **BOUNDED_REPLACEMENTS,
    id(getattr): guarded_getattr,
    id(hasattr): guarded_hasattr,
    id(asyncio.gather): guarded_gather,
}
