"""Guarded versions of granted helpers that take names or values at run time (SPEC 3.1, 12).

A literal attribute is checked at validation; a name built at run time
(``getattr(x, '_' + '_class__')``) is checked here, with the same rules
(:func:`denylist.name_violation`), and no attribute at all may be read on
frames, tracebacks, code objects, generators, coroutines and async
generators. When an allowlist grants ``getattr``, ``hasattr``, ``pow``,
``range``, ``print`` or ``asyncio.gather``, the name is bound to the guarded
version here instead of the real one.

Guards never trust the objects they are handed (SPEC 12). A ``str`` subclass
can answer ``startswith`` or ``__eq__`` as it likes, a ``dict`` subclass can
list other ``keys()`` than it holds, a ``list`` subclass can iterate over
other items: so every guard decides on exact built-in types, reading
containers through the base type's own methods (``dict.items(d)``,
``list.__iter__(v)``) and names as exact ``str`` (a subclass is refused, or
copied with ``str.__str__`` where Python itself accepts subclasses, as for
keyword names). What leaves a guard is what it checked: :func:`guard_kwargs`
returns a new plain ``dict``. Calls that build classes are refused
(:func:`guarded_call`), so an expression cannot make such lying objects in
the first place.
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ..errors import S2OError
from ..run.scopes import Secret, SecretText, placed, reveal
from .bounded import BOUNDED_REPLACEMENTS, SIZED_METHODS, bounded_format, sized_attribute
from .denylist import OPAQUE_TYPES, is_metaclass, name_violation, type_name
from .written import too_large_text, too_large_to_write

_MISSING = object()
_OPAQUE = frozenset(OPAQUE_TYPES)  # none of these types can be subclassed: an exact match is complete

# C type flags (``tp_flags``) that a class inherits from its built-in base, whatever it overrides
_flags = type.__dict__["__flags__"].__get__
_STR, _DICT = 1 << 28, 1 << 29


def check_attribute(obj: Any, name: Any) -> str:
    """Raise ``S2OError`` when reading ``obj.<name>`` breaks a name rule (stage ``run``); return ``name``.

    ``name`` must be an exact ``str``: a subclass is refused with code
    ``attribute`` (its ``startswith`` could lie), anything else is a
    ``runtime`` ``TypeError``. No attribute at all may be read on frames,
    tracebacks, code objects, generators, coroutines and cells.
    """
    if type(name) is not str and not _flags(type(name)) & _STR:
        raise S2OError("runtime", f"TypeError: attribute name must be a string, not '{type_name(name)}'")
    bad = name_violation(name)
    if bad is not None:
        raise S2OError(bad[0], bad[1])
    if type(obj) in _OPAQUE:
        raise S2OError("attribute", f"attributes of {type_name(obj)} objects are not allowed")
    return str(name)


def guarded_getattr(obj: Any, name: Any, default: Any = _MISSING) -> Any:
    """``getattr`` that applies the name rules to ``name`` first (SPEC 3.1).

    Raises ``S2OError`` (``underscore``, ``format``, ``attribute``) for a
    refused name, ``not-allowed`` for a member a granted module does not
    give; otherwise behaves like ``getattr``.
    """
    check_attribute(obj, name)
    if name in SIZED_METHODS:
        return sized_attribute(obj, name) if default is _MISSING or hasattr(obj, name) else default
    if default is _MISSING:
        return getattr(obj, name)
    return getattr(obj, name, default)


def guarded_hasattr(obj: Any, name: Any) -> bool:
    """``hasattr`` that applies the name rules to ``name`` first (SPEC 3.1).

    A member that a granted module does not give counts as absent.
    """
    check_attribute(obj, name)
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    except S2OError as exc:
        if exc.code == "not-allowed":
            return False
        raise
    return True


def guard_kwargs(mapping: Any) -> dict[str, Any]:
    """Check the keys of a ``**mapping`` call argument against the underscore rule; return a plain dict.

    The call receives the returned ``dict`` (exact ``str`` keys, the values
    read once), never ``mapping`` itself, so a mapping whose ``keys()``
    answers differently on a second call, or a ``dict`` subclass whose
    ``keys()`` hides what it holds, passes nothing it was not checked for.
    Raises ``S2OError`` (``underscore``; ``runtime`` ``TypeError`` for a value
    that is not a mapping or a key that is not a string).
    """
    if _flags(type(mapping)) & _DICT:
        items = list(dict.items(mapping))
    else:
        try:
            keys = list(mapping.keys())
        except AttributeError:
            raise S2OError("runtime", "TypeError: argument after ** must be a mapping") from None
        items = [(key, mapping[key]) for key in keys]
    out: dict[str, Any] = {}
    for key, value in items:
        if type(key) is not str:
            if not _flags(type(key)) & _STR:
                raise S2OError("runtime", "TypeError: keywords must be strings")
            key = str.__str__(key)
        bad = name_violation(key)
        if bad is not None and bad[0] == "underscore":
            raise S2OError(bad[0], bad[1])
        out[key] = value
    return out


def guarded_call(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``, unless it is a metaclass (``type``, ``abc.ABCMeta``, ``enum.EnumType`` …) (SPEC 12).

    Calls with three or more arguments, or with ``*``/``**``, are rewritten to
    go through here (``rules.CALL_GUARD``): that is the shape of
    ``M(name, bases, namespace)``, which builds a class whose methods can lie
    to every guard. Raises ``S2OError("not-allowed")``.
    """
    refuse_metaclass(fn)
    return fn(*args, **kwargs)


def refuse_metaclass(fn: Any) -> None:
    """Raise ``S2OError("not-allowed")`` naming ``fn`` when it is a metaclass (SPEC 12); the one refusal
    every call guard gives (:func:`guarded_call`, :func:`.kept.guarded_store`)."""
    if is_metaclass(fn):
        name = str.__str__(type.__dict__["__name__"].__get__(fn))[:60]
        raise S2OError("not-allowed", f"calling the metaclass '{name}' is not allowed: it builds classes (SPEC 12)")


#: Modules that C code of granted functions may import while an expression runs
#: (``datetime.strftime`` imports ``time``; an unawaited coroutine's warning imports ``warnings``).
C_IMPORTS = frozenset({"time", "warnings", "_strptime", "locale", "encodings", "unicodedata", "calendar",
                       "_datetime", "datetime", "re", "_decimal", "decimal", "_pydecimal", "numbers"})


def guarded_import(name: Any, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """Stands in for ``__import__`` inside expressions (which cannot name it: underscore rule).

    Only C code of granted functions imports through it; it may import the
    few harmless modules in :data:`C_IMPORTS`, anything else fails cleanly.
    """
    if type(level) is int and level == 0 and type(name) is str and name.split(".")[0] in C_IMPORTS:
        import importlib

        module = importlib.import_module(name)
        return module if fromlist else importlib.import_module(name.split(".")[0])
    shown = str.__str__(name)[:100] if _flags(type(name)) & _STR else type_name(name)
    raise S2OError("not-allowed", f"importing '{shown}' is not allowed inside an expression")


async def guarded_gather(*aws: Any, return_exceptions: bool = False) -> list[Any]:
    """``asyncio.gather`` without ``return_exceptions``: exceptions never become values (SPEC 12).

    Anything but ``False`` itself is refused (an object whose ``__bool__``
    says ``False`` today might not tomorrow).
    """
    if return_exceptions is not False:
        raise S2OError("not-allowed", "asyncio.gather(..., return_exceptions=True) is not allowed: "
                       "errors cannot become values")
    return await asyncio.gather(*aws)


_CONVERSIONS: dict[int, Callable[[Any], str]] = {115: str, 114: repr, 97: ascii}


def format_string(*parts: Any) -> Any:
    """Build an f-string: ``parts`` are literal ``str`` pieces and ``(value, conversion, spec)`` tuples.

    Every f-string is rewritten to a call of this function, so that format
    widths and precisions are bounded (``f'{1:{10**10}}'`` is refused before
    it allocates) and a secret formatted into the text keeps the whole result
    secret: the result is then a :class:`SecretText` whose ``repr`` shows
    ``***`` in place of each secret. A secret (or text made with one) takes no
    format specification (:data:`NO_SECRET_SPEC`).
    """
    out: list[str] = []
    for part in parts:
        if type(part) is str:
            out.append(part)
            continue
        value, conversion, spec = part
        kind = type(value)
        if kind is Secret or kind is SecretText:
            return _format_with_secrets(parts)
        if conversion != -1:
            value = _CONVERSIONS[conversion](value)
        out.append(bounded_format(value, spec) if spec else format(value))
    return "".join(out)


#: Why a secret (a :class:`Secret`, or a :class:`SecretText` made with one) takes no format specification, whatever
#: its conversion (SPEC 7.1, 12): a precision (``:.12``) cuts its text, and a width pads it by as many characters as
#: it lacks, so a server that reflects the text (or the ``echo`` profile) would answer with a piece of the secret,
#: or tell its length, and stepping the precision would recover it whole. ``{sys.secret['K']}``, ``!s`` and an
#: empty specification (``{sys.secret['K']:}``) put the whole text in; ``!r`` and ``!a`` its name (``<secret K>``).
NO_SECRET_SPEC = ("a secret takes no format specification: a precision would cut its text and a width would "
                  "tell its length; format it whole, as in f'Bearer {sys.secret[\"TOKEN\"]}'")


def _format_with_secrets(parts: tuple[Any, ...]) -> SecretText:
    out: list[str] = []
    masked: list[str] = []
    places: list[str] = []
    for part in parts:
        if type(part) is str:
            out.append(part)
            masked.append(part)
            places.append(part)
            continue
        value, conversion, spec = part
        if type(spec) is SecretText or type(spec) is Secret:
            raise S2OError("not-allowed", "a secret cannot be used as a format specification")
        if type(value) is Secret or type(value) is SecretText:
            if spec:
                raise S2OError("not-allowed", NO_SECRET_SPEC)
            whole = conversion in (-1, 115)
            text = reveal(value) if whole else repr(value)
            out.append(text)
            masked.append("***" if type(value) is Secret else object.__getattribute__(value, "_masked"))
            places.append(placed(value) if whole else text)
            continue
        if conversion != -1:
            value = _CONVERSIONS[conversion](value)
        text = bounded_format(value, spec) if spec else format(value)
        out.append(text)
        masked.append(text)
        places.append(text)
    return SecretText("".join(out), "".join(masked), "".join(places))


#: Where ``print`` writes during a run: ``sink(text)``, set by the run for its task and the tasks it starts
#: (``RunResult.printed``, or the caller's ``on_print``); outside a run, ``sys.stdout``.
PRINT_SINK: ContextVar[Callable[[str], None] | None] = ContextVar("PRINT_SINK", default=None)


def guarded_print(*values: Any, sep: Any = None, end: Any = None, **others: Any) -> None:
    """``print`` as an allowlist grants it: ``values`` as text, separated by ``sep`` (default a space)
    and followed by ``end`` (default a newline), to the run's printed text (:data:`PRINT_SINK`: the
    kernel shows it as the cell's ``stdout`` stream in order with its other output, SPEC 9; a library
    caller gets it in ``RunResult.printed``), or ``sys.stdout`` outside a run.

    No ``file`` and no ``flush``: a run writes nowhere else. ``sep`` and ``end`` must be ``None`` or
    exact ``str`` (``runtime`` ``TypeError`` otherwise); a secret refuses to become text
    (``not-allowed``), as in an f-string.
    """
    for name in others:  # file=, flush= or a misspelling: named as Python names it for print itself
        raise S2OError("runtime", f"TypeError: print() got an unexpected keyword argument {name!r}")
    for what, value in (("sep", sep), ("end", end)):
        if value is not None and type(value) is not str:
            raise S2OError("runtime", f"TypeError: {what} must be None or a string, not {type_name(value)}")
    text = io.StringIO()
    print(*(too_large_text(v) if too_large_to_write(v) else v for v in values), sep=sep, end=end, file=text)
    sink = PRINT_SINK.get()
    (sys.stdout.write if sink is None else sink)(text.getvalue())


#: Real object → guarded stand-in used when an allowlist grants it.
GUARDED_REPLACEMENTS: dict[int, Any] = {
    **BOUNDED_REPLACEMENTS,
    id(getattr): guarded_getattr,
    id(hasattr): guarded_hasattr,
    id(print): guarded_print,
    id(asyncio.gather): guarded_gather,
}
