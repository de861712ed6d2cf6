"""The worker's seccomp-bpf filter: which system calls it refuses, as data, and the BPF program built from them.

SPEC 12 ("containment in depth"): the worker cannot start processes or run
another program, open sockets, change its own limits or reach other
processes, even after a full escape of the language rules. :data:`RULES` is
the whole policy, one :class:`Rule` per system call with the reason;
:func:`program` turns it into a classic-BPF program for one
:class:`~.syscalls.Arch` and :func:`install` loads it for every thread of the
process (``SECCOMP_FILTER_FLAG_TSYNC``). Calls not named are allowed: the
filter is a deny-list of what the worker never needs, the other layers
(Landlock, no capabilities) cover what it does not name.

The program, in order:

1. load ``seccomp_data.arch``; anything but the expected ``AUDIT_ARCH_*``
   kills the process (``SECCOMP_RET_KILL_PROCESS``): a 32-bit or foreign ABI
   has other numbers;
2. load the call number; on x86_64 a number with the x32 bit set kills too;
3. one block per rule: ``jeq NR`` and the rule's body, which always ends in
   a ``ret``: refuse with ``errno`` (``EPERM``, or ``ENOSYS`` for ``clone3``), or
   test one argument and allow or refuse;
4. ``ret ALLOW``.

Arguments are compared on their low 32 bits (``seccomp_data.args[i]`` is
little-endian on both architectures) wherever the kernel reads the argument
as a 32-bit ``int`` (pids, socket domains, ``ioctl`` requests) or the bit
tested lies there (``CLONE_THREAD``); a pointer is compared on both halves.
``clone3`` takes its flags behind a pointer that seccomp cannot read, so it
answers ``ENOSYS`` and glibc falls back to ``clone``, whose flags are checked.
"""

from __future__ import annotations

import ctypes
import errno
from collections.abc import Sequence
from dataclasses import dataclass

from .syscalls import Arch, syscall

# classic BPF opcodes (linux/bpf_common.h)
LD_W_ABS = 0x20  #: ``BPF_LD | BPF_W | BPF_ABS``: A = 32-bit word of seccomp_data at offset k
JEQ_K = 0x15  #: ``BPF_JMP | BPF_JEQ | BPF_K``
JGE_K = 0x35  #: ``BPF_JMP | BPF_JGE | BPF_K``
JSET_K = 0x45  #: ``BPF_JMP | BPF_JSET | BPF_K``: jump when A & k is not 0
RET_K = 0x06  #: ``BPF_RET | BPF_K``

# seccomp return values (linux/seccomp.h)
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1

#: Offsets in ``struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6];}``.
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARGS = 16

CLONE_THREAD = 0x00010000
AF_UNIX = 1  #: ``socket.AF_UNIX`` on Linux (not imported: the worker starts faster without the module)
TIOCSTI = 0x5412  #: pushes a byte into a terminal's input queue
TIOCLINUX = 0x541C  #: console subcommands, among them pasting the selection as input


def arg_low(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` (0-5) in ``seccomp_data``."""
    return OFFSET_ARGS + 8 * index


def arg_high(index: int) -> int:
    """Offset of the high 32 bits of argument ``index`` (0-5) in ``seccomp_data``."""
    return OFFSET_ARGS + 8 * index + 4


@dataclass(frozen=True)
class Instruction:
    """One ``struct sock_filter``: ``code``, jump offsets ``jt``/``jf`` (0-255) and the constant ``k``."""

    code: int
    jt: int
    jf: int
    k: int


def _ld(offset: int) -> Instruction:
    return Instruction(LD_W_ABS, 0, 0, offset)


def _ret(value: int) -> Instruction:
    return Instruction(RET_K, 0, 0, value)


def _errno(code: int) -> int:
    return RET_ERRNO | code


#: Kinds of :class:`Rule`, and what each does with the call.
KINDS = {
    "deny": "refused with EPERM",
    "enosys": "answered with ENOSYS (not implemented)",
    "allow-if-flag": "allowed when argument `arg` has a bit of `values[0]` set, else EPERM",
    "allow-if-in": "allowed when argument `arg` is one of `values`, else EPERM",
    "allow-if-self": "allowed when argument `arg` is this process's id, else EPERM",
    "allow-if-null": "allowed when the pointer argument `arg` is NULL, else EPERM",
    "deny-if-in": "refused with EPERM when argument `arg` is one of `values`, else allowed",
}


@dataclass(frozen=True)
class Rule:
    """The filter's treatment of one system call (``syscall`` by name): ``kind`` from :data:`KINDS`,
    the argument ``arg`` (0-5) and constants ``values`` it tests, and ``why`` the worker is refused."""

    syscall: str
    kind: str
    why: str
    arg: int = 0
    values: tuple[int, ...] = ()

    def body(self, pid: int) -> list[Instruction]:
        """The instructions after the rule's ``jeq NR``; the last one is always a ``ret``."""
        allow, deny = _ret(RET_ALLOW), _ret(_errno(errno.EPERM))
        if self.kind == "deny":
            return [deny]
        if self.kind == "enosys":
            return [_ret(_errno(errno.ENOSYS))]
        if self.kind == "allow-if-flag":
            return [_ld(arg_low(self.arg)), Instruction(JSET_K, 0, 1, self.values[0]), allow, deny]
        if self.kind == "allow-if-null":
            return [_ld(arg_low(self.arg)), Instruction(JEQ_K, 0, 3, 0),
                    _ld(arg_high(self.arg)), Instruction(JEQ_K, 0, 1, 0), allow, deny]
        if self.kind in ("allow-if-in", "allow-if-self", "deny-if-in"):
            values = (pid,) if self.kind == "allow-if-self" else self.values
            on_match, otherwise = (deny, allow) if self.kind == "deny-if-in" else (allow, deny)
            count = len(values)
            tests = [Instruction(JEQ_K, count - i, 0, value & 0xFFFFFFFF) for i, value in enumerate(values)]
            # a match jumps to the last ret; falling through every jeq reaches the one before it
            return [_ld(arg_low(self.arg)), *tests, otherwise, on_match]
        raise ValueError(f"unknown rule kind {self.kind!r}")


_PROCESS = "a new process; the worker's own threads (CLONE_THREAD) are allowed"
_SIGNAL = "signals reach this process only (pid 0 and -1 would reach the kernel's process group)"
_MOUNT = "namespaces and mounts: changing what the file-system rules see"
_KERNEL = "kernel-wide state: modules, keys, BPF, tracing, swap, reboot"

#: The policy: every system call the worker is refused, and why (SPEC 12). A call the running
#: architecture lacks (``fork`` and ``vfork`` on arm64) is left out of its program.
RULES: tuple[Rule, ...] = (
    Rule("execve", "deny", "runs another program"),
    Rule("execveat", "deny", "runs another program"),
    Rule("fork", "deny", "a new process"),
    Rule("vfork", "deny", "a new process"),
    Rule("clone", "allow-if-flag", _PROCESS, arg=0, values=(CLONE_THREAD,)),
    Rule("clone3", "enosys", "flags behind a pointer the filter cannot read; ENOSYS makes glibc use clone"),
    Rule("socket", "deny", "network and local sockets; the worker talks to the kernel over its pipes"),
    Rule("socketpair", "allow-if-in", "only a connected AF_UNIX pair (the event loop's wake-up pipe)",
         arg=0, values=(AF_UNIX,)),
    Rule("io_uring_setup", "deny", "runs operations (open, connect, socket) the filter does not see"),
    Rule("io_uring_enter", "deny", "runs operations (open, connect, socket) the filter does not see"),
    Rule("io_uring_register", "deny", "runs operations (open, connect, socket) the filter does not see"),
    Rule("setrlimit", "deny", "only the kernel process changes the worker's limits (the memory cap)"),
    Rule("prlimit64", "allow-if-null", "reading limits is fine; changing them is the kernel process's",
         arg=2),
    Rule("ptrace", "deny", "reads and writes other processes"),
    Rule("process_vm_readv", "deny", "reads other processes' memory"),
    Rule("process_vm_writev", "deny", "writes other processes' memory"),
    Rule("process_madvise", "deny", "acts on other processes' memory"),
    Rule("kcmp", "deny", "inspects other processes"),
    Rule("kill", "allow-if-self", _SIGNAL, arg=0),
    Rule("tgkill", "allow-if-self", _SIGNAL, arg=0),
    Rule("rt_sigqueueinfo", "allow-if-self", _SIGNAL, arg=0),
    Rule("rt_tgsigqueueinfo", "allow-if-self", _SIGNAL, arg=0),
    Rule("tkill", "deny", "signals any thread of the system by id"),
    Rule("pidfd_open", "deny", "handles on other processes"),
    Rule("pidfd_send_signal", "deny", "signals other processes"),
    Rule("pidfd_getfd", "deny", "takes other processes' files"),
    Rule("ioctl", "deny-if-in", "types into the terminal the worker inherited", arg=1,
         values=(TIOCSTI, TIOCLINUX)),
    *(Rule(name, "deny", _MOUNT) for name in (
        "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
        "fsconfig", "fsmount", "fspick", "mount_setattr")),
    *(Rule(name, "deny", _KERNEL) for name in (
        "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "kexec_load",
        "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct",
        "open_by_handle_at")),
)


def program(arch: Arch, pid: int, rules: Sequence[Rule] = RULES) -> list[Instruction]:
    """The BPF program enforcing ``rules`` on ``arch`` for the process ``pid`` (see the module docstring).

    Raises ``ValueError`` for a rule of unknown kind or a body too long for a BPF jump (255).
    """
    out = [_ld(OFFSET_ARCH), Instruction(JEQ_K, 1, 0, arch.audit), _ret(RET_KILL_PROCESS), _ld(OFFSET_NR)]
    if arch.x32_bit:
        out += [Instruction(JGE_K, 0, 1, arch.x32_bit), _ret(RET_KILL_PROCESS)]
    for rule in rules:
        number = arch.numbers.get(rule.syscall)
        if number is None:
            continue
        body = rule.body(pid)
        if len(body) > 255:
            raise ValueError(f"the rule for {rule.syscall} is too long for one BPF jump")
        out += [Instruction(JEQ_K, 0, len(body), number), *body]
    out.append(_ret(RET_ALLOW))
    return out


class _SockFilter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32))


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def install(arch: Arch, instructions: Sequence[Instruction]) -> None:
    """Load ``instructions`` as a seccomp filter for every thread of this process (``TSYNC``).

    ``PR_SET_NO_NEW_PRIVS`` must be set first (or the process must hold
    ``CAP_SYS_ADMIN``). A filter can never be removed, only added to. Raises
    ``OSError`` when the kernel refuses it (``EINVAL``/``ENOSYS``: no seccomp
    filter support; a thread that could not be synchronised: ``EAGAIN``).
    """
    array = (_SockFilter * len(instructions))(*(_SockFilter(i.code, i.jt, i.jf, i.k) for i in instructions))
    fprog = _SockFprog(len(instructions), array)
    result = syscall(arch.numbers["seccomp"], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                     ctypes.byref(fprog))
    if result != 0:  # TSYNC: the id of a thread that could not take the filter
        raise OSError(errno.EAGAIN, f"thread {result} could not take the filter")
