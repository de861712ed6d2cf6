"""The store guard at run time: a call that may keep a value the expression made checks it first (SPEC 12).

:mod:`.stores` finds, at validation, the calls that have a target (a value of the session they may change)
and an argument that may hold a value the expression made, and the rewrites send them through
:func:`guarded_store` (``xs.append(g)`` → ``__s2o_store(xs.append, (0,), g)``). Here the callee decides:

* a callee that keeps none of its arguments (:func:`keeps_nothing`) runs unchecked: a C method of an
  immutable builtin value (``sep.join(str(x) for x in xs)``), a C method of a builtin container other than
  those of :data:`KEEPING_METHODS` (``d.get``, ``set(xs).union(...)``), a C function of a standard-library
  module audited for it (:data:`KEEPS_NOTHING_MODULES`) other than those of :data:`KEEPING_FUNCTIONS`
  (``sorted``, ``max``, ``math.fsum``), a C type (constructing one builds a new value, checked where it is
  kept or returned), the engine's guarded ``asyncio.gather``. When such a callee calls what it is given
  (:data:`HIGHER_ORDER`: ``map``, ``sorted``, ``functools.reduce``, ``itertools.starmap``…), each callable
  argument that may keep or call one (``xs.append``, ``map``, a ``partial``) is handed over wrapped
  (:class:`GuardedCallable`): each call it makes goes through this guard, with every argument checked, so
  ``map(xs.append, map(countdown, [1]))``, ``functools.reduce(list.append, [xs, g])`` and
  ``map(map, [xs.append], [[g]])`` are refused when the made value reaches the keeping callable;
* any other callee (a keeping method, ``heapq.heappush``, a Python function or method, a class written in
  Python, a C function of an unaudited module such as ``xml.etree.ElementTree.SubElement``), or a callee
  that keeps nothing given a callable that keeps (``sorted(gens, key=d.setdefault)``), gets the arguments
  :mod:`.stores` named checked as a variable's value is (:func:`.values.check_value`), before it runs, with
  the callee itself when it carries arguments (a ``partial``, an ``operator.methodcaller``) or when
  :mod:`.stores` names its receiver (``-1``: ``[g].sort(key=xs.append)``); a refusal changes nothing. An
  iterator a consuming callee is given (:data:`CONSUMING`: ``xs.extend(c for c in s)``,
  ``operator.iadd(xs, it)``) is consumed first, each item checked, and the callee is handed the list: only
  the items are kept, and a refused item leaves the target as it was.

Every test is by identity or exact type (never ``isinstance``, ``==`` or a hash a class could define).
"""

from __future__ import annotations

import bisect
import builtins
import collections
import functools
import heapq
import itertools
import operator
import types
from collections.abc import Iterable
from typing import Any

from .guards import SafeIterator, guarded_gather, refuse_metaclass
from .stores import RECEIVER
from .values import LAZY_ITERATOR_TYPES, check_value

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
#: The C modules (a C function's ``__self__``) audited for this guard: their functions keep none of their
#: arguments in another, but for :data:`KEEPING_FUNCTIONS`. A C function of any other module
#: (``_elementtree.SubElement`` keeps its attributes in its first argument, ``_csv``, ``_collections``) is
#: taken as keeping.
KEEPS_NOTHING_MODULES = frozenset({
    "builtins", "math", "cmath", "_decimal", "_statistics", "_json", "time", "_datetime", "_sre", "_string",
    "unicodedata", "binascii", "_hashlib", "_md5", "_sha1", "_sha256", "_sha512", "_sha3", "_blake2",
    "itertools", "_functools", "_operator", "_heapq", "_bisect", "_struct",
})
#: In-place operator functions: ``operator.iadd(xs, it)`` extends ``xs`` with the items of ``it``.
_IN_PLACE: tuple[Any, ...] = tuple(getattr(operator, name) for name in (
    "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul", "imod", "imul", "ior", "ipow", "irshift",
    "isub", "itruediv", "ixor"))
#: C functions of audited modules that keep an argument (or its items) in another argument.
KEEPING_FUNCTIONS: tuple[Any, ...] = (
    heapq.heappush, heapq.heappushpop, heapq.heapreplace, operator.setitem, *_IN_PLACE,
    bisect.insort, bisect.insort_left, bisect.insort_right, builtins.setattr, builtins.delattr,
)
#: Callees that keep nothing themselves but call what they are given (a function argument, or the items of
#: one with the items of another): their callable arguments are wrapped (:class:`GuardedCallable`).
HIGHER_ORDER: tuple[Any, ...] = (
    map, filter, sorted, min, max, iter, functools.reduce, operator.call,
    itertools.starmap, itertools.accumulate, itertools.groupby, itertools.dropwhile, itertools.takewhile,
    itertools.filterfalse,
)
#: Callable objects that carry arguments they were made with: checked as a callee (``partial(xs.append, g)``).
_CARRIERS: tuple[type, ...] = (functools.partial, operator.methodcaller)
#: The engine's own granted functions that keep nothing (``asyncio.gather`` awaits what it is given).
KEEPS_NOTHING_HELPERS: tuple[Any, ...] = (guarded_gather,)
#: Methods of builtin containers that consume an iterable and keep only its items, by the container type.
CONSUMING: dict[type, frozenset[str]] = {
    list: frozenset({"extend"}), set: frozenset({"update"}), dict: frozenset({"update"}),
    collections.deque: frozenset({"extend", "extendleft"}),
}
#: The same methods, unbound (``list.extend(xs, it)``), and the in-place operator functions: callees whose
#: second positional argument is consumed.
_CONSUMING_SECOND = (*(getattr(kind, name) for kind, names in CONSUMING.items() for name in sorted(names)),
                     *_IN_PLACE)
#: Iterators whose items a consuming callee is given one by one: every lazy iterator of the builtins and
#: :mod:`itertools`, generators, and the iterators of granted generators.
ITERATORS: tuple[type, ...] = (*LAZY_ITERATOR_TYPES, types.GeneratorType, SafeIterator)
#: The heap-type flag of a class (``Py_TPFLAGS_HEAPTYPE``): a class written in Python, not C.
_HEAP_TYPE = 1 << 9
#: How a value a call may keep is named in a refusal.
_HOLDER = "an argument of a call that may keep it"


class GuardedCallable:
    """A callable argument handed to a :data:`HIGHER_ORDER` callee in its place: each call goes through
    :func:`guarded_store` with every argument checked. Never held: the lazy iterators that keep one are refused
    wherever a value is checked (:func:`.values.check_value`)."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return guarded_store(self._fn, ("*",), *args, **kwargs)

    def __repr__(self) -> str:
        return "<a guarded callable>"


def guarded_store(fn: Any, risky: tuple[int | str, ...], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with ``args`` and ``kwargs``, as the module doc says: unchecked when ``fn`` keeps nothing
    (its keeping or calling callable arguments wrapped when ``fn`` is :data:`HIGHER_ORDER`), else with the
    arguments ``risky`` names checked first (positional indices and keyword names, ``"*"`` for all,
    :data:`RECEIVER` for the callee's receiver; from :func:`.stores.risky_arguments`).

    Raises ``S2OError`` ``not-allowed`` (a generator, module, frame… in a checked argument; ``fn`` a
    metaclass, as :func:`.guards.guarded_call`) or ``not-awaited`` (a coroutine) before ``fn`` runs, or when a
    wrapped callable is called with one."""
    refuse_metaclass(fn)
    if keeps_nothing(fn):
        calling = [i for i, a in enumerate(_all(args, kwargs)) if _may_keep_or_call(a)]
        if not calling:
            return fn(*args, **kwargs)
        if any(fn is higher for higher in HIGHER_ORDER):
            return _call_wrapped(fn, calling, args, kwargs)
        if RECEIVER in risky:  # a made receiver whose items the callable is given: [g].sort(key=xs.append)
            check_value(fn, _HOLDER)
    if any(type(fn) is carrier for carrier in _CARRIERS):
        check_value(fn, _HOLDER)
    if "*" in risky:
        risky = (*range(len(args)), *kwargs)
    first_consumed = _first_consumed(fn)
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
            return (type(name) is str and name in KEEPS_NOTHING_MODULES
                    and not any(fn is keeping for keeping in KEEPING_FUNCTIONS))
        if type(owner) is type:  # a C class method (dict.fromkeys, str.maketrans): builds a new value
            return not owner.__flags__ & _HEAP_TYPE
        return _method_keeps_nothing(type(owner), fn.__name__)
    if kind is types.MethodDescriptorType:  # an unbound C method: list.append, str.join
        return _method_keeps_nothing(fn.__objclass__, fn.__name__)
    if kind is type:  # a class: a C one builds a new value; one written in Python runs its own __init__
        return not fn.__flags__ & _HEAP_TYPE
    return any(fn is helper for helper in KEEPS_NOTHING_HELPERS)


def _may_keep_or_call(value: Any) -> bool:
    """Whether ``value`` is a callable that may keep one of its arguments, or call another callable."""
    return callable(value) and (not keeps_nothing(value) or any(value is higher for higher in HIGHER_ORDER))


def _call_wrapped(fn: Any, calling: list[int], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` with the arguments at the positions ``calling`` (positional, then keyword, as
    :func:`_all` counts them) wrapped in :class:`GuardedCallable`."""
    given = list(args)
    names = list(kwargs)
    for i in calling:
        if i < len(given):
            given[i] = GuardedCallable(given[i])
        else:
            kwargs[names[i - len(given)]] = GuardedCallable(kwargs[names[i - len(given)]])
    return fn(*given, **kwargs)


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
    """The first positional argument a consuming callee consumes (0 for a bound method of
    :data:`CONSUMING`, 1 for the unbound ones and the in-place operator functions: after the target),
    compared by identity; ``None`` for any other callable."""
    if type(fn) is types.BuiltinMethodType:
        receiver = type(fn.__self__)
        for kind, names in CONSUMING.items():
            if receiver is kind:
                return 0 if fn.__name__ in names else None
    return 1 if any(fn is consuming for consuming in _CONSUMING_SECOND) else None


def _kept(value: Any, consumed: bool) -> Any:
    """``value`` once checked as a variable's value is; an iterator a consuming callee is given (``consumed``)
    is consumed here into a list, each item checked, so a refused item leaves the target as it was."""
    if consumed and any(type(value) is kind for kind in ITERATORS):
        items = []
        for item in value:
            check_value(item, "an item given to a call that keeps it")
            items.append(item)
        return items
    check_value(value, _HOLDER)
    return value
