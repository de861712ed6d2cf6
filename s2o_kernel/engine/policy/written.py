"""How long a value is written out (its ``repr``, its JSON), measured before anything writes it (SPEC 9, 12).

A container held twice is written twice: sixty ``var`` commands ``x = [x, x]`` make a value of sixty-one
lists whose ``repr`` and JSON have 2**60 items, and writing either never ends (the kernel showing the
result, the worker saving its state). :func:`written_size` counts the written-out items in time linear
in the distinct containers; the engine and the kernel write a value only when it is within
:data:`WRITTEN_LIMIT` (``scopes.as_json``, the worker's ``encode_value``, the kernel's ``value_bundle``),
else it is not JSON and shows :func:`too_large_text`. Every other writer of a value it did not make
(``log``, ``fail``, ``ask``, ``print``, ``values.safe_repr``/``safe_str``, inspection, ``%vars``) asks
:func:`too_large_to_write` first.

:func:`shown_text` is the text a result shows (SPEC 9): its ``repr`` with every long list, tuple, set and
dict cut after :data:`SHOWN_ITEMS` items, as IPython's pretty printer cuts them, written where the value
is (the kernel's process, or the worker, which sends it beside the ``repr``).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from ...bounds import SHOWN_ITEMS, WRITTEN_LIMIT
from .parts import PLAIN_TYPES, parts_of


def written_size(value: Any, cap: int = WRITTEN_LIMIT) -> int:
    """How many items ``value`` has when written out (its ``repr``, its JSON): 1 for a scalar or an object
    that is not opened, 1 plus its parts' for every container the values check opens
    (:func:`.parts.parts_of`: ``list``, ``tuple``, ``dict``, sets, ``deque``, dict views, ``ChainMap``,
    ``SimpleNamespace``, ``slice``, ``partial``, bound methods, exceptions, subclasses of the built-in
    containers, …), each container counted every time it appears; a number above ``cap`` once past it.

    A container held twice is written twice, so a value of a few dozen lists (``x = [x, x]``, sixty times)
    is 2**60 items written out, and its ``repr`` or JSON never ends. Sizes are memoised by identity, so
    the count takes time linear in the distinct containers (iterative: any depth); a container of scalars
    only is counted at C speed. A cycle counts 1 (``repr`` writes ``[...]``; it is not JSON anyway).
    Parts are read as the values check reads them (a subclass's ``__iter__`` never runs)."""
    if type(value) in _SCALARS:
        return 1
    sizes: dict[int, int] = {}
    pending: set[int] = set()
    alive: list[Any] = []  # keeps every object measured alive, so no id is reused meanwhile
    # An entry is (container, None) to open, or (container, its items) to finish. A container is opened
    # (its parts listed) once, when its first entry is popped: one held a million times is pushed a
    # million times (one entry each, like its holders' items) but listed once (else: quadratic).
    stack: list[tuple[Any, list[Any] | None]] = [(value, None)]
    while stack:
        v, items = stack.pop()
        key = id(v)
        if items is None:
            if key in sizes or key in pending:  # measured, or an ancestor (a cycle: counts 1)
                continue
            alive.append(v)
            opened = _items(v)
            if opened is None or _scalars_only(opened):  # not opened, or a row: sized at C speed
                sizes[key] = 1 if opened is None else min(1 + len(opened), cap + 1)
            else:
                pending.add(key)
                stack.append((v, opened))
                stack.extend((item, None) for item in opened
                             if type(item) not in _SCALARS and id(item) not in sizes)
            if sizes.get(key, 0) > cap:
                return cap + 1
            continue
        total = 1
        for item in items:
            total += sizes.get(id(item), 1)  # a scalar, an object not opened, or a cycle
            if total > cap:
                return cap + 1  # every part of the value is written inside it: the value is past cap too
        sizes[key] = total
        pending.discard(key)
    return sizes.get(id(value), 1)


#: Types written as themselves, with no parts.
_SCALARS = PLAIN_TYPES
_EXACT = frozenset({list, tuple, set, frozenset})


def _scalars_only(items: list[Any]) -> bool:
    return set(map(type, items)) <= _SCALARS


def _items(v: Any) -> list[Any] | None:
    """The parts of ``v`` as they are written, or ``None`` when it has none (a scalar, an object not opened)."""
    t = type(v)
    if t in _EXACT:
        return list(v)  # exact built-in types: their own C iteration, nothing overridden
    if t is dict:
        return [*v.keys(), *v.values()]
    if t in _SCALARS:
        return None
    parts = parts_of(v)
    return None if parts is None else list(parts)


def too_large_to_write(value: Any, cap: int = WRITTEN_LIMIT) -> bool:
    """Whether ``value`` has more than ``cap`` items written out (:func:`written_size`): its ``str``,
    ``repr`` or JSON may then never end, so whatever writes a value it did not make checks this first
    (a message, a log line, a ``fail`` text, a variable's summary)."""
    return written_size(value, cap) > cap


def too_large_text(value: Any, cap: int = WRITTEN_LIMIT) -> str:
    """The placeholder shown for a value of more than ``cap`` items written out (:func:`written_size`)."""
    return f"<{type(value).__name__}: too large to show, more than {cap:,} items written out>"


def _repr(value: Any) -> str:
    """``repr(value)``, or a placeholder naming its type when ``repr`` fails (an int too long for text)."""
    try:
        text = repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} object: repr failed with {type(exc).__name__}>"
    return text if isinstance(text, str) else f"<{type(value).__name__} object>"


#: The containers :func:`shown_text` cuts: exact built-in types, whose ``repr`` is their items'. Any other
#: value is written by its own ``repr``, whole (IPython also cuts a ``deque``, a ``Counter`` or a subclass).
_CUT: dict[type, tuple[str, str, str]] = {
    list: ("[", "]", "[...]"), tuple: ("(", ")", "(...)"), dict: ("{", "}", "{...}"),
    set: ("{", "}", "set(...)"), frozenset: ("frozenset({", "})", "frozenset(...)"),
}
_EMPTY: dict[type, str] = {list: "[]", tuple: "()", dict: "{}", set: "set()", frozenset: "frozenset()"}
#: A task of :func:`_write_cut`: text to write as it is, or the end of a container (it leaves the path).
_TEXT, _LEAVE = object(), object()


def shown_text(value: Any, each: int = SHOWN_ITEMS) -> str:
    """The text a result shows (SPEC 9): ``repr(value)``, except that every ``list``, ``tuple``, ``set``,
    ``frozenset`` and ``dict`` (exact types, at any depth) of more than ``each`` items shows its first
    ``each`` (a set in its iteration order, a dict its first keys) and then ``...``, as IPython's pretty
    printer writes it on one line with its ``max_seq_length``: ``[0, 1, ...]``, ``{0: 0, ...}``,
    ``frozenset({0, 1, ...})``. A container met again inside itself is ``[...]``, as ``repr`` writes it.

    Never raises: a value of more than :data:`WRITTEN_LIMIT` items written out is :func:`too_large_text`,
    and a ``repr`` that fails is a placeholder naming the type. The cut text is written in time linear in
    what it shows; a value with no container of more than ``each`` items is ``repr`` itself (C speed).
    """
    size = written_size(value)
    if size > WRITTEN_LIMIT:
        return too_large_text(value)
    if size <= each:  # no container of it holds more than ``each`` items: nothing to cut
        return _repr(value)
    out: list[str] = []
    _write_cut(value, each, out)
    return "".join(out)


def _write_cut(value: Any, each: int, out: list[str]) -> None:
    """Append :func:`shown_text`'s text of ``value`` to ``out``: a stack of tasks, so any depth is written."""
    path: set[int] = set()  # the containers being written: one met again is a cycle
    stack: list[tuple[Any, Any]] = [(None, value)]
    while stack:
        task, item = stack.pop()
        if task is _TEXT:
            out.append(item)
            continue
        if task is _LEAVE:
            path.discard(item)
            continue
        kind = type(item)
        marks = _CUT.get(kind)
        if marks is None:
            out.append(_repr(item))
        elif id(item) in path:
            out.append(marks[2])
        elif not item:
            out.append(_EMPTY[kind])
        elif len(item) <= each and _scalars_only([*item, *item.values()] if kind is dict else list(item)):
            out.append(_repr(item))  # a row of scalars: written whole, at C speed
        else:
            path.add(id(item))
            stack.extend(reversed(_cut_tasks(item, kind, marks, each)))


def _cut_tasks(item: Any, kind: type, marks: tuple[str, str, str], each: int) -> list[tuple[Any, Any]]:
    """The tasks that write the container ``item`` with at most ``each`` items, in order."""
    tasks: list[tuple[Any, Any]] = [(_TEXT, marks[0])]
    for i, part in enumerate(islice(item.items() if kind is dict else item, each)):
        if i:
            tasks.append((_TEXT, ", "))
        if kind is dict:
            tasks.extend(((None, part[0]), (_TEXT, ": "), (None, part[1])))
        else:
            tasks.append((None, part))
    if len(item) > each:
        tasks.append((_TEXT, ", ..."))
    elif kind is tuple and len(item) == 1:
        tasks.append((_TEXT, ","))
    tasks.extend(((_TEXT, marks[1]), (_LEAVE, id(item))))
    return tasks
