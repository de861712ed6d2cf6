"""What a value holds, judged whole: a granted or reached value is checked through whatever holds it (SPEC 4, 12).

The allowlist grants values, not only names: ``mymodule.bag`` may be a ``dict`` holding ``os`` and ``exec``,
and a granted host object may hand out a list, a mapping proxy or an iterator over them. A container is not
plain data because its type is a builtin one; what decides is what it holds. This module is the one walk
that says so, used wherever a value crosses into an expression:

* :func:`refusal` judges one value: a module that is not an allowlist namespace, a refused built-in
  (``exec``, ``eval``, ``open`` …), a function, class or instance whose home is a standard-library module
  the audited table does not grant (``os.system``, ``subprocess.Popen``), a metaclass, a bound method or
  ``partial`` of those. An object that holds a function to call later (``map``, ``filter``,
  ``iter(f, sentinel)``, the :mod:`itertools` and :mod:`functools` wrappers, a closure the standard library
  made) is judged by everything it holds. Host objects pass (their attributes are reached one by one).
* :func:`walk` applies a judgement to a value and to everything it holds, opened as the result check opens
  it (:func:`.parts.held_parts`: exact containers, their subclasses and ``mappingproxy`` read through the
  base type's C accessors, dict views, ``deque``, ``ChainMap``, ``SimpleNamespace``, slices, partials, bound
  methods, the lazy iterators through their C ``__reduce__``, exceptions' arguments), each container once,
  and past :data:`~...bounds.SCAN_LIMIT` items it answers "too many to check" rather than half an answer.
  What cannot be opened (a generator, a host object) is judged as itself.
* :func:`first_refusal` is that walk with :func:`refusal`: the reach guard at run time
  (:func:`.reach.check`), the set-time check of a local, and the allowlist at load, which refuses an entry
  whose value holds a refused value (``refused-entry``); :func:`refused_part` says where it sits
  (``['m']``, ``[0]['e']``) for the message.

The walk reads no Python code of the values it opens (no ``__iter__``, ``keys`` or ``__getattr__`` of a
subclass runs), so a container cannot hide what it holds from it.
"""

from __future__ import annotations

import collections
import functools
import gc
import itertools
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from ...bounds import SCAN_LIMIT
from ..errors import S2OError
from .parts import CONTAINERS, PLAIN_TYPES, held_parts, walk_held
from .stdlib_audit import object_refusal
from .values import safe_repr

#: Exact types that hold nothing a walk must look at.
PLAIN = PLAIN_TYPES | {bytearray}
#: A deque's own C iteration (a subclass's ``__iter__`` never runs).
deque_iter: Any = collections.deque.__iter__
#: What the walk answers for a value it cannot finish.
TOO_MANY = f"it holds more than {SCAN_LIMIT:,} items: too many to check"
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
    """Why ``value`` itself may not reach an expression (see the module doc), or ``None`` when it may.

    Plain values pass at once; a module is refused (allowlist namespaces are not modules); a bound method
    by its function and its object; a lazy caller and a closure of the standard library by what they hold;
    everything else by the audited table's :func:`~.stdlib_audit.object_refusal`.
    """
    t = type(value)
    if t in PLAIN:
        return None
    if t is types.ModuleType:
        return "a module can only be reached through the allowlist"
    if t is types.MethodType:  # itself too: a bound method the table leaves out (random.seed) is refused by identity
        return object_refusal(value) or refusal(value.__func__) or refusal(value.__self__)
    if t in _LAZY_CALLERS:
        return _held_refusal(value)
    if t is types.FunctionType and value.__closure__ and not from_host_code(value):
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


def from_host_code(obj: Any) -> bool:
    """Whether ``obj`` (not a container) comes from outside the standard library and this project: a function
    or class by its ``__module__``, a builtin method by its owner, an instance by its class."""
    owner = obj if isinstance(obj, type) or callable(obj) else type(obj)
    home = getattr(owner, "__module__", None)
    if type(home) is not str:
        bound = getattr(owner, "__self__", None)
        home = bound.__name__ if type(bound) is types.ModuleType else type(bound).__module__
    return type(home) is not str or host_module(home)


def host_module(home: str) -> bool:
    """Whether the dotted module ``home`` is host code: neither the standard library nor this project."""
    top = home.split(".")[0]
    return not (top in sys.stdlib_module_names or top in ("s2o_kernel", "builtins"))


def opened(v: Any, t: type) -> Iterable[Any] | None:
    """What ``v`` (of exact type ``t``, not a plain value nor an exact container) holds, as the result check
    opens it (:func:`.parts.held_parts`); ``None`` when it is not opened or cannot be (a generator, a lazy
    iterator that calls a function: the result check refuses those where they are kept)."""
    try:
        return held_parts(v, t, "a value")
    except S2OError:
        return None


def walk(value: Any, judge: Callable[[Any], str | None]) -> str | None:
    """The first answer of ``judge`` (a reason) for ``value`` or anything it holds, or ``None``.

    ``judge`` sees every value that is neither plain (:data:`PLAIN`) nor an exact built-in container, before
    it is opened (:func:`opened`). Each container is opened once (shared and cyclic values cost their size);
    past :data:`SCAN_LIMIT` values the answer is :data:`TOO_MANY`.
    """
    def visit(v: Any, t: type) -> Iterable[Any] | None:
        why = judge(v)
        if why is not None:
            raise _Found(why)
        return opened(v, t)

    try:
        return None if walk_held(value, visit, PLAIN, SCAN_LIMIT) else TOO_MANY
    except _Found as found:
        return found.why


class _Found(Exception):
    """The answer of :func:`walk`'s ``judge``, carried out of the walk."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def first_refusal(value: Any) -> str | None:
    """Why ``value``, or anything it holds at any depth, is refused (:func:`refusal`), or ``None``."""
    return walk(value, refusal)


def refused_part(value: Any) -> tuple[str, str] | None:
    """``(where, why)`` for the first refused value ``value`` holds (:func:`first_refusal`), ``where`` written
    as items after the holder's name (``"['m']"``, ``"[0]['e']"``, ``" (a member of the set)"``, ``""`` for
    ``value`` itself); ``None`` when nothing is refused. For load-time messages."""
    why = first_refusal(value)
    if why is None:
        return None
    if why == TOO_MANY:
        return "", why
    found = _where(value, why)
    return (found if found is not None else " (too deep to show where)"), why


def _where(value: Any, why: str) -> str | None:
    """Where in ``value`` the value :func:`refusal` refuses with ``why`` sits (the walk again, with paths)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    seen: set[int] = set()
    while stack and len(seen) <= SCAN_LIMIT:
        v, where = stack.pop()
        t = type(v)
        if t in PLAIN or id(v) in seen:
            continue
        if t not in CONTAINERS and refusal(v) == why:
            return where
        seen.add(id(v))
        stack.extend(reversed(_labelled(v, t, where)))
    return None


def _labelled(v: Any, t: type, where: str) -> list[tuple[Any, str]]:
    """The parts of ``v`` (of exact type ``t``) with where each sits, written after ``where``; a subclass of a
    container is read through its base type (``issubclass`` of the exact type: nothing of ``v`` answers)."""
    if issubclass(t, dict) or t is types.MappingProxyType:
        pairs = list(dict.items(v)) if issubclass(t, dict) else list(v.items())
        return [p for k, x in pairs for p in ((k, f"{where} (the key {_text(k)})"), (x, f"{where}[{_text(k)}]"))]
    if issubclass(t, (list, tuple, collections.deque)):
        reader = list.__iter__ if issubclass(t, list) else tuple.__iter__ if issubclass(t, tuple) else deque_iter
        return [(x, f"{where}[{i}]") for i, x in enumerate(list(reader(v)))]
    if issubclass(t, (set, frozenset)):
        members = list(set.__iter__(v)) if issubclass(t, set) else list(frozenset.__iter__(v))
        return [(x, f"{where} (a member of the {t.__name__})") for x in members]
    return [(x, f"{where} (held by a {t.__name__})") for x in opened(v, t) or ()]


def _text(key: Any) -> str:
    """A key as a message shows it: a plain key's bounded ``repr``, any other by its type (no host text)."""
    return safe_repr(key, 60) if type(key) in PLAIN else f"<a {type(key).__name__}>"
