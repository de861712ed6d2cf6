"""A compiled expression: the one code form every evaluation runs (SPEC 2, 3, 6).

An expression that passed the compile rules (:mod:`.rules`) and had its rewrites applied is compiled once,
as the body of a function of no argument::

    def <expr>():            # async def <expr>(): for an expression that awaits
        return EXPR

:func:`function_code` makes that code; :meth:`Compiled.bind` makes the function over a globals dict (a
session's, or the namespace of a fragment's function call). Names resolve as in ``eval(code, globals)``:
the globals dict, then its ``__builtins__`` (the engine's builtins, taken when the function is made), read
by ``LOAD_GLOBAL``. The compile rules refuse what would bind a name in the function (``:=``) or make it a
generator (``yield``), so the function form means what the expression means. Calling it costs ~20 ns where
``eval`` of an expression's code costs ~100 ns (``docs/performance.md``); an awaiting expression's call
returns its coroutine, awaited on the session's loop.

This module sits below the engine, the code cache and the execution: it imports nothing of the package.
"""

from __future__ import annotations

import ast
import inspect
import types
from dataclasses import dataclass
from typing import Any

#: File name given to compiled expressions (how run-time errors find their position).
FILENAME = "<s2o>"


@dataclass
class Compiled:
    """A checked, rewritten and compiled expression (cached per compile fingerprint by the engine).

    Attributes:
        source: the expression text.
        code: the code of its function (:func:`function_code`).
        local_names: names it reads that must come from locals.
        name_positions: name → (line, col) of its first use (for ``unknown-name``).
        may_run_long: it calls, loops or awaits (informational for tools).
        may_hold_objects: its value may hold objects the result check must look at (SPEC 12).
        is_coroutine_code: it awaits: its function is ``async`` and a call returns the coroutine to await.
        top_call: the whole expression is one call, whose coroutine (an async allowlist function's) the run
            awaits for you (SPEC 2).
        call_at: where that call starts (line, col), for an error raised while it is awaited (no frame of
            the expression is left to take a position from); ``None`` otherwise.
    """

    source: str
    code: types.CodeType
    local_names: frozenset[str]
    name_positions: dict[str, tuple[int, int]]
    may_run_long: bool
    may_hold_objects: bool
    is_coroutine_code: bool
    top_call: bool
    call_at: tuple[int, int] | None = None

    def bind(self, namespace: dict[str, Any]) -> types.FunctionType:
        """The expression's function over ``namespace`` (its globals; builtins from its ``__builtins__``)."""
        return types.FunctionType(self.code, namespace)


def function_code(tree: ast.Expression, *, awaits: bool) -> types.CodeType:
    """The code of ``def <expr>(): return BODY`` (``async def`` when ``awaits``) for the checked and
    rewritten ``tree``, positions the expression's own.

    Raises what ``compile`` raises for a tree that does not compile (``SyntaxError``, ``ValueError``,
    ``RecursionError``, ``MemoryError``). ``tree`` is not changed.
    """
    body = tree.body
    kind = ast.AsyncFunctionDef if awaits else ast.FunctionDef
    ret = _placed(ast.Return(value=body), body)
    function = _placed(kind(name="<expr>", args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                              kw_defaults=[], kwarg=None, defaults=[]),
                            body=[ret], decorator_list=[], returns=None, type_comment=None), body)
    module = compile(ast.Module(body=[function], type_ignores=[]), FILENAME, "exec", dont_inherit=True)
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


def is_coroutine(code: types.CodeType) -> bool:
    """Whether ``code`` is an ``async def``'s: a call returns a coroutine."""
    return bool(code.co_flags & inspect.CO_COROUTINE)


def _placed(new: Any, where: Any) -> Any:
    new.lineno, new.col_offset = where.lineno, where.col_offset
    new.end_lineno, new.end_col_offset = where.end_lineno, where.end_col_offset
    return new
