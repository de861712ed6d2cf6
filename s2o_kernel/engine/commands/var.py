"""``var``: set local, agent and conversation variables in order (SPEC 7).

Fields are ``target → dynamic value``; targets are ``x``, ``agent.x``, ``conv.x``, optionally followed
by ``[key]`` / ``[index]`` items (an item of a variable that is not set is ``not-set``; an index one
past the end appends). Later fields see earlier ones as ``command.<name>``. Agent and conversation
values must be JSON (``not-json``). ``var`` reads ``onError`` among its own fields.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from ...bounds import TARGET_CACHE
from ..errors import S2OError
from ..fragments.dataflow import ref_path
from ..fragments.tree import Command, join
from ..language.rules import RESERVED_NAMES
from ..policy import reach
from ..policy.values import exception_text
from ..run.state import SessionState
from ..run.undo import restorable
from .protocols import Interpreter, Parser
from .spec import CommandSpec

#: One parsed field of a ``var``: (target text, JSON path, raw value, scope, name, item path).
Target = tuple[str, str, Any, str, str, list[Any]]


def parse_target(target: str) -> tuple[str, str, list[Any]]:
    """Split a ``var`` target into ``(scope, name, item path)``.

    ``x`` → ``("local", "x", [])``; ``agent.cart['items'][0]`` → ``("agent", "cart", ["items", 0])``.
    Raises ``S2OError`` (``fragment`` or ``underscore``) for anything else. Cached: a pure function of
    ``target`` (a fragment is checked again before every run).
    """
    if type(target) is not str:  # a key of a dict made in Python; hashed next, by the cache
        raise S2OError("fragment", f"a var target is text, not {type(target).__name__}", stage="validate")
    scope, name, items = _parse_target(target)
    return scope, name, list(items)


@functools.lru_cache(maxsize=TARGET_CACHE)
def _parse_target(target: str) -> tuple[str, str, tuple[Any, ...]]:
    bad = S2OError("fragment", f"'{target}' is not a var target: use x, agent.x, conv.x, "
                   "optionally followed by [key] or [index]", stage="validate")
    if not target.isascii():  # before the parse, which folds look-alikes (NFKC: 'ｐｒｉｃｅ' is 'price')
        at = next(i for i, ch in enumerate(target) if not ch.isascii())
        raise S2OError("non-ascii", f"the character {target[at]!r} is not ASCII: a var target names a variable "
                       "with ASCII letters, digits and '_' (a look-alike would name another one)",
                       line=1, col=at, stage="validate", source=target)
    try:
        node = ast.parse(target, mode="eval").body
    except SyntaxError:
        raise bad from None
    items: list[Any] = []
    while isinstance(node, ast.Subscript):
        key = node.slice
        if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, int))
                and not isinstance(key.value, bool)):
            raise bad
        items.append(key.value)
        node = node.value
    items.reverse()
    if isinstance(node, ast.Name):
        scope, name = "local", node.id
        if name in RESERVED_NAMES:
            raise S2OError("fragment", f"'{name}' is a runtime namespace, not a variable", stage="validate")
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("agent", "conv"):
        scope, name = node.value.id, node.attr
    else:
        raise bad
    if name.startswith("_") or any(isinstance(k, str) and k.startswith("_") for k in items):
        raise S2OError("underscore", f"names starting with '_' are not allowed: '{target}'", stage="validate")
    return scope, name, tuple(items)


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check each target and value; a local target is known to the commands after it."""
    if not isinstance(fields, dict) or not [k for k in fields if k != "onError"]:
        p.error("fragment", "var takes an object of target → value", cmd.path)
        return None
    if "onError" in fields:
        cmd.on_error = p.commands(fields["onError"], join(cmd.path, "onError"), known, in_loop)
    targets: list[Target] = []
    earlier: list[str] = []
    for target, value in fields.items():
        if target == "onError":
            continue
        fpath = join(cmd.path, target)
        try:
            scope, name, items = parse_target(target)
        except S2OError as exc:
            p.errors.append(exc.with_context(path=fpath))
            continue
        if scope == "local" and items and name not in known:
            p.error("not-set", f"'{name}' has not been set, so '{target}' cannot be set", fpath)
        p.value(value, fpath, known, earlier)
        if scope == "local":
            known.add(name)
        earlier.append(name)
        targets.append((target, fpath, value, scope, name, items))
        p.access("write", ref_path(scope, (name, *items)), fpath, "var")
    cmd.model = targets
    # one assignment of a whole variable, the last thing it does (see Command.atomic); an item target writes
    # the item before the variable's value is checked whole, which may refuse it
    cmd.atomic = len(targets) == 1 and not targets[0][5]
    cmd.fields = {k: v for k, v in fields.items() if k != "onError"}
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Evaluate and assign each field in order."""
    done: dict[str, Any] = {}
    for target, path, raw, scope, name, items in cmd.model:
        value = await it.value(raw, path, done)
        store(it, (target, path, raw, scope, name, items), value)
        done[name] = value


def run_sync(it: Interpreter, cmd: Command) -> None:
    """:func:`run` for a sync ``var`` (no field awaits)."""
    done: dict[str, Any] = {}
    for field in cmd.model:
        value = it.value_sync(field[2], field[1], done)
        store(it, field, value)
        done[field[4]] = value


def store(it: Interpreter, field: Target, value: Any) -> None:
    """Assign the evaluated ``value`` of the parsed ``field``; errors carry the field's path."""
    target, path, _, scope, name, items = field
    try:
        assign(it.session, scope, name, items, value, target)
    except S2OError as exc:
        exc.stage = "run"
        raise exc.with_context(path=path) from None


def assign(session: SessionState, scope: str, name: str, items: list[Any], value: Any, target: str) -> None:
    """Set ``value`` at ``target`` (``scope``, ``name`` and item path as :func:`parse_target` splits it)."""
    if not items and scope == "local":
        session.set_local(name, value)
        return
    if items:
        if not session.exists(scope, name):
            shown = f"'{name}'" if scope == "local" else f"{scope}.{name}"
            raise S2OError("not-set", f"{shown} has not been set, so '{target}' cannot be set")
        reach.check_item(scope, name, value)  # before the live holder changes
        root = session.variable(scope, name)
        holder = root
        try:
            for key in items[:-1]:
                if isinstance(holder, dict) and key not in holder:  # no defaultdict's __missing__: a new key
                    raise KeyError(key)  # the journal does not know would stay if the command failed
                holder = holder[key]
            if not restorable(holder):
                raise S2OError("runtime", f"TypeError: cannot set {target}: var sets items of lists and dicts (and "
                               f"of deque, OrderedDict, defaultdict, Counter, UserList, UserDict), not of "
                               f"{type(holder).__name__}", python_type="TypeError")
            if isinstance(holder, list) and items[-1] == len(holder):
                if scope == "local":
                    session.items_written.note(holder, items[-1], value)  # put back if the command fails
                holder.append(value)
            else:
                if isinstance(holder, list) and not -len(holder) <= items[-1] < len(holder):
                    raise IndexError("list index out of range")
                if scope == "local":
                    session.items_written.note(holder, items[-1], value)
                holder[items[-1]] = value
        except S2OError:
            raise
        except Exception as exc:  # a missing key, an index out of range, a holder that refuses items
            raise S2OError("runtime", f"{type(exc).__name__}: cannot set {target}: {exception_text(exc)}",
                           python_type=type(exc).__name__) from None
        value = root
    session.set_variable(scope, name, value)


VAR = CommandSpec("var", parse, run, parses_on_error=True, run_sync=run_sync)
