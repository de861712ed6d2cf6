"""Reference expressions: the dataflow notation of SPEC 8, tokenized and parsed by a small, strict grammar.

A field's string that is no dynamic string (SPEC 1) and *starts* with a dagger ``\u2020`` (U+2020) is a
reference expression, and must be one whole (:func:`is_reference`); white space and the opening
parentheses of a group (``"(\u2020agent.a && \u2020agent.b) || \u2020conv.c"``) may come before that
dagger. Any other string is plain text, a dagger inside it included (``"Price\u2020 incl. VAT"``,
``"see \u2020agent.x"``): a dagger is a character people write (SPEC 8). Text that must start with a
dagger is written as a dynamic string, ``"{ '\\u2020agent.x' }"`` (the expression's ``\\u`` escape: an
expression is printable ASCII, SPEC 3). The grammar::

    expr     := operand ( "||" operand )*  |  operand ( "&&" operand )*
    operand  := ref | "(" expr ")"
    ref      := "\u2020" scope item*
    scope    := "local" | "agent" | "conv" | "sys.inputs" | "result"
    item     := "." name | "['" key "']" | '["' key '"]' | "[" digits "]"

White space may stand around operators and parentheses. ``local``, ``agent`` and ``conv`` need a
variable name as their first item (``\u2020agent.cart``); ``sys.inputs`` and ``result`` stand alone or
with items. Names and keys starting with ``_`` are refused as everywhere else (``underscore``).

:func:`parse_reference` returns a tiny tree (:class:`Ref`, :class:`Or`, :class:`And`) or raises an
:class:`~.errors.S2OError` with stage ``validate``, line 1, the 0-based column of the problem and the
text as its ``source`` (so a caret can point at the column); the caller adds the field's JSON path.
Each malformed form has its own code (SPEC 8):

=================  ===============================================================================
``ref-text``       text after a reference, or beside one (``"\u2020conv.name is here"``)
``ref-scope``      an unknown scope (``\u2020user.name``), or a ``\u2020`` with no scope
``ref-path``       a malformed or missing key or index (``\u2020agent.``, ``\u2020agent[x]``, ``\u2020agent``)
``ref-operator``   a single ``|`` or ``&``
``ref-mixed``      ``||`` and ``&&`` at one level without parentheses
``ref-empty``      an operator or parentheses with nothing on one side (``\u2020a.x ||``, ``()``)
``ref-paren``      unbalanced parentheses
``too-deep``       parentheses nested past :data:`MAX_REFERENCE_DEPTH`
``underscore``     a name or key starting with ``_``
=================  ===============================================================================

Tokenizing and parsing are linear in the text; parsed trees are cached by text (they are immutable).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ...bounds import MAX_REFERENCE_DEPTH, REFERENCE_CACHE
from ..errors import S2OError

#: The character that starts a reference.
DAGGER = "\u2020"

#: Scopes a reference may name (SPEC 8); the first three need a variable name as their first item.
SCOPES = ("local", "agent", "conv", "sys.inputs", "result")
VARIABLE_SCOPES = ("local", "agent", "conv")


Item = str | int

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"\[([0-9]+)\]")  # ASCII digits: \d takes '１' and '١' too
_KEY = re.compile(r"""\[(?:'([^'\\\n]*)'|"([^"\\\n]*)")\]""")


@dataclass(frozen=True, slots=True)
class Ref:
    """One reference: ``scope`` (one of :data:`SCOPES`), ``items`` (keys and indices) and its column."""

    scope: str
    items: tuple[Item, ...]
    col: int = 0

    def text(self) -> str:
        """The reference as written canonically, without the dagger: ``agent.cart['my key'][0]``."""
        out = self.scope
        for item in self.items:
            if isinstance(item, int):
                out += f"[{item}]"
            elif _NAME.fullmatch(item):
                out += f".{item}"
            else:
                out += f"[{item!r}]"
        return out


@dataclass(frozen=True, slots=True)
class Or:
    """``a || b || …``: the first operand that exists (input side); success / failure (output side)."""

    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class And:
    """``a && b && …``: every operand must exist, the last gives the value (input side); fan-out (output)."""

    operands: tuple[Expr, ...]


Expr = Ref | Or | And


#: What may stand before the dagger that starts a reference expression: white space and opening parentheses.
_START = re.compile(f"[ \t\r\n(]*{DAGGER}")


def is_reference(text: str) -> bool:
    """True when the string ``text`` starts with a dagger (white space and opening parentheses before it
    aside), so that it must be a whole reference expression (SPEC 8); any other string is plain text, a
    dagger inside it included. Linear in the text's leading white space and parentheses; ``text`` is a
    ``str`` (the callers' dynamic values)."""
    return _START.match(text) is not None


def refs_of(expr: Expr) -> list[Ref]:
    """Every :class:`Ref` of ``expr``, in the order written."""
    if isinstance(expr, Ref):
        return [expr]
    return [r for op in expr.operands for r in refs_of(op)]


def show(expr: Expr) -> str:
    """``expr`` written back as text (daggers, operators with one space, parentheses where nested)."""
    if isinstance(expr, Ref):
        return DAGGER + expr.text()
    sep = " || " if isinstance(expr, Or) else " && "
    return sep.join(show(op) if isinstance(op, Ref) else f"({show(op)})" for op in expr.operands)


def _error(code: str, message: str, col: int) -> S2OError:
    return S2OError(code, message, line=1, col=col, stage="validate")


# -- tokens ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ref", "||", "&&", "(", ")"
    col: int
    ref: Ref | None = None


def _tokens(text: str) -> list[_Token]:
    """The tokens of ``text``; raises the coded error of the first character that is none."""
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif ch == DAGGER:
            ref, i = _ref(text, i)
            out.append(_Token("ref", ref.col, ref))
        elif text.startswith(("||", "&&"), i):
            out.append(_Token(text[i:i + 2], i))
            i += 2
        elif ch in "|&":
            raise _error("ref-operator", f"a single '{ch}' is no operator: write '{ch * 2}'", i)
        elif ch in "()":
            out.append(_Token(ch, i))
            i += 1
        else:
            raise _error("ref-text", f"plain text beside a {DAGGER} reference: a field that starts with {DAGGER} must "
                         f"be made only of references joined by || or && (found {text[i:i + 12]!r})", i)
    return out


def _ref(text: str, start: int) -> tuple[Ref, int]:
    """The reference starting at the dagger at ``start``, and the index after it."""
    i = start + 1
    m = _NAME.match(text, i)
    if m is None:
        raise _error("ref-scope", f"{DAGGER} must be followed by a scope: {', '.join(SCOPES)}", i)
    scope = m.group()
    i = m.end()
    if scope == "sys":
        end = i + len(".inputs")
        if not text.startswith(".inputs", i) or (end < len(text) and (text[end].isalnum() or text[end] == "_")):
            raise _error("ref-scope", "the only sys scope a reference reads is sys.inputs", start + 1)
        scope, i = "sys.inputs", end
    elif scope not in SCOPES:
        raise _error("ref-scope", f"unknown scope '{scope}'; scopes are {', '.join(SCOPES)}", start + 1)
    items: list[Item] = []
    while i < len(text) and text[i] in ".[":
        item, i = _item(text, i)
        items.append(item)
    if scope in VARIABLE_SCOPES and (not items or not isinstance(items[0], str)):
        raise _error("ref-path", f"{DAGGER}{scope} needs a variable name: {DAGGER}{scope}.name", start)
    return Ref(scope, tuple(items), start), i


def _item(text: str, i: int) -> tuple[Item, int]:
    """One ``.name``, ``['key']`` or ``[index]`` at ``i``; the item and the index after it."""
    if text[i] == ".":
        m = _NAME.match(text, i + 1)
        if m is None:
            raise _error("ref-path", "'.' must be followed by a name (letters, digits, '_')", i)
        return _checked_key(m.group(), i + 1), m.end()
    m = _INDEX.match(text, i)
    if m is not None:
        return int(m.group(1)), m.end()
    m = _KEY.match(text, i)
    if m is None:
        raise _error("ref-path", "'[' must hold a quoted key ['key'] or a list index [0]", i)
    key = m.group(1) if m.group(1) is not None else m.group(2)
    return _checked_key(key, i + 2), m.end()


def _checked_key(key: str, col: int) -> str:
    if key.startswith("_"):
        raise _error("underscore", f"names starting with '_' are not allowed: '{key}'", col)
    return key


# -- the parser ---------------------------------------------------------------------------------------
class _Parser:
    """Recursive descent over the tokens, with a depth bound on parentheses."""

    def __init__(self, tokens: list[_Token], length: int) -> None:
        self.tokens = tokens
        self.pos = 0
        self.length = length

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def expr(self, depth: int) -> Expr:
        first = self.operand(depth)
        operands = [first]
        op: str | None = None
        while (tok := self.peek()) is not None and tok.kind in ("||", "&&"):
            if op is not None and tok.kind != op:
                raise _error("ref-mixed", f"'{op}' and '{tok.kind}' are mixed without parentheses: "
                             f"group with ( ) to say which comes first", tok.col)
            op = tok.kind
            self.pos += 1
            operands.append(self.operand(depth, after=tok))
        if op is None:
            return first
        return Or(tuple(operands)) if op == "||" else And(tuple(operands))

    def operand(self, depth: int, after: _Token | None = None) -> Expr:
        tok = self.peek()
        if tok is None or tok.kind in ("||", "&&", ")"):
            raise self._missing(tok, after)
        self.pos += 1
        if tok.kind == "ref":
            assert tok.ref is not None
            return tok.ref
        # "(": a group
        if depth >= MAX_REFERENCE_DEPTH:
            raise _error("too-deep", f"parentheses nest more than {MAX_REFERENCE_DEPTH} levels", tok.col)
        inner = self.expr(depth + 1)
        close = self.peek()
        if close is None or close.kind != ")":
            raise _error("ref-paren", "'(' is never closed", tok.col)
        self.pos += 1
        return inner

    def _missing(self, tok: _Token | None, after: _Token | None) -> S2OError:
        """The error for an operand that is not there: an empty side, empty or unbalanced parentheses."""
        if after is not None:
            return _error("ref-empty", f"'{after.kind}' needs a reference on each side", after.col)
        opened = self.tokens[self.pos - 1] if self.pos > 0 and self.tokens[self.pos - 1].kind == "(" else None
        if tok is None:
            if opened is not None:
                return _error("ref-paren", "'(' is never closed", opened.col)
            return _error("ref-empty", "a reference is missing", self.length)
        if tok.kind == ")":
            if opened is not None:
                return _error("ref-empty", "empty parentheses", opened.col)
            return _error("ref-paren", "')' closes nothing", tok.col)
        return _error("ref-empty", f"'{tok.kind}' needs a reference on each side", tok.col)


@functools.lru_cache(maxsize=REFERENCE_CACHE)
def parse_reference(text: str) -> Expr:
    """The reference expression ``text`` as a tree; raises :class:`S2OError` (see the module doc).

    ``text`` is a field's whole string value; call it only when :func:`is_reference` is true.
    """
    try:
        tokens = _tokens(text)
        if not tokens:
            raise _error("ref-empty", "a reference is missing", 0)
        p = _Parser(tokens, len(text))
        expr = p.expr(0)
        rest = p.peek()
        if rest is not None:
            if rest.kind == ")":
                raise _error("ref-paren", "')' closes nothing", rest.col)
            raise _error("ref-text", "a reference must be joined to the one before it by || or &&", rest.col)
    except S2OError as exc:
        raise exc.with_context(source=text) from None
    return expr
