"""What a value holds: the parts the values check opens, read by exact type (SPEC 6, 12).

:func:`held_parts` is the one reading of a value's parts for :func:`.values.check_value` (which refuses a
value by what it holds) and :func:`parts_of` for :func:`.written.written_size` (which counts what a value
writes out). Containers are read through the C-level accessors of the built-in base type, so a subclass's
overridden ``__iter__``, ``keys`` or ``args`` hides nothing; see :mod:`.values` for the list of what is opened.
This module sits below both: it imports only the bounds, :mod:`.errors`, :mod:`.iterators` and
:mod:`.wrappers`. Its
:func:`walk_held` is the one walk of a value and what it holds, which both checks drive.
"""

from __future__ import annotations

import collections
import functools
import operator
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from ...bounds import SCAN_LIMIT
from ..errors import S2OError
from .iterators import LAZY_ITERATOR_TYPES, calls_a_function, is_c_iterator, type_dict, type_mro
from .wrappers import GuardedCallable

#: Types with no parts to check (written as themselves).
PLAIN_TYPES = frozenset({str, int, float, bool, type(None), bytes, complex, range})

#: Callable objects of :mod:`operator` that carry their arguments: opened through their C ``__reduce__``.
_CARRIER_TYPES = frozenset({operator.methodcaller, operator.attrgetter, operator.itemgetter})

_DICT_TYPES = frozenset({dict, collections.OrderedDict, collections.defaultdict, collections.Counter})
#: The ``default_factory`` a ``defaultdict`` held in a result or a local may have (compared by identity):
#: types whose call with no argument makes an empty container or a zero, nothing a check would refuse. Any
#: other factory (a function, a ``partial``) would run at a missing key's read and its value would be kept
#: in the variable with no check (a granted generator's iterator, for one).
DEFAULT_FACTORIES: tuple[type, ...] = (list, dict, set, frozenset, tuple, str, bytes, int, float, complex, bool,
                                       collections.deque, collections.OrderedDict, collections.Counter,
                                       collections.defaultdict)
_ITERABLE_TYPES = frozenset({
    list, tuple, set, frozenset, collections.deque,
    type({}.keys()), type({}.values()), type({}.items()),
    type(collections.OrderedDict().keys()), type(collections.OrderedDict().values()),
    type(collections.OrderedDict().items()),
})
_BOUND_TYPES = frozenset({types.BuiltinMethodType, types.MethodWrapperType})

#: C type flags (``tp_flags``) a class inherits from its built-in base, whatever it overrides.
_type_flags: Any = vars(type)["__flags__"].__get__
_LIST_FLAG, _TUPLE_FLAG, _DICT_FLAG = 1 << 25, 1 << 26, 1 << 29
#: What a :class:`.wrappers.GuardedCallable` wraps, read through its slot.
_GUARDED_FN: Any = vars(GuardedCallable)["_fn"].__get__

#: The C-level descriptors of an exception's parts: reading through them runs no subclass's property.
_EXC: dict[str, Any] = {name: vars(BaseException)[name]
                        for name in ("args", "__cause__", "__context__", "__traceback__", "__dict__")}
_ATTRIBUTE_ERROR_OBJ: Any = vars(AttributeError)["obj"]
_STOP_ITERATION_VALUE: Any = vars(StopIteration)["value"]


def _exception_parts(v: BaseException, t: type) -> list[Any]:
    """An exception's parts through the base type's descriptors (a subclass's properties never run)."""
    parts: list[Any] = list(_EXC["args"].__get__(v))
    parts.extend(_EXC[name].__get__(v) for name in ("__cause__", "__context__", "__dict__"))
    if issubclass(t, AttributeError):
        parts.append(_ATTRIBUTE_ERROR_OBJ.__get__(v))
    if issubclass(t, StopIteration):
        parts.append(_STOP_ITERATION_VALUE.__get__(v))
    return parts


def refused(what: str, what_holds: str) -> S2OError:
    return S2OError("not-allowed", f"{what} cannot be {what_holds}; "
                    "consume it inside the expression (for example with list(...))")


def held_parts(v: Any, t: type, what_holds: str) -> Iterable[Any] | None:
    """The values ``v`` holds, read by its exact type ``t``; ``None`` when it is not opened."""
    if t in _ITERABLE_TYPES:
        return v  # type: ignore[no-any-return]
    if t in _DICT_TYPES:
        parts = [*dict.keys(v), *dict.values(v)]
        if t is collections.defaultdict:
            factory = v.default_factory
            if factory is not None and not any(factory is kind for kind in DEFAULT_FACTORIES):
                kind = type(factory).__name__
                raise S2OError("not-allowed", f"a defaultdict whose default_factory is a {kind} cannot be "
                               f"{what_holds}: each missing key read would keep what it makes, unchecked; "
                               "use a builtin type (list, dict, set, int, float, str …)")
        return parts
    if t in LAZY_ITERATOR_TYPES:
        try:
            reduced = v.__reduce__()
        except Exception:
            raise refused(f"a {t.__name__} iterator (whose contents cannot be checked)", what_holds) from None
        if type(reduced) is not tuple:
            return ()
        if calls_a_function(t, reduced):
            raise refused(f"a {t.__name__} iterator that calls a function as it is consumed", what_holds)
        return reduced[1:]
    if t in _CARRIER_TYPES:
        reduced = v.__reduce__()
        return reduced if type(reduced) is tuple else ()
    if issubclass(t, BaseException):
        if _EXC["__traceback__"].__get__(v) is not None:
            raise refused("an exception that was raised (it carries a traceback)", what_holds)
        return _exception_parts(v, t)
    if t in _BOUND_TYPES:
        owner = v.__self__
        return () if owner is None or isinstance(owner, types.ModuleType) else (owner,)
    return _other_parts(v, t, what_holds)


def parts_of(v: Any) -> Iterable[Any] | None:
    """The values ``v`` holds as :func:`check_value` opens it (by exact type, through the base type's
    accessors), or ``None`` when it is not opened or cannot be (a lazy iterator that will not open, a
    raised exception). For :func:`.written.written_size`. Never raises."""
    try:
        return held_parts(v, type(v), "a value")
    except Exception:
        return None


def _subclass_parts(v: Any, t: type) -> Iterable[Any] | None:
    """What a subclass of a built-in container holds, read through the base type (its overrides never run)."""
    flags = _type_flags(t)
    if flags & _LIST_FLAG:
        return list(list.__iter__(v))
    if flags & _TUPLE_FLAG:
        return list(tuple.__iter__(v))
    if flags & _DICT_FLAG:
        return [*dict.keys(v), *dict.values(v)]
    if issubclass(t, set):
        return list(set.__iter__(v))
    if issubclass(t, frozenset):
        return list(frozenset.__iter__(v))
    return None


def _other_parts(v: Any, t: type, what_holds: str) -> Iterable[Any] | None:
    if t is types.MappingProxyType:
        return (*v.keys(), *v.values())
    if t is types.MethodType:
        return (v.__self__, v.__func__)
    if t is functools.partial:
        return (v.func, *v.args, *v.keywords.values())
    if t is types.SimpleNamespace:
        return (vars(v),)
    if t is slice:
        return (v.start, v.stop, v.step)
    if t is collections.ChainMap:
        return (v.maps,)
    if t is GuardedCallable:
        return (_GUARDED_FN(v),)
    if t is types.GenericAlias:
        return (v.__origin__, *v.__args__)
    if t is classmethod or t is staticmethod:
        return (v.__func__,)
    parts = _subclass_parts(v, t)
    if parts is None and is_c_iterator(t):
        raise refused(f"a {t.__name__} iterator (whose contents cannot be checked)", what_holds)
    return _stdlib_instance_parts(v, t) if parts is None else parts


def _element_type() -> type | None:
    """``xml.etree.ElementTree.Element`` once that module is loaded (a C type with no ``__dict__`` whose
    attributes and children may be any value), else ``None``; the engine never imports it for this."""
    if _ELEMENT:
        return _ELEMENT[0]
    module = sys.modules.get("xml.etree.ElementTree")
    element = getattr(module, "Element", None) if module is not None else None
    if type(element) is not type:
        return None
    _ELEMENT.append(element)
    return element


#: ``xml.etree.ElementTree.Element``, once :func:`_element_type` has found it.
_ELEMENT: list[type] = []


def _stdlib_instance_parts(v: Any, t: type) -> Iterable[Any] | None:
    """The attributes of an instance of a standard-library class (``collections.UserList``'s ``data``,
    ``string.Template``'s ``template``, ``graphlib.TopologicalSorter``'s nodes): its own ``__dict__``, which
    its ``repr`` may write and whose values it hands back. Not classes, not :mod:`asyncio`'s (their event
    loop's tasks are the engine's), not the builtins' (functions, granted as such)."""
    module = vars(type)["__module__"].__get__(t)
    if type(module) is not str or isinstance(v, type):
        return None
    top = module.split(".")[0]
    if top not in sys.stdlib_module_names or top in _NOT_OPENED_MODULES:
        return None
    if top == "xml" and t is _element_type():
        return (v.__getstate__(),)  # the C state: tag, attrib, text, tail and children
    try:
        held = object.__getattribute__(v, "__dict__")
    except AttributeError:
        held = None
    parts = [held] if type(held) is dict else []
    parts.extend(_slot_values(v, t))
    return parts or None


def _slot_values(v: Any, t: type) -> list[Any]:
    """The values in ``v``'s ``__slots__`` (``dataclasses.Field``'s ``default``), read through each class's
    own member descriptors; a slot never set is skipped."""
    values = []
    for klass in type_mro(t):
        own = type_dict(klass)
        slots = own.get("__slots__")
        for name in (slots,) if type(slots) is str else slots if type(slots) in (tuple, list) else ():
            member = own.get(name) if type(name) is str else None
            if type(member) is types.MemberDescriptorType:
                try:
                    values.append(member.__get__(v))
                except AttributeError:
                    continue
    return values


#: Standard-library modules whose instances are never opened (see :func:`_stdlib_instance_parts`).
_NOT_OPENED_MODULES = frozenset({"builtins", "asyncio", "_asyncio", "concurrent", "threading", "types"})


#: Built-in containers the walk opens by exact type: nothing of theirs can be overridden.
CONTAINERS = frozenset({list, tuple, set, frozenset, dict})


def walk_held(value: Any, visit: Callable[[Any, type], Iterable[Any] | None], plain: frozenset[Any] = PLAIN_TYPES,
              limit: int = SCAN_LIMIT) -> bool:
    """Walk ``value`` and everything it holds, at any depth; ``False`` when that is more than ``limit`` items (the
    caller refuses it: too many to check), else ``True``. The one walk of the values check and the granted check.

    Values of ``plain`` types are passed; exact :data:`CONTAINERS` are opened here (a container of plain values
    without walking its items one by one); every other value is handed once to ``visit(v, type(v))``, which
    returns its parts to walk on (``None``: nothing) or raises to stop the walk. Each value is opened once
    (shared and cyclic values cost their size); everything seen is kept alive, so no ``id`` is reused.
    """
    t = type(value)
    if t in plain:
        return True
    if t in CONTAINERS and set(map(type, value)) <= plain and (
            t is not dict or set(map(type, value.values())) <= plain):
        return True  # the common case (a row, a list of numbers), without the walk's own state
    stack = [value]
    seen: dict[int, Any] = {}
    visited = 0
    while stack:
        v = stack.pop()
        t = type(v)
        visited += 1
        if t in plain:
            continue
        if visited > limit:
            return False
        if id(v) in seen:
            continue
        seen[id(v)] = v
        if t in CONTAINERS:
            if t is dict:
                if set(map(type, v)) <= plain and set(map(type, v.values())) <= plain:
                    visited += 2 * len(v)
                else:
                    stack.extend(v)
                    stack.extend(v.values())
            elif set(map(type, v)) <= plain:
                visited += len(v)
            else:
                stack.extend(v)
            continue
        parts = visit(v, t)
        if parts is not None:
            stack.extend(parts)
    return True
