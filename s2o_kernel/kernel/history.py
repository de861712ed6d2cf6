"""The kernel's input history, kept in a SQLite file across sessions (SPEC 9.1 ``%history``; Jupyter
messaging ``history_request``).

The file is ``<jupyter data dir>/s2o/history.sqlite`` (``jupyter_core.paths.jupyter_data_dir()``), or
the path in ``$S2O_HISTORY_FILE`` (``:memory:`` keeps history in memory only, for this kernel). It has
two tables, as IPython's history has: ``sessions(session, start, end)``, one row per kernel, and
``cells(session, line, source)``, one row per cell run with ``store_history`` (``line`` is the
execution count). Several kernels may write the same file at once: it is in WAL mode and every
connection waits up to :data:`HISTORY_BUSY_TIMEOUT_MS` for a lock.

Nothing touches the file on the kernel's hot path. One background thread (a single-worker
``ThreadPoolExecutor``) owns the connection: it opens the file on its first task, and
:meth:`History.remember` only appends to a list and, when no write is pending, schedules one. That
write first waits up to :data:`HISTORY_FLUSH_DELAY` seconds, so a burst of cells (a notebook run top to
bottom) becomes one transaction, written after the burst instead of during its cells' round trips.
A read (:meth:`History.reply`, :meth:`History.entries`) or :meth:`History.close` cuts the wait
short; reads run on the same thread after the pending writes, so they see every cell remembered
before them; the caller waits at most :data:`HISTORY_READ_TIMEOUT` seconds and gets nothing after that.
A kernel killed outright loses at most the last :data:`HISTORY_FLUSH_DELAY` seconds of cells.

The text of a cell's result is kept for this kernel only, in memory (the last :data:`HISTORY_OUTPUTS_KEPT`
cells), for ``history_request`` with ``output``; the file holds sources only. When the file cannot
be opened or written (a read-only folder, a corrupt file), history goes on in memory and the
kernel log says why once; in memory, only this kernel's last :data:`HISTORY_MEMORY_CELLS` cells are kept.
SQLite's page cache is bounded to :data:`HISTORY_CACHE_KIB`, so the kernel's memory does not grow with the
file. Nothing here imports Jupyter but ``jupyter_core.paths``, and only on the
history thread.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from s2o_kernel.bounds import (
    HISTORY_BUSY_TIMEOUT_MS,
    HISTORY_CACHE_KIB,
    HISTORY_FLUSH_DELAY,
    HISTORY_MAX_ENTRIES,
    HISTORY_MEMORY_CELLS,
    HISTORY_OUTPUTS_KEPT,
    HISTORY_READ_TIMEOUT,
)

log = logging.getLogger(__name__)

#: Environment variable naming the history file (``:memory:``: no file).
HISTORY_ENV = "S2O_HISTORY_FILE"

#: ``(session, line, source)``: one cell of the history.
Entry = tuple[int, int, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (session INTEGER PRIMARY KEY AUTOINCREMENT, start TEXT, end TEXT);
CREATE TABLE IF NOT EXISTS cells (session INTEGER NOT NULL, line INTEGER NOT NULL, source TEXT NOT NULL,
                                  PRIMARY KEY (session, line));
"""

T = TypeVar("T")


def history_path() -> str:
    """Where the history is kept: ``$S2O_HISTORY_FILE``, else ``<jupyter data dir>/s2o/history.sqlite``."""
    env = os.environ.get(HISTORY_ENV, "").strip()
    if env:
        return env
    from jupyter_core.paths import jupyter_data_dir

    return os.path.join(jupyter_data_dir(), "s2o", "history.sqlite")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class HistoryLike(Protocol):
    """What ``%history`` needs of the history (the cell runner holds one, or ``None``)."""

    @property
    def session(self) -> int | None:
        """This kernel's session number, or ``None`` when the history cannot be read."""
        ...

    def entries(self, access: str, **query: Any) -> list[Entry]:
        """The entries of a ``tail``, ``range`` or ``search`` (see :meth:`History.entries`)."""
        ...


class _Store:
    """The connection and this kernel's session row; used on the history thread only."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.conn = self._open(path)
        self.session = self._new_session()

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        conn = sqlite3.connect(path, timeout=HISTORY_BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)  # fmt: skip
        try:
            conn.execute(f"PRAGMA busy_timeout = {HISTORY_BUSY_TIMEOUT_MS}")
            conn.execute(f"PRAGMA cache_size = -{HISTORY_CACHE_KIB}")
            _Store._prepare(conn, path)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _prepare(conn: sqlite3.Connection, path: str) -> None:
        """WAL mode and the tables. Switching to WAL can be refused at once ("database is locked",
        without the busy timeout) while another kernel creates the same file: retried for up to
        :data:`HISTORY_BUSY_TIMEOUT_MS`."""
        deadline = time.monotonic() + HISTORY_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                if path != ":memory:" and conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(_SCHEMA)
                break
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if path != ":memory:":
            conn.execute("PRAGMA synchronous = NORMAL")

    def _new_session(self) -> int:
        cur = self.conn.execute("INSERT INTO sessions (start) VALUES (?)", (_now(),))
        return int(cur.lastrowid or 0)

    def write(self, cells: list[tuple[int, str]]) -> None:
        with self.conn:  # one transaction for the batch
            self.conn.execute("BEGIN")
            self.conn.executemany("INSERT OR REPLACE INTO cells (session, line, source) VALUES (?, ?, ?)",
                                  [(self.session, line, source) for line, source in cells])  # fmt: skip
            if self.path == ":memory:":  # nothing spills to a file: keep the last HISTORY_MEMORY_CELLS only
                self.conn.execute("DELETE FROM cells WHERE session = ? AND line <= "
                                  "(SELECT MAX(line) FROM cells WHERE session = ?) - ?",
                                  (self.session, self.session, HISTORY_MEMORY_CELLS))  # fmt: skip

    def end(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("UPDATE sessions SET end = ? WHERE session = ?", (_now(), self.session))
        self.conn.close()

    def rows(self, sql: str, args: tuple[Any, ...]) -> list[Entry]:
        return [(int(s), int(n), str(src)) for s, n, src in self.conn.execute(sql, args)]


class History:
    """The history of this kernel and the earlier ones that used the same file (see the module doc).

    ``path``: the file (default :func:`history_path`, read on the history thread). Thread-safe.
    """

    def __init__(self, path: str | None = None) -> None:
        self._path = path
        self._store: _Store | None = None
        self._lock = threading.Lock()
        #: Cells not written yet; a flush is scheduled exactly while this is not empty.
        self._pending: list[tuple[int, str]] = []
        #: Set to end a scheduled flush's wait (a read or close wants the cells written now).
        self._hurry = threading.Event()
        self._outputs: OrderedDict[int, str | None] = OrderedDict()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    # -- the history thread ---------------------------------------------------------------------
    def _submit(self, fn: Callable[[], T]) -> Any:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s2o-history")
        return self._executor.submit(fn)

    def _ready(self) -> _Store:
        """The store, opened on first use; in memory when the file cannot be used."""
        if self._store is None:
            path = self._path or history_path()
            try:
                self._store = _Store(path)
            except (OSError, sqlite3.Error) as exc:
                self._fall_back(f"cannot open {path}: {exc}")
        assert self._store is not None
        return self._store

    def _fall_back(self, why: str) -> None:
        log.warning("s2o: history kept in memory only (%s)", why)
        if self._store is not None:
            with contextlib.suppress(sqlite3.Error):
                self._store.conn.close()
        self._store = _Store(":memory:")

    def _flush_later(self) -> None:
        """The scheduled write: wait up to :data:`HISTORY_FLUSH_DELAY` for the rest of the burst, then write."""
        self._hurry.wait(HISTORY_FLUSH_DELAY)
        self._flush()

    def _flush(self) -> None:
        with self._lock:
            cells, self._pending = self._pending, []
            self._hurry.clear()  # the next burst waits again
        if not cells:
            return
        store = self._ready()
        try:
            store.write(cells)
        except sqlite3.Error as exc:
            self._fall_back(f"cannot write {store.path}: {exc}")
            self._ready().write(cells)

    def _call(self, fn: Callable[[_Store], T], default: T) -> T:
        """Run ``fn(store)`` on the history thread after the pending writes; ``default`` on any failure."""
        if self._closed:
            return default

        def task() -> T:
            self._flush()
            return fn(self._ready())

        self._write_now()
        try:
            result: T = self._submit(task).result(HISTORY_READ_TIMEOUT)
        except Exception:  # a history that cannot answer answers nothing
            log.warning("s2o: could not read the history", exc_info=True)
            return default
        return result

    # -- the kernel's side -----------------------------------------------------------------------
    def remember(self, line: int, source: str, result_text: str | None) -> None:
        """Keep the cell run as execution ``line`` (written by the history thread, never here)."""
        if self._closed:
            return
        with self._lock:
            self._outputs[line] = result_text
            while len(self._outputs) > HISTORY_OUTPUTS_KEPT:
                self._outputs.popitem(last=False)
            scheduled = bool(self._pending)
            self._pending.append((line, source))
            if scheduled:
                return
        with contextlib.suppress(RuntimeError):  # the interpreter is shutting down: nothing is written any more
            self._submit(self._flush_later)

    def _write_now(self) -> None:
        """End the wait of a scheduled write (before a read or close); the next write on the history
        thread clears it again (the read's own task writes what is pending first)."""
        self._hurry.set()

    @property
    def session(self) -> int | None:
        """This kernel's session number in the file (``None`` when the history cannot be read)."""
        return self._call(lambda store: store.session, None)

    def entries(self, access: str, **query: Any) -> list[Entry]:
        """The entries of a ``history_request``, oldest first.

        ``access`` is ``tail`` (``n``: the last n cells of every session), ``range`` (``session``:
        a number, or 0 / ``None`` for this kernel and -k for the k-th before it; ``start`` and
        ``stop``: lines, ``start <= line < stop``) or ``search`` (``pattern``: a glob, case
        sensitive, matched against the whole source; ``n``: the last n matches; ``unique``: only
        the latest of equal sources). Anything else is a ``tail``. Malformed values give ``[]``.
        """
        return self._call(lambda store: _query(store, access, query), [])

    def reply(self, access: str, *, output: bool = False, **query: Any) -> list[tuple[Any, ...]]:
        """The ``history`` list of a ``history_reply``: ``(session, line, source)`` items, or
        ``(session, line, (source, result_text))`` with ``output`` (``None`` for earlier kernels)."""
        entries = self.entries(access, **query)
        if not output:
            return list(entries)
        mine = self._store.session if self._store is not None else None
        with self._lock:
            outputs = dict(self._outputs)
        return [(s, n, (src, outputs.get(n) if s == mine else None)) for s, n, src in entries]

    def close(self) -> None:
        """Write what is pending, end this kernel's session row and stop the thread (waits at most
        :data:`HISTORY_READ_TIMEOUT` seconds)."""
        if self._closed:
            return

        def end() -> None:
            self._flush()
            if self._store is not None:
                self._store.end()

        self._write_now()
        with contextlib.suppress(Exception):
            self._submit(end).result(HISTORY_READ_TIMEOUT)
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False)


def _number(value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if type(value) is not int:
        raise ValueError(f"not a number: {value!r}")
    return value


def _query(store: _Store, access: str, query: dict[str, Any]) -> list[Entry]:
    """The entries of one request (see :meth:`History.entries`); ``[]`` for malformed values."""
    try:
        if access == "range":
            return _range(store, query)
        if access == "search":
            return _search(store, query)
        n = _number(query.get("n"), HISTORY_MAX_ENTRIES) or 0
        rows = store.rows("SELECT session, line, source FROM cells ORDER BY session DESC, line DESC LIMIT ?",
                          (max(0, min(n, HISTORY_MAX_ENTRIES)),))  # fmt: skip
        return rows[::-1]
    except (ValueError, sqlite3.Error):
        return []


def _range(store: _Store, query: dict[str, Any]) -> list[Entry]:
    session = _number(query.get("session"), 0) or 0
    if session <= 0:
        session += store.session
    start = _number(query.get("start"), 0) or 0
    stop = _number(query.get("stop"), None)
    end = stop if stop is not None else 2**62
    return store.rows("SELECT session, line, source FROM cells WHERE session = ? AND line >= ? AND line < ? "
                      "ORDER BY line LIMIT ?", (session, start, end, HISTORY_MAX_ENTRIES))


def _search(store: _Store, query: dict[str, Any]) -> list[Entry]:
    pattern = query.get("pattern")
    pattern = pattern if type(pattern) is str else "*"
    n = _number(query.get("n"), None)
    limit = HISTORY_MAX_ENTRIES if not n or n < 0 else min(n, HISTORY_MAX_ENTRIES)
    sql = "SELECT session, line, source FROM cells WHERE source GLOB ? ORDER BY session DESC, line DESC"
    if not query.get("unique"):
        return store.rows(sql + " LIMIT ?", (pattern, limit))[::-1]
    found: list[Entry] = []
    seen: set[str] = set()
    for entry in store.conn.execute(sql, (pattern,)):
        if entry[2] not in seen:
            seen.add(entry[2])
            found.append((int(entry[0]), int(entry[1]), str(entry[2])))
            if len(found) >= limit:
                break
    return found[::-1]
