"""What a value may hold, and the text of any value for a message (SPEC 6, 12).

Two jobs that every part of the engine needs when a value crosses a boundary:

* :func:`check_value`: the result and locals check. A result, a local or an output may never hold a
  coroutine (``not-awaited``; it is closed), a generator, an async generator or its awaitables, a
  frame, a code object, a traceback, a module, a cell or a class builder (metaclass)
  (``not-allowed``), however deep it sits. The walk is iterative, visits each container once (shared
  and cyclic structures cost their size, not their paths), reads containers through the C-level
  accessors of the built-in base type (a subclass's overridden ``__iter__``, ``keys`` or ``args``
  hides nothing: guards trust no object, SPEC 12), and is bounded: a value with more than
  :data:`SCAN_LIMIT` items is refused rather than half checked.
* :func:`safe_repr`, :func:`safe_str` and :func:`exception_text`: text for an error message built
  from any value, never raising and never long. An ``int`` too large to print shows its size, a
  ``repr`` that raises or recurses shows the type's name, and every text is cut at
  :data:`MAX_TEXT` characters.

What the walk opens, by exact type: ``list``, ``tuple``, ``set``, ``frozenset``, ``collections.deque``,
``dict`` and its standard subclasses (``OrderedDict``, ``defaultdict`` — whose factory must be a builtin
type, :data:`DEFAULT_FACTORIES` — ``Counter``),
``ChainMap``, dict views (``keys()``, ``values()``, ``items()``), ``types.SimpleNamespace``, ``slice``,
bound methods (their ``self``, unless it is a module: granted functions of a module are bound to it),
``functools.partial``, ``classmethod``/``staticmethod``, ``types.MappingProxyType``, subclasses of
``list``, ``tuple``, ``dict``, ``set`` and ``frozenset`` (read by the C type flags they inherit),
exceptions (``args``, cause, context, attributes; an exception carrying a traceback is refused) and
the lazy iterators of the builtins and
:mod:`itertools` (``map``, ``zip``, ``iter(list)``, ``itertools.chain`` …, opened through their C
``__reduce__``, which reads without consuming; one that cannot be opened is refused, and so is one that
calls a function as it is consumed — ``map(f, xs)``, ``filter``, ``itertools.starmap`` … — unless the function
is plain, :data:`.iterators.PLAIN_FUNCTIONS`: it would make or keep values after every check). An
``xml.etree.ElementTree.Element`` (its C state: attributes, text, children). Instances of
classes of the standard library (their ``__dict__``: ``collections.UserList``'s data; not :mod:`asyncio`'s).
Instances of other classes are not opened: a host object's attributes are the host's business (``docs/security.md``).
"""

from __future__ import annotations

import functools
import reprlib
import types
from collections.abc import Iterable
from typing import Any

from ...bounds import INT_TEXT_BITS, MAX_TEXT, SCAN_LIMIT
from ..errors import S2OError
from .denylist import is_metaclass
from .parts import PLAIN_TYPES, held_parts, refused, walk_held
from .wrappers import SafeAsyncIterator, SafeIterator
from .written import too_large_text, too_large_to_write

#: ``BaseException.args``, read through its C-level descriptor (a subclass's property never runs).
_ARGS: Any = vars(BaseException)["args"]


async def _agen() -> Any:  # pragma: no cover - only its type is used
    yield None


def _async_generator_awaitable_types() -> dict[type, str]:
    """The awaitables an async generator hands out (``asend``/``athrow``), which hold it."""
    agen = _agen()
    send = agen.asend(None)
    throw = agen.athrow(GeneratorExit)
    out = {type(send): "an awaitable of an async generator", type(throw): "an awaitable of an async generator"}
    send.close()
    throw.close()
    return out


#: Types a result or a local may never hold (SPEC 6, 12), with the words the message uses.
FORBIDDEN_VALUE_TYPES: dict[type, str] = {
    types.GeneratorType: "a generator",
    types.AsyncGeneratorType: "an async generator",
    types.FrameType: "a frame",
    types.CodeType: "a code object",
    types.TracebackType: "a traceback",
    types.ModuleType: "a module",
    types.CellType: "a cell",
    SafeIterator: "an iterator (of a granted generator, or reached through a granted object)",
    SafeAsyncIterator: "an async iterator of a granted generator",
    type(functools.cache(len)): "a functools cache (it keeps what its function returns, out of every check)",
    **_async_generator_awaitable_types(),
}


def _forbidden(v: Any, t: type, what_holds: str) -> None:
    if t is types.CoroutineType:
        v.close()
        raise S2OError("not-awaited", f"{what_holds} holds a coroutine that was never awaited: "
                       "put 'await' before the async call")
    what = FORBIDDEN_VALUE_TYPES.get(t)
    if what is None and issubclass(t, types.ModuleType):
        what = "a module"
    if what is None and is_metaclass(v):
        what = "a class builder (metaclass)"
    if what is not None:
        raise refused(what, what_holds)


def check_value(value: Any, what_holds: str) -> None:
    """Refuse ``value`` when it holds, at any depth, something a result or a local may not hold (SPEC 6, 12).

    ``what_holds`` names the holder in the message ("the result of an expression", "the local 'x'").
    Raises ``S2OError`` ``not-awaited`` for a coroutine (which is closed), ``not-allowed`` for a
    generator, async generator or one of its awaitables, frame, code object, traceback, module, cell,
    metaclass, a raised exception, an iterator of a granted generator, a lazy iterator that cannot be opened
    or that calls a function other than a plain one as it is consumed,
    and for a value with more than :data:`SCAN_LIMIT` items (too large to check). See the module doc
    for what is opened.
    """
    if type(value) in PLAIN_TYPES:  # before the walk's closure: most results hold nothing
        return

    def visit(v: Any, t: type) -> Iterable[Any] | None:
        _forbidden(v, t, what_holds)
        return held_parts(v, t, what_holds)

    if not walk_held(value, visit, limit=SCAN_LIMIT):  # read here: a test lowers it
        raise S2OError("not-allowed", f"{what_holds} holds more than {SCAN_LIMIT:,} items: too many to check")


# -- text of any value ----------------------------------------------------------------------------


def _int_text(value: int) -> str:
    if value.bit_length() <= INT_TEXT_BITS:
        return int.__repr__(value)
    return f"<int with about {int(value.bit_length() * 0.30103) + 1:,} digits>"


class _BoundedRepr(reprlib.Repr):
    """:mod:`reprlib` with ints shown by size past :data:`MAX_TEXT` digits (``repr`` of a huge int raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 4
        self.maxstring = MAX_TEXT
        self.maxother = MAX_TEXT
        self.maxlong = MAX_TEXT
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = self.maxdict = 30

    def repr_int(self, x: int, level: int) -> str:
        return _int_text(x)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = repr(x)
        except Exception:
            return f"<{type(x).__name__} object>"
        return cut(text if type(text) is str else f"<{type(x).__name__} object>")


_REPR = _BoundedRepr()


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text``, cut to ``limit`` characters with a mark that says so."""
    return text if len(text) <= limit else text[:limit] + " … (cut)"


def safe_repr(value: Any, limit: int = MAX_TEXT) -> str:
    """A ``repr`` of ``value`` for a message: never raises, at most about ``limit`` characters."""
    if too_large_to_write(value):  # the parts reprlib hands to repr() are then within the limit too
        return cut(too_large_text(value), limit)
    try:
        return cut(_REPR.repr(value), limit)
    except Exception:  # a recursion or a failing repr inside a container
        return f"<{type(value).__name__} object>"


def safe_str(value: Any, limit: int = MAX_TEXT) -> str:
    """``str(value)`` for a message: never raises, at most about ``limit`` characters."""
    t = type(value)
    if t is str:
        return cut(value, limit)
    if t is int or t is bool or t is float or value is None:
        return cut(_int_text(value) if t is int else repr(value), limit)
    if too_large_to_write(value):
        return cut(too_large_text(value), limit)
    try:
        text = str(value)
    except Exception:
        return safe_repr(value, limit)
    return cut(text, limit) if type(text) is str else f"<{t.__name__} object>"


def exception_text(exc: BaseException) -> str:
    """The message of ``exc`` as ``str(exc)`` would give it, built safely (never raises, cut to :data:`MAX_TEXT`).

    The arguments are read through ``BaseException.args`` (no subclass property runs). A ``KeyError``
    shows its key's :func:`safe_repr`; an exception with the base ``__str__`` shows its one argument
    with :func:`safe_str` or its arguments with :func:`safe_repr`; any other ``__str__`` is called
    and its failure shown as the type's name.
    """
    t = type(exc)
    args = _ARGS.__get__(exc)
    if t.__str__ is KeyError.__str__ and len(args) == 1:
        return safe_repr(args[0])
    if t.__str__ is BaseException.__str__:
        if not args:
            return ""
        return safe_str(args[0]) if len(args) == 1 else safe_repr(args)
    try:
        text = str(exc)
    except Exception:
        return f"<the {t.__name__} message could not be shown>"
    return cut(text) if type(text) is str else f"<the {t.__name__} message could not be shown>"


#: Advice CPython appends to its int-to-text error; the engine's users cannot follow it.
_INT_DIGITS_ADVICE = "; use sys.set_int_max_str_digits() to increase the limit"


def error_message(exc: BaseException) -> str:
    """``"TypeName: message"`` for a Python error (the message of a ``runtime`` error, SPEC 6), built with
    :func:`exception_text`; just the type's name when the message is empty."""
    text = exception_text(exc).replace(_INT_DIGITS_ADVICE, "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def runtime_error(exc: BaseException, path: str | None = None) -> S2OError:
    """The ``runtime`` error (stage ``run``) for a Python error raised at ``path``, with its type's name."""
    return S2OError("runtime", error_message(exc), path=path, python_type=type(exc).__name__)
