"""Introspection for tools: completion candidates and descriptions of names (SPEC 9).

Used by the kernel's completion and inspection through the session's
``completion_names``, ``member_names`` and ``describe`` methods; nothing here
runs an expression.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .allowlist import Namespace, namespace_members
from .denylist import name_violation

if TYPE_CHECKING:
    from .session import Session


def completion_names(session: Session) -> dict[str, str]:
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


def member_names(session: Session, dotted: str) -> list[str]:
    """Public members after ``dotted.`` that an expression may read (empty when unknown)."""
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


def describe(session: Session, dotted: str) -> str | None:
    """A short description of a granted name or a variable: signature and doc, or type and value."""
    parts = dotted.split(".")
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
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
