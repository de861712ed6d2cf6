"""The code cache on disk (issue 12: a notebook reopened is hot; ``s2o_kernel/engine/run/codecache.py``).

What is checked: records written by an engine that compiled them are served to a later engine of the same
compile fingerprint and run as a fresh compile does; a record changed, signed with another key, moved to
another fingerprint's file, or made under another engine, is never read; a folder or key others could
change turns the cache off without failing a run; refusals are never written; a contained worker's
sources are compiled again by its parent, which never takes code from it, and a second worker started on
the same cache compiles nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import marshal
import os
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from s2o_kernel.engine import CodeCache, Engine, S2OError, Session, bare_settings, default_cache, default_settings
from s2o_kernel.engine.run import codecache
from s2o_kernel.engine.run import engine as engine_module
from s2o_kernel.engine.worker import mirror as mirror_module
from s2o_kernel.engine.worker import wire

#: Expressions of every shape a record keeps: names read, an operator with a numeric fast path, an f-string,
#: a call that is awaited, a comprehension, command fields.
SOURCES = ["price * quantity", "name.upper().strip()", "f'{name}: {price:.2f}'", "[x * 2 for x in range(n)]",
           "{'a': price, 'b': [quantity, 2]}", "len(name) > 2 and name.startswith('A')"]
NAMES = {"price": 4.5, "quantity": 3, "name": " Ada ", "n": 4}


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


def _values(engine: Engine) -> list[object]:
    session = Session(engine, locals=dict(NAMES))
    return [session.evaluate(source) for source in SOURCES] + [session.evaluate(source) for source in SOURCES]


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.s2oc"))


def test_a_later_engine_is_served_what_an_earlier_one_compiled(tmp_path: Path, fresh_process: None) -> None:
    settings = default_settings()
    first = Engine(settings, code_cache=CodeCache(tmp_path))
    expected = _values(first)
    fresh = {source: first.compile(source) for source in SOURCES}
    engine_module._SHARED.clear()  # a new process
    cache = CodeCache(tmp_path)
    second = Engine(settings, code_cache=cache)
    assert cache.loaded == len(SOURCES)
    assert all(second.has_compiled(source, None) for source in SOURCES)
    for source in SOURCES:
        loaded, made = second.compile(source), fresh[source]
        assert loaded is not made
        assert (loaded.code.co_code, loaded.code.co_names, loaded.code.co_consts) == (
            made.code.co_code, made.code.co_names, made.code.co_consts)
        assert (loaded.local_names, loaded.name_positions, loaded.is_coroutine_code, loaded.top_call) == (
            made.local_names, made.name_positions, made.is_coroutine_code, made.top_call)
    assert _values(second) == expected
    assert cache.written == 0  # nothing compiled again, nothing written again


def test_command_fields_and_functions_are_kept(tmp_path: Path, fresh_process: None) -> None:
    engine = Engine(default_settings())
    compiled = engine.compile("value + 1", command_fields=["value"])
    plain = engine.compile("price * 2")
    cache = CodeCache(tmp_path)
    assert cache.write(engine, [(frozenset({"value"}), compiled), (None, plain)]) == 2
    engine_module._SHARED.clear()
    later = Engine(default_settings(), code_cache=CodeCache(tmp_path))
    assert later.has_compiled("value + 1", frozenset({"value"}))
    assert not later.has_compiled("value + 1", None)
    assert later.compile("price * 2").code.co_name == "<expr>"
    assert Session(later, locals={"price": 21}).evaluate("price * 2") == 42


def test_refusals_are_never_written(tmp_path: Path, fresh_process: None) -> None:
    cache = CodeCache(tmp_path)
    engine = Engine(default_settings(), code_cache=cache)
    for source in ("x.__class__", "__import__('os')", "1 +"):
        with pytest.raises(S2OError):
            engine.compile(source)
    assert cache.written == 0 and _files(tmp_path) == []


def _one_file(tmp_path: Path) -> Path:
    engine = Engine(default_settings(), code_cache=CodeCache(tmp_path))
    for source in SOURCES:
        engine.compile(source)
    (path,) = _files(tmp_path)
    engine_module._SHARED.clear()
    return path


def _loaded(tmp_path: Path) -> int:
    engine_module._SHARED.clear()
    return CodeCache(tmp_path).load(Engine(default_settings()))


def test_a_changed_byte_ends_the_reading_there(tmp_path: Path, fresh_process: None) -> None:
    path = _one_file(tmp_path)
    data = bytearray(path.read_bytes())
    first_length = struct.unpack_from(">I", data, 32)[0]
    second = 36 + first_length
    data[second + 36 + 5] ^= 1  # inside the second record's payload
    path.write_bytes(bytes(data))
    assert _loaded(tmp_path) == 1


def test_a_file_cut_short_keeps_its_whole_records(tmp_path: Path, fresh_process: None) -> None:
    path = _one_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-3])
    assert _loaded(tmp_path) == len(SOURCES) - 1


def test_another_key_reads_nothing(tmp_path: Path, fresh_process: None) -> None:
    _one_file(tmp_path)
    (tmp_path / "key").write_bytes(os.urandom(32))
    assert _loaded(tmp_path) == 0


def test_a_record_moved_to_another_fingerprint_is_not_read(tmp_path: Path, fresh_process: None) -> None:
    """The MAC covers the fingerprint's digest: code compiled under other rules is never served."""
    path = _one_file(tmp_path)
    loose = bare_settings({**default_settings().to_dict(), "rules": {"operators": {"**": "on"}}})
    other = Engine(loose)
    assert other.fingerprint != Engine(default_settings()).fingerprint
    target = tmp_path / f"{codecache.fingerprint_digest(other.fingerprint).hex()}.s2oc"
    target.write_bytes(path.read_bytes())
    engine_module._SHARED.clear()
    assert CodeCache(tmp_path).load(Engine(loose)) == 0


def test_another_engine_reads_another_file(tmp_path: Path, fresh_process: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _one_file(tmp_path)
    monkeypatch.setattr(codecache, "_engine_digest", hashlib.sha256(b"another engine").digest())
    monkeypatch.setattr(codecache, "_DIGESTS", {})
    assert _loaded(tmp_path) == 0


def test_a_signed_record_of_the_wrong_shape_is_skipped(tmp_path: Path, fresh_process: None) -> None:
    cache = CodeCache(tmp_path)
    key = cache.key()
    assert key is not None
    engine = Engine(default_settings())
    digest = codecache.fingerprint_digest(engine.fingerprint)
    out = b""
    for payload in (marshal.dumps(("1", None)), marshal.dumps(tuple(range(11)))):
        size = struct.pack(">I", len(payload))
        out += hmac.new(key, digest + size + payload, hashlib.sha256).digest() + size + payload
    (tmp_path / f"{digest.hex()}.s2oc").write_bytes(out)
    assert cache.load(engine) == 0
    assert Session(engine).evaluate("1 + 1") == 2


@pytest.mark.parametrize("spoil", ["folder-others-write", "key-others-read", "key-link", "key-short"])
def test_a_folder_or_key_others_could_change_turns_the_cache_off(tmp_path: Path, spoil: str,
                                                                  fresh_process: None) -> None:
    folder = tmp_path / "cache"
    CodeCache(folder).key()
    key = folder / "key"
    if spoil == "folder-others-write":
        folder.chmod(0o777)
    elif spoil == "key-others-read":
        key.chmod(0o644)
    elif spoil == "key-link":
        key.rename(folder / "real")
        key.symlink_to(folder / "real")
    else:
        key.write_bytes(b"short")
    cache = CodeCache(folder)
    engine = Engine(default_settings(), code_cache=cache)
    assert Session(engine, locals={"price": 2, "quantity": 3}).evaluate("price * quantity") == 6
    assert cache.problem is not None and cache.written == 0
    assert _files(folder) == []


def test_a_file_at_its_cap_is_compacted_and_writing_goes_on(tmp_path: Path, fresh_process: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """(The least recently used records go: tests/security/test_code_cache_eviction.py.)"""
    monkeypatch.setattr(codecache, "MAX_CACHE_FILE", 4000)
    cache = CodeCache(tmp_path)
    engine = Engine(default_settings(), code_cache=cache)
    for i in range(20):
        engine.compile(f"price * {i}")
    (path,) = _files(tmp_path)
    assert cache.written == 20 and cache.compacted > 0 and path.stat().st_size <= 4000


def test_the_user_s_folder_and_turning_it_off() -> None:
    assert default_cache({"S2O_CODE_CACHE": "off"}) is None
    assert default_cache({"S2O_CODE_CACHE": "No"}) is None
    named = default_cache({"S2O_CODE_CACHE": "/srv/cache"})
    assert named is not None and named.folder == Path("/srv/cache")
    xdg = default_cache({"XDG_CACHE_HOME": "/x"})
    assert xdg is not None and xdg.folder == Path("/x/s2o-kernel/compiled")
    home = default_cache({})
    assert home is not None and home.folder == Path.home() / ".cache" / "s2o-kernel" / "compiled"


def test_the_parent_compiles_reported_sources_itself(tmp_path: Path, fresh_process: None) -> None:
    """A worker reports text only; what does not pass the parent's own rules is not written."""
    cache = CodeCache(tmp_path)
    mirror = mirror_module.Mirror(cache)
    settings = default_settings()
    written = mirror.compile(settings, [("price * 2", None), ("x.__class__", None), ("__import__('os')", None),
                                        ("value + 1", ["value"]), ("1 +", None), ("y" * 20_000, None)])
    assert written == 2 and mirror.reported == 6
    assert mirror.compile(settings, [("price * 2", None)]) == 0  # known already
    engine_module._SHARED.clear()
    later = Engine(settings)
    assert CodeCache(tmp_path).load(later) == 2
    assert later.has_compiled("value + 1", frozenset({"value"})) and not later.has_compiled("x.__class__", None)


def test_the_parent_compiles_nothing_for_an_allowlist_of_its_own(tmp_path: Path, fresh_process: None) -> None:
    """Any other allowlist would import, in the unconfined parent, modules only the worker may import."""
    mirror = mirror_module.Mirror(CodeCache(tmp_path))
    own = bare_settings({**default_settings().to_dict(), "allowlist": "json\nlen\n"})
    assert mirror.engine(own) is None
    assert mirror.compile(own, [("len('a')", None)]) == 0
    assert _files(tmp_path) == [] and mirror.reported == 1
    assert mirror.engine(bare_settings({"allowlist": ""})) is not None


def test_the_worker_s_report_is_checked_on_the_wire() -> None:
    good = wire.encode_compiled(7, [("a + 1", None), ("b", ["b"])])
    event = wire.decode_message(good.rstrip(b"\n"), 7)
    assert isinstance(event, wire.Event) and event.payload == [("a + 1", None), ("b", ["b"])]
    for sources in ([["a", 1]], [[1, None]], [["a"]], "a", [["a", [1]]],
                    [["a", None]] * (codecache.MAX_REPORTED + 1)):
        line = b'{"id": 7, "event": "compiled", "sources": ' + wire.json.dumps(sources).encode() + b"}"
        with pytest.raises(S2OError) as caught:
            wire.decode_message(line, 7)
        assert caught.value.code == "worker-protocol"


def test_the_recorder_keeps_at_most_a_report(fresh_process: None) -> None:
    recorder = codecache.Recorder()
    engine = Engine(bare_settings({"allowlist": ""}), code_cache=recorder)
    for i in range(codecache.MAX_REPORTED + 10):
        engine.compile(f"{i} + 1")
    taken = recorder.take()
    assert len(taken) == codecache.MAX_REPORTED and taken[0] == ("0 + 1", None)
    assert recorder.take() == []


WORKER_RUN = textwrap.dedent("""
    import json, sys
    from s2o_kernel.engine import CodeCache, IsolatedSession, default_settings
    session = IsolatedSession(default_settings(), fork=True, code_cache=CodeCache(sys.argv[1]))
    session.set_vars(locals={"price": 2, "quantity": 3, "name": "ab"})
    values = [session.evaluate("price * quantity"), session.evaluate("[c.upper() for c in name]")]
    run = session.run_fragment({"var": {"total": "{ price * quantity + 1 }"}})
    values.append(session.evaluate("total"))
    session.reset()
    print(json.dumps({"values": values, "run": run.code, "reported": session.mirror.reported,
                      "used": session.mirror.used}))
    session.close()
""")


def test_a_second_worker_on_the_same_cache_compiles_nothing(tmp_path: Path) -> None:
    """Two fresh interpreters, one after the other, each forking a contained worker: the second worker
    finds every expression the first compiled (its parent loaded them before the fork)."""
    import json

    def run() -> dict[str, object]:
        done = subprocess.run([sys.executable, "-c", WORKER_RUN, str(tmp_path)], capture_output=True, text=True,
                              timeout=60, check=True)
        return json.loads(done.stdout)

    first, second = run(), run()
    assert first["values"] == second["values"] == [6, ["A", "B"], 7]
    assert first["run"] == second["run"] == "success"
    assert first["reported"] == 5  # the worker's warm-up expression, the three above, the fragment's
    assert second["reported"] == 0
    assert (first["used"], second["used"]) == (0, 5)  # the second worker's first use of each record


# -- the red team of 2026-12-04 (helper session against c185598): each failed before its fix --------------


def test_a_file_another_process_holds_is_skipped_never_waited_for(tmp_path: Path, fresh_process: None) -> None:
    """A confined worker may read every file, and a lock needs only a read handle: writers never wait."""
    import fcntl

    _one_file(tmp_path)
    (path,) = _files(tmp_path)
    size = path.stat().st_size
    with open(path, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        cache = CodeCache(tmp_path)
        engine = Engine(default_settings(), code_cache=cache)
        assert Session(engine, locals={"price": 2}).evaluate("price * 21") == 42
        assert cache.written == 0 and cache.problem is None
    assert path.stat().st_size == size
    engine_module._SHARED.clear()
    assert Engine(default_settings(), code_cache=CodeCache(tmp_path)).compile("price * 22").source == "price * 22"
    assert path.stat().st_size > size  # written once the lock is gone


def test_the_parent_keeps_nothing_and_serves_one_report_a_request(tmp_path: Path, fresh_process: None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = mirror_module.Mirror(CodeCache(tmp_path))
    settings = default_settings()
    assert mirror.compile(settings, [("price * 3", None)], 7) == 1
    engine = mirror.engine(settings)
    assert engine is not None and not engine.has_compiled("price * 3", None)  # written, not kept
    assert mirror.compile(settings, [("price * 4", None)], 7) == 0  # a second report of request 7
    assert mirror.compile(settings, [("price * 3", None)], 8) == 0  # written already
    monkeypatch.setattr(mirror_module, "MIRROR_BUDGET", -1.0)  # no time left: nothing is compiled
    assert mirror.compile(settings, [("price * 5", None)], 9) == 0
    assert mirror.reported == 4


def test_what_a_worker_may_report_is_bounded() -> None:
    recorder = codecache.Recorder()
    engine = Engine(bare_settings({"allowlist": ""}), code_cache=recorder)
    engine.compile("[" + ", ".join(["123456789"] * 450) + "]")  # over MAX_SOURCE characters
    assert recorder.take() == []


def test_the_digest_reads_contents_not_times(tmp_path: Path) -> None:
    """A file changed with its size and modification time kept is another engine (F3a)."""
    package = tmp_path / "pkg"
    package.mkdir()
    module = package / "rules.py"
    module.write_text("MAX_AST_DEPTH = 200\n")
    before = module.stat()
    first = codecache.package_digest(str(package))
    module.write_text("MAX_AST_DEPTH = 150\n")
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert module.stat().st_size == before.st_size
    assert codecache.package_digest(str(package)) != first


def test_an_allowlist_granting_a_host_object_is_never_cached(tmp_path: Path, fresh_process: None) -> None:
    """Your own package's functions may change (become async) with no change to the settings (F3b)."""
    cache = CodeCache(tmp_path)
    engine = Engine(bare_settings({"allowlist": "s2o_reach_hosts.double as double"}), code_cache=cache)
    assert engine.host_entries
    assert Session(engine).evaluate("double(21)") == 42
    assert cache.written == 0 and _files(tmp_path) == []


@pytest.mark.parametrize("odd", ["record-folder", "record-fifo", "key-fifo", "key-folder"])
def test_what_is_not_a_regular_file_turns_the_cache_off(tmp_path: Path, odd: str, fresh_process: None) -> None:
    """Neither a folder nor a FIFO where a file belongs stops an engine or makes it wait (F5)."""
    CodeCache(tmp_path).key()
    digest = codecache.fingerprint_digest(Engine(default_settings()).fingerprint)
    target = tmp_path / (f"{digest.hex()}.s2oc" if odd.startswith("record") else "key")
    if odd.startswith("key"):
        target.unlink()
    if odd.endswith("fifo"):
        os.mkfifo(target, 0o600)
    else:
        target.mkdir(mode=0o700)
    cache = CodeCache(tmp_path)
    engine = Engine(default_settings(), code_cache=cache)
    assert Session(engine, locals={"price": 2}).evaluate("price * 2") == 4
    assert cache.problem is not None


def test_a_torn_record_is_cut_so_later_records_are_read(tmp_path: Path, fresh_process: None) -> None:
    """A record cut short by a crash would hide every record appended after it; the next reader cuts it (F6)."""
    path = _one_file(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:50])  # a record torn after 50 bytes
    assert _loaded(tmp_path) == len(SOURCES)
    assert path.read_bytes() == whole
    engine_module._SHARED.clear()
    Engine(default_settings(), code_cache=CodeCache(tmp_path)).compile("price + 1000")
    assert _loaded(tmp_path) == len(SOURCES) + 1


def test_processes_making_the_key_at_once_agree_on_it(tmp_path: Path) -> None:
    """The key appears whole or not at all: no reader ever finds it empty or half written (F7)."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda _: CodeCache(tmp_path).key(), range(16)))
    assert keys[0] is not None and len(set(keys)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]
