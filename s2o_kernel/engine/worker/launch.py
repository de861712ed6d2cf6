"""How a worker process is started: a new interpreter, or a fork of this process (SPEC 12).

:func:`exec_worker` runs ``python -m s2o_kernel.engine.worker`` (a fresh interpreter that imports the
engine itself: about 25–30 MiB of its own). :func:`fork_worker` forks the calling process instead: the
child already holds every module the parent imported, and shares those pages with it copy-on-write,
so a worker costs only the pages it writes (a few MiB); it also skips the interpreter start and the
imports. The kernel uses the fork (``docs/performance.md``, "Kernel"); a library user gets the fresh
interpreter unless they ask for the fork (:class:`~.client.IsolatedSession` ``fork=True``).

Either way the worker is the same program (:func:`.server.main`): it confines itself (Landlock,
seccomp, no new privileges) before it reads its first request, and the parent caps its address space
(``RLIMIT_AS``) after ``init``; both apply to a forked worker exactly as to a new interpreter.

**Forking a process with threads.** The kernel forks while its own threads (ZMQ, IOPub, heartbeat)
run. Only the forking thread exists in the child, so the child must not need anything another thread
may have held at the fork: it touches no ZMQ socket, no IOPub stream and no logging handler of the
parent, replaces ``sys.stdin``/``stdout``/``stderr`` with its pipes, closes every other inherited file
descriptor, forgets the parent's running event loop and signal handlers, imports nothing the parent
had not imported before the fork (:data:`PRELOAD`), and leaves through ``os._exit`` (no ``atexit``
handler or finaliser of the parent runs). Before its first fork the parent collects and freezes its
garbage collector's objects (``gc.freeze``), so that collections in either process do not write to the
shared pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import io
import os
import signal
import subprocess
import sys
import time
import warnings
from asyncio.events import _set_running_loop  # in asyncio.events.__all__: public despite its name
from collections.abc import Callable, Mapping
from typing import IO

from ...bounds import FORK_POLL
from .. import confine
from ..settings import Settings, default_settings

#: Modules a forked worker runs on, imported by the parent before it forks (so the child imports
#: nothing while another thread of the parent might hold an import lock, and shares their pages): the
#: fragment parser and interpreter too (the session imports them; the worker wrote ~2.8 MiB of its own at
#: its first fragment cell when they were imported there); and the gateway the parent serves the
#: worker's outside calls with (the handlers' modules, httpx's among them, are imported at a kind's first call).
PRELOAD = ("s2o_kernel.engine", "s2o_kernel.engine.worker.server", "s2o_kernel.engine.confine",
           "s2o_kernel.engine.fragments.parser", "s2o_kernel.engine.fragments.interpreter",
           "s2o_kernel.engine.outside.gateway")
#: The name (``/proc/PID/comm``) of a forked worker, whose command line is its parent's; an exec'd
#: worker's command line names ``s2o_kernel.engine.worker``.
WORKER_NAME = "s2o-worker"
#: ``prctl`` option that names the calling thread (the child's only thread: the process).
_PR_SET_NAME = 15

#: Signal dispositions of a new worker (a new interpreter's, but SIGINT, which the worker ignores
#: between requests): the parent's own handlers must not run in the child.
_SIGNALS = {signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_DFL, signal.SIGHUP: signal.SIG_DFL,
            signal.SIGCHLD: signal.SIG_DFL, signal.SIGPIPE: signal.SIG_IGN}
_frozen = False
#: This process has held a credential (see :func:`may_fork`).
_held_credentials = False
#: A forked worker's standard streams (see :func:`_child`).
_std: list[io.TextIOWrapper] = []


def exec_worker(scratch: str) -> subprocess.Popen[bytes]:
    """A new interpreter running the worker, its stdin and stdout pipes to this process.

    ``scratch`` is the worker's scratch folder (:data:`.confine.SCRATCH_ENV`). Raises ``OSError``
    when the process cannot be started.
    """
    # no credential crosses into the worker, not even in its environment (SPEC 7.1)
    env = worker_environment(os.environ)
    env.setdefault("MALLOC_ARENA_MAX", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env[confine.SCRATCH_ENV] = scratch
    return subprocess.Popen([sys.executable, "-m", "s2o_kernel.engine.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=None, env=env, close_fds=True)


#: Environment variables a worker keeps (by name, or by a prefix of its name): what Python, locales and
#: the worker itself read. Any other variable may be a credential (``OPENAI_API_KEY``,
#: ``JUPYTERHUB_API_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``S2O_SECRET_*``) and never reaches a worker.
WORKER_ENV_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
                              "LD_LIBRARY_PATH", "MALLOC_ARENA_MAX", "S2O_CONFINE", "S2O_CONFIG", "S2O_DATA_DIR"})
WORKER_ENV_PREFIXES = ("LC_", "PYTHON", "COVERAGE_", "OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_",
                       confine.SCRATCH_ENV)


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` a worker gets (:data:`WORKER_ENV_NAMES`, :data:`WORKER_ENV_PREFIXES`): an
    allowlist, since a credential in the kernel's environment has no telling name (SPEC 7.1, 12)."""
    return {k: v for k, v in environ.items()
            if k in WORKER_ENV_NAMES or k.startswith(WORKER_ENV_PREFIXES) or k == confine.OFF_ENV}


def _scrub_environment() -> None:  # pragma: no cover - runs in the forked child
    """In a forked child: keep only :func:`worker_environment` of ``os.environ`` (and of the C library's
    ``environ``, which ``os.environ`` updates), then zero the block the parent was started with (what
    ``/proc/self/environ`` shows; it lies between ``env_start`` and ``env_end``, fields 50 and 51 of
    ``/proc/self/stat``, proc(5))."""
    import ctypes

    kept = worker_environment(os.environ)
    os.environ.clear()
    os.environ.update(kept)
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # after the name (field 2) comes field 3
        if 0 < start < end:
            ctypes.memset(start, 0, end - start)


def may_fork(settings: Settings) -> bool:
    """Whether a worker may be forked from this process now: only while this process has never held a
    credential, since a fork copies the whole address space and the worker must hold none (SPEC 7.1).

    A process holds one once its settings have a secret, a ``secrets_file`` or profiles other than the
    embedded default's (whose fields hold no credential), or its environment has an ``S2O_SECRET_``
    variable. That is sticky: freed memory is not cleared, so once seen, every later worker of this
    process is a new interpreter (:func:`exec_worker`), which starts with none of it.
    """
    global _held_credentials
    if not _held_credentials:
        _held_credentials = bool(
            settings.secrets or settings.secrets_file or any(k.startswith("S2O_SECRET_") for k in os.environ)
            or settings.profiles != default_settings().profiles)
    return not _held_credentials


class ForkedWorker:
    """A forked worker process, with the part of ``subprocess.Popen``'s interface the client uses.

    ``pid``; ``stdin`` (write end of the request pipe) and ``stdout`` (read end of the reply pipe), binary
    files; ``poll()``, ``wait(timeout)``, ``kill()``, ``send_signal(sig)``. ``returncode`` is ``None``
    while it runs, then its exit status (``-N`` for signal ``N``), as with ``Popen``.
    """

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status once the worker has ended (reaping it), else ``None``."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the worker to end; raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(["s2o-worker"], timeout or 0.0)
            time.sleep(FORK_POLL)
        return code

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the worker unless it has ended (and been reaped)."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the worker."""
        self.send_signal(signal.SIGKILL)


def _prepare_once() -> None:
    """Before the first fork: import :data:`PRELOAD`, build one engine for the *default* settings (it imports
    the teaching allowlist's modules and fills the process-wide caches of the audited standard library,
    which every worker's own engine then finds ready and shared), collect, and move every object the garbage
    collector tracks into its permanent generation, so that later collections in the parent and in the
    workers leave the shared pages alone. Nothing is kept of the engine built here.

    Never the caller's settings: a module their allowlist names is imported only by the confined worker,
    as with a new interpreter, never by this unconfined process.
    """
    global _frozen
    if _frozen:
        return
    for name in PRELOAD:
        importlib.import_module(name)
    from ..run.engine import Engine

    Engine(default_settings())
    gc.collect()
    gc.freeze()
    _frozen = True


def fork_worker(scratch: str, main: Callable[[], int] | None = None) -> ForkedWorker:
    """Fork this process into a worker (see the module docstring); returns the parent's handle on it.

    The worker gets its settings in its ``init`` request and builds its own engine from them, confined.
    ``main`` is what the child runs once it is set up, instead of :func:`.server.main` (a program that speaks
    the protocol in the worker's place: the tests' hostile worker); it returns the exit status. Raises
    ``OSError`` when the pipes or the fork fail.
    """
    _prepare_once()
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns of forking with threads; see the module docstring
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        for fd in (request_r, request_w, reply_r, reply_w):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover - the child; its behaviour is tested through the client
        _child(request_r, reply_w, scratch, main)
    os.close(request_r)
    os.close(reply_w)
    return ForkedWorker(pid, os.fdopen(request_w, "wb"), os.fdopen(reply_r, "rb", buffering=0))


def _child(request_r: int, reply_w: int, scratch: str, main: Callable[[], int] | None
           ) -> None:  # pragma: no cover - runs in the child
    """The forked child: become a worker on the two pipes (running ``main``, by default :func:`.server.main`)
    and never return."""
    status = 1
    try:
        from ..confine.syscalls import libc

        libc().prctl(_PR_SET_NAME, WORKER_NAME.encode(), 0, 0, 0)
        os.dup2(request_r, 0)
        os.dup2(reply_w, 1)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        _scrub_environment()
        for sig, action in _SIGNALS.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, action)
        asyncio.set_event_loop_policy(None)  # forget the parent's loop (a restart forks on the kernel's loop)
        _set_running_loop(None)
        # kept referenced here: the worker replaces sys.stdout and writes to the buffer beneath it
        _std.extend((io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False))),
                     io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "wb", closefd=False))),
                     io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "wb", closefd=False)),
                                      errors="backslashreplace", line_buffering=True)))
        sys.stdin, sys.stdout, sys.stderr = _std
        os.environ[confine.SCRATCH_ENV] = scratch
        from .server import main as serve

        status = (main or serve)()
    except BaseException:
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        os._exit(status)
