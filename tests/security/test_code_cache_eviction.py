"""The code cache evicts the least recently used records instead of stopping (issue 30, "Notation and files").

A notebook with many distinct expressions filled the cache file of its configuration (8 MiB) and from then
on nothing was cached, while every worker start read the whole file again (0.4 s of records). Now a write
that would take a file past :data:`MAX_CACHE_FILE` bytes or :data:`MAX_CACHE_RECORDS` records compacts it:
each record once (its last copy), the most recently used kept within :data:`CACHE_KEEP` of each cap, written
under a random name and renamed in place. A use of a loaded record (an engine's first compile of it in a
process, or a worker's report to its parent) appends it again, so it counts as recent. A repeated load
(before each worker fork) reads only what was added since. The caps are patched small so each test is fast;
costs are counted in records read, not seconds.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from s2o_kernel.bounds import CACHE_SIZE
from s2o_kernel.engine import CodeCache, Engine, default_settings
from s2o_kernel.engine.run import codecache
from s2o_kernel.engine.run import engine as engine_module
from s2o_kernel.engine.worker import mirror as mirror_module

#: The record cap the tests set, and the records a compaction keeps (19 expressions and the base).
RECORDS, KEEP = 40, 20


@pytest.fixture
def fresh_process() -> Iterator[None]:
    """The process-wide compile caches emptied, as in a new process; put back afterwards."""
    saved = dict(engine_module._SHARED)
    engine_module._SHARED.clear()
    try:
        yield
    finally:
        engine_module._SHARED.clear()
        engine_module._SHARED.update(saved)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Caps of 40 records (and 1 MiB), of which a compaction keeps 20."""
    monkeypatch.setattr(codecache, "MAX_CACHE_RECORDS", RECORDS)
    monkeypatch.setattr(codecache, "MAX_CACHE_FILE", 1 << 20)


def _expr(i: int) -> str:
    return f"price * {i} + len(name)"


def _file(folder: Path) -> Path:
    (path,) = folder.glob("*.s2oc")
    return path


def _records(path: Path) -> int:
    """Records in the file, by their headers (the MACs are checked by a load)."""
    data, at, count = path.read_bytes(), 0, 0
    while at < len(data):
        at += 36 + struct.unpack_from(">I", data, at + 32)[0]
        count += 1
    assert at == len(data)
    return count


def _new_process_loads(folder: Path) -> tuple[Engine, CodeCache]:
    engine_module._SHARED.clear()
    cache = CodeCache(folder)
    return Engine(default_settings(), code_cache=cache), cache


def test_past_the_record_cap_new_expressions_are_still_cached_and_the_oldest_go(
        tmp_path: Path, fresh_process: None, small: None) -> None:
    cache = CodeCache(tmp_path)
    engine = Engine(default_settings(), code_cache=cache)
    most = 0
    for i in range(200):
        engine.compile(_expr(i))
        most = max(most, _records(_file(tmp_path)))
    assert cache.written == 200 and cache.compacted == 8  # at the 41st write, then every 21st
    assert most <= RECORDS
    later, reader = _new_process_loads(tmp_path)
    assert reader.read <= RECORDS  # what a start costs: at most the cap, in records
    kept = [i for i in range(200) if later.has_compiled(_expr(i), None)]
    assert kept == list(range(200 - len(kept), 200)) and len(kept) >= KEEP - 1  # the most recent, no gap
    assert reader.loaded == len(kept)


def test_past_the_byte_cap_the_file_stays_under_it(tmp_path: Path, fresh_process: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecache, "MAX_CACHE_FILE", 16 << 10)

    def expr(i: int) -> str:
        return _expr(i) + f" + {'x' * (i % 300)!r}.count('x')"  # records of many sizes

    cache = CodeCache(tmp_path)
    engine = Engine(default_settings(), code_cache=cache)
    for i in range(150):
        engine.compile(expr(i))
        assert _file(tmp_path).stat().st_size <= 16 << 10
    assert cache.written == 150 and cache.compacted > 0
    later, reader = _new_process_loads(tmp_path)
    kept = [i for i in range(150) if later.has_compiled(expr(i), None)]
    assert kept == list(range(150 - len(kept), 150)) and reader.loaded == len(kept) > 0


def _compacted_once(folder: Path) -> None:
    """e0 … e40 written by one process: the 41st write compacts the file to e22 … e40 and a base."""
    engine_module._SHARED.clear()
    first = Engine(default_settings(), code_cache=(cache := CodeCache(folder)))
    for i in range(41):
        first.compile(_expr(i))
    assert cache.compacted == 1 and _records(_file(folder)) == KEEP


def _kept(folder: Path) -> list[int]:
    engine, _ = _new_process_loads(folder)
    return [i for i in range(100) if engine.has_compiled(_expr(i), None)]


def test_a_record_used_is_kept_over_older_ones_not_used(tmp_path: Path, fresh_process: None, small: None) -> None:
    """Least recently *used*, not first in first out: a record a later process used outlives records written
    before that use, and than older records nobody used since the last compaction."""
    _compacted_once(tmp_path)
    second, cache = _new_process_loads(tmp_path)
    assert (cache.loaded, cache.read) == (KEEP - 1, KEEP)
    for i in range(41, 51):
        second.compile(_expr(i))
    second.compile(_expr(22))  # a use of a loaded record, the oldest kept: written as used
    second.compile(_expr(22))  # a second use in the same process writes nothing more
    assert (cache.touched, cache.written) == (1, 10)
    for i in range(51, 61):
        second.compile(_expr(i))
    assert cache.compacted == 1
    assert _kept(tmp_path) == [22, *range(43, 61)]  # first in first out would have kept 42, not 22


def test_a_use_is_written_once_between_two_compactions(tmp_path: Path, fresh_process: None, small: None) -> None:
    """A notebook reopened again and again writes no record of its uses but the first after a compaction, so
    the file does not grow with every session; one never compacted records no use at all."""
    writer = Engine(default_settings(), code_cache=CodeCache(tmp_path))
    for i in range(10):
        writer.compile(_expr(i))
    size = _file(tmp_path).stat().st_size
    for _ in range(3):  # sessions of a notebook that was never compacted: everything is recent
        engine, cache = _new_process_loads(tmp_path)
        for i in range(10):
            engine.compile(_expr(i))
        assert cache.touched == cache.written == 0
    assert _file(tmp_path).stat().st_size == size
    _compacted_once(tmp_path / "other")
    touched = []
    for _ in range(3):
        engine, cache = _new_process_loads(tmp_path / "other")
        for i in range(22, 41):
            engine.compile(_expr(i))
        touched.append(cache.touched)
    assert touched == [KEEP - 1, 0, 0]


def test_a_worker_s_use_is_kept_by_its_parent(tmp_path: Path, fresh_process: None, small: None) -> None:
    """A forked worker reports the first use of a record its parent loaded; the parent, which has the record
    itself, writes the use (never anything of the worker's)."""
    _compacted_once(tmp_path)
    engine_module._SHARED.clear()
    cache = CodeCache(tmp_path)
    mirror = mirror_module.Mirror(cache)
    settings = default_settings()
    mirror.prepare(settings)
    assert cache.loaded == KEEP - 1
    assert mirror.compile(settings, [(_expr(i), None) for i in range(41, 51)], 1) == 10
    assert mirror.compile(settings, [(_expr(22), None)], 2) == 0  # a use: nothing compiled
    assert (mirror.used, mirror.reported, cache.touched) == (1, 10, 1)
    assert mirror.compile(settings, [(_expr(22), None)], 3) == 0 and cache.touched == 1  # once per process
    assert mirror.compile(settings, [(_expr(i), None) for i in range(51, 61)], 4) == 10
    assert cache.compacted == 1
    assert _kept(tmp_path) == [22, *range(43, 61)]


def test_a_repeated_load_reads_only_what_was_added(tmp_path: Path, fresh_process: None, small: None) -> None:
    """Before each worker fork the parent loads again: it reads the records added since, not the file."""
    writer = Engine(default_settings(), code_cache=CodeCache(tmp_path))
    for i in range(15):
        writer.compile(_expr(i))
    engine_module._SHARED.clear()
    cache = CodeCache(tmp_path)
    mirror = mirror_module.Mirror(cache)
    settings = default_settings()
    mirror.prepare(settings)
    assert cache.read == cache.loaded == 15
    mirror.prepare(settings)
    assert cache.read == 15  # nothing new: nothing read
    engine = mirror.engine(settings)
    assert engine is not None
    other = CodeCache(tmp_path)  # another process appends three
    assert other.write(engine, [(None, engine.compile_uncached(_expr(i), None)) for i in range(100, 103)]) == 3
    mirror.prepare(settings)
    assert cache.read == cache.loaded == 18
    compactor = CodeCache(tmp_path)  # another process takes it past the cap: a new file in place
    assert compactor.write(engine, [(None, engine.compile_uncached(_expr(i), None)) for i in range(200, 230)]) > 0
    assert compactor.compacted == 1
    mirror.prepare(settings)
    assert cache.read == 18 + KEEP  # the new file, read whole once: what a compaction keeps
    mirror.prepare(settings)
    assert cache.read == 18 + KEEP


def test_a_writer_whose_file_was_replaced_writes_to_the_new_one(tmp_path: Path, fresh_process: None, small: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction renames a new file over the one another writer opened and is about to lock: that writer
    finds, once it holds the lock, that its file is no longer the cache's, and appends to the new file."""
    engine = Engine(default_settings())
    compiled = {i: engine.compile_uncached(_expr(i), None) for i in range(60)}
    seed = CodeCache(tmp_path)
    assert seed.write(engine, [(None, compiled[i]) for i in range(RECORDS)]) == RECORDS
    real_flock = fcntl.flock
    compacting = [True]

    def flock(fd: int, how: int) -> None:
        if compacting and how & fcntl.LOCK_EX:
            compacting.clear()  # the first lock: another process compacts before this one gets it
            other = CodeCache(tmp_path)
            assert other.write(engine, [(None, compiled[50])]) == 1 and other.compacted == 1
        real_flock(fd, how)

    monkeypatch.setattr(codecache.fcntl, "flock", flock)
    late = CodeCache(tmp_path)
    assert late.write(engine, [(None, compiled[51])]) == 1
    monkeypatch.setattr(codecache.fcntl, "flock", real_flock)
    reader, cache = _new_process_loads(tmp_path)
    assert reader.has_compiled(_expr(50), None) and reader.has_compiled(_expr(51), None)
    assert cache.read == _records(_file(tmp_path)) == KEEP + 1 and cache.loaded == KEEP


def test_a_file_another_process_holds_is_not_compacted(tmp_path: Path, fresh_process: None, small: None) -> None:
    engine = Engine(default_settings())
    cache = CodeCache(tmp_path)
    assert cache.write(engine, [(None, engine.compile_uncached(_expr(i), None)) for i in range(RECORDS)]) == RECORDS
    path = _file(tmp_path)
    data = path.read_bytes()
    with open(path, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert CodeCache(tmp_path).write(engine, [(None, engine.compile_uncached(_expr(99), None))]) == 0
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["key", path.name])  # no temporary file left


CONCURRENT = textwrap.dedent("""
    import sys
    from s2o_kernel.engine import CodeCache, Engine, default_settings
    from s2o_kernel.engine.run import codecache
    codecache.MAX_CACHE_RECORDS = 40
    codecache.MAX_CACHE_FILE = 12 << 10
    cache = CodeCache(sys.argv[1])
    engine = Engine(default_settings(), code_cache=cache)
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts writing at once
    for i in range(300):
        engine.compile(f"price * {i} + len(name) + {sys.argv[2]}")
    print(cache.written, cache.compacted)
""")


def test_processes_writing_at_once_keep_the_file_whole_and_under_its_caps(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Three processes compile 300 expressions each, at once, into one file with small caps: whatever the order, the file
    is whole records under both caps, every one of them readable, and no temporary file is left."""
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(tmp_path), str(n)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(3)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    outs = [p.communicate("go\n", timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(int(out.split()[1]) for out, _ in outs) > 0  # compactions happened
    path = _file(tmp_path)
    assert path.stat().st_size <= 12 << 10 and _records(path) <= 40
    monkeypatch.setattr(codecache, "MAX_CACHE_RECORDS", 40)
    saved = dict(engine_module._SHARED)
    try:
        _, cache = _new_process_loads(tmp_path)
        assert cache.read == _records(path) > 0 and cache.problem is None
    finally:
        engine_module._SHARED.clear()
        engine_module._SHARED.update(saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["key", path.name])


def test_the_record_cap_leaves_the_compile_cache_room() -> None:
    """A whole file loaded fits the in-memory compile cache, which is cleared when full, with room to spare."""
    assert codecache.MAX_CACHE_RECORDS <= CACHE_SIZE // 2
    assert 0 < codecache.CACHE_KEEP < 1
    assert os.path.basename(codecache.__file__) == "codecache.py"
