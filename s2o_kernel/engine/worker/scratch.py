"""The worker's scratch folder, as its parent makes, holds and removes it (SPEC 12: nothing a run starts outlives it).

The confined worker may write only in its scratch folder (:mod:`..confine`), so it cannot remove it;
:class:`~.channel.Channel` does when the worker ends. A parent that is killed outright (``SIGKILL``, a
kernel shut down with ``now=True``, an out-of-memory kill) removes nothing, and before this module every
such kernel left an empty ``s2o-worker-*`` folder in the temporary folder for good.

So each folder has a *lock file* beside it, ``<folder>.lock``, outside the folder (the worker cannot
reach it), held with ``flock`` by the parent for as long as it lives: the kernel releases a lock however
it ends, and the lock works across PID namespaces sharing ``/tmp``, where a process id would not. The
first folder a process makes (:func:`make`) first sweeps the temporary folder: a ``s2o-worker-*.lock``
of this user that it can lock is one whose owner has ended, and its folder and lock are removed
(:func:`sweep`). The lock is taken under a temporary name and renamed into place, so a sweep never sees a
lock that is not yet held. Folders without a lock file (made before this module, or by a worker started
on its own) are left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ...bounds import SWEEP_MOST

#: The prefix of every scratch folder in the temporary folder.
PREFIX = "s2o-worker-"
#: The suffix of a scratch folder's lock file, beside it.
LOCK_SUFFIX = ".lock"

_swept = False


class Scratch:
    """One scratch folder (``path``, a ``str``) and the held lock beside it; :meth:`remove` ends both."""

    def __init__(self, path: str, lock_fd: int) -> None:
        self.path = path
        self._lock_fd: int | None = lock_fd

    def remove(self) -> None:
        """Remove the folder (not following links the worker may have made in it), then the lock file, and
        release the lock. Idempotent; raises nothing."""
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(self.path + LOCK_SUFFIX)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def make() -> Scratch:
    """A new scratch folder in the temporary folder, its lock held by this process (close-on-exec: a worker
    started by ``exec`` does not inherit it; a forked one closes it). The first call of a process sweeps
    stale folders first (:func:`sweep`). Raises ``OSError`` when the folder or its lock cannot be made
    (nothing is left behind then)."""
    global _swept
    if not _swept:
        _swept = True
        sweep(tempfile.gettempdir())
    path = tempfile.mkdtemp(prefix=PREFIX)
    pending = path + LOCK_SUFFIX + ".new"
    try:
        fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(pending, path + LOCK_SUFFIX)  # the lock stays held: it is the open file's, not the name's
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(pending)
        shutil.rmtree(path, ignore_errors=True)
        raise
    return Scratch(path, fd)


def sweep(folder: str) -> list[str]:
    """Remove, in ``folder``, the scratch folders of this user whose owner has ended: each
    ``s2o-worker-*.lock`` that is a regular file of this user and can be locked now, its folder (when it is
    a real folder of this user) and then the lock file. At most :data:`SWEEP_MOST` of them. Returns the
    folders removed; raises nothing (a folder that cannot be read is not swept)."""
    removed: list[str] = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(PREFIX) and n.endswith(LOCK_SUFFIX))
    except OSError:
        return removed
    uid = os.getuid()
    for name in names[:SWEEP_MOST]:
        lock = os.path.join(folder, name)
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held: its owner lives
                continue
            scratch = Path(lock[: -len(LOCK_SUFFIX)])
            with contextlib.suppress(OSError):
                kept = scratch.lstat()
                if stat.S_ISDIR(kept.st_mode) and kept.st_uid == uid:
                    shutil.rmtree(scratch, ignore_errors=True)
                    removed.append(str(scratch))
            with contextlib.suppress(OSError):
                os.unlink(lock)
        finally:
            os.close(fd)
    return removed
