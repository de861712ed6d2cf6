"""JSON read under budgets: at most so many values, nested at most so deep (SPEC 7.1, 12).

``json.loads`` builds whatever the text describes, and JSON amplifies: 60 MiB of ``[[],[],…]`` is twenty million
lists, 1.6 GB of the process that reads it, and JSON a few thousand levels deep ends in ``RecursionError``.
:func:`loads` reads JSON from a sender it does not trust with two budgets:

* ``items``: the most JSON values the text may hold (each string, number, literal, list and object counts one;
  an object's keys do not, they come with their values). Decoded, a value costs at most about 200 bytes (a
  one-key object in a list), so ``items`` bounds the memory the result takes, whatever the text's length;
* ``depth``: the deepest nesting of lists and objects (``[]`` is 1 level, ``[[]]`` 2); past it, ``too-deep``
  (SPEC 12), never a ``RecursionError``.

How it reads, from cheapest to dearest (:func:`_counts`). Every value but the first starts after a comma or
after an opening bracket that is not closed at once, so a text holds at most ``1 + commas + opening brackets -
empty containers`` values, counting those inside strings too, and nests at most ``opening brackets`` deep. A text
within the values' budget by that count (every message of an honest sender but the largest) is read by
``json.loads`` whole, at C speed, and its depth walked after when its brackets could pass the depth's (a value
too deep for ``json`` itself is ``too-deep`` too). In a text without a string every comma and bracket is
structure: its exact counts, found at C speed too, refuse it or hand it to ``json.loads``. Any other text is read
by an iterative scanner that counts as it goes and stops at the first value or level past a budget, having built
no more than the budget allows; every :data:`~s2o_kernel.bounds.JSON_CHECK_SPAN` characters it counts what is
left, refuses at once a rest without strings that has more commas than values left, and from where the rest fits
the values' budget (past a long string full of commas: a printed table, a repr) hands each value to ``json``'s C
scanner. Strings and numbers are decoded by ``json``'s own functions, so every path gives the values
``json.loads`` gives for the same text (``NaN`` and ``Infinity`` included).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from ...bounds import JSON_CHECK_SPAN
from ..errors import S2OError

_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: After a value: spaces, a comma or a closing bracket (group 1), spaces.
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]}])[ \t\n\r]*").match
#: A key without escapes or control characters (its text is group 1), its colon and the spaces around it.
_PLAIN_KEY = re.compile(r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*').match
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*").match
_SPACES = re.compile(r"[ \t\n\r]+")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
#: A JSON number (ASCII digits only: ``\d`` would take other scripts' digits, which ``int`` reads too).
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?").match
#: The words ``json.loads`` reads as values.
_WORDS: tuple[tuple[str, Any], ...] = (("null", None), ("true", True), ("false", False), ("NaN", math.nan),
                                       ("Infinity", math.inf), ("-Infinity", -math.inf))
_CLOSER = {"[": "]", "{": "}"}
_CONTAINERS = (list, dict)
#: ``json``'s own scanner of one value: ``scan(text, pos)`` → ``(value, end)``; ``StopIteration`` when none starts.
_C_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
#: ``json``'s own string decoder: ``scan(text, position after the opening quote, strict)`` → ``(text, end)``.
_SCAN_STRING: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

Container = list[Any] | dict[str, Any]


def loads(text: str, *, items: int, depth: int, code: str, what: str = "the JSON") -> Any:
    """The value of the JSON ``text``, read within the budgets (see the module doc).

    Raises ``S2OError`` ``too-deep`` when lists and objects nest deeper than ``depth`` levels, ``S2OError`` with
    ``code`` (the caller's: ``worker-protocol`` for a worker's message) when the text holds more than ``items``
    values, each naming ``what`` was read; ``ValueError`` when ``text`` is not JSON (as ``json.loads`` does).
    """
    counts = _counts(text, 0, len(text))
    opened, commas, empty = counts
    if 1 + commas + opened - empty <= items:  # cannot pass the values' budget: read at C speed
        if opened <= depth:
            return json.loads(text)
        return _within_depth(lambda: (json.loads(text), 0), 0, depth, what)[0]
    if '"' not in text:  # no string: every bracket and comma is structure, counted exactly
        _check_bare(text, items, depth, code, what, counts)
        return json.loads(text)
    return _Scanner(text, items, depth, code, what, counts).read()


def _within_depth(read: Callable[[], tuple[Any, int]], level: int, depth: int, what: str) -> tuple[Any, int]:
    """What ``read()`` (``json``'s C reader: ``(value, end)``) reads at ``level`` levels down, when its value nests
    no deeper than ``depth`` levels in all; ``too-deep`` otherwise, for a value built (it is within the values'
    budget) or one too deep for the reader itself (``RecursionError``)."""
    try:
        value, end = read()
    except RecursionError:
        raise _too_deep(what, depth) from None
    stack = [(value, level + 1)]
    while stack:
        held, at = stack.pop()
        inside = held if type(held) is list else held.values() if type(held) is dict else None
        if inside is None:
            continue
        if at > depth:
            raise _too_deep(what, depth)
        stack.extend((item, at + 1) for item in inside if type(item) in _CONTAINERS)
    return value, end


def _counts(text: str, start: int, end: int) -> tuple[int, int, int]:
    """Opening brackets, commas and empty containers (``[]``, ``{}``) in ``text[start:end]``, strings' included.

    Each value but the first starts after a comma or an opening bracket that is not closed at once, so a text
    holds at most ``1 + commas + opening brackets - empty containers`` values, whatever of it is inside strings
    (a ``[]`` inside a string brings its own ``[``; no pair spans a string's edge, which is a quote); no pair spans
    ``start`` or ``end`` either when both are where a value starts."""
    return (text.count("[", start, end) + text.count("{", start, end), text.count(",", start, end),
            text.count("[]", start, end) + text.count("{}", start, end))


def _check_bare(text: str, items: int, depth: int, code: str, what: str, counts: tuple[int, int, int]) -> None:
    """Raise as :func:`loads` does when ``text``, which holds no string, is past a budget: its values are
    ``1 + commas + opening brackets - empty containers`` (at least ``1 + commas``: a comma separates two values),
    its depth the most brackets open at once."""
    opened, commas, _ = counts
    if 1 + commas > items:
        raise _too_many(code, what, items)
    bare = _SPACES.sub("", text) if any(space in text for space in " \t\n\r") else text
    if 1 + commas + opened - bare.count("[]") - bare.count("{}") > items:
        raise _too_many(code, what, items)
    if opened > depth:  # at most 2 * items brackets: walked at C speed
        levels = accumulate(map(_STEP.__getitem__, _NOT_BRACKET.sub("", bare)))
        if max(levels, default=0) > depth:
            raise _too_deep(what, depth)


def _too_many(code: str, what: str, items: int) -> S2OError:
    return S2OError(code, f"{what} holds more than {items:,} values")


def _too_deep(what: str, depth: int) -> S2OError:
    return S2OError("too-deep", f"{what} nests lists and objects deeper than {depth} levels")


class _Scanner:
    """One reading of :func:`loads`'s slow path: an explicit stack of open containers, no recursion."""

    def __init__(self, text: str, items: int, depth: int, code: str, what: str, counts: tuple[int, int, int]
                 ) -> None:
        self.text = text
        self.items, self.depth, self.code, self.what = items, depth, code, what
        self.left = items  # values the budget still allows
        self.rest = counts  # :func:`_counts` of the text at and after ``self.mark``
        self.mark = 0
        self.quote = 0  # where the next quote at or after ``self.mark`` is (-1: none), once looked for
        self.fits = False  # the rest of the text, from ``self.mark``, fits both budgets: read at C speed
        self.keys: dict[str, str] = {}  # one str object per distinct key, as json.loads shares them

    def read(self) -> Any:
        """The value of the whole text (see :func:`loads`)."""
        text, value_at, key_at = self.text, self._value, self._key
        frames: list[Container] = []  # the open containers, outermost first
        keys: list[str] = []  # the key each open object is reading a value for
        pos = _skip(text, 0)
        while True:
            value, pos = value_at(pos, frames, keys)
            while value is not _OPENED:  # a whole value: it goes into its container, which may end with it
                if not frames:
                    if _skip(text, pos) != len(text):
                        raise ValueError(f"extra data after the JSON value at character {pos}")
                    return value
                top = frames[-1]
                if isinstance(top, list):
                    top.append(value)
                else:
                    top[keys[-1]] = value
                after = _SEPARATOR(text, pos)  # a comma or a closing bracket, and the spaces around it
                if after is None:
                    raise ValueError(f"expected ',' or the end of a list or object at character {pos}")
                char, pos = after.group(1), after.end()
                if char == ",":
                    if type(top) is dict:
                        keys[-1], pos = key_at(pos)
                    break
                if char != ("]" if type(top) is list else "}"):
                    raise ValueError(f"expected ',' or the end of a list or object at character {pos}")
                value = frames.pop()
                if type(value) is dict:
                    keys.pop()

    def _value(self, pos: int, frames: list[Container], keys: list[str]) -> tuple[Any, int]:
        """The value starting at ``pos`` and where it ends; a list or object that is not empty is pushed on
        ``frames`` instead, and ``_OPENED`` returned with the position of its first value."""
        if not self.fits and pos - self.mark >= JSON_CHECK_SPAN:
            self._count_rest(pos)
        if self.fits:
            try:
                return _within_depth(lambda: _C_SCAN(self.text, pos), len(frames), self.depth, self.what)
            except StopIteration:
                raise ValueError(f"expected a JSON value at character {pos}") from None
        self.left -= 1
        if self.left < 0:
            raise _too_many(self.code, self.what, self.items)
        char = self.text[pos:pos + 1]
        if char not in _CLOSER:
            return self._scalar(pos)
        if len(frames) >= self.depth:
            raise _too_deep(self.what, self.depth)
        after = _skip(self.text, pos + 1)
        if self.text.startswith(_CLOSER[char], after):
            return ([] if char == "[" else {}), after + 1
        if char == "[":
            frames.append([])
            return _OPENED, after
        frames.append({})
        key, after = self._key(after)
        keys.append(key)
        return _OPENED, after

    def _count_rest(self, pos: int) -> None:
        """Count the brackets and commas read since the last count. The rest fits when, however many of those
        left are inside strings, it can hold neither a value nor a level past the budgets; it holds too many
        values at once when it has no string left and more commas than values left (a comma separates two)."""
        text, mark = self.text, self.mark
        read = _counts(text, mark, pos)
        opened, commas, empty = self.rest[0] - read[0], self.rest[1] - read[1], self.rest[2] - read[2]
        self.rest, self.mark = (opened, commas, empty), pos
        self.fits = 1 + commas + opened - empty <= self.left
        if self.quote != -1 and self.quote < pos:
            self.quote = text.find('"', pos)
        if self.quote == -1 and 1 + commas > self.left:
            raise _too_many(self.code, self.what, self.items)

    def _scalar(self, pos: int) -> tuple[Any, int]:
        text = self.text
        if text.startswith('"', pos):
            return _SCAN_STRING(text, pos + 1, True)
        number = _NUMBER(text, pos)
        if number is not None:
            integer, fraction, exponent = number.groups()
            if fraction or exponent:
                return float(integer + (fraction or "") + (exponent or "")), number.end()
            return int(integer), number.end()
        for word, value in _WORDS:
            if text.startswith(word, pos):
                return value, pos + len(word)
        raise ValueError(f"expected a JSON value at character {pos}")

    def _key(self, pos: int) -> tuple[str, int]:
        """An object's key starting at ``pos`` and the position after its ``:``."""
        plain = _PLAIN_KEY(self.text, pos)  # no escape in it: its text as it is
        if plain is not None:
            key, pos = plain.group(1), plain.end()
        else:
            if not self.text.startswith('"', pos):
                raise ValueError(f"expected a key in double quotes at character {pos}")
            key, pos = _SCAN_STRING(self.text, pos + 1, True)
            colon = _COLON(self.text, pos)
            if colon is None:
                raise ValueError(f"expected ':' at character {pos}")
            pos = colon.end()
        return self.keys.setdefault(key, key), pos


def _skip(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    if not text.startswith(_SPACE_CHARS, pos):
        return pos
    match = _WHITESPACE.match(text, pos)
    return pos if match is None else match.end()


_SPACE_CHARS = (" ", "\t", "\n", "\r")


#: What :meth:`_Scanner._value` returns for a container it opened (its values follow).
_OPENED: Any = object()
