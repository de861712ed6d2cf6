"""Expression functions: the form a compiled expression takes on the hot path (SPEC 2, 6; docs/performance.md).

``eval`` of an expression's code object costs ~100 ns before its first operation (a C call, a function
object and a frame built for it, a new C-level interpreter frame) and reads every name by ``LOAD_NAME``
through up to three dicts. The same expression as the body of a Python function, ``def <expr>(): return
EXPR``, bound to the session's globals dict, is called from Python in ~20 ns and reads names by
``LOAD_GLOBAL``, which CPython specializes (a dict-version check, no lookup). Names resolve exactly as
in ``eval(code, globals)``: the globals dict, then its ``__builtins__`` (the engine's builtins, taken when
the function is made); the compile rules refuse what would bind a name in the function (``:=``) and
what would make it a generator (``yield``), and an expression that awaits keeps its ``eval`` form.

An expression that runs without the watchdog when its names hold exact builtin types
(:func:`.limits.unwatched`) gets a second, *tested* function that checks those types inline, by
identity (never a hash or ``==`` a metaclass could define), before the expression::

    def <tested>():
        if (__s2o_t := __s2o_type(price)) is __s2o_exact_float or __s2o_t is __s2o_exact_int ...:
            return price * quantity
        return __s2o_watch

:data:`WATCH` (``__s2o_watch``) says the types did not hold: the caller runs the plain function under
the time limit. The engine binds the hidden names of :data:`HIDDEN` in every expression's builtins.
"""

from __future__ import annotations

import ast
import types
from typing import Any

from .limits import Needs
from .rewrites import EXACT_NAMES, EXACT_ORDER, TYPE_HELPER, placed_at


class _Watch:
    """The type of :data:`WATCH`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WATCH"


#: What a tested function returns when a name's type did not hold (never a value of an expression:
#: no expression can name it, and nothing gives it out).
WATCH = _Watch()
#: The hidden global bound to :data:`WATCH`.
WATCH_NAME = "__s2o_watch"
#: The tested function's local holding the type under test.
_TYPE_LOCAL = "__s2o_t"
#: Every hidden global a function's code may read, and what the engine binds it to.
HIDDEN: dict[str, Any] = {WATCH_NAME: WATCH, **{name: kind for kind, name in EXACT_NAMES.items()}}

_NO_ARGUMENTS = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                              kwarg=None, defaults=[])


def function_codes(tree: ast.Expression, needs: Needs | None, filename: str) -> tuple[types.CodeType,
                                                                                      types.CodeType | None]:
    """The code of the plain function of ``tree`` (a checked and rewritten expression) and, when ``needs``
    (``(name, exact types)`` pairs from :func:`.limits.unwatched`) is not empty, of its tested function;
    both take no argument and are compiled in one ``compile`` call with ``filename`` (positions are the
    expression's own). Raises what ``compile`` raises (``SyntaxError``, ``ValueError``, ``RecursionError``,
    ``MemoryError``) for a tree that does not compile."""
    body = tree.body
    functions: list[ast.stmt] = [_function("<expr>", [placed_at(ast.Return(value=body), body)], body)]
    if needs:
        tests = [_one_of(name, kinds, body) for name, kinds in needs]
        test = tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.And(), values=tests), body)
        tested = [placed_at(ast.If(test=test, body=[placed_at(ast.Return(value=body), body)], orelse=[]), body),
                  placed_at(ast.Return(value=placed_at(ast.Name(id=WATCH_NAME, ctx=ast.Load()), body)), body)]
        functions.append(_function("<tested>", tested, body))
    module = compile(ast.Module(body=functions, type_ignores=[]), filename, "exec", dont_inherit=True)
    codes = {c.co_name: c for c in module.co_consts if isinstance(c, types.CodeType)}
    return codes["<expr>"], codes.get("<tested>")


def _one_of(name: str, kinds: frozenset[type], at: ast.expr) -> ast.expr:
    """``(__s2o_t := __s2o_type(name)) is __s2o_exact_str or __s2o_t is …``: ``name``'s exact type is one
    of ``kinds``."""
    compared = [kind for kind in EXACT_ORDER if kind in kinds]
    if not compared:  # a need no exact type meets: the tested function always returns WATCH
        return placed_at(ast.Constant(value=False), at)
    read = placed_at(ast.NamedExpr(target=placed_at(ast.Name(id=_TYPE_LOCAL, ctx=ast.Store()), at),
                             value=placed_at(ast.Call(func=placed_at(ast.Name(id=TYPE_HELPER, ctx=ast.Load()), at),
                                                args=[placed_at(ast.Name(id=name, ctx=ast.Load()), at)],
                                                keywords=[]), at)), at)
    tests: list[ast.expr] = []
    for i, kind in enumerate(compared):
        left = read if i == 0 else placed_at(ast.Name(id=_TYPE_LOCAL, ctx=ast.Load()), at)
        tests.append(placed_at(ast.Compare(left=left, ops=[ast.Is()],
                                     comparators=[placed_at(ast.Name(id=EXACT_NAMES[kind], ctx=ast.Load()), at)]), at))
    return tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.Or(), values=tests), at)


def _function(name: str, body: list[ast.stmt], at: ast.expr) -> ast.FunctionDef:
    return placed_at(ast.FunctionDef(name=name, args=_NO_ARGUMENTS, body=body, decorator_list=[], returns=None,
                                     type_comment=None), at)
