"""Lazy iterators: which types the values check opens, and which call a function as they are consumed
(SPEC 12).

A lazy iterator of the builtins or :mod:`itertools` (``map(f, xs)``, ``itertools.chain(...)``) holds the
values it will hand out, or the iterables they come from; :mod:`.values` opens it through its C
``__reduce__``, which reads without consuming. One that *calls a function* as it is consumed (``map``,
``filter``, ``itertools.starmap`` …, :data:`CALLING_ITERATORS`) makes or keeps values after every check, so
it may be held only when its function is plain (:func:`plain_function`). An iterator of a C type the check
does not know (:func:`is_c_iterator`) is refused rather than taken as holding nothing.
"""

from __future__ import annotations

import collections
import itertools
import types
from typing import Any


def _lazy_iterator_types() -> frozenset[type]:
    """Exact types of the C-level lazy iterators of the builtins and :mod:`itertools`."""
    samples: list[Any] = [  # one of each
        map(abs, ()), filter(None, ()), zip(), enumerate(()), reversed([]), reversed(()),
        iter([]), iter(()), iter(set()), iter({}), iter({}.values()), iter({}.items()), iter(bytearray()),
        iter(collections.deque()), reversed(collections.deque()), iter(int, 1),
        itertools.chain(), itertools.islice((), 0), itertools.cycle(()), itertools.count(), itertools.repeat(None),
        itertools.accumulate(()), itertools.compress((), ()), itertools.dropwhile(bool, ()),
        itertools.takewhile(bool, ()), itertools.filterfalse(None, ()), itertools.groupby(()),
        itertools.starmap(abs, ()), itertools.tee(())[0], itertools.zip_longest(()), itertools.product(),
        itertools.permutations(()), itertools.combinations((), 0),
        itertools.combinations_with_replacement((), 0), itertools.pairwise(()),
        next(itertools.groupby([None]))[1],  # itertools._grouper: one group of a groupby
        reversed({}), reversed({}.values()), reversed({}.items()), iter(collections.OrderedDict()),
        iter(""), iter("\u00e9"), iter(b""), iter(range(0)), iter(range(2 ** 70)),  # str, bytes and range
    ]
    tee_data = itertools.tee(())[0].__reduce__()[2][0]  # what a tee shares with its twins
    return frozenset(type(s) for s in [*samples, tee_data])


LAZY_ITERATOR_TYPES = _lazy_iterator_types()
#: Functions a lazy iterator held in a result or a local may call as it is consumed (``map(str, xs)``,
#: ``filter(None, xs)``), compared by identity: builtins that make a plain value (a number, a string) and
#: keep nothing. Methods of immutable builtin values (``str.upper``, ``', '.join``) may be called too.
#: Any other function (``map(countdown, xs)``, ``map(xs.append, gens)``) would make or keep values when the
#: iterator is consumed, after every check: such an iterator is refused (SPEC 12).
PLAIN_FUNCTIONS: tuple[Any, ...] = (str, int, float, bool, bytes, complex, abs, len, round, ord, chr, repr, ascii,
                                    hash)
#: Exact types whose values cannot change: their C methods make values that hold nothing of the expression's
#: (for :data:`PLAIN_FUNCTIONS`), and keep no argument (for the store guard, :data:`.kept.IMMUTABLE`).
IMMUTABLE_TYPES: tuple[type, ...] = (str, bytes, int, float, complex, bool, tuple, frozenset, range, type(None))
#: Lazy iterators that call a function they were built with as they are consumed: where, in the arguments
#: their C ``__reduce__`` gives, the function is (``map(f, xs)`` → ``(map, (f, it))``).
CALLING_ITERATORS: dict[type, int] = {
    map: 0, filter: 0, itertools.starmap: 0, itertools.filterfalse: 0, itertools.dropwhile: 0,
    itertools.takewhile: 0, itertools.accumulate: 1, itertools.groupby: 1, type(iter(int, 1)): 0,
}
def calls_a_function(t: type, reduced: tuple[Any, ...]) -> bool:
    """Whether the lazy iterator of exact type ``t``, whose C ``__reduce__`` gave ``reduced``, calls a function
    other than a plain one (:func:`plain_function`) as it is consumed."""
    where = CALLING_ITERATORS.get(t)
    return where is not None and not plain_function(_argument(reduced, where))


def _argument(reduced: tuple[Any, ...], index: int) -> Any:
    """The argument ``index`` of a C ``__reduce__`` value ``(type, args, …)``; ``len`` (a plain function) when
    it has none there (an exhausted iterator reduces to an empty one)."""
    args = reduced[1] if len(reduced) > 1 else ()
    return args[index] if type(args) is tuple and index < len(args) else len


def plain_function(part: Any) -> bool:
    """Whether ``part``, one argument a lazy iterator was built from, is no function or one it may call while
    held (:data:`PLAIN_FUNCTIONS`, a C method of an immutable builtin value); decided by exact type and
    identity, never by asking ``part``."""
    kind = type(part)
    if not callable(part) or any(part is plain for plain in PLAIN_FUNCTIONS):
        return True
    if kind is types.MethodDescriptorType:
        return any(part.__objclass__ is immutable for immutable in IMMUTABLE_TYPES)
    if kind is types.BuiltinMethodType:
        return any(type(part.__self__) is immutable for immutable in IMMUTABLE_TYPES)
    return False


def is_c_iterator(t: type) -> bool:
    """Whether ``t`` is a C type (not a class written in Python) whose values are iterators: it or a type of
    its method resolution order defines ``__next__``. Read through ``type``'s own descriptors (no metaclass
    code runs); for iterators the values check does not know (:data:`LAZY_ITERATOR_TYPES`), which would make
    their items after every check."""
    if _type_flags(t) & _HEAP_TYPE_FLAG:
        return False
    return any("__next__" in type_dict(k) for k in type_mro(t))




#: C type flags and the type's own dictionary and method resolution order, read through ``type``'s
#: descriptors (no metaclass code runs); the last two for :mod:`.values` too.
_HEAP_TYPE_FLAG = 1 << 9
_type_flags: Any = vars(type)["__flags__"].__get__
type_dict: Any = vars(type)["__dict__"].__get__
type_mro: Any = vars(type)["__mro__"].__get__
