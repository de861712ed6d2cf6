"""Values reached at run time: what a granted object may hand to an expression (SPEC 12, issue 8).

Names are checked when an expression is validated, but a granted *host* object (one of your own
packages, or a local the host gave) can hand out anything through an attribute, a property, a call's
return value, an item, an operator or an awaited result: ``thing.p.os.popen('id')`` where ``thing.p``
holds ``os.path``, ``c.get_os()``, ``c.evil('...')`` where ``c.evil`` is ``exec``. This module decides,
by class, what must never reach an expression, and guards every such path:

* :func:`.granted.refusal` is the one classifier, the audited table's own (:mod:`.stdlib_audit`): a
  module that is not an allowlist namespace, a refused built-in (``exec``, ``eval``, ``open``, the real
  ``getattr`` …), a function, class or instance whose home is a standard-library module the table
  does not grant (``os``, ``subprocess``, ``socket``, ``io``, ``threading``, ``logging`` …), a member
  the table leaves out (``string.Formatter``, ``operator.attrgetter`` …), a metaclass, or a method or
  ``partial`` bound to any of those; :func:`check` applies it to a value and everything the value
  holds (:func:`.granted.first_refusal`: containers of every kind, their subclasses, mapping proxies,
  lazy iterators). Plain built-in values, containers of allowed values and host objects pass; every
  other iterator is handed on as an opaque :class:`~.wrappers.SafeIterator` whose items are checked
  one by one.
* :class:`ReachRewriter` rewrites a compiled expression so that every attribute read, call result,
  item, operator result, awaited value and ``{**m}`` display passes :func:`reach` (attribute reads
  through :func:`reach_attribute`, which lets allowlist namespaces answer for their functions and
  classes), and every iteration (comprehensions, ``*args``) and ``**kwargs`` mapping is checked item
  by item. A granted value that is not a function, class or namespace (a host module's ``dict``, a
  list, an iterator, an instance: :func:`read_through_reach`) is read through :func:`reach` wherever
  its name or its namespace member is read, so what it holds is checked as an attribute's value is,
  however it changed since the allowlist loaded; and the result of guarded code is always checked
  (``Execution.finish``).

The checks sit where compiled code receives a value, and that is enough even for values C code passes
to C code (``list(map(list, map(map, it, args)))``, where the inner ``map`` objects are built and
consumed inside C): C code can only get a value from its arguments, and every argument is a value
compiled code received (checked), an iterator (its items checked as they are pulled) or a lazy caller
(judged by what it holds); a lazy caller C code builds from items is itself such an item.

Guarding costs a Python call per operation, so the engine applies it only where a host object can
be reached: when the allowlist grants anything but plain text and numbers from outside the audited
standard library and this project (``allow_unsafe_entries`` turns guarding off), or a session is
given a host object as a local, or a container holding one (:func:`is_host_object` looks through
containers). The teaching configuration grants only audited modules and the project's own examples,
and runs unguarded (see ``docs/security.md`` and ``docs/performance.md``).
"""

from __future__ import annotations

import ast
import types
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from ..errors import S2OError
from ..run.scopes import check_json
from .allowlist import Namespace, namespace_path
from .bounded import SIZED_METHODS, sized_attribute
from .denylist import type_name
from .granted import PLAIN, first_refusal, from_host_code, host_module, refusal, walk
from .guards import guard_kwargs
from .parts import CONTAINERS, PLAIN_TYPES
from .values import check_value
from .wrappers import SafeIterator

#: Hidden globals the rewritten code calls.
REACH = "__s2o_reach"
ATTRIBUTE = "__s2o_attr"
ITERATE = "__s2o_iter"
AITERATE = "__s2o_aiter"
MAPPING = "__s2o_mapping"

#: Exact types whose values hold nothing and whose attributes are their own methods and numbers.
_PLAIN = PLAIN
_PLAIN_OWNERS = _PLAIN | CONTAINERS
_VIEWS = frozenset({type({}.keys()), type({}.values()), type({}.items())})


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
    if type(value) in PLAIN_TYPES:  # nothing inside
        return
    check_value(value, holder)
    check(value, holder)


def check_given(value: Any, holder: str) -> bool:
    """:func:`check_kept` of a value the host gives a session (``Session.set_local``), in the same two walks;
    returns whether ``value`` is, or holds at any depth, a host object (:func:`is_host_object`): the session
    must then guard what it reaches. Raises as :func:`check_kept` does."""
    if type(value) in PLAIN_TYPES:
        return False
    check_value(value, holder)
    host: list[bool] = []

    def judge(v: Any) -> str | None:
        why = refusal(v)
        if why is None and not host and is_host_itself(v):
            host.append(True)
        return why

    why = walk(value, judge)
    if why is not None:
        raise S2OError("not-allowed", f"{holder} is not allowed: {why}")
    return any(host)


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
    if t in CONTAINERS:  # by exact type: not an iterator
        return value
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

    Allowlist namespaces answer for themselves: they hand out granted members only, and a member that
    is not called as such (a container, an iterator: :func:`read_through_reach`) is reached like any
    value; the attributes of plain built-in values and containers are their own methods and numbers
    (what calling a method returns is reached), so they pass unchecked. Sized methods are bounded as
    in unguarded code.
    """
    if name in SIZED_METHODS:
        return reach(sized_attribute(obj, name))
    t = type(obj)
    if t in _PLAIN or t in CONTAINERS:
        return getattr(obj, name)
    if t is Namespace:
        member = getattr(obj, name)
        return reach(member) if read_through_reach(member) else member
    return reach(getattr(obj, name))


def read_through_reach(value: Any) -> bool:
    """Whether a granted value (an allowlist name's, a namespace's member) is read through :func:`reach`: all
    but plain values, namespaces and callables (functions, classes, a callable object), which the allowlist
    judged when it loaded and which are used as such (what calling one returns is reached). A container, an
    iterator or another instance is checked through everything it holds at every read, whoever changed it
    since the allowlist loaded. ``callable`` reads the type's call slot; no code of ``value`` runs."""
    t = type(value)
    return not (t in _PLAIN or t is Namespace or callable(value))


def _checked_items(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        yield reach(item)


def reach_iter(iterable: Any) -> Any:
    """What a comprehension or ``*args`` iterates: plain containers as they are, anything else item by item."""
    t = type(iterable)
    if t in _PLAIN or t in CONTAINERS or t in _VIEWS:
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
    the engine's hidden helpers that cannot hand out host objects are left as they are. ``granted``:
    the allowlist names whose values are read through the guard (:func:`read_through_reach`).
    """

    def __init__(self, granted: Collection[str] = ()) -> None:
        self.granted = granted

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

    def visit_Name(self, node: ast.Name) -> ast.AST:
        """``bag`` → ``__s2o_reach(bag)`` for a granted container, iterator or instance."""
        if isinstance(node.ctx, ast.Load) and node.id in self.granted:
            return self._wrap(REACH, node)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        """``{**m}`` → ``__s2o_reach({**m})``: C code read ``m``'s keys and items into the new dict."""
        self.generic_visit(node)
        return self._wrap(REACH, node) if None in node.keys else node

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


def guard_tree(tree: ast.Expression, granted: Collection[str] = ()) -> ast.Expression:
    """``tree`` rewritten by :class:`ReachRewriter` (in place; ``granted``: the allowlist names read through
    the guard), locations filled."""
    ReachRewriter(granted).visit(tree)
    ast.fix_missing_locations(tree)
    return tree


def is_host_object(obj: Any) -> bool:
    """Whether ``obj`` is, or holds at any depth, an object from outside the standard library and this
    project: a host object whose attributes and results must be guarded. Allowlist namespaces of host
    packages count; a container counts by what it holds (:func:`.granted.walk`), and one too large to
    look through counts too."""
    return walk(obj, _host_reason) is not None


def is_host_itself(v: Any) -> bool:
    """Whether ``v`` itself (what it holds aside) comes from host code: a namespace of a host package, or
    an object :func:`.granted.from_host_code` places outside the standard library and this project."""
    if type(v) is Namespace:
        return host_module(namespace_path(v))
    return from_host_code(v)


def _host_reason(v: Any) -> str | None:
    return "a host object" if is_host_itself(v) else None
