"""The worker's Landlock rules: read everywhere, write only in its scratch folder, no TCP, no signals out.

SPEC 12 ("containment in depth"). Landlock is the Linux security module an
unprivileged process uses to restrict itself (``Documentation/userspace-api/
landlock.rst``). :func:`restrict` builds one ruleset from what the running
kernel's Landlock ABI supports and enforces it on the process:

* file system (ABI 1+): every access right the ABI knows is *handled*, so
  denied unless a rule grants it. Beneath ``/`` the worker may read files and
  list directories (:data:`READ`; it imports modules lazily). Beneath its
  scratch folder it may also write, create, remove and truncate regular files
  and directories (:data:`SCRATCH`). Nothing grants ``EXECUTE`` (no program
  can be run, whatever seccomp does; shared libraries are mapped with
  ``mmap``, which this right does not govern), making devices, sockets, pipes
  or symbolic links, linking or renaming across folders (``REFER``), or device
  ``ioctl`` (ABI 5+);
* network (ABI 4+, Linux 6.7): TCP ``bind`` and ``connect`` are handled and
  never granted;
* scopes (ABI 6+, Linux 6.12): no connection to an abstract UNIX socket and
  no signal to a process outside the worker's own domain.

A part the kernel's ABI lacks is reported unavailable with the reason. Files
opened before the rules (the worker's pipes) keep working. Landlock confines
the calling thread and the threads it starts later, so :func:`restrict`
refuses to run when other threads exist already.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

from .syscalls import syscall

#: Landlock's system calls: the same numbers on every architecture.
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446

CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

#: ``LANDLOCK_ACCESS_FS_*`` name → (bit, first ABI that knows it).
FS_RIGHTS: dict[str, tuple[int, int]] = {
    "execute": (1 << 0, 1), "write_file": (1 << 1, 1), "read_file": (1 << 2, 1), "read_dir": (1 << 3, 1),
    "remove_dir": (1 << 4, 1), "remove_file": (1 << 5, 1), "make_char": (1 << 6, 1), "make_dir": (1 << 7, 1),
    "make_reg": (1 << 8, 1), "make_sock": (1 << 9, 1), "make_fifo": (1 << 10, 1), "make_block": (1 << 11, 1),
    "make_sym": (1 << 12, 1), "refer": (1 << 13, 2), "truncate": (1 << 14, 3), "ioctl_dev": (1 << 15, 5),
}


def _bits(*names: str) -> int:
    out = 0
    for name in names:
        out |= FS_RIGHTS[name][0]
    return out


#: Granted beneath ``/``: read files and list directories.
READ = _bits("read_file", "read_dir")
#: Granted beneath the scratch folder: read, and write, create, remove and truncate files and directories.
SCRATCH = READ | _bits("write_file", "remove_dir", "remove_file", "make_dir", "make_reg", "truncate")

NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
NET_ABI = 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
SCOPE_ABI = 6

#: The parts of the Landlock confinement, as :func:`restrict` reports them.
PARTS = ("landlock.fs", "landlock.net", "landlock.scope")


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64))


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def abi_version() -> int:
    """The highest Landlock ABI the running kernel supports.

    Raises ``OSError``: ``ENOSYS`` when Landlock is not built into the kernel,
    ``EOPNOTSUPP`` when it is built in but not enabled at boot (``lsm=``).
    """
    return syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)


def _why_unavailable(exc: OSError) -> str:
    if exc.errno == errno.ENOSYS:
        return "this kernel has no Landlock (CONFIG_SECURITY_LANDLOCK)"
    if exc.errno == errno.EOPNOTSUPP:
        return "Landlock is not enabled at boot (add it to the kernel's lsm= list)"
    return f"Landlock refused the rules: {exc.strerror}"


def thread_count() -> int:
    """Threads of this process (``/proc/self/task``); 1 when that cannot be read."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def handled_fs(abi: int) -> int:
    """Every file-system access right Landlock ABI ``abi`` knows (all of them are handled, i.e. denied
    unless granted)."""
    return sum(bit for bit, since in FS_RIGHTS.values() if since <= abi)


def _allow_beneath(ruleset: int, path: Path, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(access, fd)
        syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def _enforce(abi: int, scratch: Path) -> None:
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= NET_ABI else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= SCOPE_ABI else 0)
    # the struct grew with the ABI: an older kernel refuses a size it does not know
    size = 8 if abi < NET_ABI else 16 if abi < SCOPE_ABI else ctypes.sizeof(_RulesetAttr)
    ruleset = syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    try:
        _allow_beneath(ruleset, Path("/"), READ & fs)
        _allow_beneath(ruleset, scratch, SCRATCH & fs)
        syscall(SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def restrict(scratch: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Enforce the rules of the module docstring on this process; ``scratch`` is an existing folder.

    ``PR_SET_NO_NEW_PRIVS`` must be set first (or the process must hold
    ``CAP_SYS_ADMIN``). Returns ``(active, unavailable)``: each maps a part of
    :data:`PARTS` to what it enforces, or to why it is not in force. Never
    raises for an unsupported kernel; the rules cannot be lifted once in force.
    """
    try:
        abi = abi_version()
    except OSError as exc:
        return {}, dict.fromkeys(PARTS, _why_unavailable(exc))
    threads = thread_count()
    if threads > 1:
        return {}, dict.fromkeys(PARTS, f"{threads} threads are running already; Landlock confines only the "
                                        "thread that enforces it and the threads it starts")
    try:
        _enforce(abi, scratch)
    except OSError as exc:
        return {}, dict.fromkeys(PARTS, _why_unavailable(exc))
    fs = f"ABI {abi}: read everywhere, write only beneath {scratch}, never execute"
    if abi < FS_RIGHTS["truncate"][1]:
        fs += " (truncate(2) by path is not controlled before ABI 3)"
    active = {"landlock.fs": fs}
    unavailable = {}
    if abi >= NET_ABI:
        active["landlock.net"] = "no TCP bind or connect"
    else:
        unavailable["landlock.net"] = f"needs Landlock ABI {NET_ABI} (Linux 6.7); this kernel has ABI {abi}"
    if abi >= SCOPE_ABI:
        active["landlock.scope"] = "no signal or abstract UNIX socket outside the worker"
    else:
        unavailable["landlock.scope"] = f"needs Landlock ABI {SCOPE_ABI} (Linux 6.12); this kernel has ABI {abi}"
    return active, unavailable
