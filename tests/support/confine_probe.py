"""Child process of ``tests/security/test_confine.py``: confine itself, then try what a full escape would try.

``python tests/support/confine_probe.py CONFIG_JSON``. ``CONFIG_JSON`` holds the
scratch folder, the paths and ports of the test's listeners and markers, the
pid of a victim process, the layers to apply and the attempts to make. The
probe lowers ``RLIMIT_AS`` to :data:`SOFT_AS` (hard limit unchanged) as the
kernel process would, and the hard ``RLIMIT_NOFILE`` to its soft limit,
applies :func:`s2o_kernel.engine.confine.apply`, then
prints one JSON line with the report and one per attempt:
``{"attempt": name, "ok": true, "value": repr}`` or
``{"attempt": name, "ok": false, "error": type name, "errno": n}``. Every
attempt runs whatever happened before it; none stops the probe.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from s2o_kernel.engine import confine

#: The soft address-space limit set before confining (the hard limit is left as it is).
SOFT_AS = 4 << 30
PTRACE_ATTACH = 16
PTRACE_DETACH = 17


def _subprocess_run(c: dict[str, Any]) -> Any:
    return subprocess.run(["touch", c["markers"]["subprocess_run"]], check=True).returncode


def _os_system(c: dict[str, Any]) -> Any:
    status = os.system(f"touch {shlex.quote(c['markers']['os_system'])}")
    if status != 0:
        raise ChildProcessError(status, "the shell did not run")
    return status


def _os_fork(c: dict[str, Any]) -> Any:
    pid = os.fork()
    if pid == 0:  # only reached when fork is allowed: mark it and leave at once, whatever happens
        try:
            Path(c["markers"]["os_fork"]).touch()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return pid


def static_exit_program(machine: str) -> bytes:
    """A static ELF program that exits with status 0: it needs no ELF interpreter, so only the right to
    execute the file itself decides whether it runs."""
    code = {"x86_64": bytes.fromhex("b83c00000031ff0f05"),  # mov eax, 60 (exit); xor edi, edi; syscall
            "aarch64": bytes.fromhex("a80b80d2000080d2010000d4")}[machine]  # mov x8, 93; mov x0, 0; svc 0
    base, size = 0x400000, 64 + 56 + len(code)
    header = struct.pack("<4sBBBBB7xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, 2,
                         {"x86_64": 62, "aarch64": 183}[machine], 1, base + 120, 64, 0, 0, 64, 56, 1, 0, 0, 0)
    segment = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)  # PT_LOAD, read + execute
    return header + segment + code


def _exec_from_scratch(c: dict[str, Any]) -> Any:
    program = Path(c["scratch"]) / "program"  # written where writing is allowed
    program.write_bytes(static_exit_program(os.uname().machine))
    program.chmod(0o755)
    return subprocess.run([str(program)], check=True).returncode


def _os_execv(c: dict[str, Any]) -> Any:
    os.execv("/bin/sh", ["sh", "-c", f"touch {shlex.quote(c['markers']['os_execv'])}"])


def _tcp_connect(c: dict[str, Any]) -> Any:
    with socket.create_connection(("127.0.0.1", c["tcp_port"]), timeout=2) as sock:
        sock.sendall(b"escaped")
    return "connected"


def _udp_send(c: dict[str, Any]) -> Any:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return sock.sendto(b"escaped", ("127.0.0.1", c["udp_port"]))


def _unix_connect(c: dict[str, Any]) -> Any:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(c["unix_path"])
        sock.sendall(b"escaped")
    return "connected"


def _open_outside(c: dict[str, Any]) -> Any:
    with open(c["outside"], "w") as fh:
        return fh.write("escaped")


def _rlimit_as_raise(c: dict[str, Any]) -> Any:
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_AS)


def _rlimit_nofile_hard_raise(c: dict[str, Any]) -> Any:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # hard == soft: lowered before confining
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard + 1))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _kill_other(c: dict[str, Any]) -> Any:
    os.kill(c["victim"], signal.SIGTERM)
    return "sent"


def _ptrace_other(c: dict[str, Any]) -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    args = (ctypes.c_long(c["victim"]), ctypes.c_void_p(0), ctypes.c_void_p(0))
    if libc.ptrace(ctypes.c_long(PTRACE_ATTACH), *args) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    libc.ptrace(ctypes.c_long(PTRACE_DETACH), *args)
    return "attached"


def _write_scratch(c: dict[str, Any]) -> Any:
    import tempfile

    folder = Path(c["scratch"]) / "sub"
    folder.mkdir()
    (folder / "inside.txt").write_text("kept")
    with tempfile.NamedTemporaryFile("w") as tmp:  # TMPDIR points at the scratch folder
        tmp.write("x")
        in_scratch = Path(tmp.name).parent == Path(c["scratch"])
    (folder / "gone.txt").write_text("x")
    (folder / "gone.txt").unlink()
    return [(folder / "inside.txt").read_text(), in_scratch]


def _thread(c: dict[str, Any]) -> Any:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
    thread.start()
    thread.join()
    return seen[0] != threading.get_native_id()


def _event_loop(c: dict[str, Any]) -> Any:
    import asyncio

    async def main() -> int:
        await asyncio.sleep(0)
        return await asyncio.get_running_loop().run_in_executor(None, lambda: 5)

    return asyncio.run(main())


def _lazy_import(c: dict[str, Any]) -> Any:
    was_loaded = "_sqlite3" in sys.modules  # a C extension, mapped from disk only now
    import sqlite3

    with sqlite3.connect(":memory:") as db:
        return [was_loaded, db.execute("select 1 + 1").fetchone()[0]]


def _kill_self(c: dict[str, Any]) -> Any:
    os.kill(os.getpid(), 0)
    return "alive"


def _rlimit_as_now(c: dict[str, Any]) -> Any:
    return resource.getrlimit(resource.RLIMIT_AS)[0]


ATTEMPTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "subprocess_run": _subprocess_run, "exec_from_scratch": _exec_from_scratch, "os_system": _os_system,
    "os_fork": _os_fork, "tcp_connect": _tcp_connect, "udp_send": _udp_send, "unix_connect": _unix_connect,
    "open_outside": _open_outside,
    "rlimit_as_raise": _rlimit_as_raise, "rlimit_nofile_hard_raise": _rlimit_nofile_hard_raise,
    "kill_other": _kill_other, "ptrace_other": _ptrace_other,
    "write_scratch": _write_scratch, "thread": _thread, "event_loop": _event_loop, "lazy_import": _lazy_import,
    "kill_self": _kill_self, "rlimit_as_now": _rlimit_as_now,
    "os_execv": _os_execv,  # last: when it works, the probe is gone
}


def _emit(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def main() -> None:
    """Apply the confinement as configured, then make each attempt."""
    config = json.loads(sys.argv[1])
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (SOFT_AS if hard == resource.RLIM_INFINITY else min(SOFT_AS, hard), hard))
    nofile, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    report = confine.apply(Path(config["scratch"]), layers=config["layers"])
    _emit({"report": report.to_dict(), "warnings": report.warnings})
    for name, attempt in ATTEMPTS.items():
        if name not in config["attempts"]:
            continue
        try:
            _emit({"attempt": name, "ok": True, "value": repr(attempt(config))})
        except BaseException as exc:  # every outcome is reported, none ends the probe
            _emit({"attempt": name, "ok": False, "error": type(exc).__name__, "errno": getattr(exc, "errno", None)})


if __name__ == "__main__":
    main()
