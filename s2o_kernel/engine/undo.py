"""The items of locals a run's commands wrote, so that a failing command puts them back (SPEC 7).

A failing command leaves the variables as they were before it (docs/design.md, "A failing command"): the
session's snapshot copies its namespaces, and this journal covers what a copy of a namespace does not, the
items the engine itself wrote inside a local's value (``{"var": {"xs[0]": 1}}``, an ``outputPath`` of
``†local.d.k``). What the methods an expression calls change in place (``xs.append(1)``) is the
expression's own effect, kept as in Python, as an outside call's is.
"""

from __future__ import annotations

import contextlib
from typing import Any

#: An item a command wrote did not exist before (a new key, an appended item).
_NO_ITEM = object()


class ItemJournal:
    """``(holder, key, old item)`` of each item written during a run, in order; :meth:`mark` and
    :meth:`undo` bracket one command. Cleared when the run ends (:meth:`clear`)."""

    def __init__(self) -> None:
        self._written: list[tuple[Any, Any, Any]] = []

    def note(self, holder: Any, key: Any) -> None:
        """Record item ``key`` of ``holder`` before it is written: an exact ``list`` (an index, or its length
        for an append) or ``dict`` (a key, new or not). Other holders are not the engine's to restore."""
        kind = type(holder)
        if kind is list:
            old = _NO_ITEM if key == len(holder) else holder[key]
        elif kind is dict:
            old = holder.get(key, _NO_ITEM)
        else:
            return
        self._written.append((holder, key, old))

    def mark(self) -> int:
        """Where the journal stands: what :meth:`undo` goes back to."""
        return len(self._written)

    def undo(self, mark: int) -> None:
        """Put back every item written since ``mark``, the latest first (an item an expression's method changed
        since, so that it is no longer there, stays as it is)."""
        written = self._written
        while len(written) > mark:
            holder, key, old = written.pop()
            with contextlib.suppress(LookupError):
                if old is _NO_ITEM:
                    del holder[key]
                else:
                    holder[key] = old

    def clear(self) -> None:
        """Forget everything written: no command of the run is left to fail."""
        self._written.clear()
