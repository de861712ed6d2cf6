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
  :mod:`.stores` named checked as a variable's value is (:func:`.reach.check_kept`), before it runs, with
  the callee itself when it carries arguments (a ``partial``, an ``operator.methodcaller``) or when
  :mod:`.stores` names its receiver (``-1``: ``[g].sort(key=xs.append)``); a refusal changes nothing. Unless
  it only keeps (a method of :data:`KEEPING_METHODS`, a function of :data:`KEEPING_FUNCTIONS`), such a callee
  may also call what it is given with values it makes (``json.JSONDecoder(object_hook=xs.append)``,
  ``ET.TreeBuilder(element_factory=...)``): its keeping arguments (a method of a value, a ``partial``) are
  handed over wrapped too; functions and classes are not (the host's business; a wrapped class would break
  ``isinstance``). A C type builds a new value only from an audited module
  (:data:`KEEPS_NOTHING_TYPE_MODULES`). An
  iterator a consuming callee is given (:data:`CONSUMING`: ``xs.extend(c for c in s)``,
  ``operator.iadd(xs, it)``, ``Counter.update``) is consumed first, each item checked (an item repeated, once),
  and the callee is handed the list: only the items are kept, and a refused item leaves the target as it was.

Every test is by identity or exact type (never ``isinstance``, ``==`` or a hash a class could define).
"""

from __future__ import annotations

import bisect
import builtins
import collections
import functools
import heapq
import itertools
import json
import operator
import types
from collections.abc import Iterable
from typing import Any

from .guards import guarded_gather, refuse_metaclass
from .iterators import IMMUTABLE_TYPES, LAZY_ITERATOR_TYPES, is_c_iterator
from .parts import PLAIN_TYPES
from .reach import check_kept
from .stores import RECEIVER
from .wrappers import GuardedCallable, SafeIterator

#: :data:`.parts.PLAIN_TYPES`, to compare by identity.
_PLAIN: tuple[Any, ...] = tuple(PLAIN_TYPES)

#: Exact types whose values cannot change: their bound C methods keep no argument.
IMMUTABLE: tuple[type, ...] = IMMUTABLE_TYPES  # one home: iterators.IMMUTABLE_TYPES
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
#: The modules (a C type's ``__module__``, first part) whose C types build a new value and keep nothing else
#: when called; a C type of any other module (``xml.etree.ElementTree.TreeBuilder`` calls and keeps what it
#: is given) is taken as keeping.
KEEPS_NOTHING_TYPE_MODULES = frozenset({
    "builtins", "collections", "itertools", "functools", "operator", "datetime", "decimal", "fractions", "re",
    "json", "_json", "math", "statistics", "struct", "_struct", "hashlib", "_hashlib", "_md5", "_sha1",
    "_sha256", "_sha512", "_sha3", "_blake2", "uuid", "ipaddress", "string",
})
#: In-place operator functions: ``operator.iadd(xs, it)`` extends ``xs`` with the items of ``it``.
_IN_PLACE: tuple[Any, ...] = tuple(getattr(operator, name) for name in (
    "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul", "imod", "imul", "ior", "ipow", "irshift",
    "isub", "itruediv", "ixor"))
#: C functions of audited modules that keep an argument (or its items) in their first argument, the target.
KEEPING_FUNCTIONS: tuple[Any, ...] = (
    heapq.heappush, heapq.heappushpop, heapq.heapreplace, operator.setitem, *_IN_PLACE,
    bisect.insort, bisect.insort_left, bisect.insort_right, builtins.setattr, builtins.delattr,
)
#: Callees that keep nothing themselves but call some of their arguments, with where those are: positional
#: indices and keyword names (``sorted(xs, key=f)``, ``functools.reduce(f, xs, initial)``: not ``initial``,
#: not ``max``'s ``default``, which are values handed back), ``None`` for any. Those arguments, when they may
#: keep or call (:func:`_may_keep_or_call`), are handed over wrapped (:class:`.wrappers.GuardedCallable`).
HIGHER_ORDER: dict[Any, tuple[tuple[int, ...], tuple[str, ...]] | None] = {
    map: ((0,), ()), filter: ((0,), ()), sorted: ((), ("key",)), min: ((), ("key",)), max: ((), ("key",)),
    iter: ((0,), ()), functools.reduce: ((0,), ()), operator.call: ((0,), ()),
    itertools.starmap: ((0,), ()), itertools.accumulate: ((1,), ("func",)), itertools.groupby: ((1,), ("key",)),
    itertools.dropwhile: ((0,), ()), itertools.takewhile: ((0,), ()), itertools.filterfalse: ((0,), ()),
    # functions of the standard library written in Python, audited: they keep nothing, and may call any
    # argument (json's cls(**kw) takes every extra keyword): every one that may keep or call is wrapped
    heapq.nlargest: None, heapq.nsmallest: None, json.dumps: None, json.loads: None,
}
#: Callable objects that carry arguments they were made with: checked as a callee (``partial(xs.append, g)``).
_CARRIERS: tuple[type, ...] = (functools.partial, operator.methodcaller)
#: The engine's own granted functions that keep nothing (``asyncio.gather`` awaits what it is given).
KEEPS_NOTHING_HELPERS: tuple[Any, ...] = (guarded_gather,)
#: Methods of builtin containers that consume an iterable and keep only its items, by the container type.
CONSUMING: dict[type, frozenset[str]] = {
    list: frozenset({"extend"}), set: frozenset({"update", "symmetric_difference_update"}),
    dict: frozenset({"update"}), collections.OrderedDict: frozenset({"update"}),
    collections.defaultdict: frozenset({"update"}), collections.deque: frozenset({"extend", "extendleft"}),
}
#: Methods written in Python that consume their first argument, by their function (``Counter.update``).
_CONSUMING_PYTHON: tuple[Any, ...] = (collections.Counter.update, collections.Counter.subtract)
#: The same C methods, unbound (``list.extend(xs, it)``), and the in-place operator functions: callees whose
#: second positional argument is consumed.
_CONSUMING_SECOND = (*(getattr(kind, name) for kind, names in CONSUMING.items() for name in sorted(names)),
                     *_IN_PLACE)
#: Iterators whose items a consuming callee is given one by one: every lazy iterator of the builtins and
#: :mod:`itertools`, generators, and the iterators of granted generators (and any other C iterator).
ITERATORS: tuple[type, ...] = (*LAZY_ITERATOR_TYPES, types.GeneratorType, SafeIterator)
#: The heap-type flag of a class (``Py_TPFLAGS_HEAPTYPE``): a class written in Python, not C.
_HEAP_TYPE = 1 << 9


def _by_id(objects: Iterable[Any]) -> dict[int, Any]:
    """``objects`` keyed by ``id``: a test of identity in one lookup that hashes nothing of the value tested
    (``_KEEPING.get(id(fn)) is fn``). The objects are kept alive by the table, so no id is reused."""
    return {id(o): o for o in objects}


_KEEPING = _by_id(KEEPING_FUNCTIONS)
_HELPERS = _by_id(KEEPS_NOTHING_HELPERS)
_CONSUMING_SECOND_IDS = _by_id(_CONSUMING_SECOND)
_HIGHER_ORDER_IDS: dict[int, tuple[Any, tuple[tuple[int, ...], tuple[str, ...]] | None]] = {
    id(fn): (fn, where) for fn, where in HIGHER_ORDER.items()}
#: How a value a call may keep is named in a refusal.
_HOLDER = "an argument of a call that may keep it"
#: The C-level ``__module__`` of a type: no metaclass property runs.
_type_module: Any = vars(type)["__module__"].__get__


def guarded_store(fn: Any, risky: tuple[int | str, ...], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with ``args`` and ``kwargs``, as the module doc says: unchecked when ``fn`` keeps nothing
    (the callable arguments it calls wrapped when ``fn`` is :data:`HIGHER_ORDER`), else with the arguments
    ``risky`` names checked first (positional indices and keyword names, ``"*"`` for all,
    :data:`.stores.RECEIVER` for the callee's receiver; from :func:`.stores.risky_arguments`).

    Raises ``S2OError`` ``not-allowed`` (a generator, module, frame… in a checked argument; ``fn`` a
    metaclass, as :func:`.guards.guarded_call`) or ``not-awaited`` (a coroutine) before ``fn`` runs, or when a
    wrapped callable is called with one."""
    refuse_metaclass(fn)
    return _store(fn, risky, args, kwargs, callee_checked=False)


def _guarded_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A call a :class:`.wrappers.GuardedCallable` makes: the store guard with every argument checked (its
    carrier callee was checked once, when it was wrapped)."""
    return _store(fn, ("*",), args, dict(kwargs), callee_checked=True)


def _store(fn: Any, risky: tuple[int | str, ...], args: tuple[Any, ...], kwargs: dict[str, Any],
           callee_checked: bool) -> Any:
    """The store guard's decision for ``fn(*args, **kwargs)`` (see :func:`guarded_store`)."""
    nothing = keeps_nothing(fn)
    if nothing:
        higher = _higher_order(fn, len(args))
        if higher is not None:
            return _call_higher_order(fn, higher, args, kwargs)
        if not any(map(_may_keep_or_call, args)) and not any(map(_may_keep_or_call, kwargs.values())):
            return fn(*args, **kwargs)
        if RECEIVER in risky:  # a made receiver whose items the callable is given: [g].sort(key=xs.append)
            check_kept(fn, _HOLDER)
    if not callee_checked and any(type(fn) is carrier for carrier in _CARRIERS):
        check_kept(fn, _HOLDER)
    given = list(args)
    if "*" in risky:
        first = 1 if _keeps_in_first(fn) else 0  # the target of heappush(heap, x) is changed, not kept
        risky = (*range(first, len(given)), *kwargs)
    first_consumed = _first_consumed(fn)
    for key in risky:
        if type(key) is int and 0 <= key < len(given):
            given[key] = _kept(given[key], first_consumed is not None and key >= first_consumed)
        elif type(key) is str and key in kwargs:
            kwargs[key] = _kept(kwargs[key], False)
    if (not nothing and not _keeps_only(fn)) or fn is functools.partial:  # it may call what it is given
        given = _wrapped(given, kwargs, None, _is_keeper)  # with values it makes (json's hooks), or later
    return fn(*given, **kwargs)


def _call_higher_order(fn: Any, where: tuple[tuple[int, ...], tuple[str, ...]], args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` for a :data:`HIGHER_ORDER` callee: the arguments it calls (``where``) that may
    keep or call are handed over wrapped; the call is made as it is when there is none."""
    anywhere = where is _ANY
    positions, names = (range(len(args)), list(kwargs)) if anywhere else where
    if not any(i < len(args) and _may_keep_or_call(args[i]) for i in positions) and not any(
            name in kwargs and _may_keep_or_call(kwargs[name]) for name in names):
        return fn(*args, **kwargs)
    return fn(*_wrapped(list(args), kwargs, None if anywhere else where, _may_keep_or_call), **kwargs)


def keeps_nothing(fn: Any) -> bool:
    """Whether calling ``fn`` can keep none of its arguments in another value (a receiver, another argument),
    decided by exact types and identity (the module doc lists what does); ``False`` when unsure."""
    kind = type(fn)
    if kind is types.BuiltinMethodType:  # a C function, or a C method bound to its receiver
        owner = fn.__self__
        if owner is None or type(owner) is types.ModuleType:
            name = getattr(owner, "__name__", None) if owner is not None else "builtins"
            return type(name) is str and name in KEEPS_NOTHING_MODULES and _KEEPING.get(id(fn)) is not fn
        if type(owner) is type:  # a C class method (dict.fromkeys, str.maketrans): builds a new value
            return not owner.__flags__ & _HEAP_TYPE
        return _method_keeps_nothing(type(owner), fn.__name__)
    if kind is types.MethodDescriptorType:  # an unbound C method: list.append, str.join
        return _method_keeps_nothing(fn.__objclass__, fn.__name__)
    if kind is type:  # a class: a C one of an audited module builds a new value; a Python one runs __init__
        module = _type_module(fn)
        return (not fn.__flags__ & _HEAP_TYPE and type(module) is str
                and module.partition(".")[0] in KEEPS_NOTHING_TYPE_MODULES)
    return _HELPERS.get(id(fn)) is fn or _higher_order(fn, 2) is not None


#: Where a :data:`HIGHER_ORDER` callee of ``None`` calls: anywhere (:func:`_wrapped` takes every place).
_ANY: tuple[tuple[int, ...], tuple[str, ...]] = ((-1,), ("*",))


def _higher_order(fn: Any, positional: int) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """Where the :data:`HIGHER_ORDER` callee ``fn`` (by identity), given ``positional`` positional arguments,
    takes the callables it calls; ``None`` for any other callee (and for ``iter(xs)``, which calls nothing)."""
    entry = _HIGHER_ORDER_IDS.get(id(fn))
    if entry is None or entry[0] is not fn or (fn is iter and positional < 2):
        return None
    return _ANY if entry[1] is None else entry[1]


def _may_keep_or_call(value: Any) -> bool:
    """Whether ``value`` is a callable that may keep one of its arguments, or call another callable."""
    return callable(value) and (not keeps_nothing(value) or _higher_order(value, 2) is not None)


def _is_keeper(value: Any) -> bool:
    """Whether ``value`` may keep what it is called with: a method of a value that may keep its argument
    (``xs.append``, ``d.update``, ``list.append``), a Python function or method (``singledispatch(xs.append)``
    is one), a ``partial`` or a guarded callable: what a callee that calls its arguments must be handed
    wrapped. Not a class: a wrapped class would break ``isinstance`` in the callee."""
    kind = type(value)
    if kind is types.BuiltinMethodType or kind is types.MethodDescriptorType:
        return not keeps_nothing(value)
    return (kind is types.MethodType or kind is types.FunctionType or kind is GuardedCallable
            or any(kind is c for c in _CARRIERS))


def _keeps_only(fn: Any) -> bool:
    """Whether ``fn`` is a C callee that keeps its arguments and calls none of them: a keeping method of a
    builtin container, a function of :data:`KEEPING_FUNCTIONS` (their arguments are kept, never wrapped)."""
    kind = type(fn)
    if kind is types.BuiltinMethodType:
        owner = fn.__self__
        if owner is None or type(owner) is types.ModuleType:
            return _KEEPING.get(id(fn)) is fn
        return any(type(owner) is container for container in KEEPING_METHODS)
    return kind is types.MethodDescriptorType and any(fn.__objclass__ is c for c in KEEPING_METHODS)


def _keeps_in_first(fn: Any) -> bool:
    """Whether ``fn`` keeps its other arguments in its first one (``heapq.heappush(heap, x)``,
    ``list.append(xs, x)``): that one is the target, changed, not kept, so it is not checked."""
    if type(fn) is types.MethodDescriptorType:
        return any(fn.__objclass__ is c for c in KEEPING_METHODS)
    return _KEEPING.get(id(fn)) is fn


def _wrapped(given: list[Any], kwargs: dict[str, Any], where: tuple[tuple[int, ...], tuple[str, ...]] | None,
             test: Any) -> list[Any]:
    """``given`` with each argument that ``test`` accepts, at the places ``where`` names (every place when
    ``None``), replaced by a :class:`.wrappers.GuardedCallable`; ``kwargs`` changed in place the same way."""
    positions = range(len(given)) if where is None else where[0]
    names = kwargs if where is None else where[1]
    for i in positions:
        if i < len(given) and test(given[i]):
            given[i] = _wrap(given[i])
    for name in list(names):
        if name in kwargs and test(kwargs[name]):
            kwargs[name] = _wrap(kwargs[name])
    return given


def _wrap(fn: Any) -> GuardedCallable:
    """``fn`` wrapped so each call goes through the store guard; a carrier callee is checked once, here."""
    if any(type(fn) is carrier for carrier in _CARRIERS):
        check_kept(fn, _HOLDER)
    return GuardedCallable(fn, _guarded_call)


def _method_keeps_nothing(receiver: type, name: Any) -> bool:
    """Whether the C method ``name`` of the exact type ``receiver`` keeps no argument in its receiver."""
    if any(receiver is kind for kind in IMMUTABLE):
        return True
    for kind, keeping in KEEPING_METHODS.items():
        if receiver is kind:
            return type(name) is str and name not in keeping
    return False


def _first_consumed(fn: Any) -> int | None:
    """The first positional argument a consuming callee consumes (0 for a bound method of
    :data:`CONSUMING` or ``Counter.update``, 1 for the unbound ones and the in-place operator functions: after
    the target), compared by identity; ``None`` for any other callable."""
    kind = type(fn)
    if kind is types.BuiltinMethodType:
        receiver = type(fn.__self__)
        for container, names in CONSUMING.items():
            if receiver is container:
                return 0 if fn.__name__ in names else None
    if kind is types.MethodType and type(fn.__self__) is collections.Counter:
        return 0 if any(fn.__func__ is method for method in _CONSUMING_PYTHON) else None
    return 1 if _CONSUMING_SECOND_IDS.get(id(fn)) is fn else None


def _kept(value: Any, consumed: bool) -> Any:
    """``value`` once checked as a variable's value is; an iterator a consuming callee is given (``consumed``)
    as a generator that checks each item (an item met again, by identity, once) as the callee consumes it, so
    the callee sees its target change as Python's would (``xs.extend(w for w in ws if w not in xs)``): a
    refused item ends the run with the items before it kept, as a failing ``append`` in a Python loop would."""
    kind = type(value)
    if consumed and (any(kind is iterator for iterator in ITERATORS) or is_c_iterator(kind)):
        return _checked_items(value)
    check_kept(value, _HOLDER)
    return value


def _checked_items(items: Iterable[Any]) -> Iterable[Any]:
    """The items of ``items``, each checked (:func:`.reach.check_kept`) before it is handed on."""
    checked: dict[int, Any] = {}
    for item in items:
        item_type = type(item)
        if not any(item_type is plain for plain in _PLAIN) and id(item) not in checked:
            check_kept(item, "an item given to a call that keeps it")
            checked[id(item)] = item
        yield item
