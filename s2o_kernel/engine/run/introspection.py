"""Introspection for tools: completion candidates and descriptions of names (SPEC 9).

Used by the kernel's completion and inspection through the session's
``completion_names``, ``member_names`` and ``describe`` methods; nothing here
runs an expression.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from ...bounds import LITERAL_LENGTH
from ..policy.allowlist import Namespace, namespace_members
from ..policy.denylist import name_violation
from ..policy.written import too_large_text, too_large_to_write
from .state import SessionState


def completion_names(session: SessionState) -> dict[str, str]:
    """Names an expression may start with, name → kind (``variable``, ``namespace``, ``module``,
    ``class``, ``function``, ``keyword``)."""
    out: dict[str, str] = {}
    for name, obj in session.engine.allowlist.names.items():
        out[name] = _kind(obj)
    for name in ("agent", "conv", "sys", "const"):
        out[name] = "namespace"
    for name in session.locals:
        out[name] = "variable"
    for word in ("await", "and", "or", "not", "in", "is", "if", "else", "for", "async", "True", "False", "None"):
        out.setdefault(word, "keyword")
    return out


#: Types of the literals whose members :func:`member_names` lists (``"a,b".split``, ``[1].count``).
LITERAL_TYPES = frozenset({str, bytes, list, tuple, dict, set})


def member_names(session: SessionState, dotted: str) -> list[str]:
    """Public members after ``dotted.`` that an expression may read (empty when unknown). ``dotted`` is a
    dotted name, or the text of a literal of :data:`LITERAL_TYPES` (``'a,b'``, ``[1, 2]``; at most
    :data:`LITERAL_LENGTH` characters, read by ``ast.literal_eval``, never run): its type's members."""
    literal = _literal_type(dotted)
    if literal is not None:
        return sorted(n for n in dir(literal) if name_violation(n) is None)
    parts = dotted.split(".")
    head = parts[0]
    if len(parts) == 1:
        if head == "agent":
            return sorted(session.agent_vars)
        if head == "conv":
            return sorted(session.conv_vars)
        if head == "const":
            return sorted(session.engine.settings.const)
        if head == "sys":
            return sorted({"inputs", "query", "secret", "exists", *session.engine.settings.sys.enabled()})
    obj = session.engine.allowlist.lookup(dotted)
    if obj is None and head in session.locals and len(parts) == 1:
        obj = session.variable("local", head)
    if obj is None:
        return []
    if isinstance(obj, Namespace):
        return sorted(namespace_members(obj))
    names = dir(obj if isinstance(obj, type) else type(obj))
    return sorted(n for n in names if name_violation(n) is None)


def _literal_type(text: str) -> type | None:
    """The type of the literal ``text`` when it is one of :data:`LITERAL_TYPES`, else ``None``."""
    if type(text) is not str or not text or text[0] not in "'\"[({b" or len(text) > LITERAL_LENGTH:
        return None
    try:
        kind = type(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    return kind if kind in LITERAL_TYPES else None


#: What ``name?`` says of each runtime namespace (SPEC 5) before listing its members.
_RUNTIME = {
    "agent": "agent variables, kept with the conversation; set with var agent.NAME",
    "conv": "conversation variables, shared by every agent; set with var conv.NAME",
    "sys": "read-only runtime values; sys.exists(scope, name) asks whether a variable is set",
    "const": "read-only constants of the agent (the settings' [const], %sys)",
}


def describe(session: SessionState, dotted: str) -> str | None:
    """A short description of a granted name, a variable or a runtime namespace (SPEC 5, 9):
    signature and doc, type and value, or what the namespace holds and its members."""
    parts = dotted.split(".")
    if len(parts) == 1 and parts[0] in _RUNTIME and parts[0] not in session.locals:
        members = ", ".join(member_names(session, parts[0])) or "(none set)"
        return f"{dotted}: {_RUNTIME[parts[0]]}\nmembers: {members}"
    if parts[0] in ("agent", "conv") and len(parts) == 2:
        if session.exists(parts[0], parts[1]):
            v = session.variable(parts[0], parts[1])
            return f"{dotted}: {type(v).__name__} = {_short_repr(v)}"
        return None
    if len(parts) == 1 and parts[0] in session.locals:
        v = session.variable("local", parts[0])
        return f"{dotted}: {type(v).__name__} = {_short_repr(v)}"
    obj = session.engine.allowlist.lookup(dotted)
    if obj is None:
        return None
    if isinstance(obj, Namespace):
        members = ", ".join(sorted(namespace_members(obj)))
        return f"{dotted}: granted module\nmembers: {members}"
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        sig = ""
    doc = inspect.getdoc(obj) or ""
    return f"{dotted}{sig}\n\n{doc}".strip()


def _kind(obj: Any) -> str:
    if isinstance(obj, Namespace):
        return "module"
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "function"
    return "variable"


def _short_repr(value: Any, limit: int = 200) -> str:
    if too_large_to_write(value):  # its repr would never end (written.py)
        return too_large_text(value)
    try:
        text = repr(value)
    except Exception as exc:  # an int too large to print, a failing __repr__
        return f"<{type(value).__name__} object: repr failed with {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
