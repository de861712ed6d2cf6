"""Depth bounds of a fragment (SPEC 7, 12): deeply nested JSON or command trees are ``too-deep``, never a crash.

Three bounds, all checked before anything runs, so that neither the parser nor the interpreter (both
walk the tree recursively) can exhaust Python's stack:

* **JSON depth**: a fragment whose JSON nests deeper than :data:`~..scopes.MAX_JSON_DEPTH` levels
  (objects and lists, counted from the top) is refused by :func:`json_depth_error`, an iterative
  walk, before the fragment is measured or parsed. The error's path is the first value past the
  bound (``var.x[0][0]…``). The same walk refuses (``fragment``) what is not JSON in a fragment a
  library made in Python: a key that is not a ``str``, a tuple, a set, any other object, a number
  that is not finite.
* **Command nesting**: a command list inside a command (``then``, ``else``, a loop's ``commands``, a
  ``parallel`` branch, an ``onError`` handler) is one level; the parser refuses more than
  :data:`MAX_NESTING` levels at the list that goes past it.
* **Nesting through calls**: a ``call`` at level *L* runs the callee's commands from level *L* + 1, so
  a chain of calls adds up. :func:`nesting_errors` computes, for every function, the deepest level
  its run can reach through the functions it calls (iteratively, whatever the length of the chain)
  and refuses a function past :data:`MAX_NESTING`, naming the chain.

The interpreter counts the same levels while it runs (:mod:`.interpreter`), so a run that validation
let through cannot go deeper; if it ever did, it stops with ``too-deep`` at run time.
"""

from __future__ import annotations

import math
from typing import Any

from ...bounds import JSON_INT_LIMIT, MAX_JSON_DEPTH, MAX_NESTING
from ..errors import S2OError
from ..policy.values import safe_repr
from ..run.scopes import Trail
from .tree import Command, Function, join

#: The exact types of JSON's scalars as Python's ``json`` parses them (a ``float`` must be finite too).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_depth_error(value: Any, limit: int = MAX_JSON_DEPTH, max_values: int | None = None) -> S2OError | None:
    """The first problem of ``value`` as a fragment's JSON, else ``None``: ``too-long`` past ``max_values``
    values (each value takes a character of JSON text at least, so a definition of ``limits.definition_length``
    characters holds no more; a value made in Python may hold one list twice, a thousand times over, which
    no JSON text does), ``too-deep`` (stage ``validate``) at a value nested deeper than ``limit`` levels, or
    ``fragment`` at a value that is not JSON (see the module docstring).

    Only exact ``list`` and ``dict`` nest; the walk is iterative and stops past ``max_values``. A first walk
    only checks (no path text per value); the paths are built when something is wrong.
    """
    within = _json_within(value, limit, max_values)
    if within is None:
        return S2OError("too-long", f"the definition holds more than {max_values} values, so it is longer than the "
                        f"limit of {max_values} characters (limits.definition_length)", stage="validate")
    if within:
        return None
    # Where a value sits is kept as a trail (its holder's trail, its index or key), written out for the one
    # value at fault only: a path text per value made a long key over a long list cost their product.
    stack: list[tuple[Any, int, Trail]] = [(value, 0, None)]
    while stack:
        v, depth, trail = stack.pop()
        t = type(v)
        if t is not list and t is not dict:
            if t not in _SCALARS or (t is float and not math.isfinite(v)) or (t is int and _too_long(v)):
                shown = repr(v) if t is float else "an integer of over 4,000 digits" if t is int else f"a {t.__name__}"
                return S2OError("fragment", f"the fragment is not JSON: {shown} (JSON holds objects with text keys, "
                                "lists, text, finite numbers, true, false and null)", path=_path(trail),
                                stage="validate")
            continue
        if depth >= limit:
            return S2OError("too-deep", f"the fragment's JSON nests deeper than {limit} levels", path=_path(trail),
                            stage="validate")
        if t is list:
            stack.extend((item, depth + 1, (trail, i)) for i, item in reversed(list(enumerate(v))))
            continue
        odd = next((key for key in v if type(key) is not str), _NONE)
        if odd is not _NONE:
            return S2OError("fragment", f"the fragment is not JSON: a key of type {type(odd).__name__} "
                            f"({safe_repr(odd, 40)}); JSON object keys are text", path=_path(trail), stage="validate")
        stack.extend((item, depth + 1, (trail, key)) for key, item in reversed(list(v.items())))
    return None


def _too_long(number: int) -> bool:
    """An integer past CPython's conversion to text (4,300 digits): ``json.dumps`` raises for it."""
    return not -JSON_INT_LIMIT < number < JSON_INT_LIMIT


def _path(trail: Trail) -> str | None:
    """The JSON path of ``trail`` (``var.x[0]``), each key cut to 60 characters; ``None`` for the top."""
    steps: list[int | str] = []
    while trail is not None:
        trail, step = trail
        steps.append(step)
    path = ""
    for step in reversed(steps):
        path = f"{path}[{step}]" if type(step) is int else join(path, str(step)[:60])
    return path or None


_NONE = object()


def check_fragment_json(value: Any, max_values: int | None = None) -> None:
    """Raise :func:`json_depth_error`'s error for ``value``, if it has one."""
    wrong = json_depth_error(value, max_values=max_values)
    if wrong is not None:
        raise wrong


def _json_within(value: Any, limit: int, max_values: int | None) -> bool | None:
    """Whether ``value`` is JSON (exact types, text keys, finite numbers) with no ``list`` or ``dict`` sitting
    ``limit`` levels deep or more (iterative); ``None`` as soon as it has held more than ``max_values`` values."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    left = max_values if max_values is not None else -1
    while stack:
        v, depth = stack.pop()
        t = type(v)
        if t is list:
            items = v
        elif t is dict:
            if not all(type(key) is str for key in v):
                return False
            items = v.values()
        elif _bad_scalar(v):
            return False
        else:
            continue
        if depth >= limit:
            return False
        if left >= 0:
            left -= len(items)
            if left < 0:
                return None
        for item in items:
            t = type(item)
            if t is list or t is dict:
                stack.append((item, depth + 1))
            elif t is not str and _bad_scalar(item):
                return False
    return True


def _bad_scalar(v: Any) -> bool:
    """``v`` is not a JSON scalar as :func:`json_depth_error` reads one."""
    t = type(v)
    if t is float:
        return not math.isfinite(v)
    if t is int:
        return _too_long(v)
    return t not in _SCALARS


def nesting_error(path: str) -> S2OError:
    """``too-deep`` for a command list at ``path`` past :data:`MAX_NESTING` levels."""
    return S2OError("too-deep", f"commands nest more than {MAX_NESTING} levels deep (commands inside "
                    "then, else, loops, parallel branches and onError)", path=path, stage="validate")


def _lists(cmd: Command) -> list[list[Command]]:
    out = [*cmd.children.values(), *cmd.branches]
    if cmd.on_error is not None:
        out.append(cmd.on_error)
    return out


def _callees(cmd: Command) -> list[str]:
    """Functions ``cmd`` runs: a ``call``'s function, the functions an ``llm`` command offers as tools."""
    if cmd.model is None:
        return []
    if cmd.name == "call":
        return [cmd.model.function]
    if cmd.name == "llm":
        return list(cmd.model.functions)
    return []


def profile(fn: Function) -> tuple[int, list[tuple[int, str, str]]]:
    """``(deepest level, calls)`` of ``fn``'s own commands; ``calls`` are ``(level, callee, path)``.

    The body's commands (and the function's ``onError``) are level 1.
    """
    deepest = 0
    calls: list[tuple[int, str, str]] = []
    stack: list[tuple[list[Command], int]] = [(fn.commands, 1)]
    if fn.on_error is not None:
        stack.append((fn.on_error, 1))
    while stack:
        commands, level = stack.pop()
        for cmd in commands:
            deepest = max(deepest, level)
            calls.extend((level, callee, cmd.path) for callee in _callees(cmd))
            stack.extend((inner, level + 1) for inner in _lists(cmd) if inner)
    return deepest, calls


def _depth_of(start: str, profiles: dict[str, tuple[int, list[tuple[int, str, str]]]],
              depths: dict[str, tuple[int, list[str]]]) -> None:
    """Fill ``depths[name] = (deepest level, chain of names)`` for ``start`` and what it calls (iterative)."""
    on_path: set[str] = set()
    stack: list[str] = [start]
    while stack:
        name = stack[-1]
        if name in depths:
            stack.pop()
            continue
        own, calls = profiles[name]
        waiting = [c for _, c, _ in calls if c in profiles and c not in depths and c not in on_path]
        if waiting and name not in on_path:
            on_path.add(name)
            stack.extend(waiting)
            continue
        on_path.discard(name)
        best: tuple[int, list[str]] = (own, [name])
        for level, callee, _path in calls:
            if callee in depths and level + depths[callee][0] > best[0]:
                best = (level + depths[callee][0], [name, *depths[callee][1]])
        depths[name] = best
        stack.pop()


def nesting_errors(functions: dict[str, Function], body: Function) -> list[S2OError]:
    """``too-deep`` for ``body`` and each function no other calls whose run, through its calls, nests past
    :data:`MAX_NESTING` (a function called by others nests less deeply than its callers, which are reported).

    ``functions`` are every function ``call`` may reach (recursion among them was refused before;
    a call that would close a cycle is not followed). The error's path is the function's.
    """
    profiles = {name: profile(fn) for name, fn in functions.items()}
    profiles.setdefault(body.name, profile(body))
    called = {callee for _, calls in profiles.values() for _, callee, _ in calls}
    depths: dict[str, tuple[int, list[str]]] = {}
    errors = []
    roots = [body, *(fn for name, fn in functions.items() if name not in called and fn is not body)]
    for fn in roots:
        _depth_of(fn.name, profiles, depths)
        level, chain = depths[fn.name]
        if level > MAX_NESTING:
            shown = chain if len(chain) <= 8 else [*chain[:4], "…", *chain[-3:]]
            through = f" through calls ({' → '.join(shown)})" if len(chain) > 1 else ""
            errors.append(S2OError("too-deep", f"commands nest {level} levels deep{through}; the limit is "
                                   f"{MAX_NESTING}", path=fn.path or None, stage="validate"))
    return errors
