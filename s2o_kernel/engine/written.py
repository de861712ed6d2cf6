"""How long a value is written out (its ``repr``, its JSON), measured before anything writes it (SPEC 9, 12).

A container held twice is written twice: sixty ``var`` commands ``x = [x, x]`` make a value of sixty-one
lists whose ``repr`` and JSON have 2**60 items, and writing either never ends (the kernel showing the
result, the worker saving its state). :func:`written_size` counts the written-out items in time linear
in the distinct containers; the engine and the kernel write a value only when it is within
:data:`WRITTEN_LIMIT` (``scopes.as_json``, the worker's ``encode_value``, the kernel's ``value_bundle``),
else it is not JSON and shows :func:`too_large_text`.
"""

from __future__ import annotations

from typing import Any

#: The most items a value may have written out (its ``repr``, its JSON) for the engine and the kernel to
#: write it: past it a display is a placeholder (:func:`too_large_text`) and the value is not JSON.
WRITTEN_LIMIT = 2_000_000


def written_size(value: Any, cap: int = WRITTEN_LIMIT) -> int:
    """How many items ``value`` has when written out (its ``repr``, its JSON): 1 for a scalar or an object
    that is not opened, 1 plus its parts' for every container the values check opens
    (:func:`.values.parts_of`: ``list``, ``tuple``, ``dict``, sets, ``deque``, dict views, ``ChainMap``,
    ``SimpleNamespace``, ``slice``, ``partial``, bound methods, exceptions, subclasses of the built-in
    containers, …), each container counted every time it appears; a number above ``cap`` once past it.

    A container held twice is written twice, so a value of a few dozen lists (``x = [x, x]``, sixty times)
    is 2**60 items written out, and its ``repr`` or JSON never ends. Sizes are memoised by identity, so
    the count takes time linear in the distinct containers (iterative: any depth); a container of scalars
    only is counted at C speed. A cycle counts 1 (``repr`` writes ``[...]``; it is not JSON anyway).
    Parts are read as the values check reads them (a subclass's ``__iter__`` never runs)."""
    top = _items(value)
    if top is None:
        return 1
    sizes: dict[int, int] = {}
    pending: set[int] = set()
    alive: list[Any] = []  # keeps every object measured alive, so no id is reused meanwhile
    stack: list[tuple[Any, list[Any], bool]] = [(value, top, False)]
    while stack:
        v, items, finished = stack.pop()
        key = id(v)
        if not finished and (key in sizes or key in pending):
            continue
        nested = not _scalars_only(items)
        if finished or not nested:
            total = 1 + len(items)
            if nested:
                total = 1
                for item in items:
                    total += sizes.get(id(item), 1)  # a scalar, an object not opened, or a cycle
                    if total > cap:
                        break
            sizes[key] = min(total, cap + 1)
            pending.discard(key)
            continue
        pending.add(key)
        alive.append(v)
        stack.append((v, items, True))
        for item in items:
            if type(item) in _SCALARS or id(item) in sizes:
                continue
            inner = _items(item)
            if inner is None:
                continue
            if _scalars_only(inner):  # a container of scalars (a row): sized here, never pushed
                sizes[id(item)] = min(1 + len(inner), cap + 1)
                alive.append(item)
            else:
                stack.append((item, inner, False))
    return sizes.get(id(value), 1)


#: Types written as themselves, with no parts (``values.PLAIN_TYPES``).
_SCALARS = frozenset({str, int, float, bool, type(None), bytes, complex, range})
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
    from .values import parts_of  # here: values imports what imports this module

    parts = parts_of(v)
    return None if parts is None else list(parts)


def too_large_text(value: Any, cap: int = WRITTEN_LIMIT) -> str:
    """The placeholder shown for a value of more than ``cap`` items written out (:func:`written_size`)."""
    return f"<{type(value).__name__}: too large to show, more than {cap:,} items written out>"
