"""Values reached at run time: what a granted object may hand to an expression (SPEC 12, issue 8).

Names are checked when an expression is validated, but a granted *host* object (one of your own
packages, or a local the host gave) can hand out anything through an attribute, a property, a call's
return value, an item, an operator or an awaited result: ``thing.p.os.popen('id')`` where ``thing.p``
holds ``os.path``, ``c.get_os()``, ``c.evil('...')`` where ``c.evil`` is ``exec``. This module decides,
by class, what must never reach an expression, and guards every such path:

* :func:`refusal` is the one classifier: a module that is not an allowlist namespace, a refused
  built-in (``exec``, ``eval``, ``open``, the real ``getattr`` …), a function, class or instance whose
  home is a standard-library module outside :data:`SAFE_STDLIB` (``os``, ``subprocess``, ``socket``,
  ``io``, ``threading``, ``logging`` …), an object an allowlist entry would be refused for
  (``string.Formatter``, ``operator.attrgetter`` …), a metaclass, or a method bound to any of those.
  Plain built-in values, containers of them and host objects pass; generators are handed on as
  opaque :class:`~.guards.SafeIterator` objects.
* :class:`ReachRewriter` rewrites a compiled expression so that every attribute read, call result,
  item, operator result and awaited value passes :func:`reach` (attribute reads through
  :func:`reach_attribute`, which lets allowlist namespaces answer for themselves), and every
  iteration (comprehensions, ``*args``) and ``**kwargs`` mapping is checked item by item.

Guarding costs a Python call per operation, so the engine applies it only where a host object can
be reached: when the allowlist grants an entry from outside the audited standard library (or
``allow_unsafe_entries`` is on), or a session is given a host object as a local. The teaching
configuration grants only audited modules and the project's own examples, and runs unguarded
(see ``docs/security.md`` and ``docs/performance.md``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .errors import S2OError

#: Hidden globals the rewritten code calls.
REACH = "__s2o_reach"
ATTRIBUTE = "__s2o_attr"
ITERATE = "__s2o_iter"
AITERATE = "__s2o_aiter"
MAPPING = "__s2o_mapping"

#: Standard-library modules (top-level names) whose functions, classes and instances may reach an
#: expression from a host object: pure computation, no files, processes, network, frames, imports
#: by name or process state. Anything else of the standard library is refused when reached.
SAFE_STDLIB = frozenset({
    "math", "cmath", "json", "datetime", "decimal", "fractions", "numbers", "statistics", "collections",
    "itertools", "functools", "operator", "re", "string", "textwrap", "unicodedata", "calendar", "heapq",
    "bisect", "copy", "enum", "html", "base64", "binascii", "hashlib", "uuid", "zoneinfo", "difflib",
    "random", "dataclasses", "ipaddress", "colorsys", "urllib.parse", "abc", "contextlib", "typing_extensions",
    "email.utils",
})

#: C accelerator modules and the module they stand for.
_ACCELERATORS = {
    "_json": "json", "_datetime": "datetime", "_decimal": "decimal", "_pydecimal": "decimal",
    "_statistics": "statistics", "_collections": "collections", "_collections_abc": "collections",
    "_functools": "functools", "_operator": "operator", "_sre": "re", "_string": "string",
    "_heapq": "heapq", "_bisect": "bisect", "_random": "random", "_hashlib": "hashlib", "_md5": "hashlib",
    "_sha1": "hashlib", "_sha2": "hashlib", "_sha256": "hashlib", "_sha512": "hashlib", "_sha3": "hashlib",
    "_blake2": "hashlib", "_abc": "abc", "_uuid": "uuid", "_zoneinfo": "zoneinfo", "_struct": "struct",
}

#: Built-ins that must never be reached through a host object (SPEC 12), with the reason.
REFUSED_BUILTINS: dict[str, str] = {
    "eval": "evaluates a string as code", "exec": "runs a string as code", "compile": "turns a string into code",
    "open": "reads and writes files", "__import__": "imports any module", "globals": "returns a module namespace",
    "locals": "returns a namespace", "vars": "returns an object's namespace", "dir": "lists hidden members",
    "getattr": "reads attributes by name without the name rules", "hasattr": "probes attributes by name",
    "setattr": "changes objects by name", "delattr": "changes objects by name", "breakpoint": "starts a debugger",
    "input": "blocks waiting for a terminal", "help": "starts the interactive help", "exit": "ends the process",
    "quit": "ends the process", "type": "builds classes", "object": "the root of the class hierarchy",
    "super": "reaches parent implementations", "memoryview": "exposes the underlying object of a buffer",
    "classmethod": "wraps host functions", "staticmethod": "wraps host functions", "property": "wraps host functions",
    "copyright": "interactive helper", "credits": "interactive helper", "license": "interactive helper",
}

#: Objects refused by identity whatever module they live in (walk attributes by name, format strings).
_REFUSED_OBJECTS: tuple[tuple[str, str], ...] = (
    ("string.Formatter", "reads any attribute from a format string"),
    ("logging.Formatter", "reads any attribute from a format string"),
    ("operator.attrgetter", "reads attributes by a name built at run time"),
    ("operator.methodcaller", "calls methods by a name built at run time"),
    ("functools.update_wrapper", "copies any attribute by name"),
    ("functools.wraps", "copies any attribute by name"),
    ("functools.singledispatch", "a registry of host functions"),
    ("random.seed", "changes the process's random state"),
    ("random.setstate", "changes the process's random state"),
    ("calendar.setfirstweekday", "changes process-wide state"),
    ("decimal.setcontext", "changes process-wide state"),
    ("decimal.getcontext", "hands out the process-wide context"),
)

_PLAIN = frozenset({str, int, float, bool, type(None), bytes, complex, bytearray, range, slice})
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
_VIEWS = frozenset({type({}.keys()), type({}.values()), type({}.items())})
_CALLABLE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.BuiltinMethodType,
                   types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType,
                   types.ClassMethodDescriptorType)
#: Most values one deep check visits.
_SCAN_LIMIT = 100_000


@functools.cache
def _refused_ids() -> dict[int, str]:
    found: dict[int, str] = {}
    for dotted, why in _REFUSED_OBJECTS:
        module_name, _, name = dotted.rpartition(".")
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = __import__(module_name, fromlist=["_"])
            except ImportError:
                continue
        obj = getattr(module, name, None)
        if obj is not None:
            found[id(obj)] = f"{dotted} {why}"
    return found


def module_refusal(module_name: object) -> str | None:
    """Why objects whose home is ``module_name`` may not reach an expression, or ``None``.

    Host modules (not in the standard library) and the modules of :data:`SAFE_STDLIB` pass;
    ``builtins`` is decided per object by :func:`refusal`.
    """
    if type(module_name) is not str or not module_name or module_name == "builtins":
        return None
    top = module_name.split(".")[0]
    top = _ACCELERATORS.get(top, top)
    if top not in sys.stdlib_module_names:
        return None
    if top in SAFE_STDLIB or any(module_name == m or module_name.startswith(m + ".") for m in SAFE_STDLIB):
        return None
    return f"objects of the module '{module_name}' are not granted (files, processes, network or interpreter state)"


def _home(obj: Any) -> Any:
    try:
        return type.__getattribute__(obj, "__module__") if isinstance(obj, type) else obj.__module__
    except Exception:  # a host object whose __module__ raises: judged by its type
        return type(obj).__module__


def refusal(value: Any) -> str | None:
    """Why ``value`` may not reach an expression (see the module doc), or ``None`` when it may.

    Never calls a method of ``value`` other than reading ``__module__``/``__self__``/``__func__``/
    ``__name__`` through their descriptors; judges by exact types.
    """
    t = type(value)
    if t in _PLAIN:
        return None
    why = _refused_ids().get(id(value))
    if why is not None:
        return why
    if t is types.ModuleType:
        return "a module can only be reached through the allowlist"
    if isinstance(value, type):
        return _class_refusal(value)
    if isinstance(value, _CALLABLE_TYPES):
        return _callable_refusal(value)
    if isinstance(value, functools.partial):
        return refusal(value.func)
    why = _refused_ids().get(id(t))
    if why is not None:
        return why
    return _class_refusal(t)


def _class_refusal(cls: type) -> str | None:
    why = _refused_ids().get(id(cls))
    if why is not None:
        return why
    if issubclass(cls, type) and cls is not type:
        return "a metaclass builds classes"
    home = _home(cls)
    if home == "builtins":
        name = cls.__name__
        return REFUSED_BUILTINS.get(name) if name in ("type", "object", "super", "memoryview", "classmethod",
                                                      "staticmethod", "property") else None
    return module_refusal(home)


def _callable_refusal(fn: Any) -> str | None:
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.MethodType):
        return _callable_refusal(fn.__func__) or (refusal(owner) if owner is not None else None)
    if owner is not None and type(owner) is not types.ModuleType:
        if type(owner) in _PLAIN or type(owner) in _CONTAINERS:
            return None  # a method of a plain value: 'x'.upper
        return refusal(owner) if not isinstance(owner, type) else _class_refusal(owner)
    home = owner.__name__ if type(owner) is types.ModuleType else _home(fn)
    if home == "builtins":
        name = getattr(fn, "__name__", "")
        return REFUSED_BUILTINS.get(name) if isinstance(name, str) else "an unnamed built-in"
    return module_refusal(home)


def check(value: Any, what: str = "a value reached through a granted object") -> None:
    """Raise ``S2OError`` ``not-allowed`` when ``value``, or anything a container of it holds, is refused."""
    stack = [value]
    seen = 0
    while stack and seen < _SCAN_LIMIT:
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
            raise S2OError("not-allowed", f"{what} is not allowed: {why}")


def reach(value: Any) -> Any:
    """``value`` once :func:`check` passes; a generator is handed on as an opaque iterator."""
    t = type(value)
    if t in _PLAIN:
        return value
    if t is types.GeneratorType:
        from .guards import SafeIterator

        return SafeIterator(_checked_items(value), "generator")
    check(value)
    return value


def reach_attribute(obj: Any, name: str) -> Any:
    """``obj.<name>`` (``name`` is a literal the compile rules passed), its value checked by :func:`reach`.

    Allowlist namespaces answer for themselves: they hand out granted members only. Sized methods
    are bounded as in unguarded code.
    """
    from .allowlist import Namespace
    from .bounded import SIZED_METHODS, sized_attribute

    if type(obj) is Namespace:
        return getattr(obj, name)
    if name in SIZED_METHODS:
        return reach(sized_attribute(obj, name))
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
    from .guards import guard_kwargs

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

    _SAFE_HELPERS = frozenset({"__s2o_fstring", "__s2o_kwargs", "__s2o_sized", REACH, ATTRIBUTE, ITERATE, AITERATE,
                               MAPPING})

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
    from .allowlist import Namespace, namespace_path

    if type(obj) in _PLAIN or type(obj) in _CONTAINERS:
        return False
    if type(obj) is Namespace:
        home = namespace_path(obj)
    else:
        home = _home(obj) if isinstance(obj, (type, *_CALLABLE_TYPES)) else type(obj).__module__
    if type(home) is not str:
        return True
    top = home.split(".")[0]
    return not (top in sys.stdlib_module_names or top == "s2o_kernel" or home == builtins.__name__)
