"""Process-wide parts of the worker's confinement: no new privileges, no capabilities, and its memory cap.

SPEC 12. ``PR_SET_NO_NEW_PRIVS`` (:func:`no_new_privs`) is what lets an
unprivileged process enforce Landlock and seccomp, and it can never be
cleared. :func:`drop_capabilities` empties the effective, permitted and
inheritable capability sets: a worker started as root (CI runs as root) can
then no longer do what only capabilities allow (raise a hard limit, signal or
trace another user's processes, mount, load modules, reach I/O ports …) even
through a call the seccomp filter does not name.

The memory cap (``limits.memory``) is set from outside: the kernel process
measures the worker once its settings are loaded (:func:`vm_size`) and caps
its address space (:func:`cap_address_space`, ``prlimit`` on the worker's
pid), because the worker itself is refused every change of its limits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource

from .syscalls import Arch, prctl, syscall

PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def no_new_privs() -> None:
    """Set ``PR_SET_NO_NEW_PRIVS`` for this process (irreversible). Raises ``OSError`` (``EINVAL`` before Linux
    3.5)."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def drop_capabilities(arch: Arch) -> None:
    """Empty this process's effective, permitted, inheritable and ambient capability sets (``capset``).

    Dropping is always allowed; nothing can raise them again without
    ``execve`` of a privileged program, which the confinement refuses. Raises
    ``OSError`` when the kernel refuses.
    """
    with contextlib.suppress(OSError):  # no ambient capabilities before Linux 4.3: nothing to clear
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()  # version 3: two words of 32 capabilities, all zero
    syscall(arch.numbers["capset"], ctypes.byref(header), data)


def vm_size(pid: int) -> int:
    """Address space of process ``pid`` in bytes (``/proc/PID/statm``), or ``0`` when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def cap_address_space(pid: int, cap: int) -> None:
    """Set the soft ``RLIMIT_AS`` of process ``pid`` to ``cap`` bytes (never above its hard limit).

    Called by the kernel process on its worker (SPEC 12: memory capped by
    ``limits.memory``); a child of the same user may be capped without
    privileges. Raises ``OSError`` when the process is gone or out of reach.
    """
    _soft, hard = resource.prlimit(pid, resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.prlimit(pid, resource.RLIMIT_AS, (cap, hard))
