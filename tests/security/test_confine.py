"""OS confinement of the containment worker (SPEC 12, "containment in depth"; issue 8).

* The seccomp program, for every architecture it knows, run by a small
  classic-BPF interpreter on system calls numbered from the kernel's tables
  (typed here, independently of the module under test).
* Real processes: a child (``tests/support/confine_probe.py``) confines itself and
  then tries what a full escape of the language rules would try: start a
  process, run a program (also a static one it wrote into its scratch
  folder), connect to listeners this test started, write
  outside its scratch folder, raise its limits, signal or trace a victim
  process. Each forbidden attempt fails and nothing was created, received or
  killed; writing in the scratch folder, threads, the event loop and lazy
  imports keep working. Each layer is also applied alone, to show it stands
  alone. What each layer blocks is :data:`BLOCKED_BY`; which layers the
  running kernel supports is probed here independently, and the test asserts
  every supported layer is in force (an unsupported one must be reported).
* End to end: an ``IsolatedSession`` and a real kernel with settings that
  grant ``os``, ``subprocess``, ``socket``, ``open`` and ``resource``
  (``allow_unsafe_entries = true``): each attempt ends in a coded error and
  changes nothing, ordinary cells still work, and a missing confinement is
  said once at start.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import PACKAGE_ROOT, execute, install_spec, result_data, start_kernel, stop_kernel

from s2o_kernel.engine import IsolatedSession, S2OError, bare_settings
from s2o_kernel.engine.confine import seccomp, syscalls

PROBE = Path(__file__).resolve().parents[1] / "support" / "confine_probe.py"
#: ``RLIMIT_AS`` soft limit the probe sets before confining (tests/support/confine_probe.py).
PROBE_SOFT_AS = 4 << 30

# -- what the running kernel supports, probed without the module under test ----------------------


def landlock_abi() -> int:
    """``landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)``; 0 without Landlock."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(0, int(libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1))))


def seccomp_filters_supported() -> bool:
    """The kernel has seccomp (``Seccomp:`` in ``/proc/self/status``) and we know this machine's numbers."""
    status = Path("/proc/self/status").read_text()
    return "\nSeccomp:" in status and platform.machine() in ("x86_64", "aarch64")


def expected_active(layers: tuple[str, ...]) -> set[str]:
    """The mechanisms that must be in force on this kernel when ``layers`` are applied."""
    out = {"no_new_privs"}
    abi = landlock_abi()
    if "landlock" in layers:
        out |= {name for name, since in (("landlock.fs", 1), ("landlock.net", 4), ("landlock.scope", 6))
                if abi >= since}
    if "capabilities" in layers and platform.machine() in ("x86_64", "aarch64"):
        out.add("capabilities")
    if "seccomp" in layers and seccomp_filters_supported():
        out.add("seccomp")
    return out


ALL_MECHANISMS = {"no_new_privs", "landlock.fs", "landlock.net", "landlock.scope", "capabilities", "seccomp"}

# -- the seccomp program, run by a classic-BPF interpreter ----------------------------------------

#: (x86_64, aarch64) numbers from the kernel's syscall tables; ``None``: the architecture lacks the call.
NR: dict[str, tuple[int, int | None]] = {
    "read": (0, 63), "write": (1, 64), "mmap": (9, 222), "openat": (257, 56), "futex": (202, 98),
    "execve": (59, 221), "execveat": (322, 281), "fork": (57, None), "vfork": (58, None), "clone": (56, 220),
    "clone3": (435, 435), "socket": (41, 198), "socketpair": (53, 199), "setrlimit": (160, 164),
    "prlimit64": (302, 261), "kill": (62, 129), "tgkill": (234, 131), "tkill": (200, 130), "ioctl": (16, 29),
    "ptrace": (101, 117), "process_vm_writev": (311, 271), "io_uring_setup": (425, 425), "unshare": (272, 97),
    "mount": (165, 40), "bpf": (321, 280), "pidfd_send_signal": (424, 424),
}
AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
AUDIT_ARCH_I386 = 0x40000003
KILL_PROCESS = 0x80000000
ALLOW = 0x7FFF0000


def ret_errno(code: int) -> int:
    return 0x00050000 | code


def run_filter(program: list[seccomp.Instruction], arch: int, nr: int, *args: int) -> int:
    """The seccomp action ``program`` returns for one call (``struct seccomp_data``, little-endian)."""
    padded = [a & (2**64 - 1) for a in args] + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0x1000, *padded)
    pc, acc = 0, 0
    for _step in range(len(program)):  # jumps only go forward: at most one visit per instruction
        assert 0 <= pc < len(program), f"jumped outside the program to {pc}"
        ins = program[pc]
        if ins.code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, ins.k)[0]
            pc += 1
        elif ins.code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            taken = {0x15: acc == ins.k, 0x35: acc >= ins.k, 0x45: bool(acc & ins.k)}[ins.code]
            pc += 1 + (ins.jt if taken else ins.jf)
        elif ins.code == 0x06:  # ret k
            return ins.k
        else:
            raise AssertionError(f"unexpected opcode {ins.code:#x}")
    raise AssertionError("the program ran off its end")


ARCHS = ("x86_64", "aarch64")
PID = 4242


def nr(name: str, arch: str) -> int:
    number = NR[name][ARCHS.index(arch)]
    assert number is not None
    return number


@pytest.fixture(params=ARCHS)
def bpf(request: pytest.FixtureRequest) -> tuple[str, list[seccomp.Instruction]]:
    arch = request.param
    return arch, seccomp.program(syscalls.ARCHES[arch], PID)


def test_filter_kills_a_foreign_architecture_and_x32(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    assert run_filter(program, AUDIT_ARCH_I386, 0) == KILL_PROCESS
    other = AUDIT["aarch64" if arch == "x86_64" else "x86_64"]
    assert run_filter(program, other, nr("read", arch)) == KILL_PROCESS
    if arch == "x86_64":  # x32 calls share AUDIT_ARCH_X86_64 and set bit 30 of the number
        assert run_filter(program, AUDIT[arch], 0x40000000 | nr("read", arch)) == KILL_PROCESS


def test_filter_allows_ordinary_calls(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    for name in ("read", "write", "mmap", "openat", "futex"):
        assert run_filter(program, AUDIT[arch], nr(name, arch), 3, 0, 0) == ALLOW, name
    for number in range(500):  # every number ends in a ret, inside the program
        assert run_filter(program, AUDIT[arch], number, 1, 2, 3, 4, 5, 6) in (ALLOW, ret_errno(errno.EPERM),
                                                                            ret_errno(errno.ENOSYS))


def test_filter_refuses_processes_and_programs_but_not_threads(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    audit = AUDIT[arch]
    for name in ("execve", "execveat"):
        assert run_filter(program, audit, nr(name, arch)) == ret_errno(errno.EPERM)
    if arch == "x86_64":
        assert run_filter(program, audit, nr("fork", arch)) == ret_errno(errno.EPERM)
        assert run_filter(program, audit, nr("vfork", arch)) == ret_errno(errno.EPERM)
    sigchld, clone_vm, clone_vfork, glibc_thread = 17, 0x100, 0x4000, 0x3D0F00
    assert run_filter(program, audit, nr("clone", arch), sigchld) == ret_errno(errno.EPERM)
    assert run_filter(program, audit, nr("clone", arch), clone_vm | clone_vfork | sigchld) == ret_errno(errno.EPERM)
    assert run_filter(program, audit, nr("clone", arch), glibc_thread) == ALLOW
    assert run_filter(program, audit, nr("clone3", arch), 0x7FFF0000, 88) == ret_errno(errno.ENOSYS)


def test_filter_refuses_sockets_but_a_unix_pair(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    audit = AUDIT[arch]
    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX, socket.AF_NETLINK):
        assert run_filter(program, audit, nr("socket", arch), family, socket.SOCK_STREAM) == ret_errno(errno.EPERM)
    assert run_filter(program, audit, nr("socketpair", arch), socket.AF_UNIX, socket.SOCK_STREAM) == ALLOW
    assert run_filter(program, audit, nr("socketpair", arch), socket.AF_INET, 1) == ret_errno(errno.EPERM)


def test_filter_lets_limits_be_read_not_changed(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    audit, prlimit, rlimit_as = AUDIT[arch], nr("prlimit64", arch), 9
    assert run_filter(program, audit, prlimit, 0, rlimit_as, 0, 0x7FFC0000) == ALLOW  # read only
    assert run_filter(program, audit, prlimit, 0, rlimit_as, 0x7FFC0000, 0) == ret_errno(errno.EPERM)
    assert run_filter(program, audit, prlimit, 0, rlimit_as, 0x7FFC << 32, 0) == ret_errno(errno.EPERM)
    assert run_filter(program, audit, nr("setrlimit", arch), rlimit_as, 0x7FFC0000) == ret_errno(errno.EPERM)


def test_filter_keeps_signals_and_tracing_at_home(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    audit = AUDIT[arch]
    assert run_filter(program, audit, nr("kill", arch), PID, 0) == ALLOW
    assert run_filter(program, audit, nr("tgkill", arch), PID, PID + 1, 2) == ALLOW
    for pid in (1, PID + 1, 0, -1, -PID):  # 0 and negative ids reach process groups
        assert run_filter(program, audit, nr("kill", arch), pid, 15) == ret_errno(errno.EPERM), pid
        assert run_filter(program, audit, nr("tgkill", arch), pid, pid, 15) == ret_errno(errno.EPERM), pid
    for name in ("tkill", "ptrace", "process_vm_writev", "pidfd_send_signal", "io_uring_setup", "unshare", "mount",
                 "bpf"):
        assert run_filter(program, audit, nr(name, arch), 1, 2, 3) == ret_errno(errno.EPERM), name


def test_filter_refuses_typing_into_the_terminal(bpf: tuple[str, list[seccomp.Instruction]]) -> None:
    arch, program = bpf
    tiocsti, tioclinux, tcgets = 0x5412, 0x541C, 0x5401
    assert run_filter(program, AUDIT[arch], nr("ioctl", arch), 2, tiocsti, 0) == ret_errno(errno.EPERM)
    assert run_filter(program, AUDIT[arch], nr("ioctl", arch), 2, tioclinux, 0) == ret_errno(errno.EPERM)
    assert run_filter(program, AUDIT[arch], nr("ioctl", arch), 2, tcgets, 0) == ALLOW


def test_every_rule_has_a_number_where_the_call_exists() -> None:
    for arch in ARCHS:
        numbers = syscalls.ARCHES[arch].numbers
        missing = {rule.syscall for rule in seccomp.RULES} - set(numbers)
        assert missing == (set() if arch == "x86_64" else {"fork", "vfork"}), arch
        for name, pair in NR.items():
            if name in numbers:
                assert numbers[name] == pair[ARCHS.index(arch)], (arch, name)
    assert len(seccomp.program(syscalls.X86_64, PID)) < 4096  # BPF_MAXINSNS


# -- a confined child process tries what an escape would try --------------------------------------

#: Attempt → the mechanisms each of which alone makes it fail.
BLOCKED_BY: dict[str, set[str]] = {
    "subprocess_run": {"seccomp", "landlock.fs"},  # seccomp: no fork; Landlock: nothing may be executed
    "exec_from_scratch": {"seccomp", "landlock.fs"},  # Landlock grants EXECUTE nowhere, not in the scratch folder
    "os_system": {"seccomp", "landlock.fs"},
    "os_fork": {"seccomp"},
    "os_execv": {"seccomp", "landlock.fs"},
    "tcp_connect": {"seccomp", "landlock.net"},
    "udp_send": {"seccomp"},
    "unix_connect": {"seccomp"},
    "open_outside": {"landlock.fs"},
    "rlimit_as_raise": {"seccomp"},
    "rlimit_nofile_hard_raise": {"seccomp", "capabilities"},
    "kill_other": {"seccomp", "landlock.scope"},
    "ptrace_other": {"seccomp", "landlock.fs"},  # a Landlock domain may not trace a process outside it
}
#: Attempts that must work in every confinement, with the ``repr`` of what they return.
MUST_WORK = {"write_scratch": "['kept', True]", "thread": "True", "event_loop": "5", "lazy_import": "[False, 2]",
             "kill_self": "'alive'"}
MARKED = ("subprocess_run", "os_system", "os_fork", "os_execv")


@dataclass
class Target:
    """What the probe aims at: listeners, a victim process, marker and outside paths."""

    tmp: Path
    tcp: socket.socket
    udp: socket.socket
    unix: socket.socket
    unix_path: Path
    victim: subprocess.Popen[bytes]

    def markers(self) -> dict[str, str]:
        return {name: str(self.tmp / f"marker-{name}") for name in MARKED}

    def received(self) -> list[str]:
        """Listeners that were reached (connections accepted or datagrams waiting)."""
        got = []
        for name, sock in (("tcp", self.tcp), ("unix", self.unix)):
            sock.setblocking(False)
            try:
                sock.accept()[0].close()
                got.append(name)
            except BlockingIOError:
                pass
        self.udp.setblocking(False)
        try:
            self.udp.recvfrom(64)
            got.append("udp")
        except BlockingIOError:
            pass
        return got

    def created(self) -> list[str]:
        """Files the probe must not have made: markers and the file outside its scratch folder."""
        paths = [*self.markers().values(), str(self.tmp / "outside.txt")]
        return [p for p in paths if os.path.exists(p)]


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Target]:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix_path = tmp_path / "listener.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(unix_path))
    unix.listen(8)
    victim = subprocess.Popen(["sleep", "120"])
    try:
        yield Target(tmp_path, tcp, udp, unix, unix_path, victim)
    finally:
        victim.kill()
        victim.wait()
        for sock in (tcp, udp, unix):
            sock.close()


def run_probe(target: Target, layers: tuple[str, ...], attempts: list[str],
              env: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Run the probe; return (``{"report": …, "warnings": …}``, attempt → outcome)."""
    config = {"scratch": str(target.tmp / "scratch"), "outside": str(target.tmp / "outside.txt"),
              "markers": target.markers(), "tcp_port": target.tcp.getsockname()[1],
              "udp_port": target.udp.getsockname()[1], "unix_path": str(target.unix_path),
              "victim": target.victim.pid, "layers": list(layers), "attempts": attempts}
    child_env = {k: v for k, v in os.environ.items() if k != "S2O_CONFINE"}
    child_env.update({"PYTHONPATH": str(PACKAGE_ROOT), **(env or {})})
    proc = subprocess.run([sys.executable, str(PROBE), json.dumps(config)], capture_output=True, text=True,
                          timeout=60, env=child_env, check=False)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines, proc.stderr
    time.sleep(0.1)  # let a connection or datagram that was sent arrive before the listeners are read
    return lines[0], {line["attempt"]: line for line in lines[1:]}


def check_report(head: dict[str, Any], layers: tuple[str, ...]) -> set[str]:
    """The report names exactly the mechanisms this kernel supports as active, the others with a reason."""
    report = head["report"]
    active = set(report["active"])
    assert active == expected_active(layers), report
    assert set(report["unavailable"]) == ALL_MECHANISMS - active
    assert all(report["unavailable"].values())
    for name in report["unavailable"]:
        assert any(name in line for line in head["warnings"]), (name, head["warnings"])
    return active


def check_attempts(target: Target, outcomes: dict[str, dict[str, Any]], active: set[str]) -> None:
    for name, blockers in BLOCKED_BY.items():
        if blockers & active:
            assert not outcomes[name]["ok"], (name, outcomes[name])
    for name, value in MUST_WORK.items():
        assert outcomes[name] == {"attempt": name, "ok": True, "value": value}, outcomes[name]
    if BLOCKED_BY["kill_other"] & active:
        assert target.victim.poll() is None, "the victim process was killed"


def test_full_confinement_blocks_every_attempt(target: Target) -> None:
    layers = ("landlock", "capabilities", "seccomp")
    head, outcomes = run_probe(target, layers, [*BLOCKED_BY, *MUST_WORK, "rlimit_as_now"])
    active = check_report(head, layers)
    check_attempts(target, outcomes, active)
    assert set(BLOCKED_BY) == set(outcomes) - set(MUST_WORK) - {"rlimit_as_now"}  # every attempt was made
    assert target.created() == []
    assert target.received() == []
    assert outcomes["rlimit_as_now"]["value"] == str(PROBE_SOFT_AS)
    if "seccomp" in active:  # refused at fork: no process was ever started
        assert (outcomes["subprocess_run"]["errno"], outcomes["os_fork"]["errno"]) == (errno.EPERM, errno.EPERM)


@pytest.mark.parametrize("layer", ["seccomp", "landlock", "capabilities"])
def test_each_layer_stands_alone(target: Target, layer: str) -> None:
    head, outcomes = run_probe(target, (layer,), [*BLOCKED_BY, *MUST_WORK])
    active = check_report(head, (layer,))
    check_attempts(target, outcomes, active)
    blocked = {name for name, blockers in BLOCKED_BY.items() if blockers & active}
    assert blocked, f"{layer} blocks nothing on this kernel"
    leaked = set(target.created())
    for name in blocked & set(MARKED):
        assert target.markers()[name] not in leaked, name
    if {"tcp_connect", "udp_send", "unix_connect"} <= blocked:
        assert target.received() == []
    elif "tcp_connect" in blocked:
        assert "tcp" not in target.received()


def test_turned_off_for_debugging(target: Target) -> None:
    head, outcomes = run_probe(target, ("landlock", "capabilities", "seccomp"), ["open_outside", "write_scratch"],
                               env={"S2O_CONFINE": "0"})
    assert head["report"]["active"] == {}
    assert set(head["report"]["unavailable"]) == ALL_MECHANISMS
    assert len(head["warnings"]) == 1 and "S2O_CONFINE=0" in head["warnings"][0]
    assert outcomes["open_outside"]["ok"]  # really off
    assert outcomes["write_scratch"]["ok"]


def test_unknown_layer_is_refused_before_anything_is_applied(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from s2o_kernel.engine import confine\n"
            "try:\n    confine.apply(Path(sys.argv[1]), layers=('selinux',))\n"
            "except ValueError as exc:\n    print(exc)\n"
            "print(Path('/proc/self/status').read_text().split('NoNewPrivs:')[1].split()[0])")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "scratch")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}, check=True)
    assert proc.stdout.splitlines() == [
        "unknown confinement layers ['selinux']; the layers are ['landlock', 'capabilities', 'seccomp']", "0"]
    assert not (tmp_path / "scratch").exists()


# -- end to end: unsafe entries granted inside the worker -----------------------------------------

UNSAFE_ENTRIES = ("os", "subprocess", "socket", "open", "resource", "len", "str")
UNSAFE = {"allow_unsafe_entries": True, "allowlist": "\n".join(UNSAFE_ENTRIES)}


def check_said(warnings: list[str]) -> None:
    """Start-up warnings name exactly the mechanisms this kernel lacks (none on a kernel with them all)."""
    said = " ".join(w for w in warnings if "OS confinement" in w)
    missing = ALL_MECHANISMS - expected_active(("landlock", "capabilities", "seccomp"))
    assert all(name in said for name in missing), (missing, said)
    assert bool(said) == bool(missing), said


def attempts_as_cells(target: Target) -> dict[str, str]:
    """Each escape attempt as an expression over the granted unsafe entries."""
    m = target.markers()
    return {
        "subprocess_run": f"subprocess.run(['touch', {m['subprocess_run']!r}]).returncode",
        "os_fork": "os.fork()",
        "os_execv": f"os.execv('/bin/sh', ['sh', '-c', 'touch ' + {m['os_execv']!r}])",
        "tcp_connect": f"socket.create_connection(('127.0.0.1', {target.tcp.getsockname()[1]}), 2)",
        "unix_connect": f"socket.socket(socket.AF_UNIX).connect({str(target.unix_path)!r})",
        "open_outside": f"open({str(target.tmp / 'outside.txt')!r}, 'w').write('escaped')",
        "rlimit_as_raise": "resource.setrlimit(resource.RLIMIT_AS, (-1, -1))",
        "kill_other": f"os.kill({target.victim.pid}, 15)",
    }


def test_isolated_session_with_unsafe_entries_reaches_nothing(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("S2O_CONFINE", raising=False)
    session = IsolatedSession(bare_settings(UNSAFE))
    try:
        check_said(session.warnings)
        for name, cell in attempts_as_cells(target).items():
            with pytest.raises(S2OError) as caught:
                session.evaluate(cell)
            assert caught.value.code == "runtime", (name, caught.value)
        assert session.evaluate(f"os.system('touch ' + {target.markers()['os_system']!r})") != 0
        cap = session.evaluate("resource.getrlimit(resource.RLIMIT_AS)[0]")
        assert 0 < cap < session.settings.limits.memory + (1 << 30)  # the kernel process's cap is in place
        assert session.evaluate("open(os.environ['TMPDIR'] + '/inside.txt', 'w').write('kept')") == 4
        assert session.evaluate("len('abc')") == 3
        assert session.evaluate("str(6 * 7)") == "42"
        assert session.restarts == 0
    finally:
        session.close()
    assert target.created() == []
    assert target.received() == []
    assert target.victim.poll() is None


def test_isolated_session_says_once_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S2O_CONFINE", "off")
    session = IsolatedSession(bare_settings({"allowlist": "len"}))
    try:
        said = [w for w in session.warnings if "OS confinement" in w]
        assert len(said) == 1 and "S2O_CONFINE=off" in said[0]
        assert session.evaluate("len('ab')") == 2
        assert session.update_settings({"limits": {"memory": 200 << 20}}) == []  # not said again
    finally:
        session.close()


@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_spec(tmp_path_factory.mktemp("prefix"))


def write_settings(cwd: Path) -> None:
    lines = "\n".join(UNSAFE_ENTRIES)
    (cwd / "s2o.toml").write_text(f'allow_unsafe_entries = true\nallowlist = """\n{lines}\n"""\n')


def test_kernel_with_unsafe_entries_reaches_nothing(kernels_dir: Path, target: Target) -> None:
    cwd = target.tmp / "cwd"
    cwd.mkdir()
    write_settings(cwd)
    km, kc = start_kernel(kernels_dir, cwd, env={"S2O_KERNEL_ISOLATED": "", "S2O_CONFINE": ""})
    try:
        reply, outputs = execute(kc, "len('abc')")
        assert result_data(outputs)["text/plain"] == "3"
        check_said([m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream"])
        for name, cell in attempts_as_cells(target).items():
            reply, _ = execute(kc, cell)
            assert (reply["status"], reply["ename"]) == ("error", "runtime"), (name, reply)
        reply, outputs = execute(kc, "str(6 * 7)")
        assert result_data(outputs)["text/plain"] == "'42'"
    finally:
        stop_kernel(km, kc)
    assert target.created() == []
    assert target.received() == []
    assert target.victim.poll() is None


def test_kernel_says_once_at_start_what_is_missing(kernels_dir: Path, tmp_path: Path) -> None:
    km, kc = start_kernel(kernels_dir, tmp_path, env={"S2O_KERNEL_ISOLATED": "", "S2O_CONFINE": "0"})
    try:
        shown = []
        for _ in range(2):
            _reply, outputs = execute(kc, "len('abc')")
            shown.append("".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream"))
        assert "OS confinement" in shown[0] and "S2O_CONFINE=0" in shown[0]
        assert "OS confinement" not in shown[1]
    finally:
        stop_kernel(km, kc)
