"""The rewrites the compile rules record, and the hidden helpers rewritten code calls (SPEC 3, 12).

The validator (:mod:`.rules`) records a rewrite as ``(parent, field, index, node, helper)`` while it
walks; :func:`apply_rewrites` applies them innermost first, each by the rewriter the helper's name
selects in :data:`REWRITERS` (tables as data; operator helpers are the default). The helper names are
hidden globals of compiled code: the engine binds each in the expression's builtins
(:meth:`~.engine.Engine._make_builtins`), and no expression can name them (underscore rule).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ...bounds import COMPACT_INT, SMALL_NUMBER
from ..policy.bounded import spec_within_bounds

#: Each operator's part of the hidden name under which the compiled code finds its rewritten function.
_OPERATOR_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
                   "**": "pow", "<<": "lshift", ">>": "rshift", "@": "matmul", "&": "and", "|": "or", "^": "xor"}


def operator_helper_name(symbol: str) -> str:
    """The hidden global that holds the rewrite target of ``symbol``."""
    return f"__s2o_op_{_OPERATOR_NAMES[symbol]}"



def operator_rewrite(symbol: str, setting: str) -> str:
    """The helper recorded for ``symbol`` rewritten to ``setting``: :func:`operator_helper_name`, marked
    :data:`NUMERIC` for an engine-bounded operator with a numeric fast path (see :func:`_rewrite_numeric`)."""
    helper = operator_helper_name(symbol)
    return NUMERIC + helper if setting in NUMERIC_SAFE else helper


#: Hidden global that checks the keys of a ``**mapping`` argument at run time.
KWARGS_GUARD = "__s2o_kwargs"
#: Hidden global every f-string is rewritten to call (bounded widths, secrets stay secret).
FSTRING_HELPER = "__s2o_fstring"
#: Hidden global that reads an attribute named in ``bounded.SIZED_METHODS`` (sizes bounded, SPEC 12).
SIZED_HELPER = "__s2o_sized"
#: Hidden global that calls with three or more arguments (or ``*``/``**``) go through: no metaclass calls (SPEC 12).
CALL_GUARD = "__s2o_call"
#: Hidden global that calls which may keep a value the expression made go through (:mod:`.stores`, SPEC 12).
STORE_GUARD = "__s2o_store"
#: Prefix of a recorded store guard: the arguments to check follow, as JSON (see :func:`store_rewrite`).
STORE = "store:"
#: Hidden global bound to ``type``: the f-string fast path's test of its values.
TYPE_HELPER = "__s2o_type"
#: Hidden global bound to :data:`PLAIN_TEXT_TYPES`.
PLAIN_TEXT = "__s2o_plain_text"
#: Types an f-string formats natively: no secret, no Python-level ``__format__``, no long Decimal text.
PLAIN_TEXT_TYPES = frozenset({str, int, float, bool, type(None)})


#: The engine's bounded operators that are plain arithmetic on two small numbers (:func:`_rewrite_numeric`).
NUMERIC_SAFE = frozenset({"bounded_mult", "bounded_mod"})
#: Prefix of a recorded operator helper whose target is in :data:`NUMERIC_SAFE` (see :func:`_rewrite_numeric`).
NUMERIC = "numeric:"
#: Types the numeric fast path multiplies natively.
NUMBER_TYPES = frozenset({int, float})
#: Hidden globals bound to the exact builtin types the numeric fast path compares a value's type with, by
#: identity (never a hash or ``==`` a metaclass could define).
EXACT_NAMES: dict[type, str] = {kind: f"__s2o_exact_{kind.__name__}" for kind in (int, float)}

_Node = TypeVar("_Node", bound=ast.expr | ast.stmt)

#: A recorded rewrite: (parent node, field, index, node to rewrite, helper name).
Rewrite = tuple[Any, str, int | None, Any, str]


def _call(helper: str, args: list[ast.expr], where: ast.AST) -> ast.Call:
    func = placed_at(ast.Name(id=helper, ctx=ast.Load()), where)
    call = placed_at(ast.Call(func=func, args=args, keywords=[]), where)
    for n in args:
        if not hasattr(n, "lineno"):
            placed_at(n, where)
    return call


def _rewrite_kwargs(parent: Any, node: Any, helper: str) -> None:
    """``f(**m)`` → ``f(**__s2o_kwargs(m))``: the keyword names are checked at run time."""
    parent.value = _call(helper, [parent.value], node)


def _rewrite_fstring(parent: Any, node: Any, helper: str) -> None:
    """``f'a{x:>4}'`` → ``__s2o_fstring('a', (x, -1, '>4'))``: bounded widths, secrets stay secret.

    When every formatted value is a name and every format specification a constant within the
    bounds, the f-string keeps its native form behind a test of its values' exact types:
    ``f'{a}' if __s2o_type(a) in __s2o_plain_text else __s2o_fstring(...)`` (reading a name twice
    has no effect). Plain text, numbers, booleans and ``None`` format natively, at CPython's speed;
    anything else (a secret, a host object, a ``Decimal``) takes the helper (``docs/performance.md``).
    """
    test = _plain_test(node)
    if test is False or test is True:  # no formatted value: the native f-string is constant text
        return
    # The helper's arguments share the names and constants of the native form (when it is kept):
    # later passes (reach) never rewrite a name or a constant in place, and compile reads each twice.
    args: list[ast.expr] = []
    for value in node.values:
        if isinstance(value, ast.FormattedValue):
            spec = value.format_spec if value.format_spec is not None else placed_at(ast.Constant(None), node)
            args.append(placed_at(ast.Tuple(elts=[value.value, placed_at(ast.Constant(value.conversion), node), spec],
                                      ctx=ast.Load()), node))
        else:
            args.append(value)
    call = _call(helper, args, node)
    if test is None:
        _replace_child(parent, node, call)
        return
    _replace_child(parent, node, placed_at(ast.IfExp(test=test, body=node, orelse=call), node))


def placed_at(new: _Node, where: Any) -> _Node:
    """``new`` (a node built by a rewrite) placed at ``where``'s whole span; its
    children already have places."""
    new.lineno, new.col_offset = where.lineno, where.col_offset
    new.end_lineno, new.end_col_offset = where.end_lineno, where.end_col_offset
    return new


def _constant_spec(spec: ast.expr | None) -> str | None:
    """The text of a format specification made only of constant text, else ``None``."""
    if spec is None:
        return ""
    if isinstance(spec, ast.JoinedStr) and all(
            isinstance(v, ast.Constant) and isinstance(v.value, str) for v in spec.values):
        return "".join(v.value for v in spec.values)  # type: ignore[attr-defined]
    return None


def _plain_test(node: ast.JoinedStr) -> ast.expr | bool | None:
    """The type test of the f-string fast path; ``False`` when nothing is formatted, ``None`` when
    the f-string needs the helper whatever its values (a value that is not a name, a computed or
    too wide format specification)."""
    names: dict[str, ast.Name] = {}
    for value in node.values:
        if not isinstance(value, ast.FormattedValue):
            continue
        spec = _constant_spec(value.format_spec)
        if not isinstance(value.value, ast.Name) or spec is None or not spec_within_bounds(spec):
            return None
        names.setdefault(value.value.id, value.value)
    if not names:
        return False
    tests: list[ast.expr] = []
    for name in names.values():
        kind = _call(TYPE_HELPER, [placed_at(ast.Name(id=name.id, ctx=ast.Load()), name)], name)
        tests.append(placed_at(ast.Compare(left=kind, ops=[ast.In()],
                                     comparators=[placed_at(ast.Name(id=PLAIN_TEXT, ctx=ast.Load()), name)]), name))
    return tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.And(), values=tests), node)


def _rewrite_sized(parent: Any, node: Any, helper: str) -> None:
    """``s.zfill`` → ``__s2o_sized(s, 'zfill')``: the method checks its output size first."""
    _replace_child(parent, node, _call(helper, [node.value, ast.Constant(node.attr)], node))


def _rewrite_call_guard(parent: Any, node: Any, helper: str) -> None:
    """``f(a, b, c)`` → ``__s2o_call(f, a, b, c)``, in place: the callee is checked (no metaclass calls)."""
    node.args = [node.func, *node.args]
    node.func = ast.copy_location(ast.Name(id=helper, ctx=ast.Load()), node)


def store_rewrite(risky: tuple[int | str, ...]) -> str:
    """The helper recorded for a call whose arguments ``risky`` (:func:`.stores.risky_arguments`) are checked."""
    return STORE + json.dumps(list(risky))


def _rewrite_store_guard(parent: Any, node: Any, helper: str) -> None:
    """``f(a, b)`` → ``__s2o_store(f, (1,), a, b)``, in place: the arguments named are checked first."""
    risky = placed_at(ast.Tuple(elts=[placed_at(ast.Constant(value=key), node)
                                      for key in json.loads(helper.removeprefix(STORE))], ctx=ast.Load()), node)
    node.args = [node.func, risky, *node.args]
    node.func = placed_at(ast.Name(id=STORE_GUARD, ctx=ast.Load()), node)


def _rewrite_operator(parent: Any, node: Any, helper: str) -> None:
    """``a ** b`` → ``helper(a, b)``: operator rewriting of SPEC 3."""
    _replace_child(parent, node, _call(helper, [node.left, node.right], node))


#: How each kind of recorded rewrite is applied, by helper name; operator helpers are the default.
REWRITERS: dict[str, Callable[[Any, Any, str], None]] = {
    KWARGS_GUARD: _rewrite_kwargs,
    FSTRING_HELPER: _rewrite_fstring,
    SIZED_HELPER: _rewrite_sized,
    CALL_GUARD: _rewrite_call_guard,
}


def _rewrite_numeric(parent: Any, node: Any, helper: str) -> None:
    """``a * b`` → ``a * b if <a and b are numbers the bound cannot concern> else helper(a, b)``.

    For an operator rewritten to one of the engine's own bounded operators (:data:`NUMERIC_SAFE`), whose
    operands are names or number constants (reading a name twice has no effect): ints within ±(2**30-1)
    for names (:func:`_small_int`) and ±2**62 for constants, or a float, multiply (or take a remainder)
    natively with a result of at most 92 bits, so the bound holds without a call; anything else (a
    sequence, a big integer, ``bool``, a host object) takes the helper. For ``*`` one float operand is
    enough (``bounded_mult`` multiplies a float natively whatever the other operand); for ``%`` each operand
    must be a number (``bounded_mod`` checks the widths of a ``str`` left operand, whatever the right one).
    """
    call = _call(helper, [node.left, node.right], node)
    names: list[ast.Name] = []
    for operand in (node.left, node.right):
        value = operand.value if isinstance(operand, ast.Constant) else None
        if isinstance(value, (int, float)) and type(value) in NUMBER_TYPES:
            if not -SMALL_NUMBER < value < SMALL_NUMBER:
                _replace_child(parent, node, call)
                return
        elif not isinstance(operand, ast.Name):
            _replace_child(parent, node, call)
            return
        elif all(n.id != operand.id for n in names):
            names.append(operand)
    if not names:  # two small number constants
        return
    if isinstance(node.op, ast.Mult):  # every name a small int, or one of them a float
        tests = [_all_of([_small_int(n) for n in names], node), *(_exactly(n, float) for n in names)]
    else:  # each name a small int or a float
        tests = [_any_of([_small_int(n), _exactly(n, float)], node) for n in names]
        tests = [_all_of(tests, node)]
    _replace_child(parent, node, placed_at(ast.IfExp(test=_any_of(tests, node), body=node, orelse=call), node))


def _exactly(name: ast.Name, kind: type) -> ast.expr:
    """``__s2o_type(x) is __s2o_exact_<kind>`` for the name ``x``."""
    read = placed_at(ast.Name(id=name.id, ctx=ast.Load()), name)
    return placed_at(ast.Compare(left=_call(TYPE_HELPER, [read], name), ops=[ast.Is()],
                                 comparators=[placed_at(ast.Name(id=EXACT_NAMES[kind], ctx=ast.Load()), name)]), name)


def _small_int(name: ast.Name) -> ast.expr:
    """``__s2o_type(x) is int and -(2**30-1) < x and x < 2**30-1`` for the name ``x``: an int within
    :data:`COMPACT_INT` (compared by a specialized instruction; two comparisons, not a chained one, which
    copies and swaps) gives a product of at most 60 bits."""
    def read() -> ast.Name:
        return placed_at(ast.Name(id=name.id, ctx=ast.Load()), name)

    above = placed_at(ast.Compare(left=placed_at(ast.Constant(-COMPACT_INT), name), ops=[ast.Lt()],
                                  comparators=[read()]), name)
    below = placed_at(ast.Compare(left=read(), ops=[ast.Lt()],
                                  comparators=[placed_at(ast.Constant(COMPACT_INT), name)]), name)
    return placed_at(ast.BoolOp(op=ast.And(), values=[_exactly(name, int), above, below]), name)


def _all_of(tests: list[ast.expr], at: ast.AST) -> ast.expr:
    return tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.And(), values=tests), at)


def _any_of(tests: list[ast.expr], at: ast.AST) -> ast.expr:
    return tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.Or(), values=tests), at)


def apply_rewrites(tree: ast.Expression, rewrites: Iterable[Rewrite]) -> None:
    """Apply recorded rewrites, innermost first (the walk recorded them outer first)."""
    for parent, _attr, _index, node, helper in reversed(list(rewrites)):
        if helper.startswith(NUMERIC):
            _rewrite_numeric(parent, node, helper.removeprefix(NUMERIC))
        elif helper.startswith(STORE):
            _rewrite_store_guard(parent, node, helper)
        else:
            REWRITERS.get(helper, _rewrite_operator)(parent, node, helper)


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, v in enumerate(value):
                if v is old:
                    value[i] = new
                    return
    raise AssertionError("rewrite target not found in its parent")  # pragma: no cover
