"""Bounded operators and a bounded ``range`` (SPEC 3 operator rewriting, SPEC 6).

One huge C-level operation such as ``9 ** 9 ** 9`` or ``'a' * 10 ** 10`` can
neither be interrupted in-process nor undone, so these functions check the
size of the result *before* computing it and raise ``OverflowError`` (shown
as a ``runtime`` error) when it would pass the bound. The embedded default
configuration rewrites ``**``, ``*`` and ``<<`` to them; a configuration may
name them in ``rules.operators`` without an allowlist entry.

Bounds: integers up to :data:`MAX_INT_BITS` bits, sequences up to
:data:`MAX_ITEMS` items (characters for strings), ranges up to
:data:`MAX_RANGE` steps.

Bounded by class (SPEC 12): every operation whose output size comes from an
argument rather than from the size of its inputs — repetition (``*``,
``operator.mul``), powers (``**``, ``pow``, ``operator.pow``, a ``Fraction``
base), shifts, widths and precisions of ``format``, f-strings and ``%`` (mapping
keys included), the sized methods of :data:`SIZED_METHODS` (``str.zfill``,
``center``, ``ljust``, ``rjust``, ``expandtabs``, ``int.to_bytes``), and
formatting a ``Decimal`` whose exponent makes its text long, ``math.factorial``,
``math.perm`` and ``math.comb``. The compile rules
rewrite every attribute named in :data:`SIZED_METHODS` to :func:`sized_attribute`,
so the bound holds however the method is reached (called, passed to ``map``,
read with ``getattr``).
"""

from __future__ import annotations

import array
import collections
import decimal
import fractions
import math
import operator
import re
import statistics
from collections.abc import Callable
from typing import Any

from ...bounds import MAX_FORMAT_WIDTH, MAX_INT_BITS, MAX_ITEMS, MAX_RANGE, SMALL_NUMBER

_SPEC_NUMBERS = re.compile(r"(\d+)")
_PERCENT_NUMBERS = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d*)(?:\.(\*|\d*))?")

#: Sequences whose ``*`` repeats them: the builtin ones and the standard library's (their ``__mul__`` repeats
#: the data in one C call, as ``collections.deque('a') * 10**9`` would).
_SEQUENCES = (str, bytes, bytearray, list, tuple, collections.deque, collections.UserList, collections.UserString,
              array.array)
#: Text a ``%``-format or a sized method writes from: ``UserString`` delegates to its ``str``.
_TEXTS = (str, collections.UserString)


def _int_like(x: Any) -> bool:
    return isinstance(x, int)


def _base_bits(base: Any) -> float:
    """Bits of an exact base (``int`` or ``Fraction``: its larger term), 0 for anything else."""
    if _int_like(base):
        return math.log2(abs(base)) if abs(base) > 1 else 0.0
    if isinstance(base, fractions.Fraction):
        return float(max(base.numerator.bit_length(), base.denominator.bit_length()))
    return 0.0


def bounded_pow(base: Any, exponent: Any, modulo: Any = None) -> Any:
    """``base ** exponent`` (or ``pow(base, exponent, modulo)``) with a bounded exact result.

    Raises ``OverflowError`` when an integer or ``Fraction`` result would have more than
    :data:`MAX_INT_BITS` bits (for a fraction: in its numerator or denominator).
    """
    if modulo is None and _int_like(exponent) and exponent != 0:
        bits = _base_bits(base) * abs(exponent)
        if bits > MAX_INT_BITS:
            raise OverflowError(f"the result of ** would have about {int(bits)} bits; the bound is {MAX_INT_BITS}")
    if modulo is None:
        return base ** exponent
    return pow(base, exponent, modulo)


def bounded_mult(left: Any, right: Any) -> Any:
    """``left * right`` with bounded repetition and integer size.

    Raises ``OverflowError`` when a repeated sequence would have more than
    :data:`MAX_ITEMS` items or an integer product more than
    :data:`MAX_INT_BITS` bits.
    """
    kind_left, kind_right = type(left), type(right)
    if kind_left is float or kind_right is float:  # no repetition, no big integer: the common cases first
        return left * right
    small = SMALL_NUMBER
    if kind_left is int and kind_right is int and -small < left < small and -small < right < small:
        return left * right  # at most 124 bits
    if _int_like(right) and isinstance(left, _SEQUENCES):
        if len(left) * right > MAX_ITEMS:
            raise OverflowError(f"the result of * would have {len(left) * right} items; the bound is {MAX_ITEMS}")
    elif _int_like(left) and isinstance(right, _SEQUENCES):
        if len(right) * left > MAX_ITEMS:
            raise OverflowError(f"the result of * would have {len(right) * left} items; the bound is {MAX_ITEMS}")
    elif _int_like(left) and _int_like(right):
        bits = abs(left).bit_length() + abs(right).bit_length()
        if bits > MAX_INT_BITS:
            raise OverflowError(f"the result of * would have about {bits} bits; the bound is {MAX_INT_BITS}")
    elif isinstance(left, (int, fractions.Fraction)) and isinstance(right, (int, fractions.Fraction)):
        _check_bits(_base_bits(left) + _base_bits(right), "the result of *")  # a Fraction's terms multiply
    return left * right


def bounded_lshift(value: Any, count: Any) -> Any:
    """``value << count`` with the result bounded to :data:`MAX_INT_BITS` bits."""
    if _int_like(value) and _int_like(count) and value and count > 0:
        bits = abs(value).bit_length() + count
        if bits > MAX_INT_BITS:
            raise OverflowError(f"the result of << would have {bits} bits; the bound is {MAX_INT_BITS}")
    return value << count


def bounded_range(*args: Any) -> range:
    """``range(*args)`` with at most :data:`MAX_RANGE` steps; raises ``OverflowError`` beyond."""
    r = range(*args)
    try:
        n = len(r)
    except OverflowError:
        n = MAX_RANGE + 1
    if n > MAX_RANGE:
        raise OverflowError(f"range() of more than {MAX_RANGE} steps is not allowed")
    return r


def _check_widths(numbers: list[str], what: str) -> None:
    for n in numbers:
        if n and n.isdigit() and (len(n) > 6 or int(n) > MAX_FORMAT_WIDTH):
            raise OverflowError(f"{what} width or precision {n} is larger than {MAX_FORMAT_WIDTH}")


def spec_within_bounds(spec: str) -> bool:
    """Whether a constant format specification's widths and precisions are within
    :data:`MAX_FORMAT_WIDTH` (decided when an f-string is compiled; see ``rewrites``)."""
    try:
        _check_widths(_SPEC_NUMBERS.findall(spec), "format")
    except OverflowError:
        return False
    return True


def _check_decimal(value: Any) -> None:
    """Refuse a ``Decimal`` whose fixed-point text would pass :data:`MAX_ITEMS` characters."""
    if isinstance(value, decimal.Decimal) and value.is_finite() and abs(value.adjusted()) > MAX_ITEMS:
        raise OverflowError(f"the text of this Decimal would have more than {MAX_ITEMS} characters")


def bounded_format(value: Any, spec: str = "") -> str:
    """``format(value, spec)`` with widths and precisions bounded to :data:`MAX_FORMAT_WIDTH`
    and ``Decimal`` text bounded to :data:`MAX_ITEMS` characters."""
    if spec:
        if not isinstance(spec, str):
            raise TypeError("format() argument 2 must be str")
        _check_widths(_SPEC_NUMBERS.findall(spec), "format")
    _check_decimal(value)
    return format(value, spec)


def bounded_mod(left: Any, right: Any) -> Any:
    """``left % right`` with %-format widths bounded (``'%10000000000d' % 1`` is refused)."""
    if isinstance(left, (*_TEXTS, bytes, bytearray)):
        text = str(left) if isinstance(left, _TEXTS) else bytes(left).decode("latin-1")
        numbers = [n for pair in _PERCENT_NUMBERS.findall(text) for n in pair]
        _check_widths(numbers, "%-format")
        args = right if isinstance(right, tuple) else (right,)
        if "*" in numbers:  # widths taken from the arguments
            _check_widths([str(abs(a)) for a in args if isinstance(a, int) and not isinstance(a, bool)],
                          "%-format")
        values = right.values() if isinstance(right, dict) else args
        for value in values:
            _check_decimal(value)
    return left % right


# -- sized methods: the output size is an argument ------------------------------------------------
def _width(args: tuple[Any, ...], kwargs: dict[str, Any], keyword: str) -> Any:
    return args[0] if args else kwargs.get(keyword, 0)


def _check_size(size: Any, what: str, bound: int = MAX_ITEMS) -> None:
    if _int_like(size) and size > bound:
        raise OverflowError(f"{what} would build {size} items; the bound is {bound}")


def _padded(receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> None:
    _check_size(_width(args, kwargs, "width"), f"{name}()")


def _expandtabs(receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> None:
    size = _width(args, kwargs, "tabsize")
    if not _int_like(size):
        return
    if isinstance(receiver, _TEXTS):
        tabs = str(receiver).count("\t")
    elif isinstance(receiver, (bytes, bytearray)):
        tabs = receiver.count(b"\t")
    else:
        return
    _check_size(len(receiver) + tabs * max(size, 0), "expandtabs()")


def _to_bytes(receiver: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> None:
    _check_size(_width(args, kwargs, "length"), "to_bytes()")


#: Methods whose output size is one of their arguments, name → check of (receiver, args, kwargs).
SIZED_METHODS: dict[str, Callable[[Any, tuple[Any, ...], dict[str, Any], str], None]] = {
    "zfill": _padded,
    "center": _padded,
    "ljust": _padded,
    "rjust": _padded,
    "expandtabs": _expandtabs,
    "to_bytes": _to_bytes,
}

#: Receiver types whose sized methods are checked (a host object's own method of that name is not).
_SIZED_RECEIVERS = (*_TEXTS, bytes, bytearray, int)


class SizedMethod:
    """A sized method (see :data:`SIZED_METHODS`) that checks the output size before it runs."""

    __slots__ = ("_check", "_method", "_name", "_receiver")

    def __init__(self, method: Any, name: str, receiver: Any) -> None:
        self._method = method
        self._name = name
        self._receiver = receiver
        self._check = SIZED_METHODS[name]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        receiver = self._receiver
        if isinstance(receiver, type):  # str.zfill('x', 9): the receiver is the first argument
            if not args:
                return self._method(*args, **kwargs)
            receiver, rest = args[0], args[1:]
            self._check(receiver, rest, kwargs, self._name)
        else:
            self._check(receiver, args, kwargs, self._name)
        return self._method(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<bounded method {self._name}>"


def sized_attribute(obj: Any, name: str) -> Any:
    """``obj.<name>`` for a name of :data:`SIZED_METHODS`: a :class:`SizedMethod` when ``obj`` is (an
    instance of) ``str``, ``collections.UserString``, ``bytes``, ``bytearray`` or ``int``, the plain attribute
    otherwise."""
    value = getattr(obj, name)
    is_sized = isinstance(obj, _SIZED_RECEIVERS) or (isinstance(obj, type) and issubclass(obj, _SIZED_RECEIVERS))
    return SizedMethod(value, name, obj) if is_sized and name in SIZED_METHODS else value


def _check_bits(bits: float, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise OverflowError(f"{what} would have about {int(bits)} bits; the bound is {MAX_INT_BITS}")


def bounded_factorial(n: Any) -> Any:
    """``math.factorial(n)`` with the result bounded to :data:`MAX_INT_BITS` bits (about n·log2 n)."""
    if _int_like(n) and n > 2:
        _check_bits(n * math.log2(n), "factorial()")
    return math.factorial(n)


def bounded_perm(n: Any, k: Any = None) -> Any:
    """``math.perm(n, k)`` with the result bounded to :data:`MAX_INT_BITS` bits (at most k·log2 n)."""
    if _int_like(n) and n > 2:
        count = n if k is None else k
        if _int_like(count):
            _check_bits(min(count, n) * math.log2(n), "perm()")
    return math.perm(n, k)


def bounded_comb(n: Any, k: Any) -> Any:
    """``math.comb(n, k)`` with the result bounded to :data:`MAX_INT_BITS` bits (at most min(k, n-k)·log2 n)."""
    if _int_like(n) and _int_like(k) and n > 2 and 0 <= k <= n:
        _check_bits(min(k, n - k) * math.log2(n), "comb()")
    return math.comb(n, k)


#: The engine's own bounded operators, which rewrites may name without an allowlist entry.
BOUNDED_OPERATORS = {
    "bounded_pow": bounded_pow,
    "bounded_mult": bounded_mult,
    "bounded_lshift": bounded_lshift,
    "bounded_mod": bounded_mod,
}

def bounded_prod(iterable: Any, /, *, start: Any = 1) -> Any:
    """``math.prod(iterable, start=start)`` with each product bounded as ``*`` is (:func:`bounded_mult`):
    ``math.prod(['a', 10**8])`` and ``math.prod([2**999999] * 20)`` raise ``OverflowError`` where ``'a' * 10**8``
    and ``(2**999999) ** 20`` do. A Python loop: the time limit stops a long one."""
    product = start
    for item in iterable:
        product = bounded_mult(product, item)
    return product


def bounded_lcm(*integers: Any) -> Any:
    """``math.lcm(*integers)`` with the result bounded to :data:`MAX_INT_BITS` bits: the integers' bits together
    (the least common multiple of coprime integers is their product)."""
    if all(_int_like(n) for n in integers):
        _check_bits(sum(abs(n).bit_length() for n in integers), "lcm()")
    return math.lcm(*integers)


def bounded_round(number: Any, ndigits: Any = None) -> Any:
    """``round(number, ndigits)``, without computing ``10 ** -ndigits`` for an exact number it rounds to zero:
    ``round(5, -10**7)`` would build a 33 M-bit power of ten in C (~8 s); ``10 ** -ndigits``
    beyond twice the number's magnitude rounds it to ``0`` (a ``Fraction`` for a ``Fraction``), as ``round`` gives."""
    if ndigits is None:
        return round(number)
    if (_int_like(ndigits) and ndigits < 0 and (_int_like(number) or isinstance(number, fractions.Fraction))
            and -ndigits > _base_bits(number) * math.log10(2) + 2):
        return 0 if _int_like(number) else fractions.Fraction(0)  # what int's and Fraction's __round__ return
    return round(number, ndigits)


def _spread(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a ``statistics`` spread: variance, standard deviation) with its squares bounded: each exact
    datum (and a given mean) of at most half :data:`MAX_INT_BITS` bits (``statistics.pvariance([0, 2**999999])``
    would square a 1 M-bit integer)."""
    what = f"the squares of statistics.{function.__name__}()"

    def bounded(data: Any, *args: Any, **kwargs: Any) -> Any:
        items = list(data)  # as the function itself does with an iterator
        for value in (*items, *args, *kwargs.values()):
            _check_bits(2 * _base_bits(value) + 2, what)
        return function(items, *args, **kwargs)

    bounded.__name__, bounded.__qualname__, bounded.__doc__ = function.__name__, function.__qualname__, function.__doc__
    return bounded


_SPREADS = (statistics.variance, statistics.pvariance, statistics.stdev, statistics.pstdev)

#: Granted objects replaced by their bounded versions when an allowlist grants them, ``id`` → stand-in.
BOUNDED_REPLACEMENTS: dict[int, Any] = {
    id(pow): bounded_pow,
    id(range): bounded_range,
    id(format): bounded_format,
    id(operator.pow): bounded_pow,
    id(operator.ipow): bounded_pow,
    id(operator.mul): bounded_mult,
    id(operator.imul): bounded_mult,
    id(operator.lshift): bounded_lshift,
    id(operator.ilshift): bounded_lshift,
    id(operator.mod): bounded_mod,
    id(operator.imod): bounded_mod,
    id(math.factorial): bounded_factorial,
    id(math.perm): bounded_perm,
    id(math.comb): bounded_comb,
    id(math.prod): bounded_prod,
    id(math.lcm): bounded_lcm,
    id(round): bounded_round,
    **{id(function): _spread(function) for function in _SPREADS},
}
