"""Raw Linux system calls through :mod:`ctypes`, and the system-call numbers of the architectures known here.

The confinement (SPEC 12, "containment in depth") needs a handful of calls that
Python's standard library does not wrap: ``landlock_*``, ``seccomp``,
``capset`` and ``prctl``. :func:`syscall` calls one by number through the C
library's ``syscall(2)`` and turns a failure into ``OSError`` with the C
``errno``. :class:`Arch` holds, per architecture, the ``AUDIT_ARCH_*`` value
the seccomp filter checks and the numbers of the calls the filter names; the
numbers come from the kernel's tables (``arch/x86/entry/syscalls/syscall_64.tbl``
and ``include/uapi/asm-generic/unistd.h``, which arm64 uses). An architecture
without a table here has no seccomp filter (the confinement report says so).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: ``AUDIT_ARCH_X86_64`` (``EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE``).
AUDIT_ARCH_X86_64 = 0xC000003E
#: ``AUDIT_ARCH_AARCH64`` (``EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE``).
AUDIT_ARCH_AARCH64 = 0xC00000B7
#: ``__X32_SYSCALL_BIT``: x32 calls carry ``AUDIT_ARCH_X86_64`` too and are told apart by this bit of the number.
X32_SYSCALL_BIT = 0x40000000

#: Calls numbered alike on every architecture (added after the tables were unified, Linux 5.1+).
_COMMON = {
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
}

_X86_64 = {
    "ioctl": 16, "socket": 41, "socketpair": 53, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62,
    "ptrace": 101, "capset": 126, "rt_sigqueueinfo": 129, "pivot_root": 155, "setrlimit": 160,
    "chroot": 161, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "init_module": 175, "delete_module": 176, "tkill": 200, "tgkill": 234, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "rt_tgsigqueueinfo": 297, "perf_event_open": 298,
    "prlimit64": 302, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "seccomp": 317, "kexec_file_load": 320, "bpf": 321, "execveat": 322,
    "userfaultfd": 323,
}

#: arm64 uses the generic table: it has no ``fork`` or ``vfork`` (glibc forks with ``clone``).
_AARCH64 = {
    "ioctl": 29, "umount2": 39, "mount": 40, "pivot_root": 41, "chroot": 51, "acct": 89, "capset": 91,
    "unshare": 97, "kexec_load": 104, "init_module": 105, "delete_module": 106, "ptrace": 117, "kill": 129,
    "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "reboot": 142, "setrlimit": 164,
    "socket": 198, "socketpair": 199, "add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220,
    "execve": 221, "swapon": 224, "swapoff": 225, "rt_tgsigqueueinfo": 240, "perf_event_open": 241,
    "prlimit64": 261, "open_by_handle_at": 265, "setns": 268, "process_vm_readv": 270, "process_vm_writev": 271,
    "kcmp": 272, "finit_module": 273, "seccomp": 277, "bpf": 280, "execveat": 281, "userfaultfd": 282,
    "kexec_file_load": 294,
}


@dataclass(frozen=True)
class Arch:
    """One architecture: ``name`` as ``uname -m`` spells it, ``audit`` its ``AUDIT_ARCH_*``
    value, ``numbers`` system-call name → number, and ``x32_bit`` the number bit of a second ABI that
    shares ``audit`` (x32 on x86_64; ``0`` when there is none)."""

    name: str
    audit: int
    numbers: Mapping[str, int]
    x32_bit: int = 0


X86_64 = Arch("x86_64", AUDIT_ARCH_X86_64, {**_X86_64, **_COMMON}, X32_SYSCALL_BIT)
AARCH64 = Arch("aarch64", AUDIT_ARCH_AARCH64, {**_AARCH64, **_COMMON})
#: Architectures with a syscall table, by ``uname -m`` name.
ARCHES: Mapping[str, Arch] = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


def current_arch() -> Arch | None:
    """The running machine's :class:`Arch` (by ``uname -m``), or ``None`` when this module has no table for it."""
    return ARCHES.get(os.uname().machine.lower())


@functools.cache
def libc() -> Any:
    """The C library (``ctypes.CDLL(None)``, with ``errno`` kept), loaded once."""
    return ctypes.CDLL(None, use_errno=True)


def _c_arg(value: Any) -> Any:
    return ctypes.c_long(value) if isinstance(value, int) else value


def syscall(number: int, *args: Any) -> int:
    """Call system call ``number`` with ``args`` (ints as C ``long``, or ``ctypes`` pointers/``byref``).

    Returns the call's non-negative result; raises ``OSError(errno)`` when it fails.
    """
    function = libc().syscall
    function.restype = ctypes.c_long
    result = int(function(ctypes.c_long(number), *(_c_arg(a) for a in args)))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """``prctl(option, arg2, …)``; raises ``OSError(errno)`` when it fails."""
    function = libc().prctl
    function.restype = ctypes.c_int
    result = int(function(ctypes.c_int(option), *(ctypes.c_ulong(a) for a in (arg2, arg3, arg4, arg5))))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result
