"""Reading and writing reference expressions against a session while a fragment runs (SPEC 8).

Reading (:func:`read`, an input field):

* ``a || b`` is the first operand that **exists**; ``0``, ``''``, ``None``, ``[]`` and ``{}`` are values;
* ``a && b`` needs every operand to exist and is the last one's value;
* when the whole expression has no value the field fails with ``not-set``, whose message and
  ``details["missing"]`` name the missing paths.

A reference exists when its variable is set (``local``: a local of the running function; ``agent``,
``conv``: a variable of that scope, read as a copy with the JSON rules of expressions; ``sys.inputs``:
the run's inputs; ``result``: set by a command earlier) and each item is there: a key of a ``dict`` or
an index ``0 <= i < len`` of a ``list`` or ``tuple``. Nothing else is descended into (no attributes, no
``__getitem__`` of other types), so reading never runs code of a value.

Writing (:func:`write`, an ``outputPath`` target): ``local``, ``agent`` or ``conv``; missing dict levels
are created (a list when the next item is an index); an index equal to the list's length appends;
agent and conversation values keep the JSON-only rule (``not-json``). A holder of another type, an
index past the end, a key into a list or an index into a dict is a ``runtime`` error naming the path.
"""

from __future__ import annotations

from typing import Any

from ..errors import S2OError
from ..language.references import DAGGER, And, Expr, Item, Or, Ref
from ..policy import reach
from ..run.scopes import SysScope
from ..run.state import SessionState

_MISSING = object()


def _lookup(session: SessionState, ref: Ref) -> Any:
    """The value ``ref`` names, or the sentinel ``_MISSING`` when it does not exist (see the module doc)."""
    value = _root(session, ref)
    items = ref.items[1:] if ref.scope in ("local", "agent", "conv") else ref.items
    for item in items:
        if value is _MISSING:
            break
        value = _child(value, item)
    return value


def _root(session: SessionState, ref: Ref) -> Any:
    if ref.scope in ("local", "agent", "conv"):
        name = ref.items[0]
        assert isinstance(name, str)
        return session.variable(ref.scope, name) if session.exists(ref.scope, name) else _MISSING
    namespace = session.namespace()
    if ref.scope == "result":
        return namespace.get("result", _MISSING)
    sys_scope = namespace.get("sys")
    return sys_scope.inputs if type(sys_scope) is SysScope else {}


def _child(holder: Any, item: Item) -> Any:
    if isinstance(item, str):
        if isinstance(holder, dict) and dict.__contains__(holder, item):
            return dict.__getitem__(holder, item)
        return _MISSING
    if isinstance(holder, list) and 0 <= item < list.__len__(holder):
        return list.__getitem__(holder, item)
    if isinstance(holder, tuple) and 0 <= item < tuple.__len__(holder):
        return tuple.__getitem__(holder, item)
    return _MISSING


def _resolve(session: SessionState, expr: Expr) -> tuple[Any, list[str]]:
    """``(value or _MISSING, missing paths)`` of ``expr``."""
    if isinstance(expr, Ref):
        value = _lookup(session, expr)
        return value, ([DAGGER + expr.text()] if value is _MISSING else [])
    missing: list[str] = []
    found: Any = _MISSING
    for operand in expr.operands:
        found, gone = _resolve(session, operand)
        missing.extend(gone)
        if isinstance(expr, Or) and found is not _MISSING:
            return found, []
        if isinstance(expr, And) and found is _MISSING:
            return _MISSING, missing
    return found, missing


def read(session: SessionState, expr: Expr, text: str) -> Any:
    """The value of the reference expression ``expr`` (written ``text``); ``not-set`` when it has none."""
    value, missing = _resolve(session, expr)
    if value is not _MISSING:
        return value
    if isinstance(expr, Or):
        message = f"none of the alternatives exists: {', '.join(missing)}"
    elif isinstance(expr, And):
        message = f"the gate needs {missing[0]}, which does not exist"
    else:
        message = f"{missing[0]} does not exist"
    raise S2OError("not-set", f"{message} (in {text!r})", details={"missing": missing})


def write(session: SessionState, ref: Ref, value: Any) -> None:
    """Set ``value`` at ``ref`` (scope ``local``, ``agent`` or ``conv``), creating missing dict levels."""
    name = ref.items[0]
    assert isinstance(name, str)
    path = ref.items[1:]
    if not path:
        session.set_variable(ref.scope, name, value)
        return
    reach.check_item(ref.scope, name, value)  # before the live holder changes
    root: Any = session.variable(ref.scope, name) if session.exists(ref.scope, name) else _new_level(path[0])
    holder: Any = root
    # a local's items are put back if the command fails; agent and conversation values are copies
    note = session.items_written.note if ref.scope == "local" else _no_note
    for i, item in enumerate(path):
        last = i == len(path) - 1
        _check_holder(holder, item, ref, i + 1)
        if isinstance(item, str):
            if last:
                note(holder, item, value)
                holder[item] = value
            elif item not in holder:
                level = _new_level(path[i + 1])
                note(holder, item, level)
                holder[item] = level
            holder = holder[item]
            continue
        if item > len(holder) or (item == len(holder) and not last):
            raise S2OError("runtime", f"IndexError: cannot write {DAGGER}{ref.text()}: index {item} is past the "
                           f"end of {_prefix(ref, i + 1)} (length {len(holder)})", python_type="IndexError")
        if item == len(holder):
            note(holder, item, value)
            holder.append(value)
        elif last:
            note(holder, item, value)
            holder[item] = value
        holder = holder[item]
    session.set_variable(ref.scope, name, root)


def _no_note(holder: Any, key: Any, value: Any) -> None:
    """:meth:`.undo.ItemJournal.note` for an agent or conversation variable: its holders are copies."""


def _new_level(item: Item) -> dict[str, Any] | list[Any]:
    return [] if isinstance(item, int) else {}


def _check_holder(holder: Any, item: Item, ref: Ref, depth: int) -> None:
    """Raise ``runtime`` unless ``holder`` is a dict (for a key) or a list (for an index)."""
    want = dict if isinstance(item, str) else list
    if type(holder) is not want:
        kind = "a dict (it is indexed by a key)" if want is dict else "a list (it is indexed by a number)"
        raise S2OError("runtime", f"TypeError: cannot write {DAGGER}{ref.text()}: {_prefix(ref, depth)} is "
                       f"{type(holder).__name__}, not {kind}", python_type="TypeError")


def _prefix(ref: Ref, depth: int) -> str:
    """The text of ``ref`` cut after its first ``depth`` items."""
    return Ref(ref.scope, ref.items[:depth]).text()


def targets(expr: Expr) -> tuple[list[Ref], list[Ref]]:
    """An ``outputPath``'s ``(targets on success, targets on failure)``: ``a && b`` → ``([a, b], [])``;
    ``a || b`` → ``([a], [b])``; each side of ``||`` may itself be a ``&&`` fan-out."""
    if isinstance(expr, Or):
        ok, failed = expr.operands
        return _fan_out(ok), _fan_out(failed)
    return _fan_out(expr), []


def _fan_out(expr: Expr) -> list[Ref]:
    if isinstance(expr, Ref):
        return [expr]
    return [r for op in expr.operands for r in _fan_out(op)]
