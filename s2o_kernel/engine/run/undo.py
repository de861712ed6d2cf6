"""The items of locals a run's commands wrote, so that a failing command puts them back (SPEC 7).

A failing command leaves the variables as they were before it (docs/design.md, "A failing command"): the
session's snapshot copies its namespaces, and this journal covers what a copy of a namespace does not, the
items the engine itself wrote inside a local's value (``{"var": {"xs[0]": 1}}``, an ``outputPath`` of
``†local.d.k``). What the methods an expression calls change in place (``xs.append(1)``, ``xs.reverse()``,
``d.update(k=2)``) is the expression's own effect, kept as in Python, as an outside call's is: an item is
put back only where the engine wrote it and only while it is still the value the engine wrote there (by
identity). An item an expression moved, replaced or removed since stays as the expression left it: searching
for it elsewhere would take the user's own item when both are the same object (``None``, a small int).
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any

#: An item a command wrote did not exist before (a new key, an appended item).
_NO_ITEM = object()
#: Holders whose items the journal puts back: indexed ones (an index, or the length for an append) and keyed
#: ones (read with ``get``, which makes no default in a ``defaultdict``).
_INDEXED = (list, collections.UserList, collections.deque)
_KEYED = (dict, collections.UserDict)


#: The exact types a ``var`` item target writes into (:func:`restorable`): their ``__setitem__`` stores the value
#: given, so the journal finds it there and can put the old item back. A subclass may store something else
#: (a host dict that wraps each value, whose wrapper the journal would not find): not these.
_HOLDERS: tuple[type, ...] = (list, dict, collections.OrderedDict, collections.defaultdict, collections.Counter,
                              collections.deque, collections.UserList, collections.UserDict)


def restorable(holder: Any) -> bool:
    """Whether the journal puts back an item written in ``holder``: one of :data:`_HOLDERS` exactly, compared by
    identity (no metaclass code runs). A ``var`` item target sets items of these only, so that a failing
    command can put them back."""
    kind = type(holder)
    return any(kind is exact for exact in _HOLDERS)


class Window:
    """One command's part of the journal: where it starts, and the table of the window around it."""

    __slots__ = ("enclosing", "start")

    def __init__(self, start: int, enclosing: dict[tuple[int, Any], int]) -> None:
        self.start = start
        self.enclosing = enclosing


class ItemJournal:
    """``(holder, key, written, old item)`` of each item written during a run, in order.

    :meth:`mark` opens a :class:`Window` for one command, :meth:`undo` closes it when the command fails
    (putting its items back) and :meth:`release` when it succeeds (its entries then belong to the enclosing
    window). An item written again within one window, with nothing else written there between, keeps one
    entry, and a released window's entry for an item the enclosing window holds an older entry for is folded
    into it, so a loop writing ``d['k']`` each pass holds one old value, not one a pass. Cleared when the run
    ends (:meth:`clear`).
    """

    def __init__(self) -> None:
        self._written: list[tuple[Any, Any, Any, Any] | None] = []
        #: ``(id(holder), key)`` → the index of its latest entry, in the innermost open window.
        self._window: dict[tuple[int, Any], int] = {}
        #: The open windows, innermost last.
        self._open: list[Window] = []

    def note(self, holder: Any, key: Any, value: Any) -> None:
        """Record item ``key`` of ``holder`` before ``value`` is written there (see :data:`_INDEXED`,
        :data:`_KEYED`; other holders are not the engine's to restore). Raises what reading the item raises
        (an index out of range: check it first)."""
        if isinstance(holder, _INDEXED):
            old = _NO_ITEM if key == len(holder) else holder[key]
        elif isinstance(holder, _KEYED):
            old = holder.get(key, _NO_ITEM)
        else:
            return
        slot = (id(holder), key)
        index = self._window.get(slot)
        first = self._written[index] if index is not None else None
        if index is not None and first is not None and first[2] is old:  # written again, nothing between:
            self._written[index] = (first[0], first[1], value, first[3])  # the oldest item goes back
            return
        self._window[slot] = len(self._written)
        self._written.append((holder, key, value, old))

    def mark(self) -> Window:
        """Open a window for a command: what :meth:`undo` goes back to, or :meth:`release` lets go."""
        window = Window(len(self._written), self._window)
        self._open.append(window)
        self._window = {}
        return window

    def _close(self, window: Window) -> list[dict[tuple[int, Any], int]] | None:
        """Close ``window`` and the windows still open inside it; their tables, innermost first (``None`` when
        ``window`` is closed already: a second restore)."""
        if not any(w is window for w in self._open):
            return None
        tables = []
        while True:
            closed = self._open.pop()
            tables.append(self._window)
            self._window = closed.enclosing
            if closed is window:
                return tables

    def release(self, window: Window) -> None:
        """The command of ``window`` succeeded: its entries belong to the enclosing window, where an item the
        enclosing window holds an older entry for (written again, nothing between) is folded into that entry;
        folded entries at the journal's end are dropped (a loop's pass leaves nothing behind)."""
        tables = self._close(window)
        if tables is None:
            return
        written = self._written
        for table in tables:
            for slot, index in table.items():
                earlier, latest = self._window.get(slot), written[index]
                first = written[earlier] if earlier is not None else None
                if earlier is not None and first is not None and latest is not None and latest[3] is first[2]:
                    written[earlier] = (first[0], first[1], latest[2], first[3])
                    written[index] = None  # folded: the older entry puts the item back
                else:
                    self._window[slot] = index
        floor = self._open[-1].start if self._open else 0  # never below an open window's start
        while len(written) > floor and written[-1] is None:
            written.pop()

    def undo(self, window: Window) -> None:
        """The command of ``window`` failed: put back every item written since it opened, the latest first,
        each where it was written and only while it still holds the value the engine wrote; close it."""
        written = self._written
        while len(written) > window.start:
            entry = written.pop()
            if entry is not None:  # None: folded into an older entry (release)
                with contextlib.suppress(LookupError, TypeError, ValueError):  # a holder that refuses: it stays
                    _put_back(*entry)
        self._close(window)

    def clear(self) -> None:
        """Forget everything written: no command of the run is left to fail."""
        self._written.clear()
        self._window = {}
        self._open.clear()


def _put_back(holder: Any, key: Any, value: Any, old: Any) -> None:
    """Undo one write of ``value`` at ``holder[key]`` whose item before was ``old`` (or :data:`_NO_ITEM`)."""
    if isinstance(holder, _KEYED):
        if key not in holder or holder[key] is not value:
            return
    elif not -len(holder) <= key < len(holder) or holder[key] is not value:
        return
    if old is _NO_ITEM:
        del holder[key]
    else:
        holder[key] = old
