"""The text of an expression before the rules walk it: raw-text checks and the parse (SPEC 3, 12).

:func:`check_text` refuses text that is too long or not printable ASCII; :func:`parse` turns the text
into one ``ast.Expression`` (top-level ``await`` allowed) and turns every parser failure, including
``RecursionError`` and ``MemoryError``, into a coded error (``syntax``, ``too-deep``), with a hint when
the text is a statement rather than an expression.
"""

from __future__ import annotations

import ast
import contextlib
import re
import types
import warnings

from ..errors import S2OError

#: Any character that is not printable ASCII, tab, newline or carriage return.
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e\t\n\r]")

#: The filter ``warnings.simplefilter("ignore")`` puts first.
_IGNORE_ALL = ("ignore", None, Warning, None, 0)


def quiet() -> contextlib.AbstractContextManager[None]:
    """A context in which compiler warnings (``SyntaxWarning`` of odd literals) never reach the host's
    stderr; nothing to do when the caller already silenced every warning (the cold path nests this,
    and ``catch_warnings`` costs several µs)."""
    if warnings.filters and warnings.filters[0] == _IGNORE_ALL:
        return contextlib.nullcontext()
    return _Silenced()


class _Silenced(contextlib.AbstractContextManager[None]):
    """``catch_warnings()`` with every warning ignored inside."""

    def __enter__(self) -> None:
        self._saved = warnings.catch_warnings()
        self._saved.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: types.TracebackType | None) -> None:
        self._saved.__exit__(kind, value, tb)


def not_text(source: object) -> S2OError:
    """The ``syntax`` error for a ``source`` that is not exactly a ``str`` (an expression is text; a subclass
    could hash or compare as it likes): callers test ``type(source) is not str`` first."""
    return S2OError("syntax", f"an expression is text (a str), not {type(source).__name__}", stage="validate")


def check_text(source: str, definition_length: int) -> S2OError | None:
    """Checks on the raw text: :func:`not_text`, ``too-long`` past ``definition_length`` characters, and
    ``non-ascii`` (SPEC 3, 12); the first problem found, or ``None``."""
    if type(source) is not str:
        return not_text(source)
    if len(source) > definition_length:
        return S2OError("too-long", f"the expression is {len(source)} characters long; "
                        f"the limit is {definition_length}", stage="validate", source=None)
    if _NOT_PRINTABLE_ASCII.search(source) is None:  # the common case, at C speed
        return None
    for index, ch in enumerate(source):
        o = ord(ch)
        if 32 <= o <= 126 or ch in "\t\n\r":
            continue
        line = source.count("\n", 0, index) + 1
        col = index - (source.rfind("\n", 0, index) + 1)
        return S2OError("non-ascii",
                        f"the character {ch!r} is not printable ASCII; write it as '\\u{o:04x}'"
                        if o <= 0xFFFF else
                        f"the character {ch!r} is not printable ASCII; write it as '\\U{o:08x}'",
                        line=line, col=col, stage="validate", source=source)
    return None


def parse(source: str) -> ast.Expression:
    """Parse one expression (top-level ``await`` allowed); errors are ``syntax``/``too-deep``."""
    try:
        with quiet():  # SyntaxWarnings of odd literals must not reach the host's stderr
            return ast.parse(source, mode="eval", type_comments=False)
    except SyntaxError as exc:
        line = exc.lineno
        lines = source.splitlines() or [""]
        if exc.offset:
            col = exc.offset - 1
        else:  # the input ended too early: point just past its end
            line = len(lines)
            col = len(lines[-1])
        msg = exc.msg
        if msg.startswith("too many nested parentheses"):
            raise S2OError("too-deep", "the expression nests too deeply (too many nested parentheses)",
                           line=line, col=col, stage="validate", source=source) from None
        raise S2OError("syntax", msg + _statement_hint(source), line=line, col=col, stage="validate",
                       source=source) from None
    except (MemoryError, RecursionError):
        raise S2OError("too-deep", "the expression nests too deeply for the parser",
                       stage="validate", source=source) from None
    except ValueError as exc:  # e.g. NUL bytes on older versions
        raise S2OError("syntax", str(exc), stage="validate", source=source) from None


def _statement_hint(source: str) -> str:
    """A hint when ``source`` is a Python statement rather than an expression (``x = 1``, ``import os``)."""
    try:
        with quiet():
            body = ast.parse(source, mode="exec").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return ""
    if any(isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) for node in body):
        return ("; an expression cannot assign: set variables with a var command, "
                'for example {"var": {"x": 1}}')
    if len(body) > 1 or (body and not isinstance(body[0], ast.Expr)):
        return "; only one expression is allowed, not statements"
    return ""
