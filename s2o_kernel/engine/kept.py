"""The store guard at run time: a call that may keep a value the expression made checks it first (SPEC 12).

:mod:`.stores` finds, at validation, the calls that have a target (a value of the session they may change)
and an argument that may hold a value the expression made, and the rewrites send them through
:func:`guarded_store` (``xs.append(g)`` → ``__s2o_store(xs.append, (0,), g)``). Here the callee decides:

* a callee that keeps none of its arguments (:func:`keeps_nothing`) runs unchecked, unless another argument
  is a callable that may keep one (``map(xs.append, gens)``, ``sorted(gens, key=d.setdefault)``): a C method
  of an immutable builtin value (``sep.join(str(x) for x in xs)``), a C method of a builtin container other
  than those of :data:`KEEPING_METHODS` (``d.get``, ``set(xs).union(...)``), a C function of the standard
  library other than those of :data:`KEEPING_FUNCTIONS` (``sorted``, ``max``), a C type (constructing one
  builds a new value, checked where it is kept or returned), the engine's guarded ``asyncio.gather``;
* any other callee (a keeping method, ``heapq.heappush``, a Python function or method, a class written in
  Python, a C function of another package) gets the arguments :mod:`.stores` named checked as a variable's
  value is (:func:`.values.check_value`), before it runs; a refusal changes nothing. An iterator handed to a
  builtin container's method that consumes it (:data:`CONSUMING`: ``xs.extend(c for c in s)``) is checked
  item by item as it is consumed, since only its items are kept.

Every test is by identity or exact type (never ``isinstance``, ``==`` or a hash a class could define).
"""

from __future__ import annotations

import bisect
import collections
import heapq
import operator
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

from .guards import SafeIterator, guarded_gather, refuse_metaclass
from .values import check_value

#: Exact types whose values cannot change: their bound C methods keep no argument.
IMMUTABLE: tuple[type, ...] = (str, bytes, int, float, complex, bool, tuple, frozenset, range, type(None))
#: Methods of builtin containers that keep an argument, or the items of one, in the receiver, by the
#: receiver's exact type; every other C method of these types keeps nothing. ``bytearray`` keeps only ints.
KEEPING_METHODS: dict[type, frozenset[str]] = {
    list: frozenset({"append", "extend", "insert"}),
    dict: frozenset({"update", "setdefault"}),
    set: frozenset({"add", "update", "symmetric_difference_update"}),
    collections.deque: frozenset({"append", "appendleft", "extend", "extendleft", "insert"}),
    collections.OrderedDict: frozenset({"update", "setdefault"}),
    collections.defaultdict: frozenset({"update", "setdefault"}),
    bytearray: frozenset(),
}
#: C functions of the standard library that keep an argument (or its items) in another argument.
KEEPING_FUNCTIONS: tuple[Any, ...] = (
    heapq.heappush, heapq.heappushpop, heapq.heapreplace, operator.setitem,
    *(getattr(operator, name) for name in ("iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul", "imod",
                                           "imul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor")),
    bisect.insort, bisect.insort_left, bisect.insort_right,
)
#: The engine's own granted functions that keep nothing (``asyncio.gather`` awaits what it is given).
KEEPS_NOTHING_HELPERS: tuple[Any, ...] = (guarded_gather,)
#: Methods of builtin containers that consume an iterable and keep only its items, by the container type.
CONSUMING: dict[type, frozenset[str]] = {
    list: frozenset({"extend"}), set: frozenset({"update"}), dict: frozenset({"update"}),
    collections.deque: frozenset({"extend", "extendleft"}),
}
#: The same methods, unbound (``list.extend(xs, it)``).
_CONSUMING_UNBOUND = tuple(getattr(kind, name) for kind, names in CONSUMING.items() for name in sorted(names))
#: Iterators of builtins whose items a consuming method may be given one by one.
_ITERATORS: tuple[type, ...] = (types.GeneratorType, SafeIterator, map, filter, zip, enumerate, reversed,
                                type(iter([])), type(iter(())), type(iter("")), type(iter(range(0))),
                                type(iter({})), type(iter(set())))
#: The heap-type flag of a class (``Py_TPFLAGS_HEAPTYPE``): a class written in Python, not C.
_HEAP_TYPE = 1 << 9
#: How a value a call may keep is named in a refusal.
_HOLDER = "an argument of a call that may keep it"


def guarded_store(fn: Any, risky: tuple[int | str, ...], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with ``args`` and ``kwargs``; first, unless ``fn`` and every callable argument keep nothing
    (:func:`keeps_nothing`), check the arguments ``risky`` names (positional indices and keyword names, ``"*"``
    for all; from :func:`.stores.risky_arguments`) as a variable's value is checked.

    Raises ``S2OError`` ``not-allowed`` (a generator, module, frame… in a checked argument; ``fn`` a
    metaclass, as :func:`.guards.guarded_call`) or ``not-awaited`` (a coroutine) before ``fn`` runs; an item of
    a consumed iterator (:data:`CONSUMING`) is refused when the method reaches it."""
    refuse_metaclass(fn)
    if keeps_nothing(fn) and not any(callable(a) and not keeps_nothing(a) for a in _all(args, kwargs)):
        return fn(*args, **kwargs)
    first_consumed = _first_consumed(fn)
    if "*" in risky:
        risky = (*range(len(args)), *kwargs)
    given = list(args)
    for key in risky:
        if type(key) is int and 0 <= key < len(given):
            given[key] = _kept(given[key], first_consumed is not None and key >= first_consumed)
        elif type(key) is str and key in kwargs:
            kwargs[key] = _kept(kwargs[key], False)
    return fn(*given, **kwargs)


def keeps_nothing(fn: Any) -> bool:
    """Whether calling ``fn`` can keep none of its arguments in another value (a receiver, another argument),
    decided by exact types and identity (the module doc lists what does); ``False`` when unsure."""
    kind = type(fn)
    if kind is types.BuiltinMethodType:  # a C function, or a C method bound to its receiver
        owner = fn.__self__
        if owner is None or type(owner) is types.ModuleType:
            name = getattr(owner, "__name__", None) if owner is not None else "builtins"
            return (type(name) is str and name.partition(".")[0] in sys.stdlib_module_names
                    and not any(fn is keeping for keeping in KEEPING_FUNCTIONS))
        if type(owner) is type:  # a C class method (dict.fromkeys, str.maketrans): builds a new value
            return not owner.__flags__ & _HEAP_TYPE
        return _method_keeps_nothing(type(owner), fn.__name__)
    if kind is types.MethodDescriptorType:  # an unbound C method: list.append, str.join
        return _method_keeps_nothing(fn.__objclass__, fn.__name__)
    if kind is type:  # a class: a C one builds a new value; one written in Python runs its own __init__
        return not fn.__flags__ & _HEAP_TYPE
    return any(fn is helper for helper in KEEPS_NOTHING_HELPERS)


def _method_keeps_nothing(receiver: type, name: Any) -> bool:
    """Whether the C method ``name`` of the exact type ``receiver`` keeps no argument in its receiver."""
    if any(receiver is kind for kind in IMMUTABLE):
        return True
    for kind, keeping in KEEPING_METHODS.items():
        if receiver is kind:
            return type(name) is str and name not in keeping
    return False


def _all(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterable[Any]:
    """The positional then the keyword arguments of a call."""
    yield from args
    yield from kwargs.values()


def _first_consumed(fn: Any) -> int | None:
    """The first positional argument a method of :data:`CONSUMING` consumes (0 bound, 1 unbound: after the
    receiver), compared by identity; ``None`` for any other callable."""
    if type(fn) is types.BuiltinMethodType:
        receiver = type(fn.__self__)
        for kind, names in CONSUMING.items():
            if receiver is kind:
                return 0 if fn.__name__ in names else None
        return None
    return 1 if any(fn is method for method in _CONSUMING_UNBOUND) else None


def _kept(value: Any, consumed: bool) -> Any:
    """``value`` once checked as a variable's value is; an iterator a consuming method is given (``consumed``)
    as a generator that checks each item as it is consumed."""
    if consumed and any(type(value) is kind for kind in _ITERATORS):
        return _checked_items(value)
    check_value(value, _HOLDER)
    return value


def _checked_items(items: Iterator[Any]) -> Iterator[Any]:
    """The items of ``items``, each checked (:func:`.values.check_value`) before it is handed on."""
    for item in items:
        check_value(item, "an item given to a call that keeps it")
        yield item
