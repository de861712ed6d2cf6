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
"""

from __future__ import annotations

import math
import re
from typing import Any

#: Largest integer result, in bits (about 301,000 decimal digits).
MAX_INT_BITS = 1_000_000
#: Largest sequence built by repetition, in items (characters for str).
MAX_ITEMS = 10_000_000
#: Largest number of steps of a bounded range.
MAX_RANGE = 10_000_000
#: Largest width or precision in a format specification or a %-format.
MAX_FORMAT_WIDTH = 100_000

_SPEC_NUMBERS = re.compile(r"(\d+)")
_PERCENT_NUMBERS = re.compile(r"%[-+ #0]*(\*|\d*)(?:\.(\*|\d*))?")

_SEQUENCES = (str, bytes, bytearray, list, tuple)


def _int_like(x: Any) -> bool:
    return isinstance(x, int)


def bounded_pow(base: Any, exponent: Any, modulo: Any = None) -> Any:
    """``base ** exponent`` (or ``pow(base, exponent, modulo)``) with a bounded integer result.

    Raises ``OverflowError`` when an integer result would have more than
    :data:`MAX_INT_BITS` bits.
    """
    if modulo is None and _int_like(base) and _int_like(exponent) and exponent > 0 and abs(base) > 1:
        bits = math.log2(abs(base)) * exponent
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


def bounded_format(value: Any, spec: str = "") -> str:
    """``format(value, spec)`` with widths and precisions bounded to :data:`MAX_FORMAT_WIDTH`."""
    if spec:
        if not isinstance(spec, str):
            raise TypeError("format() argument 2 must be str")
        _check_widths(_SPEC_NUMBERS.findall(spec), "format")
    return format(value, spec)


def bounded_mod(left: Any, right: Any) -> Any:
    """``left % right`` with %-format widths bounded (``'%10000000000d' % 1`` is refused)."""
    if isinstance(left, (str, bytes)):
        text = left if isinstance(left, str) else left.decode("latin-1")
        numbers = [n for pair in _PERCENT_NUMBERS.findall(text) for n in pair]
        _check_widths(numbers, "%-format")
        if "*" in numbers:  # widths taken from the arguments
            args = right if isinstance(right, tuple) else (right,)
            _check_widths([str(abs(a)) for a in args if isinstance(a, int) and not isinstance(a, bool)],
                          "%-format")
    return left % right


#: The engine's own bounded operators, which rewrites may name without an allowlist entry.
BOUNDED_OPERATORS = {
    "bounded_pow": bounded_pow,
    "bounded_mult": bounded_mult,
    "bounded_lshift": bounded_lshift,
    "bounded_mod": bounded_mod,
}
