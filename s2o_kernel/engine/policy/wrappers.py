"""What stands in for a callable or an iterator the engine hands to untrusted code (SPEC 3.1, 12).

* :class:`GuardedCallable`: a callable given to a callee in place of one that may keep its arguments
  (:mod:`.kept`); each call goes through the store guard first;
* :class:`SafeIterator` and :class:`SafeAsyncIterator`: what a granted (async) generator function returns
  (:func:`wrap_generator_function`), iteration only: no frame, no code, no address.

The values check (:mod:`.parts`, :mod:`.values`) opens or refuses these by their exact type, and the guards
(:mod:`.guards`) make them; this module sits below both and imports nothing of the package.
"""

from __future__ import annotations

import inspect
from typing import Any


class GuardedCallable:
    """A callable handed to a callee in place of one that may keep its arguments (:mod:`.kept`): each call
    goes through ``via(fn, args, kwargs)``, the store guard, which checks every argument first. The values
    check (:func:`.values.check_value`) opens it to ``fn``; its ``repr`` names nothing of ``fn``."""

    __slots__ = ("_fn", "_via")

    def __init__(self, fn: Any, via: Any) -> None:
        self._fn = fn
        self._via = via

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._via(self._fn, args, kwargs)

    def __repr__(self) -> str:
        return "<a guarded callable>"


class SafeIterator:
    """What a granted generator function returns: iteration only (SPEC 3.1, 12).

    A host generator object exposes ``gi_frame``, ``gi_code`` and a ``repr``
    with the host function's address; this wrapper has none of them.
    """

    __slots__ = ("_it", "_name")

    def __init__(self, it: Any, name: str) -> None:
        self._it = it
        self._name = name

    def __iter__(self) -> SafeIterator:
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

    def __aiter__(self) -> SafeAsyncIterator:
        return self

    def __anext__(self) -> Any:
        return self._it.__anext__()

    def __repr__(self) -> str:
        return f"<async iterator {self._name}>"


def wrap_generator_function(fn: Any) -> Any:
    """Grant a (async) generator function so that it returns a safe iterator instead of a generator."""
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
