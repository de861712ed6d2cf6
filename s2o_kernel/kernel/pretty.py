"""How a result looks (SPEC 9): its repr pretty-printed as IPython does, and rows as an html table.

Both functions are pure (text or JSON in, text out) and deterministic, so a stored notebook output
compares equal on every run.

:func:`pretty_text` takes the result's ``repr`` text, not the value: in the contained worker
(SPEC 12) the kernel only ever sees that text (and the value's JSON form), and reading the text
keeps one path for both ways of running. The text is parsed as a Python expression (``ast``);
lists, tuples, sets, dicts and literals are rebuilt, and any other part (``Decimal('1.5')``,
``nan``, ``datetime.date(2024, 1, 2)``) stays exactly as written. The rebuilt value is laid out
the way IPython's pretty printer (``IPython.lib.pretty``) lays it out, so a result looks as it does
in IPython: on one line when it fits in :data:`PRETTY_WIDTH` characters, otherwise one item a line, nested
containers indented by one more space per level, dict keys in their order, set items sorted (a set of
:data:`SHOWN_ITEMS` items or more in its own order, as IPython leaves it). As in IPython, a container
shows at most :data:`SHOWN_ITEMS` items and then ``...``: the text is usually cut already where the
value is (``engine.shown_text``, which writes ``[0, 1, ...]`` and ``{0: 0, ...}`` as IPython does on one
line, so a long result never crosses as megabytes), and a longer container of the text is cut here.
Text that is not such an expression (``<Opaque>``), or longer than :data:`PRETTY_MAX_CHARS`, is shown
as it is. The module
does not import IPython (the kernel's pure modules import nothing of Jupyter's); a test holds its
output to IPython's. One known difference: a dict whose keys are tuples or frozensets may break
its lines elsewhere than IPython, whose queue of groups drops a group in that case.

:func:`rows_table` takes the value's JSON form: a list of objects that all have the same keys
(rows, as a ``db`` command returns) becomes an html table: a header row of the keys in the first
row's order, then at most :data:`ROW_CAP` rows and a last line ``… N more rows``. A string cell
shows its text, any other cell its Python repr (``None``, ``True``, ``1.5``, ``[1, 2]``); every
text is html-escaped and passed through the redactor (secrets become ``***``).
"""

from __future__ import annotations

import ast
import html
import io
import tokenize
from collections.abc import Callable
from typing import Any

from s2o_kernel.bounds import PRETTY_MAX_CHARS, PRETTY_WIDTH, ROW_CAP, SHOWN_ITEMS


class _Verbatim:
    """A part of a ``repr`` that is not a literal: printed exactly as it was written."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


#: ``...`` where it stands for items left out (IPython's ``max_seq_length``) or for a cycle (``[...]``).
_ELIDED = _Verbatim("...")


class _SetItems:
    """A set or frozenset as its ``repr`` wrote it: its items in the text's order (a set's own order,
    which IPython keeps for a set of :data:`SHOWN_ITEMS` items or more). Hashable when ``frozen``."""

    __slots__ = ("frozen", "items")

    def __init__(self, items: list[Any], frozen: bool) -> None:
        self.items = items
        self.frozen = frozen

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _SetItems) and self.frozen == other.frozen
                and frozenset(self.items) == frozenset(other.items))

    def __hash__(self) -> int:
        if not self.frozen:
            raise TypeError("unhashable type: 'set'")
        return hash(frozenset(self.items))


class _NotRebuilt(Exception):
    """The text is not something :class:`_Rebuilder` can show faithfully."""


class _Rebuilder:
    """Rebuilds the value a parsed one-line ``repr`` stands for, as far as the pretty printer needs it.

    Lists, tuples, sets, dicts, ``set()`` and ``frozenset({...})`` are rebuilt; a literal whose own
    ``repr`` is the text as written is kept as its value; any other part becomes :class:`_Verbatim`.
    Raises :class:`_NotRebuilt` when the rebuilt value would not show what the text says (a
    repeated dict key or set item, ``{**x}``).
    """

    def __init__(self, text: str) -> None:
        self.raw = text.encode("utf-8", "surrogatepass")  # ast's columns are UTF-8 byte offsets

    def segment(self, node: ast.expr) -> str:
        """The text of ``node`` exactly as written."""
        return self.raw[node.col_offset:node.end_col_offset].decode("utf-8", "surrogatepass")

    def container(self, node: ast.List | ast.Tuple | ast.Set | ast.Dict) -> Any:
        """A list, tuple, set or dict node rebuilt."""
        if isinstance(node, ast.List):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.Set):
            listed = [self.value(e) for e in node.elts]
            if len(set(listed)) != len(listed):  # a custom repr that repeats an item
                raise _NotRebuilt
            return _SetItems(listed, frozen=False)
        keys = [k for k in node.keys if k is not None]
        if len(keys) != len(node.keys):  # ``{**x}``: not a repr
            raise _NotRebuilt
        pairs = {self.value(k): self.value(v) for k, v in zip(keys, node.values, strict=True)}
        if len(pairs) != len(keys):
            raise _NotRebuilt
        return pairs

    def value(self, node: ast.expr) -> Any:
        """The value ``node`` stands for."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            return self.container(node)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset")
                and not node.keywords and len(node.args) <= 1):
            # ``set()`` and ``frozenset({...})``: rebuilt, so their items are sorted as IPython sorts them
            inner = self.value(node.args[0]) if node.args else _SetItems([], frozen=False)
            if isinstance(inner, _SetItems) and (node.func.id == "frozenset" or not inner.items):
                return _SetItems(inner.items, frozen=node.func.id == "frozenset")
        segment = self.segment(node)
        if isinstance(node, ast.Constant) and node.value is Ellipsis and segment == "...":
            return _ELIDED
        try:
            value = ast.literal_eval(node)  # 1, 'a', -1, None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return _Verbatim(segment)
        return value if repr(value) == segment else _Verbatim(segment)


def _dict_ellipses(text: str) -> str:
    """``text`` with each ``...`` that ends a dict (``{0: 0, ...}``, a dict cut as IPython writes it,
    which is not Python) written as the pair ``...: ...``, which parses; only outside string literals
    (the text is read with :mod:`tokenize`). One line of text; returned as it is when it does not tokenize."""
    if ", ...}" not in text:  # most texts, a cut list or set included: no tokenizing
        return text
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.OP]
    except (tokenize.TokenError, SyntaxError):
        return text
    braces: list[bool] = []  # one per open bracket: a ``{`` that holds ``key: value`` pairs
    cuts: list[int] = []
    for before, token, after in zip([None, *tokens[:-1]], tokens, [*tokens[1:], None], strict=True):
        if token.string in ("(", "[", "{"):
            braces.append(False)
        elif token.string in (")", "]", "}"):
            if braces:
                braces.pop()
        elif token.string == ":" and braces and not braces[-1]:
            braces[-1] = True  # no bracket of a repr holds a ``:`` but a dict
        elif (token.string == "..." and braces and braces[-1] and before is not None and before.string == ","
              and after is not None and after.string == "}"):
            cuts.append(token.end[1])
    for col in reversed(cuts):
        text = text[:col] + ": ..." + text[col:]
    return text


def _sorted(items: Any) -> list[Any]:
    """Set items in IPython's order: sorted, else sorted by their text, else as they come."""
    listed: list[Any] = list(items)
    try:
        return sorted(listed)
    except Exception:
        try:
            return sorted(listed, key=str)
        except Exception:
            return listed


class _Printer:
    """IPython's pretty printer (``IPython.lib.pretty``) for the values :class:`_Rebuilder` makes.

    A container is a group: ``open``, items separated by ``,`` and a break, ``close``. A group
    that fits on its line, with the text that must follow it before the next break, is written
    flat; otherwise every break of it is a new line, indented by the sum of the opening widths
    of the groups it is in (1 for ``[``, ``(``, ``{``; 11 for ``frozenset({``), and its items are
    laid out the same way. The outermost group breaks first. Deterministic; a test holds it to
    IPython's own output.
    """

    def __init__(self, width: int, each: int) -> None:
        self.width = width
        self.each = each
        self.out: list[str] = []
        self._flat: dict[int, str] = {}

    def parts(self, value: Any) -> tuple[str, list[tuple[Any, Any]], str, str] | None:
        """``(open, [(key or _NO_KEY, item)...], tail, close)`` of a non-empty container, else ``None``;
        at most ``each`` items, then ``...`` (IPython's ``max_seq_length``)."""
        kind = type(value)
        if kind is _SetItems:
            if not value.items:
                return None
            start, end = ("frozenset({", "})") if value.frozen else ("{", "}")
            shown = [x for x in value.items if x is not _ELIDED]
            if len(value.items) < self.each:  # IPython sorts a set of fewer items than it shows
                shown = _sorted(shown)
            shown += [_ELIDED] * (len(value.items) - len(shown))
            return start, self._cut([(_NO_KEY, x) for x in shown]), "", end
        if not value or kind not in (list, tuple, dict):
            return None
        if kind is dict:
            return "{", self._cut([(_NO_KEY, v) if k is _ELIDED else (k, v) for k, v in value.items()]), "", "}"
        if kind is list:
            return "[", self._cut([(_NO_KEY, x) for x in value]), "", "]"
        return "(", self._cut([(_NO_KEY, x) for x in value]), "," if len(value) == 1 else "", ")"

    def _cut(self, items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """``items`` up to ``each`` of them, then ``...`` for the rest."""
        return items if len(items) <= self.each else [*items[:self.each], (_NO_KEY, _ELIDED)]

    def flat(self, value: Any) -> str:
        """``value`` on one line."""
        known = self._flat.get(id(value))
        if known is not None:
            return known
        parts = self.parts(value)
        if parts is None:
            empty_set = type(value) is _SetItems
            text = ("frozenset()" if value.frozen else "set()") if empty_set else repr(value)
        else:
            start, items, tail, end = parts
            inner = ", ".join(self.flat(x) if k is _NO_KEY else f"{self.flat(k)}: {self.flat(x)}" for k, x in items)
            text = start + inner + tail + end
        self._flat[id(value)] = text
        return text

    def layout(self, value: Any, col: int, indent: int, trail: int) -> int:
        """Write ``value`` starting at column ``col`` inside groups indenting ``indent``; ``trail``
        characters must follow on the same line. Returns the column after it."""
        text = self.flat(value)
        parts = self.parts(value)
        if parts is None or col + len(text) + trail <= self.width:
            self.out.append(text)
            return col + len(text)
        start, items, tail, end = parts
        self.out.append(start)
        col += len(start)
        inner = indent + len(start)
        for i, (key, item) in enumerate(items):
            if i:
                self.out.append(",\n" + " " * inner)
                col = inner
            after = len(tail) + len(end) + trail if i == len(items) - 1 else 1
            if key is not _NO_KEY:
                col = self.layout(key, col, inner, self.key_trail(item, after)) + 2
                self.out.append(": ")
            col = self.layout(item, col, inner, after)
        self.out.append(tail + end)
        return col + len(tail) + len(end)

    def key_trail(self, value: Any, after: int) -> int:
        """What must follow a dict key on its line, for the value ``value`` and the ``after`` that
        follows it: ``": "`` and the value up to its own first break (IPython breaks the key, the
        shallower group, when the line overflows before that)."""
        parts = self.parts(value)
        if parts is None or len(parts[1]) == 1:
            return 2 + len(self.flat(value)) + after
        start, items, _, _ = parts
        key, first = items[0]
        first_text = self.flat(first) if key is _NO_KEY else f"{self.flat(key)}: {self.flat(first)}"
        return 2 + len(start) + len(first_text) + 1


#: The key of an item that has none (a list, tuple or set item).
_NO_KEY = object()


def pretty_text(text: str, width: int = PRETTY_WIDTH, each: int = SHOWN_ITEMS) -> str:
    """``text`` (a value's ``repr``, or ``engine.shown_text``'s) pretty-printed as IPython prints the value
    with ``max_seq_length=each`` (module docstring): at most ``each`` items of a container, then ``...``.

    Returns ``text`` unchanged when it is not a Python expression of containers and literals, spans
    several lines, or is longer than :data:`PRETTY_MAX_CHARS`. Never raises.
    """
    if len(text) > PRETTY_MAX_CHARS or "\n" in text or text[:1] not in ("[", "(", "{", "s", "f"):
        return text
    try:
        parsed = _dict_ellipses(text)
        tree = ast.parse(parsed, mode="eval")
        printer = _Printer(width, each)
        printer.layout(_Rebuilder(parsed).value(tree.body), 0, 0, 0)
    except (_NotRebuilt, SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return text
    return "".join(printer.out)


def without_addresses(text: str) -> str:
    """``text`` (a ``repr``) with the memory addresses of default reprs taken out, so a stored output
    compares equal on every run: ``<function f at 0x7f3a…>`` becomes ``<function f>``, as IPython shows
    a function; ``<A object at 0x…>`` becomes ``<A object>``, inside containers too.

    Only an ``at 0x…`` just before a closing ``>`` outside string literals is cut (the text is read
    with :mod:`tokenize`, so a string value holding ``" at 0x1234>"`` keeps it). Text that does not
    tokenize (an unbalanced quote in some repr) is returned as it is.
    """
    if " at 0x" not in text:  # almost every result: no tokenizing
        return text
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    cuts = []
    for at, number, close in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if (at.type == tokenize.NAME and at.string == "at" and number.type == tokenize.NUMBER
                and number.string[:2].lower() == "0x" and close.type == tokenize.OP
                and close.string.startswith(">") and at.start[0] == number.end[0] == close.start[0]):
            begin = starts[at.start[0] - 1] + at.start[1]
            begin -= text[begin - 1:begin] == " "  # the space before "at" goes too
            cuts.append((begin, starts[number.end[0] - 1] + number.end[1]))
    for begin, end in reversed(cuts):
        text = text[:begin] + text[end:]
    return text


def _cell_text(value: Any) -> str:
    """A table cell: a string's own text, any other JSON value's Python repr."""
    return value if isinstance(value, str) else repr(value)


def is_rows(value: Any) -> bool:
    """True for a non-empty list of JSON objects that all have the same, non-empty, set of keys."""
    if not isinstance(value, list) or not value or not all(isinstance(row, dict) for row in value):
        return False
    keys = value[0].keys()
    return bool(keys) and all(row.keys() == keys for row in value)


def rows_table(value: Any, redact: Callable[[str], str] | None = None) -> str | None:
    """``value`` (a JSON value) as an html table when it is rows (:func:`is_rows`), else ``None``.

    Header: the first row's keys; body: the first :data:`ROW_CAP` rows, cells in the header's
    order; then ``… N more rows`` when there are more. Every text is redacted (``redact``) and
    html-escaped.
    """
    if not is_rows(value):
        return None
    red = redact or (lambda t: t)
    keys = list(value[0])

    def cell(tag: str, text: str) -> str:
        return f"<{tag}>{html.escape(red(text))}</{tag}>"

    lines = ['<table class="s2o-rows">', "<thead>", "<tr>" + "".join(cell("th", k) for k in keys) + "</tr>",
             "</thead>", "<tbody>"]
    lines.extend("<tr>" + "".join(cell("td", _cell_text(row[k])) for k in keys) + "</tr>" for row in value[:ROW_CAP])
    lines.append("</tbody>")
    lines.append("</table>")
    more = len(value) - ROW_CAP
    if more > 0:
        lines.append(f"<p>… {more} more row{'s' if more != 1 else ''}</p>")
    return "\n".join(lines)


def rows_text(rows: list[dict[str, str]]) -> str:
    """Rows of texts (every row with the first row's keys) as a plain-text table: a header line of
    the keys, then one line a row, columns padded to their widest text and two spaces apart.
    Trailing spaces are dropped. ``""`` for no rows."""
    if not rows:
        return ""
    keys = list(rows[0])
    widths = [max(len(key), *(len(row[key]) for row in rows)) for key in keys]
    lines = [keys, *([row[key] for key in keys] for row in rows)]
    return "\n".join("  ".join(t.ljust(w) for t, w in zip(line, widths, strict=True)).rstrip() for line in lines)
