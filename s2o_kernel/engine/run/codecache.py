"""Compiled expressions kept on disk across processes, signed, so that a notebook reopened is hot (issue 12).

A :class:`CodeCache` is a folder of the user's (default ``~/.cache/s2o-kernel/compiled``, see
:func:`default_cache`) holding ``key``, 32 random bytes only its owner may read, and one file per compile
fingerprint (:meth:`.Engine.compile_fingerprint`), ``<digest>.s2oc``. ``digest`` is a SHA-256 of the
fingerprint, of this engine's own source files and of the Python version, so code compiled under other
rules, another allowlist, another engine or another bytecode is never served: it is in another file.

A file is a sequence of records, appended, each ``MAC (32 bytes) | length (4 bytes, big-endian) |
payload``: the payload a ``marshal``-ed tuple (:func:`_record`) of one :class:`.Compiled` (the code of its
function, the names and positions it reads, its flags), the MAC an HMAC-SHA256 with the key over
``digest | length | payload``. A record is read only when its MAC holds, so ``marshal`` (not secure
against data made to attack it) only ever reads what a process holding the key wrote, for this very
fingerprint; the first record that does not hold ends the reading (a file cut short by a crash, or
changed, loses its tail, never more).

**Who writes.** A code object loaded from the file runs with no rule checked again, so a record is
written only by a process that ran the compile rules itself: an in-process engine built with
``code_cache=`` (:meth:`.Engine.__init__`), or the parent of a contained worker (:class:`.worker.mirror.Mirror`), which
compiles again every source its worker reports having compiled and never takes code from the worker. The
worker reads and writes nothing of it (SPEC 12): a forked worker finds the entries its parent loaded
already in its process-wide cache. A folder or key another user could write, a link in place of a file,
a file over :data:`MAX_CACHE_FILE` bytes: the cache is then off (:attr:`CodeCache.problem` says why), never an
error of the run. ``docs/performance.md`` ("Across kernels") and ``docs/security.md`` give the figures
and the reasons.
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
from pathlib import Path
from typing import Any

from ...bounds import MAX_CACHE_FILE, MAX_CACHE_RECORD, MAX_CACHED_SOURCE, MAX_REPORTED
from ..language.compiled import Compiled, is_coroutine
from ..settings import switched_off
from .codestore import CachingEngine

#: The environment variable naming the folder; ``off`` (or ``0``, ``false``, ``no``) turns the cache off.
CACHE_ENV = "S2O_CODE_CACHE"
#: The key's file name and length (bytes).
KEY_NAME, KEY_SIZE = "key", 32
#: The version of the record layout, part of every digest.
LAYOUT = b"s2o-code-2"

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


def _entry(payload: bytes) -> tuple[tuple[str, frozenset[str] | None], Compiled] | None:
    """The cache key and :class:`.Compiled` of a record's payload (signed: written by this layout, so only
    its outline is checked); ``None`` for one of another outline. Raises ``ValueError``, ``TypeError``,
    ``KeyError`` or ``EOFError`` for a payload that is not a record."""
    data = marshal.loads(payload)
    if type(data) is not tuple or len(data) != 9:
        return None
    source, fields, code, local_names, positions, run_long, hold, top_call, call_at = data
    if type(source) is not str or type(code) is not types.CodeType or type(positions) is not dict:
        return None
    compiled = Compiled(source=source, code=code, local_names=frozenset(local_names), name_positions=positions,
                        may_run_long=run_long, may_hold_objects=hold, is_coroutine_code=is_coroutine(code),
                        top_call=top_call, call_at=call_at)
    return (source, frozenset(fields) if fields is not None else None), compiled


class CodeCache:
    """A folder of signed compiled expressions (see the module docstring); ``CodeCache(folder)``.

    Nothing on the folder is touched until the first :meth:`load` or :meth:`write`. Every failure turns
    the cache off for this object and is kept in :attr:`problem`; no method raises.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        #: Why the cache is off (a sentence), or ``None`` while it works.
        self.problem: str | None = None
        #: Records read (``loaded``) and written (``written``) by this object.
        self.loaded = self.written = 0
        self._key: bytes | None = None
        self._read: set[bytes] = set()  # digests whose file this object has read

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
    def _read_regular(path: Path, limit: int, *, private: bool = False) -> bytes | None:
        """Up to ``limit`` bytes of ``path`` when it is a regular file of the user's (and, ``private``, only
        the user's to read), else ``None``; never follows a link, never waits on a FIFO. Raises ``OSError``."""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (0o077 if private else 0o022):
                return None
            return f.read(limit)

    def _path(self, digest: bytes) -> Path:
        return self.folder / f"{digest.hex()}.s2oc"

    def load(self, engine: CachingEngine, *, again: bool = False) -> int:
        """Put every record of ``engine``'s fingerprint into its (process-wide) compile cache, once per
        fingerprint and object unless ``again``; returns how many were read. An engine granting a host
        object reads nothing (see :func:`usable_by`)."""
        if not usable_by(engine):
            return 0
        digest = fingerprint_digest(engine.fingerprint)
        key = self.key()
        if key is None or (digest in self._read and not again):
            return 0
        self._read.add(digest)
        path = self._path(digest)
        try:
            data = self._read_regular(path, MAX_CACHE_FILE)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self._off(f"a file of {self.folder} cannot be read ({exc.strerror or exc})")
            return 0
        if data is None:
            self._off(f"{path} is not a regular file of the user's")
            return 0
        count, end = 0, 0
        for entry, at in self._entries(key, digest, data):
            end = at
            if entry is not None:
                engine.cached(*entry)
                count += 1
        if end < len(data):
            self._cut(path, end, len(data))
        self.loaded += count
        return count

    @staticmethod
    def _entries(key: bytes, digest: bytes, data: bytes) -> Iterable[tuple[tuple[tuple[str, frozenset[str] | None],
                                                                                  Compiled] | None, int]]:
        """Each record's entry (``None`` for one of another outline) and where the record ends, up to the first
        record that does not hold."""
        at = 0
        while at + _HEADER.size <= len(data):
            mac, length = _HEADER.unpack_from(data, at)
            start = at + _HEADER.size
            payload = data[start:start + length]
            if len(payload) != length or not hmac.compare_digest(mac, _mac(key, digest, data[at + 32:start], payload)):
                return  # cut short or not ours: nothing after it is read
            try:
                entry = _entry(payload)
            except (ValueError, EOFError, TypeError, KeyError):
                return
            at = start + length
            yield entry, at

    def _cut(self, path: Path, end: int, seen: int) -> None:
        """Cut the file at ``path`` back to ``end`` (after its last record that holds), when no other process
        holds it and it is still ``seen`` bytes long: records appended after a torn one stay readable."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_size == seen:
                os.ftruncate(fd, end)
        except OSError:
            pass
        finally:
            os.close(fd)

    def write(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """Append a record for each ``(command fields, compiled)`` that ``engine`` compiled itself; returns
        how many were written: none when the cache is off, the engine grants a host object, another process
        holds the file (never waited for) or the file would pass :data:`MAX_CACHE_FILE`."""
        key = self.key()
        if key is None or not usable_by(engine):
            return 0
        digest = fingerprint_digest(engine.fingerprint)
        out = bytearray()
        count = 0
        for fields, compiled in entries:
            payload = _record(compiled, fields)
            if payload is None or len(payload) > MAX_CACHE_RECORD:
                continue
            size = struct.pack(">I", len(payload))
            out += _mac(key, digest, size, payload) + size + payload
            count += 1
        if not out:
            return 0
        try:
            fd = os.open(self._path(digest), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                         0o600)
        except OSError as exc:
            self._off(f"a file of {self.folder} cannot be written ({exc.strerror or exc})")
            return 0
        before = -1
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # two kernels never interleave; none waits for another
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size + len(out) > MAX_CACHE_FILE:
                return 0
            before = st.st_size
            if os.write(fd, bytes(out)) != len(out):  # a full disk: no torn record stays
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
        finally:
            os.close(fd)
        self.written += count
        return count


def usable_by(engine: CachingEngine) -> bool:
    """Whether ``engine``'s compiled code may be kept on disk: not when its allowlist grants a host object
    (your own or a third party's package), whose functions may change (becoming async, say) with no change
    to the settings or to this package, which the file's digest covers."""
    return not engine.host_entries


class Recorder:
    """The worker's side: keeps the sources its engines compiled cold, for the parent to compile again.

    Given to the worker's engine as ``code_cache`` (it reads and writes no file: :meth:`load` does
    nothing); :meth:`take` hands the parent at most :data:`MAX_REPORTED` ``(source, command fields)``.
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

    def take(self) -> list[tuple[str, list[str] | None]]:
        """The sources kept since the last call, oldest first."""
        taken, self._sources = self._sources, []
        return taken
