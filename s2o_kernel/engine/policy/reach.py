"""Values reached at run time: what a granted object may hand to an expression (SPEC 12, issue 8).

Names are checked when an expression is validated, but a granted *host* object (one of your own
packages, or a local the host gave) can hand out anything through an attribute, a property, a call's
return value, an item, an operator or an awaited result: ``thing.p.os.popen('id')`` where ``thing.p``
holds ``os.path``, ``c.get_os()``, ``c.evil('...')`` where ``c.evil`` is ``exec``. This module decides,
by class, what must never reach an expression, and guards every such path:

* :func:`refusal` is the one classifier, the audited table's own (:mod:`.stdlib_audit`): a module
  that is not an allowlist namespace, a refused built-in (``exec``, ``eval``, ``open``, the real
  ``getattr`` …), a function, class or instance whose home is a standard-library module the table
  does not grant (``os``, ``subprocess``, ``socket``, ``io``, ``threading``, ``logging`` …), a member
  the table leaves out (``string.Formatter``, ``operator.attrgetter`` …), a metaclass, or a method or
  ``partial`` bound to any of those. An object that holds a function to call later (a ``map``,
  ``filter``, ``iter(f, sentinel)``, ``itertools`` or ``functools`` wrapper, a ``staticmethod``, a
  closure made by the standard library) is judged by everything it holds. Plain built-in values,
  containers of them and host objects pass; every other iterator is handed on as an opaque
  :class:`~.wrappers.SafeIterator` whose items are checked one by one.
* :class:`ReachRewriter` rewrites a compiled expression so that every attribute read, call result,
  item, operator result and awaited value passes :func:`reach` (attribute reads through
  :func:`reach_attribute`, which lets allowlist namespaces answer for themselves), and every
  iteration (comprehensions, ``*args``) and ``**kwargs`` mapping is checked item by item.

The checks sit where compiled code receives a value, and that is enough even for values C code passes
to C code (``list(map(list, map(map, it, args)))``, where the inner ``map`` objects are built and
consumed inside C): C code can only get a value from its arguments, and every argument is a value
compiled code received (checked), an iterator (its items checked as they are pulled) or a lazy caller
(judged by what it holds); a lazy caller C code builds from items is itself such an item.

Guarding costs a Python call per operation, so the engine applies it only where a host object can
be reached: when the allowlist grants an entry from outside the audited standard library (or
``allow_unsafe_entries`` is on), or a session is given a host object as a local. The teaching
configuration grants only audited modules and the project's own examples, and runs unguarded
(see ``docs/security.md`` and ``docs/performance.md``).
"""

from __future__ import annotations

import ast
import functools
import gc
import itertools
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...bounds import REACH_SCAN_LIMIT
from ..errors import S2OError
from ..run.scopes import check_json
from .allowlist import Namespace, namespace_path
from .bounded import SIZED_METHODS, sized_attribute
from .denylist import type_name
from .guards import guard_kwargs
from .parts import PLAIN_TYPES
from .stdlib_audit import object_refusal
from .values import check_value
from .wrappers import SafeIterator

#: Hidden globals the rewritten code calls.
REACH = "__s2o_reach"
ATTRIBUTE = "__s2o_attr"
ITERATE = "__s2o_iter"
AITERATE = "__s2o_aiter"
MAPPING = "__s2o_mapping"

_PLAIN = frozenset({str, int, float, bool, type(None), bytes, complex, bytearray, range, slice})
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
_PLAIN_OWNERS = _PLAIN | _CONTAINERS
_VIEWS = frozenset({type({}.keys()), type({}.values()), type({}.items())})
#: Types of the granted standard library whose objects hold a function they call later, from C code
#: (SPEC 12): judged by everything they hold, read with ``gc.get_referents`` (their own traversal, which
#: neither calls nor consumes anything).
_LAZY_CALLERS = frozenset({
    map, filter, type(iter(int, 0)), functools.partial, staticmethod, classmethod,
    type(functools.cmp_to_key(int)), type(functools.lru_cache(int)),
    itertools.starmap, itertools.accumulate, itertools.takewhile, itertools.dropwhile, itertools.filterfalse,
    itertools.groupby,
})


def refusal(value: Any) -> str | None:
    """Why ``value`` may not reach an expression (see the module doc), or ``None`` when it may.

    Plain values pass at once; a module is refused (allowlist namespaces are not modules); a
    ``functools.partial`` is judged by what it wraps; everything else by the audited table's
    :func:`~.stdlib_audit.object_refusal` (refused built-ins and members by identity, metaclasses,
    instances of refused classes, objects whose home is a standard-library module it does not grant).
    """
    t = type(value)
    if t in _PLAIN:
        return None
    if t is types.ModuleType:
        return "a module can only be reached through the allowlist"
    if t is types.MethodType:
        return refusal(value.__func__) or refusal(value.__self__)
    if t in _LAZY_CALLERS:
        return _held_refusal(value)
    if t is types.FunctionType and value.__closure__ and not is_host_object(value):
        return _held_refusal(value) or object_refusal(value)
    return object_refusal(value)


def _held_refusal(value: Any) -> str | None:
    """Why something ``value`` holds (a lazy caller's function and arguments, a closure's cells) is refused."""
    if type(value) is types.FunctionType:
        held = [cell.cell_contents for cell in value.__closure__ or () if cell_filled(cell)]
    else:
        held = [r for r in gc.get_referents(value) if type(r) is not type]
    why = first_refusal(held)
    if why is None or why.startswith("it holds"):
        return why
    return f"it holds a value that is refused: {why}"


def cell_filled(cell: types.CellType) -> bool:
    """Whether a closure cell holds a value (an empty cell raises ``ValueError`` when read)."""
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def first_refusal(value: Any) -> str | None:
    """Why ``value``, or anything a container of it holds, is refused (:func:`refusal`), or ``None``."""
    stack = [value]
    seen = 0
    while stack and seen < REACH_SCAN_LIMIT:
        v = stack.pop()
        seen += 1
        t = type(v)
        if t in _PLAIN:
            continue
        if t in _CONTAINERS or t in _VIEWS:
            if t is dict:
                stack.extend(v.keys())
                stack.extend(v.values())
            else:
                stack.extend(v)
            continue
        why = refusal(v)
        if why is not None:
            return why
    return None


def check(value: Any, what: str = "a value reached through a granted object") -> None:
    """Raise ``S2OError`` ``not-allowed`` when ``value``, or anything a container of it holds, is refused."""
    why = first_refusal(value)
    if why is not None:
        raise S2OError("not-allowed", f"{what} is not allowed: {why}")


def check_kept(value: Any, holder: str) -> None:
    """Refuse ``value`` as something a session keeps — a local a ``var`` sets, an argument a call may keep
    (:mod:`.kept`) — with both checks a local gets: :func:`.values.check_value` (SPEC 6, 12: no generator,
    module, frame …) and :func:`check` (nothing refused by class: an unaudited module's object, a refused
    built-in). Raises ``S2OError`` (``not-allowed``, ``not-awaited``)."""
    if type(value) in PLAIN_TYPES:  # nothing inside (unlike a slice, which reach's own _PLAIN passes)
        return
    check_value(value, holder)
    check(value, holder)


def check_item(scope: str, name: str, value: Any) -> None:
    """Check ``value`` as ``scope`` checks a whole value (a local's :func:`check_kept`, JSON for ``agent`` and
    ``conv``) before it is written into an item of the variable ``name`` (``xs[0]``, ``agent.d.k``): the
    holder written into is the live one, so a refusal must come before the write."""
    if scope == "local":
        check_kept(value, f"an item of the local '{name}'")
    else:
        check_json(value, f"{scope}.{name}")


def reach(value: Any) -> Any:
    """``value`` once :func:`check` passes; a generator is handed on as an opaque iterator."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is types.BuiltinMethodType and type(value.__self__) in _PLAIN_OWNERS:
        return value  # a method of a plain value: 'x'.upper
    if t is types.GeneratorType:
        return SafeIterator(_checked_items(value), "generator")
    check(value)
    if t is not SafeIterator and _is_iterator(t):
        return SafeIterator(_checked_items(value), type_name(value))
    return value


def _is_iterator(t: type) -> bool:
    """Whether instances of ``t`` are iterators (``__next__`` in the class dict of a class on its C-level MRO)."""
    mro: tuple[type, ...] = _MRO.__get__(t)
    return any("__next__" in _CLASS_DICT.__get__(k) for k in mro)


_MRO = type.__dict__["__mro__"]
_CLASS_DICT = type.__dict__["__dict__"]


def reach_attribute(obj: Any, name: str) -> Any:
    """``obj.<name>`` (``name`` is a literal the compile rules passed), its value checked by :func:`reach`.

    Allowlist namespaces answer for themselves: they hand out granted members only; the attributes
    of plain built-in values and containers are their own methods and numbers, so they pass
    unchecked. Sized methods are bounded as in unguarded code.
    """
    if name in SIZED_METHODS:
        return reach(sized_attribute(obj, name))
    t = type(obj)
    if t in _PLAIN or t in _CONTAINERS or t is Namespace:
        return getattr(obj, name)
    return reach(getattr(obj, name))


def _checked_items(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        yield reach(item)


def reach_iter(iterable: Any) -> Any:
    """What a comprehension or ``*args`` iterates: plain containers as they are, anything else item by item."""
    t = type(iterable)
    if t in _PLAIN or t in _CONTAINERS or t in _VIEWS:
        return iterable
    return _checked_items(iterable)


async def _checked_async_items(items: Any) -> Any:
    async for item in items:
        yield reach(item)


def reach_aiter(iterable: Any) -> Any:
    """What an ``async for`` clause iterates, item by item."""
    return _checked_async_items(iterable)


def reach_mapping(mapping: Any) -> Any:
    """A ``**mapping`` argument: its keys checked by the name rules, its values by :func:`reach`."""
    guard_kwargs(mapping)
    if type(mapping) is dict:
        check(mapping)
        return mapping
    return {key: reach(mapping[key]) for key in list(mapping.keys())}


#: The runtime helpers, by hidden global name (the engine puts them in the builtins of guarded code).
HELPERS: Mapping[str, Any] = {REACH: reach, ATTRIBUTE: reach_attribute, ITERATE: reach_iter, AITERATE: reach_aiter,
                              MAPPING: reach_mapping}

#: Names whose attributes need no guard: the runtime's own scopes (SPEC 5).
_RUNTIME_SCOPES = frozenset({"agent", "conv", "sys", "const", "command", "exc"})


class ReachRewriter(ast.NodeTransformer):
    """Rewrites a checked expression so every value reached at run time passes the reach guard.

    Applied after the compile rules' own rewrites (operators, f-strings, sized methods); calls of
    the engine's hidden helpers that cannot hand out host objects are left as they are.
    """

    _SAFE_HELPERS = frozenset({"__s2o_fstring", "__s2o_type", "__s2o_kwargs", "__s2o_sized",
                               REACH, ATTRIBUTE, ITERATE, AITERATE, MAPPING})

    def _wrap(self, helper: str, node: ast.expr, *extra: ast.expr) -> ast.Call:
        call = ast.Call(func=ast.Name(id=helper, ctx=ast.Load()), args=[node, *extra], keywords=[])
        for n in (call, call.func, *extra):
            ast.copy_location(n, node)
        return call

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        """``a.b`` → ``__s2o_attr(a, 'b')`` (not on the runtime scopes)."""
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        if isinstance(node.value, ast.Name) and node.value.id in _RUNTIME_SCOPES:
            return node
        return self._wrap(ATTRIBUTE, node.value, ast.Constant(node.attr))

    def visit_Call(self, node: ast.Call) -> ast.AST:
        """``f(x)`` → ``__s2o_reach(f(x))``; ``**m`` → ``**__s2o_mapping(m)``; ``*s`` → ``*__s2o_iter(s)``."""
        self.generic_visit(node)
        for kw in node.keywords:
            if kw.arg is None:
                kw.value = self._wrap(MAPPING, kw.value)
        if isinstance(node.func, ast.Name) and node.func.id in self._SAFE_HELPERS:
            return node
        return self._wrap(REACH, node)

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        """``*s`` in a call or a display iterates ``s`` item by item."""
        self.generic_visit(node)
        node.value = self._wrap(ITERATE, node.value)
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        """``for x in s`` iterates ``s`` item by item."""
        self.generic_visit(node)
        node.iter = self._wrap(AITERATE if node.is_async else ITERATE, node.iter)
        return node

    def _value(self, node: ast.expr) -> ast.AST:
        self.generic_visit(node)
        return self._wrap(REACH, node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        """``a[i]`` → ``__s2o_reach(a[i])``."""
        if not isinstance(node.ctx, ast.Load):
            self.generic_visit(node)
            return node
        return self._value(node)

    visit_BinOp = _value
    visit_UnaryOp = _value
    visit_Compare = _value
    visit_Await = _value


def guard_tree(tree: ast.Expression) -> ast.Expression:
    """``tree`` rewritten by :class:`ReachRewriter` (in place), locations filled."""
    ReachRewriter().visit(tree)
    ast.fix_missing_locations(tree)
    return tree


def is_host_object(obj: Any) -> bool:
    """Whether ``obj`` comes from outside the standard library and this project: a host object whose
    attributes and results must be guarded. Allowlist namespaces of host packages count."""
    t = type(obj)
    if t in _PLAIN or t in _CONTAINERS:
        return False
    if t is Namespace:
        home: Any = namespace_path(obj)
    else:
        owner = obj if isinstance(obj, type) or callable(obj) else t
        home = getattr(owner, "__module__", None)
        if type(home) is not str:
            bound = getattr(owner, "__self__", None)
            home = bound.__name__ if type(bound) is types.ModuleType else type(bound).__module__
    if type(home) is not str:
        return True
    top = home.split(".")[0]
    return not (top in sys.stdlib_module_names or top in ("s2o_kernel", "builtins"))
