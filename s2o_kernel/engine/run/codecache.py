"""Compiled expressions kept on disk across processes, signed, so that a notebook reopened is hot (issue 12).

A :class:`CodeCache` is a folder of the user's (default ``~/.cache/s2o-kernel/compiled``, see
:func:`default_cache`) holding ``key``, 32 random bytes only its owner may read, and one file per compile
fingerprint (:meth:`.Engine.compile_fingerprint`), ``<digest>.s2oc``. ``digest`` is a SHA-256 of the
fingerprint, of this engine's own source files and of the Python version, so code compiled under other
rules, another allowlist, another engine or another bytecode is never served: it is in another file.

A file is a sequence of records, appended, each ``MAC (32 bytes) | length (4 bytes, big-endian) |
payload``: the payload a ``marshal``-ed tuple (:func:`_record`) of one :class:`.Compiled` (the code of its
function, the names and positions it reads, its flags), of a use of one (``("used", source, fields)``)
or of a compacted file's base (``("base",)``); the MAC an HMAC-SHA256 with the key over
``digest | length | payload``. A record is read only when its MAC holds, so ``marshal`` (not secure
against data made to attack it) only ever reads what a process holding the key wrote, for this very
fingerprint; the first record that does not hold ends the reading (a file cut short by a crash, or
changed, loses its tail, never more).

**Eviction.** A file holds at most :data:`MAX_CACHE_FILE` bytes and :data:`MAX_CACHE_RECORDS` records (a
reader's start costs per record). A write that would pass either compacts the file first
(:meth:`CodeCache._compact`): the most recently used expressions are kept, within :data:`CACHE_KEEP` of
each cap, and the file is rewritten under a random name and renamed in place, under the same lock
appends take (no writer waits for it; a writer whose file was replaced appends to the new one). Use
is what an engine's first compile of a loaded record in a process is (:meth:`.Engine.compile`), told to
the cache (:meth:`CodeCache.used`); in a contained worker, to its parent through the worker's report
(:class:`Recorder`, :class:`.worker.mirror.Mirror`). A use is written as a small record once per key
between two compactions (the base record marks the last one): everything written or used since the
base is more recent than what was not, and within each, the later its last record the more recent. A
notebook reopened writes nothing, and a repeated load (before each worker fork) reads only the records
added since the last (a whole file again only after a compaction replaced it).

**Who writes.** A code object loaded from the file runs with no rule checked again, so a record is
written only by a process that ran the compile rules itself: an in-process engine built with
``code_cache=`` (:meth:`.Engine.__init__`), or the parent of a contained worker (:class:`.worker.mirror.Mirror`), which
compiles again every source its worker reports having compiled and never takes code from the worker. The
worker reads and writes nothing of it (SPEC 12): a forked worker finds the entries its parent loaded
already in its process-wide cache. A folder or key another user could write, a link in place of a file:
the cache is then off (:attr:`CodeCache.problem` says why), never an error of the run.
``docs/performance.md`` ("Across kernels") and ``docs/security.md`` give the figures and the reasons.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import importlib.util
import marshal
import os
import secrets
import stat
import struct
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ...bounds import CACHE_KEEP, MAX_CACHE_FILE, MAX_CACHE_RECORD, MAX_CACHE_RECORDS, MAX_CACHED_SOURCE, MAX_REPORTED
from ..language.compiled import Compiled, is_coroutine
from ..settings import switched_off
from .codestore import CachingEngine

#: The environment variable naming the folder; ``off`` (or ``0``, ``false``, ``no``) turns the cache off.
CACHE_ENV = "S2O_CODE_CACHE"
#: The key's file name and length (bytes).
KEY_NAME, KEY_SIZE = "key", 32
#: The version of the record layout, part of every digest.
LAYOUT = b"s2o-code-3"

_HEADER = struct.Struct(">32sI")
_engine_digest: bytes | None = None
#: Compile fingerprint → its digest (:func:`fingerprint_digest`).
_DIGESTS: dict[tuple[Any, ...], bytes] = {}


def default_cache(environ: Mapping[str, str] | None = None) -> CodeCache | None:
    """The user's cache: the folder :data:`CACHE_ENV` names, else ``$XDG_CACHE_HOME/s2o-kernel/compiled``,
    else ``~/.cache/s2o-kernel/compiled``; ``None`` when :data:`CACHE_ENV` turns it off."""
    env = os.environ if environ is None else environ
    named = env.get(CACHE_ENV, "").strip()
    if switched_off(named):
        return None
    if named:
        return CodeCache(named)
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return CodeCache(os.path.join(base, "s2o-kernel", "compiled"))


def engine_digest() -> bytes:
    """SHA-256 of the record layout, the Python version and bytecode magic, and the path and content of each
    ``.py`` file of this package (``s2o_kernel``: the engine, and the functions of this project an allowlist
    may grant), so a package changed in any way is another engine; computed once per process (~5 ms; in the
    kernel, before its first fork)."""
    global _engine_digest
    if _engine_digest is None:
        _engine_digest = package_digest(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return _engine_digest


def package_digest(root: str) -> bytes:
    """SHA-256 of the record layout, the Python version and the relative path and content of every ``.py``
    file under the folder ``root``, in path order. Raises ``OSError`` for a file that cannot be read."""
    h = hashlib.sha256(LAYOUT + importlib.util.MAGIC_NUMBER + sys.version.encode())
    files: list[str] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        files.extend(os.path.join(folder, name) for name in names if name.endswith(".py"))
    for path in sorted(files):
        with open(path, "rb") as f:
            h.update(os.path.relpath(path, root).encode() + b"\0" + f.read() + b"\0")
    return h.digest()


def _canonical(value: Any) -> Any:
    """``value`` with every set sorted, so its ``repr`` is the same in every process (string hashes are not)."""
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(repr(_canonical(v)) for v in value))
    if isinstance(value, (tuple, list)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return ("dict", sorted((repr(_canonical(k)), repr(_canonical(v))) for k, v in value.items()))
    return value


def fingerprint_digest(fingerprint: tuple[Any, ...]) -> bytes:
    """The 32-byte digest naming the file of a compile fingerprint (see the module docstring); once per
    fingerprint and process."""
    digest = _DIGESTS.get(fingerprint)
    if digest is None:
        digest = hashlib.sha256(engine_digest() + repr(_canonical(fingerprint)).encode()).digest()
        if len(_DIGESTS) >= 64:
            _DIGESTS.clear()
        _DIGESTS[fingerprint] = digest
    return digest


def _mac(key: bytes, digest: bytes, size: bytes, payload: bytes) -> bytes:
    return hmac.digest(key, digest + size + payload, "sha256")


def _record(compiled: Compiled, fields: frozenset[str] | None) -> bytes | None:
    """The payload of ``compiled`` (compiled with command ``fields``), or ``None`` when it cannot be kept."""
    if len(compiled.source) > MAX_CACHED_SOURCE:
        return None
    return marshal.dumps((
        compiled.source, tuple(sorted(fields)) if fields is not None else None, compiled.code,
        tuple(sorted(compiled.local_names)), dict(compiled.name_positions), compiled.may_run_long,
        compiled.may_hold_objects, compiled.top_call, compiled.call_at))


#: A cache key: an expression's source and its command fields (``None``: a plain expression).
Key = tuple[str, frozenset[str] | None]
#: What a record holds (:func:`_item`): ``("entry", key, compiled)``, ``("used", key, None)`` or
#: ``("base", None, None)``.
Item = tuple[str, Key | None, Compiled | None]
#: A record to append: its cache key, its bytes (MAC, length, payload), and whether it holds compiled code
#: (else it is a use).
_Signed = tuple[Key, bytes, bool]

#: The payload of the record that ends a compacted file's records (see :meth:`CodeCache._compact`).
_BASE = marshal.dumps(("base",))


def _used(source: str, fields: frozenset[str] | None) -> bytes:
    """The payload of a use of the record of ``(source, fields)``."""
    return marshal.dumps(("used", source, tuple(sorted(fields)) if fields is not None else None))


def _item(payload: bytes, build: bool = True) -> Item | None:
    """What a record's payload holds (signed: written by this layout, so only its outline is checked): a
    compiled expression (its :class:`.Compiled` only when ``build``), a use of one, or the base of a
    compacted file; ``None`` for one of another outline. Raises ``ValueError``, ``TypeError``, ``KeyError``
    or ``EOFError`` for a payload that is no record."""
    data = marshal.loads(payload)
    if type(data) is not tuple:
        return None
    if data == ("base",):
        return "base", None, None
    if len(data) == 3 and data[0] == "used" and type(data[1]) is str:
        return "used", (data[1], frozenset(data[2]) if data[2] is not None else None), None
    if len(data) != 9:
        return None
    source, fields, code, local_names, positions, run_long, hold, top_call, call_at = data
    if type(source) is not str or type(code) is not types.CodeType or type(positions) is not dict:
        return None
    if not build:
        return "entry", (source, frozenset(fields) if fields is not None else None), None
    compiled = Compiled(source=source, code=code, local_names=frozenset(local_names), name_positions=positions,
                        may_run_long=run_long, may_hold_objects=hold, is_coroutine_code=is_coroutine(code),
                        top_call=top_call, call_at=call_at)
    return "entry", (source, frozenset(fields) if fields is not None else None), compiled


@dataclass
class _Seen:
    """What a :class:`CodeCache` knows of one file of records, the one at its path when it last looked
    (``ident``: its device and inode; a compaction puts a new file there): how many bytes of whole records
    it has loaded into its engines (``loaded``); how many records (``records``) lie in the first
    ``counted`` bytes; and the keys of the records written or used since the file's base (``recent``:
    those it read, wrote or used itself)."""

    ident: tuple[int, int]
    loaded: int = 0
    counted: int = 0
    records: int = 0
    recent: set[Key] = field(default_factory=set)


class CodeCache:
    """A folder of signed compiled expressions (see the module docstring); ``CodeCache(folder)``.

    Nothing on the folder is touched until the first :meth:`load` or :meth:`write`. Every failure turns
    the cache off for this object and is kept in :attr:`problem`; no method raises.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        #: Why the cache is off (a sentence), or ``None`` while it works.
        self.problem: str | None = None
        #: Compiled expressions loaded (``loaded``), records read of any kind (``read``: what loading costs),
        #: records of expressions compiled here written (``written``), uses written (``touched``) and
        #: compactions made (``compacted``), by this object.
        self.loaded = self.read = self.written = self.touched = self.compacted = 0
        self._key: bytes | None = None
        self._read: set[bytes] = set()  # digests whose file this object has read
        self._seen: dict[bytes, _Seen] = {}  # digest -> what this object knows of its file

    def _off(self, why: str) -> None:
        self.problem = self.problem or why

    def key(self) -> bytes | None:
        """The folder's key, made on first use; ``None`` (and :attr:`problem` set) when it cannot be trusted."""
        if self._key is not None or self.problem is not None:
            return self._key
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.stat(self.folder)
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                self._off(f"the folder {self.folder} is not the user's own, or others may write it")
                return None
            path = self.folder / KEY_NAME
            if not path.exists():
                self._make_key(path)
            data = self._read_regular(path, KEY_SIZE + 1, private=True)
        except OSError as exc:
            self._off(f"the folder {self.folder} cannot be used ({exc.strerror or exc})")
            return None
        if data is None or len(data) != KEY_SIZE:
            self._off(f"the key {path} is not a {KEY_SIZE}-byte file only the user may read")
            return None
        self._key = data
        return data

    @staticmethod
    def _make_key(path: Path) -> None:
        """Write a new key whole under a name of its own, then link it in place: a reader finds no
        key or a whole one (two processes making one at once: the first link wins, the other reads it)."""
        temporary = path.with_name(f"{KEY_NAME}.{secrets.token_hex(8)}.new")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, secrets.token_bytes(KEY_SIZE))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)

    @staticmethod
    def _regular(fd: int, *, private: bool = False) -> os.stat_result | None:
        """The status of the open file ``fd`` when it is a regular file of the user's (and, ``private``, only
        the user's to read), else ``None``. Raises ``OSError``."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (0o077 if private else 0o022):
            return None
        return st

    @classmethod
    def _read_regular(cls, path: Path, limit: int, *, private: bool = False) -> bytes | None:
        """Up to ``limit`` bytes of ``path`` when it is a regular file of the user's (and, ``private``, only
        the user's to read), else ``None``; never follows a link, never waits on a FIFO. Raises ``OSError``."""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if cls._regular(fd, private=private) is None:
                return None
            return os.read(fd, limit)  # a regular file: one read gives it whole, up to ``limit`` (the key's size)
        finally:
            os.close(fd)

    def _path(self, digest: bytes) -> Path:
        return self.folder / f"{digest.hex()}.s2oc"

    def load(self, engine: CachingEngine, *, again: bool = False) -> int:
        """Put the compiled expressions of ``engine``'s fingerprint into its (process-wide) compile cache, once
        per fingerprint and object unless ``again``; returns how many were loaded. Again, only the records
        added since this object last read the file are read (all of them when a compaction put a new file in
        its place). An engine granting a host object reads nothing (see :func:`usable_by`)."""
        if not usable_by(engine):
            return 0
        digest = fingerprint_digest(engine.fingerprint)
        key = self.key()
        if key is None or (digest in self._read and not again):
            return 0
        self._read.add(digest)
        path = self._path(digest)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self._off(f"a file of {self.folder} cannot be read ({exc.strerror or exc})")
            return 0
        try:
            st = self._regular(fd)
            if st is None:
                os.close(fd)
                self._off(f"{path} is not a regular file of the user's")
                return 0
            with os.fdopen(fd, "rb") as f:  # closes fd
                count = self._load_from(engine, key, digest, f, self._seen_as(digest, st), path)
        except OSError as exc:
            self._off(f"a file of {self.folder} cannot be read ({exc.strerror or exc})")
            return 0
        self.loaded += count
        return count

    def _seen_as(self, digest: bytes, st: os.stat_result) -> _Seen:
        """What this object knows of the file ``st`` describes: kept while it is the same file, not cut
        below what was seen of it; else nothing yet."""
        seen = self._seen.get(digest)
        ident = (st.st_dev, st.st_ino)
        if seen is None or seen.ident != ident or max(seen.loaded, seen.counted) > st.st_size:
            seen = self._seen[digest] = _Seen(ident)
        return seen

    def _load_from(self, engine: CachingEngine, key: bytes, digest: bytes, f: BinaryIO, seen: _Seen,
                   path: Path) -> int:
        """Load the records of the open file ``f`` after ``seen.loaded`` (all of it from 0 when that start
        does not read as records); returns how many compiled expressions were loaded."""
        start = seen.loaded
        f.seek(start)
        data = f.read(max(0, MAX_CACHE_FILE - start))
        items = list(self._items(key, digest, data))
        end = items[-1][1] if items else 0
        if start and end < len(data):  # the bytes after what was read are no whole records: read it all
            seen.loaded, seen.recent = 0, set()
            return self._load_from(engine, key, digest, f, seen, path)
        count = 0
        for item, _ in items:
            kind, cache_key, compiled = item if item is not None else ("", None, None)
            if kind == "base":
                seen.recent.clear()
            elif cache_key is not None:
                seen.recent.add(cache_key)
                if compiled is not None:
                    engine.stored(cache_key, compiled)
                    count += 1
        if end < len(data):
            self._cut(path, seen.ident, end, len(data))
        self.read += len(items)
        seen.loaded = start + end
        if seen.counted == start:  # what was read is counted as well
            seen.counted, seen.records = seen.loaded, seen.records + len(items)
        return count

    @staticmethod
    def _items(key: bytes, digest: bytes, data: bytes, build: bool = True) -> Iterable[tuple[Item | None, int]]:
        """What each record holds (``None`` for one of another outline; compiled expressions built only when
        ``build``) and where the record ends, up to the first record that does not hold."""
        at = 0
        while at + _HEADER.size <= len(data):
            mac, length = _HEADER.unpack_from(data, at)
            start = at + _HEADER.size
            payload = data[start:start + length]
            if len(payload) != length or not hmac.compare_digest(mac, _mac(key, digest, data[at + 32:start], payload)):
                return  # cut short or not ours: nothing after it is read
            try:
                item = _item(payload, build)
            except (ValueError, EOFError, TypeError, KeyError):
                return
            at = start + length
            yield item, at

    def _cut(self, path: Path, ident: tuple[int, int], end: int, seen: int) -> None:
        """Cut the file at ``path`` back to ``end`` (after its last record that holds), when no other process
        holds it and it is still the file ``ident`` names, ``seen`` bytes long: records appended after a torn
        one stay readable."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == ident and st.st_size == seen:
                os.ftruncate(fd, end)
        except OSError:
            pass
        finally:
            os.close(fd)

    def write(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """Append a record for each ``(command fields, compiled)`` that ``engine`` compiled itself; returns
        how many were written: none when the cache is off, the engine grants a host object or another
        process holds the file (never waited for). A file the records would take past :data:`MAX_CACHE_FILE`
        bytes or :data:`MAX_CACHE_RECORDS` records is compacted first (:meth:`_compact`)."""
        key = self.key()
        if key is None or not usable_by(engine):
            return 0
        records = []
        for fields, compiled in entries:
            payload = _record(compiled, fields)
            if payload is not None and len(payload) <= MAX_CACHE_RECORD:
                records.append(((compiled.source, fields), payload))
        count = self._append(key, fingerprint_digest(engine.fingerprint), records, uses=False)
        self.written += count
        return count

    def used(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """``engine`` used these entries, which this cache loaded into it (its first use of each in this
        process): append a small record of the use of each that has been neither written nor used since the
        file's base, as far as this object knows, so that a compaction keeps the most recently used (the same
        bounds and rules as :meth:`write`); returns how many uses were written."""
        key = self.key()
        if key is None or not usable_by(engine):
            return 0
        digest = fingerprint_digest(engine.fingerprint)
        seen = self._seen.get(digest)
        with contextlib.suppress(OSError):
            st = os.stat(self._path(digest), follow_symlinks=False)
            if seen is not None and seen.ident == (st.st_dev, st.st_ino):  # the file it knows: no lock for the known
                entries = [(fields, compiled) for fields, compiled in entries
                           if (compiled.source, fields) not in seen.recent]
        records = [((compiled.source, fields), _used(compiled.source, fields)) for fields, compiled in entries
                   if len(compiled.source) <= MAX_CACHED_SOURCE]
        count = self._append(key, digest, records, uses=True)
        self.touched += count
        return count

    def _append(self, key: bytes, digest: bytes, payloads: list[tuple[Key, bytes]], *, uses: bool) -> int:
        """Sign and append ``(cache key, payload)`` records to the file of ``digest`` (see :meth:`write`);
        ``uses``: they are uses, and those of keys known recent are left out. How many were written."""
        if not payloads:
            return 0
        records: list[_Signed] = []
        for cache_key, payload in payloads:
            size = struct.pack(">I", len(payload))
            records.append((cache_key, _mac(key, digest, size, payload) + size + payload, not uses))
        path = self._path(digest)
        for _ in range(2):  # once more when a compaction put a new file in place of the one opened
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
            except OSError as exc:
                self._off(f"a file of {self.folder} cannot be written ({exc.strerror or exc})")
                return 0
            try:
                written = self._append_to(fd, path, key, digest, records, uses)
            finally:
                os.close(fd)
            if written is not None:
                return written
        return 0

    def _append_to(self, fd: int, path: Path, key: bytes, digest: bytes, records: list[_Signed],
                   uses: bool) -> int | None:
        """Append ``records`` to the open file ``fd``, compacting it first when they would take it past a cap;
        how many were written, or ``None`` when ``fd`` is no longer the file at ``path``."""
        before = -1
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # two kernels never interleave; none waits for another
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return 0
            at_path = os.stat(path, follow_symlinks=False)
            if (at_path.st_dev, at_path.st_ino) != (st.st_dev, st.st_ino):
                return None
            seen = self._seen_as(digest, st)
            if uses:
                records = [signed for signed in records if signed[0] not in seen.recent]
                if not records:
                    return 0
            out = b"".join(record for _, record, _ in records)
            self._count(fd, seen, st.st_size)
            if st.st_size + len(out) > MAX_CACHE_FILE or seen.records + len(records) > MAX_CACHE_RECORDS:
                return self._compact(fd, path, key, digest, records)
            before = st.st_size
            if os.write(fd, out) != len(out):  # a full disk: no torn record stays
                os.ftruncate(fd, before)
                return 0
        except BlockingIOError:
            return 0
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                self._off(f"a file of {self.folder} cannot be written ({exc.strerror or exc})")
            if before >= 0:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, before)
            return 0
        if seen.counted == before:
            seen.counted, seen.records = before + len(out), seen.records + len(records)
        seen.recent.update(cache_key for cache_key, _, _ in records)
        return len(records)

    @staticmethod
    def _count(fd: int, seen: _Seen, size: int) -> None:
        """Count the records of the file ``fd`` (``size`` bytes) after ``seen.counted``, by their headers
        only (what a cap needs: the MACs are checked when a record is read or a file compacted)."""
        if seen.counted >= size:
            return
        data = os.pread(fd, size - seen.counted, seen.counted)
        at = 0
        while at + _HEADER.size <= len(data):
            length = _HEADER.unpack_from(data, at)[1]
            if at + _HEADER.size + length > len(data):
                break
            at += _HEADER.size + length
            seen.records += 1
        seen.counted += at

    def _compact(self, fd: int, path: Path, key: bytes, digest: bytes, records: list[_Signed]) -> int:
        """Rewrite the file ``fd`` (locked, at ``path``) with its compiled expressions and those of ``records``,
        most recently used last, keeping the most recent within :data:`CACHE_KEEP` of each cap, and a base
        record after them; returns how many of ``records`` are kept (written, or a use of one kept).

        Recency: an expression written or used after the file's base (since the last compaction) is more
        recent than one that was not, and among each, the later its last record, the more recent; so a
        record used in every session stays, and uses are written once per key between two compactions, not
        once per session (:meth:`used`). The new file is written under a random name (``O_CREAT | O_EXCL |
        O_NOFOLLOW``, mode 0600) and renamed over ``path``: a reader finds the old file or the new one
        whole, and a writer that opened the old one appends to the new one (:meth:`_append_to`). Raises
        ``OSError``."""
        data = os.pread(fd, MAX_CACHE_FILE, 0)
        code: dict[Key, bytes] = {}
        last: dict[Key, int] = {}
        base, at, order = -1, 0, 0  # the index of the base record; where a record starts; its index
        for item, end in self._items(key, digest, data, build=False):
            if item is not None:
                kind, cache_key, _ = item
                if kind == "base":
                    base = order
                elif cache_key is not None:
                    last[cache_key] = order
                    if kind == "entry":
                        code[cache_key] = data[at:end]
            at, order = end, order + 1
        for cache_key, record, is_code in records:
            last[cache_key], order = order, order + 1
            if is_code:
                code[cache_key] = record
        room, most = int(MAX_CACHE_FILE * CACHE_KEEP), int(MAX_CACHE_RECORDS * CACHE_KEEP) - 1
        kept: list[Key] = []
        for cache_key in sorted(code, key=lambda k: (last[k] > base, last[k]), reverse=True):
            if len(kept) >= most or len(code[cache_key]) > room:
                break
            kept.append(cache_key)
            room -= len(code[cache_key])
        size = struct.pack(">I", len(_BASE))
        body = b"".join(code[cache_key] for cache_key in reversed(kept)) + _mac(key, digest, size, _BASE) + size + _BASE
        temporary = path.with_name(f"{path.name}.{secrets.token_hex(16)}.new")
        new = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                if os.write(new, body) != len(body):
                    raise OSError(errno.ENOSPC, "the disk is full")
                os.fsync(new)
                st = os.fstat(new)
            finally:
                os.close(new)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._seen[digest] = _Seen((st.st_dev, st.st_ino), counted=len(body), records=len(kept) + 1)
        self.compacted += 1
        kept_keys = set(kept)
        return sum(cache_key in kept_keys for cache_key, _, _ in records)


def usable_by(engine: CachingEngine) -> bool:
    """Whether ``engine``'s compiled code may be kept on disk: not when its allowlist grants a host object
    (your own or a third party's package), whose functions may change (becoming async, say) with no change
    to the settings or to this package, which the file's digest covers."""
    return not engine.host_entries


class Recorder:
    """The worker's side: keeps the sources its engines compiled cold, for the parent to compile again.

    Given to the worker's engine as ``code_cache`` (it reads and writes no file: :meth:`load` does
    nothing); :meth:`take` hands the parent at most :data:`MAX_REPORTED` ``(source, command fields)``: those
    compiled cold, and those first used of the records the parent loaded before the fork.
    """

    def __init__(self) -> None:
        self._sources: list[tuple[str, list[str] | None]] = []

    def load(self, engine: CachingEngine) -> int:
        """Nothing: the worker reads no file (a forked worker has its parent's entries already)."""
        return 0

    def write(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """Keep the sources of ``entries`` (up to :data:`MAX_REPORTED` between two :meth:`take`)."""
        for fields, compiled in entries:
            if len(self._sources) < MAX_REPORTED and len(compiled.source) <= MAX_CACHED_SOURCE:
                self._sources.append((compiled.source, sorted(fields) if fields is not None else None))
        return 0

    def used(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """Keep the sources of ``entries``, found in the compile cache the worker inherited, as :meth:`write`
        does: the parent, which has them from the file, takes each as a use of its record (:mod:`..mirror`)."""
        return self.write(engine, entries)

    def take(self) -> list[tuple[str, list[str] | None]]:
        """The sources kept since the last call, oldest first."""
        taken, self._sources = self._sources, []
        return taken
