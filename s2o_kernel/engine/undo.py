"""The items of locals a run's commands wrote, so that a failing command puts them back (SPEC 7).

A failing command leaves the variables as they were before it (docs/design.md, "A failing command"): the
session's snapshot copies its namespaces, and this journal covers what a copy of a namespace does not, the
items the engine itself wrote inside a local's value (``{"var": {"xs[0]": 1}}``, an ``outputPath`` of
``†local.d.k``). What the methods an expression calls change in place (``xs.append(1)``, ``xs.reverse()``,
``d.update(k=2)``) is the expression's own effect, kept as in Python, as an outside call's is: an item is put
back only while it is still the value the engine wrote (found by identity), wherever such a method moved it.
"""

from __future__ import annotations

import contextlib
from typing import Any

#: An item a command wrote did not exist before (a new key, an appended item).
_NO_ITEM = object()


class ItemJournal:
    """``(holder, key, written, old item)`` of each item written during a run, in order; :meth:`mark` and
    :meth:`undo` bracket one command. Cleared when the run ends (:meth:`clear`).

    Memory: an item written again since the latest mark is not noted again (undoing to that mark or an
    earlier one needs only the oldest value), so a loop writing ``d['k']`` each pass keeps one old value.
    """

    def __init__(self) -> None:
        self._written: list[tuple[Any, Any, Any, Any]] = []
        #: ``(id(holder), key)`` → the index of its entry, for the entries since the latest :meth:`mark`.
        self._since_mark: dict[tuple[int, Any], int] = {}

    def note(self, holder: Any, key: Any, value: Any) -> None:
        """Record item ``key`` of ``holder`` before ``value`` is written there: a ``list`` (an index, or its
        length for an append) or a ``dict`` (a key, new or not), their subclasses included (``OrderedDict``,
        ``defaultdict``: read with ``get``, which makes no default). Other holders are not the engine's to
        restore. Raises what reading the item raises (an index out of range: check it first)."""
        if isinstance(holder, list):
            old = _NO_ITEM if key == len(holder) else holder[key]
        elif isinstance(holder, dict):
            old = holder.get(key, _NO_ITEM)
        else:
            return
        slot = (id(holder), key)
        index = self._since_mark.get(slot)
        if index is not None and self._written[index][2] is old:  # written again, nothing between: keep the
            first = self._written[index]  # oldest item, and now look for this value when putting it back
            self._written[index] = (first[0], first[1], value, first[3])
            return
        self._since_mark[slot] = len(self._written)
        self._written.append((holder, key, value, old))

    def mark(self) -> int:
        """Where the journal stands: what :meth:`undo` goes back to."""
        self._since_mark = {}
        return len(self._written)

    def undo(self, mark: int) -> None:
        """Put back every item written since ``mark``, the latest first, each only where the value the engine
        wrote still is (by identity): at its place, else wherever an expression's method moved it in a list;
        an item an expression replaced or removed since stays as the expression left it."""
        written = self._written
        while len(written) > mark:
            holder, key, value, old = written.pop()
            with contextlib.suppress(LookupError, TypeError, ValueError):  # a holder that refuses: it stays
                _put_back(holder, key, value, old)
        self._since_mark = {}

    def clear(self) -> None:
        """Forget everything written: no command of the run is left to fail."""
        self._written.clear()
        self._since_mark = {}


def _put_back(holder: Any, key: Any, value: Any, old: Any) -> None:
    """Undo one write of ``value`` at ``holder[key]`` whose item before was ``old`` (or :data:`_NO_ITEM`)."""
    if isinstance(holder, dict):
        if key in holder and holder[key] is value:
            if old is _NO_ITEM:
                del holder[key]
            else:
                holder[key] = old
        return
    index = key if key < len(holder) and holder[key] is value else _find(holder, value)
    if index is None:
        return
    if old is _NO_ITEM:
        del holder[index]
    else:
        holder[index] = old


def _find(items: list[Any], value: Any) -> int | None:
    """The last index of ``items`` holding ``value`` itself, or ``None``."""
    for index in range(len(items) - 1, -1, -1):
        if items[index] is value:
            return index
    return None
