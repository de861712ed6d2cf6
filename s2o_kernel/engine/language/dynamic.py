"""Dynamic strings (SPEC section 1).

A JSON string value is an expression exactly when the whole string starts
with ``{`` and ends with ``}``. The expression is the text between the braces,
stripped of surrounding white space; when that text does not parse as one
expression but the whole value does (a dict display such as ``{"a": 1}``), the
whole value is the expression. Everything else is plain text, kept as is.
"""

from __future__ import annotations

import ast
import functools

from ...bounds import EXPRESSION_CACHE


def is_dynamic(text: str) -> bool:
    """True when ``text`` is an expression: it starts with ``{`` and ends with ``}``."""
    return len(text) >= 2 and text[0] == "{" and text[-1] == "}"


def _parses(source: str) -> bool:
    try:
        ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


@functools.lru_cache(maxsize=EXPRESSION_CACHE)
def expression_of(text: str) -> tuple[str, int] | None:
    """The expression a dynamic string stands for, or ``None`` for plain text.

    Returns ``(source, offset)``: the expression text and the character offset
    of its first character inside ``text`` (so a position inside the
    expression can be mapped back to the string). The inner reading
    (``"{ x }"`` → ``x``) wins; the whole value (``{"a": 1}``) is used only
    when the inner text does not parse and the whole does. When neither
    parses, the inner reading is returned so that validation reports the
    syntax error against what the author most likely meant.

    A pure function of ``text``, cached (4096 texts): a loop's body asks again on every pass.
    """
    if not is_dynamic(text):
        return None
    inner = text[1:-1]
    stripped = inner.strip()
    lead = len(inner) - len(inner.lstrip())
    if stripped == "":
        # "{}" and "{ }" are the empty dict display.
        return text, 0
    if _parses(stripped):
        return stripped, 1 + lead
    if _parses(text):
        return text, 0
    return stripped, 1 + lead
