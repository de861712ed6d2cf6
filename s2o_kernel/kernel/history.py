"""The kernel's input history: what ``history_request`` answers (Jupyter messaging, ``tail``, ``range``, ``search``).

Entries are ``(session, line, code, result_text)``: ``session`` is always :data:`HISTORY_SESSION`
(one session per kernel process), ``line`` the execution count and ``result_text`` the
``text/plain`` of the cell's result (``None`` when it had none). At most :data:`HISTORY_MAX`
entries are kept, the oldest dropped first. Nothing here imports Jupyter.
"""

from __future__ import annotations

import fnmatch
from typing import Any

#: Session number reported in history replies (the one session of this process).
HISTORY_SESSION = 1
#: How many entries are kept.
HISTORY_MAX = 10_000

Entry = tuple[int, int, str, "str | None"]


class History:
    """The cells run with ``store_history``, oldest first."""

    def __init__(self, limit: int = HISTORY_MAX) -> None:
        self._entries: list[Entry] = []
        self._limit = limit

    def remember(self, line: int, code: str, result_text: str | None) -> None:
        """Add the cell run as execution ``line``; drop the oldest entries beyond the limit."""
        self._entries.append((HISTORY_SESSION, line, code, result_text))
        if len(self._entries) > self._limit:
            del self._entries[: len(self._entries) - self._limit]

    def reply(self, access: str, *, output: bool = False, **query: Any) -> list[tuple[Any, ...]]:
        """The ``history`` list of a ``history_reply``.

        ``access`` is ``tail``, ``range`` or ``search``; ``query`` holds the request's ``session``,
        ``start``, ``stop``, ``n``, ``pattern`` and ``unique``. Each item is ``(session, line,
        code)``, or ``(session, line, (code, result_text))`` with ``output``.
        """
        if access == "range":
            entries = self.range(query.get("session"), query.get("start"), query.get("stop"))
        elif access == "search":
            entries = self.search(query.get("pattern"), query.get("n"), unique=bool(query.get("unique")))
        else:
            entries = self.tail(query.get("n"))
        return [(s, line, (code, out) if output else code) for s, line, code, out in entries]

    def tail(self, n: int | None) -> list[Entry]:
        """The last ``n`` entries (all when ``n`` is ``None``)."""
        if n is None:
            return list(self._entries)
        return self._entries[-n:] if n > 0 else []

    def range(self, session: int | None, start: int | None, stop: int | None) -> list[Entry]:
        """Entries with ``start <= line < stop`` of this session (``0``, ``None`` or negative: this one)."""
        if session not in (None, 0, HISTORY_SESSION) and not (isinstance(session, int) and session < 0):
            return []
        lo = start if start is not None else 0
        hi = stop if stop is not None else (self._entries[-1][1] + 1 if self._entries else 0)
        return [e for e in self._entries if lo <= e[1] < hi]

    def search(self, pattern: str | None, n: int | None, *, unique: bool = False) -> list[Entry]:
        """The last ``n`` entries whose code matches the glob ``pattern``.

        ``unique`` keeps only the latest of entries with the same code.
        """
        found = [e for e in self._entries if fnmatch.fnmatchcase(e[2], pattern or "*")]
        if unique:
            seen: set[str] = set()
            kept: list[Entry] = []
            for entry in reversed(found):
                if entry[2] not in seen:
                    seen.add(entry[2])
                    kept.append(entry)
            found = kept[::-1]
        return found[-n:] if n else found
