"""The SQLite input history (``s2o_kernel/kernel/history.py``): what ``history_request`` and ``%history`` read.

Real SQLite files in a temporary folder; two real processes for concurrent writers. The restart
across real kernels is in ``test_console_kernel.py``.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.kernel import history as history_module
from s2o_kernel.kernel.history import HISTORY_ENV, History, history_path


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "sub" / "history.sqlite")


def _sessions(path: str, cells: list[list[str]]) -> list[int]:
    """Write one closed session per list of cell sources; their session numbers."""
    numbers = []
    for sources in cells:
        h = History(path)
        for line, source in enumerate(sources, 1):
            h.remember(line, source, f"out {source}")
        number = h.session
        assert number is not None
        numbers.append(number)
        h.close()
    return numbers


def test_the_file_is_in_jupyters_data_dir_unless_the_environment_names_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_core.paths import jupyter_data_dir

    monkeypatch.delenv(HISTORY_ENV, raising=False)
    assert history_path() == os.path.join(jupyter_data_dir(), "s2o", "history.sqlite")
    monkeypatch.setenv(HISTORY_ENV, "/somewhere/h.sqlite")
    assert history_path() == "/somewhere/h.sqlite"


def test_cells_are_written_on_the_history_thread_in_wal_mode(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    writers: list[str] = []
    real_write = history_module._Store.write

    def spy(self: Any, cells: list[tuple[int, str]]) -> None:
        writers.append(threading.current_thread().name)
        real_write(self, cells)

    monkeypatch.setattr(history_module._Store, "write", spy)
    h = History(path)
    for line in range(1, 51):
        h.remember(line, f"{line} + 1", str(line + 1))
    assert [e[1:] for e in h.entries("tail", n=2)] == [(49, "49 + 1"), (50, "50 + 1")]
    h.close()
    assert writers and all(name.startswith("s2o-history") for name in writers)
    assert len(writers) < 50  # cells that arrive together are written together
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM cells").fetchone()[0] == 50
        assert conn.execute("SELECT end IS NOT NULL FROM sessions").fetchall() == [(1,)]


def _spy_writes(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The lines of each batch the history writes, in order."""
    batches: list[list[int]] = []
    real_write = history_module._Store.write

    def spy(self: Any, cells: list[tuple[int, str]]) -> None:
        batches.append([line for line, _ in cells])
        real_write(self, cells)

    monkeypatch.setattr(history_module._Store, "write", spy)
    return batches


def _count(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM cells").fetchone()[0])


def test_a_burst_of_cells_is_one_write_and_a_read_sees_it_at_once(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduled write waits for the rest of the burst; a read does not wait for it (a wait longer
    than READ_TIMEOUT would make the read answer nothing)."""
    monkeypatch.setattr(history_module, "HISTORY_FLUSH_DELAY", 10 * history_module.HISTORY_READ_TIMEOUT)
    batches = _spy_writes(monkeypatch)
    h = History(path)
    try:
        for line in range(1, 21):
            h.remember(line, f"{line} + 1", None)
        assert [e[1] for e in h.entries("tail", n=30)] == list(range(1, 21))
        assert batches == [list(range(1, 21))]
        h.remember(21, "again", None)
        assert h.reply("range", start=21) == [(h.session, 21, "again")]
        assert batches == [list(range(1, 21)), [21]]
    finally:
        h.close()


def test_close_writes_what_waits_at_once(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_module, "HISTORY_FLUSH_DELAY", 10 * history_module.HISTORY_READ_TIMEOUT)
    h = History(path)
    h.entries("tail", n=1)  # the file exists
    for line in range(1, 4):
        h.remember(line, str(line), None)
    h.close()
    assert _count(path) == 3
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT end IS NOT NULL FROM sessions").fetchall() == [(1,)]


def test_a_burst_nobody_reads_is_written_after_the_delay(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_module, "HISTORY_FLUSH_DELAY", 0.05)
    batches = _spy_writes(monkeypatch)
    h = History(path)
    try:
        for line in range(1, 4):
            h.remember(line, str(line), None)
        for _ in range(200):  # up to 10 s for the history thread (never a measurement)
            if batches:
                break
            time.sleep(0.05)
        assert batches == [[1, 2, 3]]
        assert _count(path) == 3
    finally:
        h.close()


def test_tail_reads_every_session_oldest_first(path: str) -> None:
    s1, s2 = _sessions(path, [["a1", "a2"], ["b1"]])
    h = History(path)
    try:
        h.remember(1, "c1", "r")
        me = h.session
        assert len({s1, s2, me}) == 3
        assert h.entries("tail", n=3) == [(s1, 2, "a2"), (s2, 1, "b1"), (me, 1, "c1")]
        assert h.entries("tail", n=10) == [(s1, 1, "a1"), (s1, 2, "a2"), (s2, 1, "b1"), (me, 1, "c1")]
        assert h.entries("tail") == h.entries("tail", n=10)
        assert h.entries("tail", n=0) == []
        # output: the result text of this kernel's cells only (earlier kernels kept none)
        assert h.reply("tail", n=2, output=True) == [(s2, 1, ("b1", None)), (me, 1, ("c1", "r"))]
        assert h.reply("tail", n=1) == [(me, 1, "c1")]
    finally:
        h.close()


def test_range_reads_one_session_by_number_or_relative(path: str) -> None:
    s1, s2 = _sessions(path, [["a1", "a2", "a3"], ["b1", "b2"]])
    h = History(path)
    try:
        for line, source in enumerate(["c1", "c2", "c3"], 1):
            h.remember(line, source, None)
        me = h.session
        assert h.entries("range", session=0, start=2, stop=3) == [(me, 2, "c2")]
        assert h.entries("range", start=0) == [(me, 1, "c1"), (me, 2, "c2"), (me, 3, "c3")]
        assert h.entries("range", session=-1) == [(s2, 1, "b1"), (s2, 2, "b2")]
        assert h.entries("range", session=s1, start=2) == [(s1, 2, "a2"), (s1, 3, "a3")]
        assert h.entries("range", session=me + 100) == []
    finally:
        h.close()


def test_search_matches_globs_across_sessions(path: str) -> None:
    s1, = _sessions(path, [["1 + 1", "len('x')", "1 + 2", "1 + 1"]])
    h = History(path)
    try:
        h.remember(1, "1 + 3", None)
        h.remember(2, "1 + 1", None)
        me = h.session
        assert h.entries("search", pattern="1 + *") == [
            (s1, 1, "1 + 1"), (s1, 3, "1 + 2"), (s1, 4, "1 + 1"), (me, 1, "1 + 3"), (me, 2, "1 + 1")]
        assert h.entries("search", pattern="1 + *", n=2) == [(me, 1, "1 + 3"), (me, 2, "1 + 1")]
        # unique: the latest of equal cells only
        assert h.entries("search", pattern="1 + *", unique=True) == [(s1, 3, "1 + 2"), (me, 1, "1 + 3"),
                                                                     (me, 2, "1 + 1")]
        assert h.entries("search", pattern="1 + *", unique=True, n=1) == [(me, 2, "1 + 1")]
        assert h.entries("search", pattern="LEN*") == []  # case sensitive, as IPython's
        assert h.entries("search", pattern="len(?x?)") == [(s1, 2, "len('x')")]
    finally:
        h.close()


@pytest.mark.parametrize(
    ("access", "query"),
    [("tail", {"n": "5"}), ("tail", {"n": 2.5}), ("tail", {"n": True}), ("search", {"n": "5"}),
     ("range", {"session": "x"}), ("range", {"start": []}), ("range", {"stop": "9"})],
)  # fmt: skip
def test_malformed_requests_read_nothing(path: str, access: str, query: dict[str, Any]) -> None:
    h = History(path)
    try:
        h.remember(1, "1 + 1", None)
        assert h.entries(access, **query) == []
        assert h.entries("search", pattern=5) == [(h.session, 1, "1 + 1")]  # no pattern: everything
    finally:
        h.close()


def test_a_file_that_cannot_be_used_keeps_history_in_memory(tmp_path: Path, caplog: Any) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    h = History(str(blocker / "history.sqlite"))
    try:
        h.remember(1, "1 + 1", "2")
        assert h.reply("tail", n=5, output=True) == [(h.session, 1, ("1 + 1", "2"))]
    finally:
        h.close()
    assert "history kept in memory only" in caplog.text
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    h = History(str(corrupt))
    try:
        h.remember(1, "2 + 2", None)
        assert [e[2] for e in h.entries("tail", n=5)] == ["2 + 2"]
    finally:
        h.close()


def test_after_close_nothing_is_kept_or_read(path: str) -> None:
    h = History(path)
    h.remember(1, "a", None)
    h.close()
    h.remember(2, "b", None)
    assert h.entries("tail", n=5) == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT source FROM cells").fetchall() == [("a",)]


_WRITER = """
import sys
from s2o_kernel.kernel.history import History
h = History(sys.argv[1])
for line in range(1, 301):
    h.remember(line, f"{sys.argv[2]} {line}", None)
    if line % 7 == 0:
        h.entries("tail", n=1)  # reads between writes, as history requests come
h.close()
"""


def test_two_kernels_write_the_same_file_at_once(path: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, path, name], env=env, stderr=subprocess.PIPE)
             for name in ("left", "right")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"history kept in memory only" not in err  # nobody gave up on the shared file
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT session, line, source FROM cells").fetchall()
        sessions = conn.execute("SELECT session FROM sessions").fetchall()
    assert len(sessions) == 2
    assert len(rows) == 600
    by_session: dict[int, set[str]] = {}
    for session, _line, source in rows:
        by_session.setdefault(session, set()).add(source.split()[0])
    assert sorted(len(v) for v in by_session.values()) == [1, 1]


def _sqlite_memory_used() -> int:
    """Bytes SQLite holds in this process (``sqlite3_memory_used``, through the loaded library)."""
    import _sqlite3
    import ctypes

    try:
        used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (OSError, AttributeError):
        pytest.skip("sqlite3_memory_used is not reachable from this build")
    used.restype = ctypes.c_int64
    return int(used())


def _remember_many(h: History, last: int, first: int = 1) -> None:
    """Remember cells ``first``..``last`` and wait until they are written (and every 500 cells, as a
    kernel's cells come one at a time rather than in one batch)."""
    for line in range(first, last + 1):
        h.remember(line, f"{line % 97} + 1", None)
        if line % 500 == 0:
            h.entries("tail", n=1)
    assert h.entries("tail", n=1) == [(h.session, last, f"{last % 97} + 1")]


def test_sqlites_memory_does_not_grow_with_the_file(path: str) -> None:
    """60,000 cells (a ~1.3 MiB file): SQLite's page cache stays within CACHE_KIB (it filled to its
    2 MiB default before, docs/performance.md)."""
    h = History(path)
    _remember_many(h, 1_000)
    before = _sqlite_memory_used()
    _remember_many(h, 60_000, first=1_001)
    grown = _sqlite_memory_used() - before
    h.close()
    assert grown < history_module.HISTORY_CACHE_KIB * 1024 + 256 * 1024, grown


def test_history_in_memory_keeps_the_last_cells_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_module, "HISTORY_MEMORY_CELLS", 50)
    h = History(":memory:")
    for line in range(1, 201):
        h.remember(line, f"cell {line}", None)
    lines = [n for _s, n, _src in h.entries("range")]
    h.close()
    assert lines == list(range(151, 201))


def test_history_in_memory_holds_the_same_memory_after_many_cells() -> None:
    h = History(":memory:")
    _remember_many(h, history_module.HISTORY_MEMORY_CELLS)
    before = _sqlite_memory_used()
    _remember_many(h, 4 * history_module.HISTORY_MEMORY_CELLS, first=history_module.HISTORY_MEMORY_CELLS + 1)
    grown = _sqlite_memory_used() - before
    assert len(h.entries("range")) == history_module.HISTORY_MEMORY_CELLS
    h.close()
    assert grown < 128 * 1024, grown  # the rows of 30,000 more cells would be ~0.6 MiB
