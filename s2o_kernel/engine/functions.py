"""Expression functions: the form a compiled expression takes on the hot path (SPEC 2, 6; docs/performance.md).

``eval`` of an expression's code object costs ~100 ns before its first operation (a C call, a function
object and a frame built for it, a new C-level interpreter frame) and reads every name by ``LOAD_NAME``
through up to three dicts. The same expression as the body of a Python function, ``def <expr>(): return
EXPR``, bound to the session's globals dict, is called from Python in ~20 ns and reads names by
``LOAD_GLOBAL``, which CPython specializes (a dict-version check, no lookup). Names resolve exactly as
in ``eval(code, globals)``: the globals dict, then its ``__builtins__`` (the engine's builtins, taken when
the function is made); the compile rules refuse what would bind a name in the function (``:=``) and
what would make it a generator (``yield``), and an expression that awaits keeps its ``eval`` form.

An expression that may run without the watchdog (:func:`.unwatched.plan`) also gets a *tested* function
(:func:`tested_code`), which checks, by identity (never a hash or ``==`` a metaclass could define), the
exact types of the names the expression uses before it runs, and the exact type of each subscript's item
that it uses where the item is made::

    def <tested>():
        if __s2o_type(items) is __s2o_exact_list and __s2o_type(numbers) is __s2o_exact_list:
            return (__s2o_v1 if (__s2o_t := __s2o_type(__s2o_v1 := items[numbers[42]])) is __s2o_exact_dict
                    or … else __s2o_unsure())['name']
        return __s2o_unsure()

When a type does not hold it calls ``__s2o_unsure``, which raises :class:`Unsure`: the caller runs the plain
function under the time limit instead (what ran before is C code of exact builtin values: no effect). A
tested function may be *narrowed* to the types its names hold when it is made: each name is then tested
against one type, and the tests the rewrites put inside the expression (the numeric fast path of ``*`` and
``%``, the native f-string's) are decided where that type decides them. The engine binds the hidden names of
:data:`HIDDEN` in every expression's builtins.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .rewrites import EXACT_NAMES, EXACT_ORDER, PLAIN_TEXT, PLAIN_TEXT_TYPES, TYPE_HELPER, placed_at
from .unwatched import SIZED_TYPES, UNWATCHED_SIZE, Needs, Plan, numeric_fast_path

if TYPE_CHECKING:
    from .engine import Compiled


class Unsure(BaseException):
    """Raised inside a tested function when a type it needs does not hold (never seen by an expression: it
    runs no ``try``; a ``BaseException``, so no host code's ``except Exception`` takes it)."""


def _unsure() -> NoReturn:
    raise Unsure


#: The hidden global a tested function calls when a type does not hold.
UNSURE_NAME = "__s2o_unsure"
#: The tested function's local holding the type under test.
_TYPE_LOCAL = "__s2o_t"
#: Prefix of the tested function's locals holding a tested item.
_ITEM_LOCAL = "__s2o_v"
#: A probing tested function's argument, and its local holding the value.
_PROBE, _RESULT_LOCAL = "__s2o_probe", "__s2o_r"
#: The hidden global a tested function reads a sized value's length with (:data:`.unwatched.SIZED_TYPES`).
LEN_NAME = "__s2o_len"
#: Every hidden global a function's code may read, and what the engine binds it to.
HIDDEN: dict[str, Any] = {UNSURE_NAME: _unsure, LEN_NAME: len, **{name: kind for kind, name in EXACT_NAMES.items()}}
#: What :func:`observed` takes a name that is not set to hold (a type no test allows).
_UNSET = object()
#: The order in which an item's exact type is compared when it is subscripted: containers first.
_CONTAINERS_FIRST: tuple[type, ...] = (dict, list, tuple, str, int, float, bool)

_NO_ARGUMENTS = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                              kwarg=None, defaults=[])


def exact_type(value: Any) -> type | None:
    """``type(value)`` when it is one of the exact builtin types a test may name (:data:`.rewrites.EXACT_ORDER`),
    compared by identity (no metaclass's ``__hash__`` or ``__eq__`` runs), else ``None``."""
    kind = type(value)
    for exact in EXACT_ORDER:
        if kind is exact:
            return kind
    return None


def observed(needs: Needs, tested: types.FunctionType, g: dict[str, Any], builtins: dict[str, Any]) -> tuple[
        type | None, ...] | None:
    """What to narrow the tested function ``tested`` of an expression whose plan asks ``needs`` to: the exact
    types its names hold in ``g`` (then ``builtins``, as ``LOAD_GLOBAL`` reads them), then, when it tests items,
    the exact types of its items in a run as a probe (no effect but time: it runs what the expression runs,
    on exact builtin values), ``None`` for an item of another type. ``None`` when a name holds another type
    or is not set, or the probe fails (an error of the expression, a type that does not hold)."""
    found = tuple(exact_type(g[name] if name in g else builtins.get(name, _UNSET)) for name, _ in needs)
    if None in found:  # compared by identity: no metaclass's __hash__ runs
        return None
    if tested.__code__.co_argcount:  # it tests items: observe them
        try:
            probed = tested(True)
        except (Exception, Unsure):
            return None
        found += tuple(exact_type(item) for item in probed[1:])
    return found


def bind(codes: tuple[types.CodeType, types.CodeType | None], compiled: Compiled,
         narrowed_of: Callable[[Compiled, tuple[type | None, ...]], types.CodeType | None], g: dict[str, Any],
         builtins: dict[str, Any]) -> tuple[types.FunctionType | None, types.FunctionType, types.FunctionType | None]:
    """``(unwatched, plain, wider)``: the functions of ``compiled`` (``codes``: :meth:`.Engine.functions_of`)
    bound to the globals ``g`` whose builtins are ``builtins``. ``plain`` runs under the time limit;
    ``unwatched`` without it (the plain function of a ``simple`` expression, the tested function narrowed by
    ``narrowed_of`` to the exact types its names hold now and its items have in a probe run (:func:`observed`:
    no effect but time), else the tested one, else ``None``); ``wider``: the tested function a narrowed one
    gives way to, or ``None``. Raises what the probe's own code does not catch (``KeyboardInterrupt``)."""
    plain_code, tested_code = codes
    plain = types.FunctionType(plain_code, g)
    if compiled.simple or tested_code is None:
        return (plain if compiled.simple else None), plain, None
    tested = types.FunctionType(tested_code, g, None, (False,) if tested_code.co_argcount else None)  # probe=False
    seen = observed(compiled.unwatched or (), tested, g, builtins)
    narrowed = None if seen is None else narrowed_of(compiled, seen)
    if narrowed is None:
        return tested, plain, None
    return types.FunctionType(narrowed, g), plain, tested


def plain_code(tree: ast.Expression, filename: str) -> types.CodeType:
    """The code of the plain function of ``tree`` (a checked and rewritten expression): no argument, positions
    the expression's own. Raises what ``compile`` raises (``SyntaxError``, ``ValueError``, ``RecursionError``,
    ``MemoryError``) for a tree that does not compile. ``tree`` is left as it was."""
    body = tree.body
    return _compiled(_function("<expr>", [placed_at(ast.Return(value=body), body)], body), filename)


def tested_code(tree: ast.Expression, found: Plan, observed: Sequence[type | None] | None,
                filename: str) -> types.CodeType:
    """The code of the tested function of ``tree``, planned by ``found`` (:func:`.unwatched.plan` of this very
    tree, whose :attr:`~.unwatched.Plan.tests` are its nodes). Raises what :func:`plain_code` raises.

    ``observed``: the exact types to narrow it to, one per need of ``found`` then one per item test (``None``
    for an item tested against every type its use allows), each one its plan allows. Without it, the
    function takes one optional argument, ``probe``: when true it returns ``(value, item, item, …)``, the items
    it tested in :attr:`~.unwatched.Plan.tests` order (:data:`HIDDEN`'s ``__s2o_unsure`` for one not made), so
    that the caller can observe their types.

    **Changes** ``tree`` (each tested item in place; then the decided tests): compile the plain function
    first."""
    body = _GiveWay().visit(tree.body)
    count = len(found.needs)
    names: Sequence[type | None] = observed[:count] if observed is not None else (None,) * count
    testing = _Testing(found.tests, observed[count:] if observed is not None else (None,) * len(found.tests),
                       found.sized_items)
    body = testing.visit(body)
    known = {name: kind for (name, _), kind in zip(found.needs, names, strict=True) if kind is not None}
    if known:
        body = _Narrowing(known).visit(body)
    tests = [_one_of(placed_at(ast.Name(id=name, ctx=ast.Load()), body),
                     frozenset({known[name]}) if name in known else allowed, body,
                     sized=name if name in found.sized else None) for name, allowed in found.needs]
    statements: list[ast.stmt] = [placed_at(ast.Return(value=body), body)]
    arguments = _NO_ARGUMENTS
    if observed is None and testing.locals:
        arguments = _probe_arguments(body)
        statements = _probing(body, testing.locals)
    if tests:
        test = tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.And(), values=tests), body)
        statements = [placed_at(ast.If(test=test, body=statements, orelse=[]), body)]
    statements.append(placed_at(ast.Return(value=_unsure_call(body)), body))
    return _compiled(_function("<tested>", statements, body, arguments), filename)


def _probe_arguments(at: ast.AST) -> ast.arguments:
    """``(__s2o_probe=False)``, placed at ``at``."""
    probe = ast.copy_location(ast.arg(arg=_PROBE), at)
    return ast.arguments(posonlyargs=[], args=[probe], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[placed_at(ast.Constant(value=False), at)])


def _probing(body: ast.expr, items: list[str]) -> list[ast.stmt]:
    """``v1 = … = __s2o_unsure; r = BODY; if probe: return (r, v1, …); return r`` for the item locals ``items``."""
    def name(identifier: str, ctx: ast.expr_context) -> ast.Name:
        return placed_at(ast.Name(id=identifier, ctx=ctx), body)

    unset = placed_at(ast.Assign(targets=[name(item, ast.Store()) for item in items],
                                 value=name(UNSURE_NAME, ast.Load())), body)
    made = placed_at(ast.Assign(targets=[name(_RESULT_LOCAL, ast.Store())], value=body), body)
    probed = placed_at(ast.Tuple(elts=[name(_RESULT_LOCAL, ast.Load()), *(name(i, ast.Load()) for i in items)],
                                 ctx=ast.Load()), body)
    return [unset, made,
            placed_at(ast.If(test=name(_PROBE, ast.Load()), body=[placed_at(ast.Return(value=probed), body)],
                             orelse=[]), body),
            placed_at(ast.Return(value=name(_RESULT_LOCAL, ast.Load())), body)]


def _compiled(function: ast.FunctionDef, filename: str) -> types.CodeType:
    module = compile(ast.Module(body=[function], type_ignores=[]), filename, "exec", dont_inherit=True)
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


def _unsure_call(at: ast.AST) -> ast.expr:
    return placed_at(ast.Call(func=placed_at(ast.Name(id=UNSURE_NAME, ctx=ast.Load()), at), args=[], keywords=[]), at)


def _one_of(value: ast.expr, kinds: frozenset[type], at: ast.AST, order: tuple[type, ...] = EXACT_ORDER, *,
            sized: str | None = None) -> ast.expr:
    """``__s2o_type(value) is __s2o_exact_int``, or for several kinds ``(__s2o_t := __s2o_type(value)) is … or
    __s2o_t is …``: ``value``'s exact type is one of ``kinds``, compared in ``order``. ``sized``: the name that
    holds the value once its type is read, when it is used in a way linear in its length: a kind of
    :data:`.unwatched.SIZED_TYPES` then also needs ``__s2o_len(sized) < UNWATCHED_SIZE``."""
    compared = [kind for kind in order if kind in kinds]
    if not compared:  # a need no exact type meets: the test never holds
        return placed_at(ast.Constant(value=False), at)
    read: ast.expr = placed_at(ast.Call(func=placed_at(ast.Name(id=TYPE_HELPER, ctx=ast.Load()), at), args=[value],
                                        keywords=[]), at)
    if len(compared) > 1:
        read = placed_at(ast.NamedExpr(target=placed_at(ast.Name(id=_TYPE_LOCAL, ctx=ast.Store()), at), value=read), at)
    tests: list[ast.expr] = []
    for i, kind in enumerate(compared):
        left = read if i == 0 else placed_at(ast.Name(id=_TYPE_LOCAL, ctx=ast.Load()), at)
        test: ast.expr = placed_at(ast.Compare(left=left, ops=[ast.Is()], comparators=[
            placed_at(ast.Name(id=EXACT_NAMES[kind], ctx=ast.Load()), at)]), at)
        if sized is not None and kind in SIZED_TYPES:
            test = placed_at(ast.BoolOp(op=ast.And(), values=[test, _shorter(sized, at)]), at)
        tests.append(test)
    return tests[0] if len(tests) == 1 else placed_at(ast.BoolOp(op=ast.Or(), values=tests), at)


def _shorter(name: str, at: ast.AST) -> ast.expr:
    """``__s2o_len(name) < UNWATCHED_SIZE``, placed at ``at``."""
    length = placed_at(ast.Call(func=placed_at(ast.Name(id=LEN_NAME, ctx=ast.Load()), at),
                                args=[placed_at(ast.Name(id=name, ctx=ast.Load()), at)], keywords=[]), at)
    bound = placed_at(ast.Constant(UNWATCHED_SIZE), at)
    return placed_at(ast.Compare(left=length, ops=[ast.Lt()], comparators=[bound]), at)


class _GiveWay(ast.NodeTransformer):
    """Makes a numeric fast path (:func:`.unwatched.numeric_fast_path`) call ``__s2o_unsure`` where it would
    call its operator's helper: a tested function runs the native operation on small numbers only, and the
    plain function, armed, runs the helper (whose C work grows faster than its operands)."""

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        if numeric_fast_path(node):
            node.orelse = _unsure_call(node.orelse)
        return node


class _Testing(ast.NodeTransformer):
    """Puts the item tests of a plan in place: a subscript ``N`` whose item must be of ``kinds`` (or of its
    observed type) becomes ``(__s2o_vK if <__s2o_type(__s2o_vK := N) is one of kinds> else __s2o_unsure())``,
    placed at ``N``; the item is made, tested and used in the order the expression makes and uses it.
    :attr:`locals` are the item locals, in the plan's order."""

    def __init__(self, tests: tuple[tuple[ast.Subscript, frozenset[type]], ...],
                 observed: Sequence[type | None], sized: frozenset[int] = frozenset()) -> None:
        self.tests = {id(node): (i, frozenset({kind}) if kind is not None else kinds)
                      for i, ((node, kinds), kind) in enumerate(zip(tests, observed, strict=True))}
        self.locals = [f"{_ITEM_LOCAL}{i}" for i in range(len(tests))]
        self.sized = sized  # indexes of the tests whose item is used in a way linear in its length

    def visit(self, node: ast.AST) -> Any:
        node = self.generic_visit(node)
        test = self.tests.get(id(node))
        if test is None or not isinstance(node, ast.Subscript):
            return node
        index, kinds = test
        local = self.locals[index]
        made = placed_at(ast.NamedExpr(target=placed_at(ast.Name(id=local, ctx=ast.Store()), node), value=node), node)
        order = _CONTAINERS_FIRST if kinds & {list, dict, tuple} else EXACT_ORDER
        sized = local if index in self.sized else None
        return placed_at(ast.IfExp(test=_one_of(made, kinds, node, order, sized=sized),
                                   body=placed_at(ast.Name(id=local, ctx=ast.Load()), node),
                                   orelse=_unsure_call(node)), node)


def _type_test(node: ast.AST) -> tuple[str, ast.cmpop, str] | None:
    """``(name, op, hidden)`` for a test the rewrites made, ``__s2o_type(name) is __s2o_exact_…`` or
    ``__s2o_type(name) in __s2o_plain_text`` (no parsed expression can name a hidden global), else ``None``."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.In))):
        return None
    call, other = node.left, node.comparators[0]
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == TYPE_HELPER
            and len(call.args) == 1 and isinstance(call.args[0], ast.Name) and isinstance(other, ast.Name)):
        return call.args[0].id, node.ops[0], other.id
    return None


class _Narrowing(ast.NodeTransformer):
    """Decides the tests the rewrites put inside an expression (:func:`_type_test`) for names whose exact
    type is known (the tested function has checked it), and drops what they decide: a test of an
    ``if``-expression the rewrites made decided true leaves its ``body``, decided false its ``orelse``; an
    ``and``/``or`` of such tests loses its decided parts."""

    def __init__(self, observed: Mapping[str, type]) -> None:
        self.observed = observed
        self.exact = {name: kind for kind, name in EXACT_NAMES.items()}

    def decided(self, node: ast.AST) -> bool | None:
        found = _type_test(node)
        if found is None:
            return None
        name, op, hidden = found
        kind = self.observed.get(name)
        if kind is None:
            return None
        if isinstance(op, ast.Is) and hidden in self.exact:
            return kind is self.exact[hidden]
        if isinstance(op, ast.In) and hidden == PLAIN_TEXT:
            return kind in PLAIN_TEXT_TYPES
        return None

    def test(self, node: ast.expr) -> ast.expr | bool:
        """``node`` (a test: only its truth is read) with what is known decided: ``True``/``False`` when
        decided whole."""
        decided = self.decided(node)
        if decided is not None:
            return decided
        if not isinstance(node, ast.BoolOp):
            return node
        stop = isinstance(node.op, ast.Or)  # the value that decides an ``or`` (True) or an ``and`` (False)
        kept: list[ast.expr] = []
        for value in node.values:
            part = self.test(value)
            if part is stop and all(self.decided(k) is not None or _pure(k) for k in kept):
                return stop
            if part is not (not stop):
                kept.append(value if isinstance(part, bool) else part)
        if not kept:
            return not stop
        node.values = kept
        return kept[0] if len(kept) == 1 else node

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        test = self.test(node.test)
        if test is True:
            return node.body
        if test is False:
            return node.orelse
        node.test = test
        return node


def _pure(node: ast.AST) -> bool:
    """Whether ``node`` is a test the rewrites made (a type test, or a constant compared with a name), which
    runs nothing and raises nothing once its name holds an exact number: dropped with an ``and`` decided false."""
    if _type_test(node) is not None:
        return True
    if isinstance(node, ast.BoolOp):
        return all(_pure(v) for v in node.values)
    return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Lt)
            and all(isinstance(n, (ast.Constant, ast.Name)) for n in (node.left, *node.comparators)))


def _function(name: str, body: list[ast.stmt], at: ast.expr,
              arguments: ast.arguments = _NO_ARGUMENTS) -> ast.FunctionDef:
    return placed_at(ast.FunctionDef(name=name, args=arguments, body=body, decorator_list=[], returns=None,
                                     type_comment=None), at)
