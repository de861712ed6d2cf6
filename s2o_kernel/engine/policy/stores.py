"""The store guard: what a run may keep in the session, where it is checked, and why that is enough (SPEC 12).

**What is guarded.** A value the session holds (a local, ``result``, anything a check of a local opens:
:func:`.values.check_value`'s standard containers by exact type, their subclasses, bound methods,
``partial``, lazy iterators, exceptions, standard-library instances) never holds what a ``var`` could not
set: a generator, coroutine, frame, code object, traceback, module, cell, metaclass, granted iterator or
refused object (:func:`.reach.check_kept`; SPEC 12: "no value returned, stored or shown … is or contains … a
generator"). Later reads of a variable are not checked again (``xs``, ``xs[1]``, ``row['k']`` return what
they hold), so this must hold after every run.

**Where.** A session's values change in three ways only. A ``var`` or ``Session.set_local`` sets a whole
value: checked there. An item target (``var`` of ``xs[0]``, ``outputPath``) writes into one: checked before
the write (:func:`.reach.check_item`). An expression changes one in place: it has no assignment, ``:=``,
``del`` or augmented store, so only by a *call*: ``xs.append(countdown(3))``, ``d.update(k=(c for c in s))``,
``heapq.heappush(heap, g)``, ``list.append(xs, g)``, ``[row.setdefault('g', g) for g in gens]``. Agent,
conversation, ``const`` and ``sys.inputs`` values are read as JSON copies and cannot be changed in place.
:func:`risky_arguments` finds, at validation, every call that may keep a value the expression made: one with a
*target* (its callee is a session value's method or a variable; another argument may be a session value or
an uncalled function; a ``*``/``**`` argument may spread into both) and an argument that may hold a made value
(a call's result, a comprehension, a comprehension's variable), or a keeper handed beside a maker. Those calls
run through :func:`.kept.guarded_store`, where the callee decides by exact type and identity: callees that
keep nothing run as they are, higher-order ones get their keeping callables wrapped, and everything else has
the named arguments checked before it runs (a consumed iterator item by item). A refusal ends the run with
``not-allowed`` at the call's line and column, and the target is as it was. A call of a granted builtin that
keeps nothing (:data:`KEEPS_NOTHING`: ``sum``, ``len``, ``zip``…) has no target and is not rewritten.

**Why that is enough.** A call can keep only what it is given: its arguments, its receiver, and what the
callables it is given return. Values the expression did not make are session values (checked when set) or
values reached through granted objects (checked by :mod:`.reach` as they are read). Made values reach a
keeping callee only through the arguments this module names, or through callables it hands over wrapped. So
nothing the check refuses is kept, and nothing is shown before the refusal: the run stops at the call, before
any later command prints, logs or returns the value.

**What is not covered.** Code of the host's that keeps values itself: a granted function's default argument
or module-level cache, an attribute of a granted object (``shared.items.append(g)``), a host function that
composes two callables it is given positionally. Host objects are not opened by the values check; what is
read back from them is checked by :mod:`.reach`. Grant such code only if it is meant for it.

**Why not one check of the state at the run's end** (measured for issue 29; docs/performance.md, "The store
guard, decided by measurement"). It costs every evaluation a walk of every local: +12–19 µs with 10 small
locals and +9–13 ms with a 100,000-item list, against ~4–5 µs per guarded call here and nothing for the
others. It cannot undo an in-place change (a session's snapshot is shallow), so a refusal would lose the
variable; it sees no host object or closure a variable holds (``h.add(g)``, ``acc(g)``, which this guard
routes); and a fragment would already have streamed ``output`` or ``log`` showing the value before the check.
"""

from __future__ import annotations

import ast
import builtins
from typing import NamedTuple

from ..language.rewrites import store_rewrite

#: The key :func:`risky_arguments` gives for the callee's receiver (:data:`.kept.RECEIVER`).
RECEIVER = -1

#: Granted builtins that keep none of their arguments in another: they build a new value or read only.
#: Not ``map``, ``filter``, ``sorted``, ``min``, ``max``: they call a function argument on the items of
#: another (``map(xs.append, gens)``, ``sorted(gens, key=d.setdefault)``).
KEEPS_NOTHING = frozenset({
    builtins.abs, builtins.all, builtins.any, builtins.bool, builtins.dict, builtins.enumerate, builtins.float,
    builtins.frozenset, builtins.int, builtins.isinstance, builtins.len, builtins.list, builtins.reversed,
    builtins.round, builtins.set, builtins.str, builtins.sum, builtins.tuple, builtins.zip,
})

#: Nodes whose value is one the expression makes, whatever their parts.
_MADE = (ast.Call, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.Await)


def guard_of(node: ast.Call, bound: frozenset[str], granted: frozenset[str],
             keeps_nothing: frozenset[str]) -> str | None:
    """The store guard's rewrite to record for the call ``node`` (:func:`.rewrites.store_rewrite` of its
    :func:`risky_arguments`), or ``None`` when it needs none."""
    risky = risky_arguments(node, bound, granted, keeps_nothing)
    return None if risky is None else store_rewrite(risky)


def risky_arguments(node: ast.Call, bound: frozenset[str], granted: frozenset[str],
                    keeps_nothing: frozenset[str]) -> tuple[int | str, ...] | None:
    """The arguments of the call ``node`` to check before it runs: positional indices and keyword names
    (``"*"`` for all, when a ``*``/``**`` argument hides where they are), or ``None`` when the call has no
    target or no argument that may hold a value the expression made.

    ``bound``: names bound by the comprehensions around the call; ``granted``: the allowlist's names (never a
    session value); ``keeps_nothing``: allowlist names bound to a builtin of :data:`KEEPS_NOTHING`."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in keeps_nothing and func.id not in bound:
        return None
    names = _Names(bound, granted, keeps_nothing - bound)
    arguments = _arguments(node)
    risky = [j for j, (_, arg) in enumerate(arguments) if _made(arg, bound)]
    spread = any(isinstance(arg, ast.Starred) or key == "*" for key, arg in arguments)
    extra = (RECEIVER,) if _sorts_made_items(func, arguments, names) else ()
    if not risky and not extra:
        return () if _hands_a_keeper(arguments, names) else None
    if not (extra or spread or _targeted(func, arguments, risky, names)):
        return None
    return ("*", *extra) if spread else (*(arguments[j][0] for j in risky), *extra)


class _Names(NamedTuple):
    """The names a call's arguments are judged by: bound by the comprehensions around it, granted by the
    allowlist, and granted builtins that keep nothing and call nothing (``len``, ``abs``: never a target)."""

    bound: frozenset[str]
    granted: frozenset[str]
    plain: frozenset[str]


def _arguments(node: ast.Call) -> list[tuple[int | str, ast.expr]]:
    """The call's arguments with their keys: positional indices, keyword names, ``"*"`` for a ``**``."""
    arguments: list[tuple[int | str, ast.expr]] = [(i, a) for i, a in enumerate(node.args)]
    return arguments + [(kw.arg if kw.arg is not None else "*", kw.value) for kw in node.keywords]


def _targeted(func: ast.expr, arguments: list[tuple[int | str, ast.expr]], risky: list[int], names: _Names) -> bool:
    """Whether the call has a target other than the one argument checked: its callee is a session value's
    (``xs.append``), or another argument may be a target (:func:`_target`)."""
    callee = func.value if isinstance(func, ast.Attribute) else func
    return _held(callee, names.bound, names.granted) or _hands_a_keeper(arguments, names) or any(
        _target(arg, names) for j, (_, arg) in enumerate(arguments) if risky != [j])


def _sorts_made_items(func: ast.expr, arguments: list[tuple[int | str, ast.expr]], names: _Names) -> bool:
    """Whether the call is ``<made>.sort(key=f)`` with ``f`` a possible target: ``list.sort``, the one C method
    of a builtin value that keeps nothing and calls an argument, would hand ``f`` the made receiver's items
    (``[g].sort(key=xs.append)``)."""
    return (isinstance(func, ast.Attribute) and func.attr == "sort" and _made(func.value, names.bound)
            and any(_target(arg, names) for _, arg in arguments))


def _hands_a_keeper(arguments: list[tuple[int | str, ast.expr]], names: _Names) -> bool:
    """Whether a call may hand its callee a keeper and a maker to compose, with nothing made in sight
    (``json.loads(s, parse_int=countdown, object_hook=xs.append)``, ``apply(f, countdown, 1)``): an argument
    holds a method of a session value, however hidden (``[xs.append][0]``, ``xs.append if c else g``), or a
    keyword argument reaches a session value (``object_hook=f``, ``**hooks``), beside an uncalled function;
    or a variable is passed beside an uncalled granted function. The callee may call the one with what the
    other makes, so its keeping arguments must be handed over wrapped. ``sorted(words, key=len)`` and
    ``d.get(k, v)`` hand over neither."""
    if len(arguments) < 2 and not any(key == "*" or isinstance(arg, ast.Starred) for key, arg in arguments):
        return False  # a keeper and a maker take two arguments, or one spread
    uncalled = [_uncalled(arg) for _, arg in arguments]
    for j, (key, arg) in enumerate(arguments):
        strong = _strong_keeper(key, arg, uncalled[j], names)
        if not strong and not (isinstance(arg, ast.Name) and _held(arg, names.bound, names.granted)):
            continue
        for i, (other_key, other) in enumerate(arguments):
            if i == j and not (strong and (other_key == "*" or isinstance(other, ast.Starred))):
                continue
            if any(_may_be_callable(n, names) and (strong or not _held(n, names.bound, names.granted))
                   for n in uncalled[i]):
                return True
    return False


def _strong_keeper(key: int | str, arg: ast.expr, uncalled: list[ast.AST], names: _Names) -> bool:
    """Whether the argument ``arg`` (passed as ``key``) surely may hand over a keeper: it holds, uncalled, an
    attribute of a session value (``xs.append``, however hidden), or it reaches a session value by keyword."""
    return (any(isinstance(n, ast.Attribute) and _held(n.value, names.bound, names.granted) for n in uncalled)
            or (type(key) is str and _held(arg, names.bound, names.granted)))


def _uncalled(node: ast.AST) -> list[ast.AST]:
    """The names and attributes in ``node`` that are not a call's callee (``f`` in ``[f][0]``, not in ``f()``)."""
    callees = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return [n for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in callees]


def _target(node: ast.AST, names: _Names) -> bool:
    """Whether the argument ``node`` may be a target: a value of the session (:func:`_held`) or a function the
    callee may call with the other arguments' parts (:func:`_may_be_callable`)."""
    return _held(node, names.bound, names.granted) or _may_be_callable(node, names)


def _may_be_callable(node: ast.AST, names: _Names) -> bool:
    """Whether ``node`` names something uncalled — a function the callee may call with the other arguments'
    parts (``functools.reduce(list.append, [xs, g])``, ``itertools.starmap(list.append, [(xs, g)])``) — other
    than a granted builtin that keeps nothing (``map(abs, ...)``, ``max(xs, key=len)``)."""
    return isinstance(node, ast.Attribute) or (isinstance(node, ast.Name) and node.id not in names.plain)


def _made(node: ast.AST, bound: frozenset[str]) -> bool:
    """Whether ``node``'s value may be or hold a value the expression made (not a variable's, checked)."""
    return any(isinstance(n, _MADE) or (isinstance(n, ast.Name) and n.id in bound) for n in ast.walk(node))


def _held(node: ast.AST, bound: frozenset[str], granted: frozenset[str]) -> bool:
    """Whether ``node``'s value may be, or reach, a value the session holds: it reads a name that is not an
    allowlist name (a variable, a runtime namespace, a comprehension's variable) or calls anything."""
    return any(isinstance(n, _MADE) or (isinstance(n, ast.Name) and (n.id in bound or n.id not in granted))
               for n in ast.walk(node))

