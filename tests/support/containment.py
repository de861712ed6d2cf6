"""The SPEC 12 containment check, shared by ``test_adversarial.py`` and ``test_fuzz.py``.

A payload is *contained* (SPEC 12) when its outcome is a coded error or a
value, nothing outside the run changed (files, processes, environment, host
globals), and nothing forbidden shows anywhere in the outcome: no module,
frame, code object, traceback, generator / coroutine / async-generator, real
builtins or dangerous host callable as an object (checked on in-process
values), and no secret value, host-global text, host-code literal or repr of
such objects as text (checked on reprs, JSON forms and error messages, for
in-process and isolated runs alike).

This module deliberately does not import the engine's own lists of codes or
denied names: the checks are written from SPEC.md, so a gap in the engine's
tables cannot hide a gap in the tests.

Everything here is Linux-specific (``/proc``), like the containment worker.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import sys
import threading
import time
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from s2o_kernel.engine.worker.launch import WORKER_NAME

# -- codes (SPEC 3, 6, 10) -----------------------------------------------------------------------

#: Codes raised at validation (SPEC 3 table).
VALIDATION_CODES = frozenset({
    "syntax", "underscore", "format", "lambda", "walrus", "call-target", "non-ascii", "comprehension-depth",
    "comprehension-clauses", "operator", "sys", "sys-member", "secret-key", "command-field", "unknown-name",
    "missing-secret", "attribute", "too-long", "too-deep", "not-awaited",
})
#: Codes raised while running (SPEC 3 "Codes raised while running", SPEC 6 limit table, SPEC 9 interrupt).
RUN_CODES = frozenset({
    "not-allowed", "not-set", "not-json", "not-awaited", "runtime", "underscore", "format", "attribute",
    "timedOut", "loop-limit", "row-limit", "cost-limit", "too-long", "memory-limit", "stopped",
})
#: Codes raised when settings or the allowlist load (SPEC 10).
LOAD_CODES = frozenset({"settings", "allowlist", "refused-entry"})
CODES_BY_STAGE = {"validate": VALIDATION_CODES, "run": RUN_CODES, "load": LOAD_CODES}

# -- forbidden text (SPEC 12) --------------------------------------------------------------------

#: Host globals and literals inside host code (tests/conformance/s2o_conformance_helpers.py).
HOST_TEXTS = ("host-secret-7f3a", "dsn-secret-19c2", "row-cred-5e1d", "inline-pass-8b2c")

#: Reprs of objects that must never reach a value or a message (SPEC 12), plus signs of a
#: host traceback or host source paths in a message (SPEC 6: "never the engine's own frames").
FORBIDDEN_REPRS = (
    "<module",
    "<frame",
    "<code object",
    "<generator object",
    "<coroutine object",
    "<async_generator",
    "<traceback",
    "<cell at",
    "<built-in function __import__",
    "<built-in function eval>",
    "<built-in function exec>",
    "<built-in function compile>",
    "<built-in function open>",
    "<built-in function getattr>",
    "<built-in function setattr>",
    "<built-in function delattr>",
    "<built-in function globals>",
    "<built-in function locals>",
    "<built-in function vars>",
    "<built-in function breakpoint>",
    "<built-in function system>",
    "Traceback (most recent call last)",
    "s2o_conformance_helpers.py",
    "/s2o_kernel/",
)

#: Names of the real builtins that hand out code execution, namespaces or files.
_DANGEROUS_BUILTINS = ("eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr", "vars",
                       "dir", "globals", "locals", "breakpoint", "input", "help", "memoryview", "super", "object",
                       "type")
#: Host modules whose callables must never become sandbox values.
_DANGEROUS_MODULES = ("os", "posix", "subprocess", "shutil", "sys", "gc", "importlib", "marshal", "pickle", "io",
                      "_io", "ctypes", "inspect", "types", "pty", "signal", "socket")
_FORBIDDEN_TYPES = {
    types.ModuleType: "a module",
    types.FrameType: "a frame",
    types.CodeType: "a code object",
    types.TracebackType: "a traceback",
    types.GeneratorType: "a generator",
    types.CoroutineType: "a coroutine",
    types.AsyncGeneratorType: "an async generator",
    types.CellType: "a closure cell",
}


def _dangerous_ids() -> dict[int, str]:
    out: dict[int, str] = {}
    for name in _DANGEROUS_BUILTINS:
        obj = getattr(builtins, name, None)
        if obj is not None:
            out[id(obj)] = f"the real builtin {name!r}"
    for modname in _DANGEROUS_MODULES:
        mod = sys.modules.get(modname)
        if mod is None:
            try:
                mod = __import__(modname)
            except ImportError:  # pragma: no cover
                continue
        for name, obj in vars(mod).items():
            if callable(obj) and not isinstance(obj, type):
                out.setdefault(id(obj), f"the host callable {modname}.{name}")
    out[id(io.open)] = "the host callable io.open"
    return out


_DANGEROUS = _dangerous_ids()


#: A run of this many characters of a secret's value counts as showing the secret (redaction that
#: matches only the whole value is beaten by a slice).
PARTIAL_SECRET = 8


def forbidden_texts(secrets: dict[str, str] | None) -> list[str]:
    """Every text that must not appear in an outcome: the case's secret values, host texts, reprs."""
    values = [v for v in (secrets or {}).values() if isinstance(v, str) and v]
    return [*values, *HOST_TEXTS, *FORBIDDEN_REPRS]


def text_problems(text: str, where: str, secrets: dict[str, str] | None, source: str) -> list[str]:
    """Forbidden texts found in ``text``.

    A repr-like marker that is written in the expression itself (``source``) is the
    user's own text echoed back, not a leak, and is ignored; secret values and host
    texts count wherever they show.
    """
    found = []
    secret_values = {v for v in (secrets or {}).values() if v}
    for needle in forbidden_texts(secrets):
        if needle in text:
            if needle not in secret_values and needle not in HOST_TEXTS and needle in source:
                continue
            kind = "secret value" if needle in secret_values else (
                "host text" if needle in HOST_TEXTS else "forbidden repr")
            i = text.index(needle)
            found.append(f"{kind} {needle!r} in {where}: …{text[max(0, i - 60): i + 80]!r}…")
    if not found:
        for value in secret_values:
            for start in range(max(0, len(value) - PARTIAL_SECRET + 1)):
                piece = value[start:start + PARTIAL_SECRET]
                if piece in text and piece not in source:
                    i = text.index(piece)
                    found.append(f"secret value (part {piece!r} of it) in {where}: "
                                 f"…{text[max(0, i - 60): i + 80]!r}…")
                    break
    return found


def _module_dict_ids() -> set[int]:
    return {id(vars(m)) for m in list(sys.modules.values()) if m is not None and hasattr(m, "__dict__")}


def object_problems(value: Any, *, pids: Iterable[int] = ()) -> list[str]:
    """Forbidden objects reachable from ``value`` through lists, tuples, sets and dicts (in-process only)."""
    problems: list[str] = []
    module_dicts = _module_dict_ids()
    pid_set = set(pids)
    stack = [(value, "value")]
    seen: set[int] = set()
    while stack and len(seen) < 200_000:
        v, at = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        t = type(v)
        for forbidden, what in _FORBIDDEN_TYPES.items():
            if isinstance(v, forbidden):
                problems.append(f"{at} is {what}: {_safe_repr(v)}")
        if v is vars(builtins) or v is builtins:
            problems.append(f"{at} is the real builtins")
        elif id(v) in module_dicts:
            problems.append(f"{at} is a host module namespace (globals)")
        elif id(v) in _DANGEROUS:
            problems.append(f"{at} is {_DANGEROUS[id(v)]}")
        if isinstance(v, BaseException) and v.__traceback__ is not None:
            problems.append(f"{at} is a raised exception carrying a traceback: {_safe_repr(v)}")
        if t is int and pid_set and v in pid_set:
            problems.append(f"{at} equals a host process id ({v}): os.getpid() ran in the host")
        if t in (list, tuple, set, frozenset):
            stack.extend((item, f"{at}[{i}]") for i, item in enumerate(v))
        elif t is dict:
            for k, item in v.items():
                if k == "__builtins__":
                    problems.append(f"{at} holds a '__builtins__' key (a module namespace)")
                stack.append((k, f"{at} key {k!r}"[:200]))
                stack.append((item, f"{at}[{k!r}]"[:200]))
    return problems


def _safe_repr(v: Any, limit: int = 200) -> str:
    try:
        text = repr(v)
    except Exception as exc:  # pragma: no cover
        text = f"<repr failed: {type(exc).__name__}>"
    return text[:limit]


def value_text(value: Any, limit: int = 2_000_000) -> tuple[str, str]:
    """``(repr, json text)`` of an outcome value; an isolated run's :class:`RemoteValue` gives its own."""
    if type(value).__name__ == "RemoteValue":  # never getattr on a sandbox value: proxies raise
        text, data = value.text, value.json
    else:
        text = _safe_repr(value, limit)
        data = None
        with contextlib.suppress(Exception):
            data = json.loads(json.dumps(value))
    try:
        jtext = json.dumps(data)
    except Exception:
        jtext = ""
    return text[:limit], jtext[:limit]


def error_texts(err: Any) -> list[tuple[str, str]]:
    """Every text an :class:`S2OError` shows (message, details, sub-errors of a group)."""
    out = [("error message", str(getattr(err, "message", "")))]
    details = getattr(err, "details", None)
    if details:
        out.append(("error details", json.dumps(details, default=repr)))
    for sub in getattr(err, "errors", None) or []:
        if sub is not err:
            out.extend(error_texts(sub))
    return out


def error_problems(err: Any) -> list[str]:
    """Why ``err`` is not a coded error of SPEC 3/6/10 (empty when it is one)."""
    code = getattr(err, "code", None)
    stage = getattr(err, "stage", None)
    if stage not in CODES_BY_STAGE:
        return [f"error has stage {stage!r}, not load/validate/run: {err!r}"]
    if code not in CODES_BY_STAGE[stage]:
        return [f"error code {code!r} is not a SPEC code for stage {stage!r}: {err!r}"]
    if not isinstance(getattr(err, "message", None), str) or not err.message:
        return [f"error has no message: {err!r}"]
    return []


# -- host state ----------------------------------------------------------------------------------

def _helpers() -> Any:
    import s2o_conformance_helpers

    return s2o_conformance_helpers


def _environ() -> dict[str, str]:
    """``os.environ`` without the variable pytest itself rewrites between test phases."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


class HostState:
    """A snapshot of what a run must not change in this process: environment, host and builtin globals."""

    def __init__(self) -> None:
        h = _helpers()
        self.environ = _environ()
        self.helpers = {k: v for k, v in vars(h).items()}
        self.helper_code = {name: (getattr(h, name).__code__, getattr(h, name).__defaults__)
                            for name in ("rows", "arows", "fetch")}
        self.builtins = dict(vars(builtins))
        self.cwd = os.getcwd()

    def changes(self) -> list[str]:
        h = _helpers()
        out = []
        env = _environ()
        if env != self.environ:
            added = set(env) - set(self.environ)
            removed = set(self.environ) - set(env)
            changed = {k for k in set(env) & set(self.environ) if env[k] != self.environ[k]}
            out.append(f"os.environ changed: added {sorted(added)}, removed {sorted(removed)}, "
                       f"changed {sorted(changed)}")
        for name in ("HOST_SECRET", "DB_DSN"):
            if getattr(h, name, None) != self.helpers.get(name):
                out.append(f"host global s2o_conformance_helpers.{name} changed")
        now = vars(h)
        for k, v in self.helpers.items():
            if k not in now or now[k] is not v:
                out.append(f"host global s2o_conformance_helpers.{k} replaced or removed")
        for k in set(now) - set(self.helpers):
            out.append(f"host global s2o_conformance_helpers.{k} added")
        for name, (code, defaults) in self.helper_code.items():
            fn = getattr(h, name)
            if fn.__code__ is not code or fn.__defaults__ != defaults:
                out.append(f"host function s2o_conformance_helpers.{name} was modified")
        bnow = vars(builtins)
        for k, v in self.builtins.items():
            if bnow.get(k, None) is not v:
                out.append(f"real builtin {k!r} replaced or removed")
        if os.getcwd() != self.cwd:
            out.append(f"working directory changed to {os.getcwd()!r}")
        return out


# -- processes -----------------------------------------------------------------------------------

def _proc_stat(pid: int) -> tuple[int, str] | None:
    """``(ppid, state)`` of ``pid`` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[1]), rest[0]


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(pid: int | None = None) -> set[int]:
    """Every living (or zombie) descendant of ``pid`` (default: this process)."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None:
                parents[int(entry)] = st[0]
    out: set[int] = set()
    frontier = {root}
    while frontier:
        nxt = {p for p, pp in parents.items() if pp in frontier and p not in out}
        out |= nxt
        frontier = nxt
    return out


def is_worker(pid: int, parent: int | None = None) -> bool:
    """True for a containment worker that is a direct child of ``parent`` (default: this process).

    A worker started as a new interpreter has ``s2o_kernel.engine.worker`` in its command line; a
    forked one (the kernel's) has its parent's command line and is named ``s2o-worker``
    (``/proc/PID/comm``). Only a direct child counts: a process a worker started is never one.
    """
    st = _proc_stat(pid)
    if st is None or st[0] != (os.getpid() if parent is None else parent):
        return False
    return "s2o_kernel.engine.worker" in cmdline(pid) or comm(pid) == WORKER_NAME


def comm(pid: int) -> str:
    """The name of process ``pid`` (``/proc/PID/comm``), ``""`` when it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def processes_in(directory: str, exclude: Iterable[int] = ()) -> list[str]:
    """Processes (other than ``exclude`` and this one) whose working directory is ``directory``.

    Catches a process that a payload started and detached (double fork), which is
    no longer a descendant of this process.
    """
    skip = {os.getpid(), *exclude}
    real = os.path.realpath(directory)
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == real:
                out.append(f"pid {entry}: {cmdline(int(entry))[:200]!r}")
        except OSError:
            continue
    return out


def wait_gone(pids: Iterable[int], timeout: float = 3.0) -> set[int]:
    """Wait until ``pids`` have exited (zombies count as gone); returns those still running."""
    deadline = time.monotonic() + timeout
    left = set(pids)
    while left and time.monotonic() < deadline:
        left = {p for p in left if (st := _proc_stat(p)) is not None and st[1] != "Z"}
        if left:
            time.sleep(0.05)
    return left


def status_kib(pid: int, field: str) -> int | None:
    """A ``/proc/PID/status`` memory field (``VmRSS``, ``VmHWM``) in KiB."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class PeakMemory:
    """Samples a worker's peak RSS (``VmHWM``) while a run is in progress."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.baseline_kib = status_kib(pid, "VmRSS") or 0
        self.peak_kib = status_kib(pid, "VmHWM") or 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            hwm = status_kib(self.pid, "VmHWM")
            if hwm is None:
                return
            self.peak_kib = max(self.peak_kib, hwm)
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        hwm = status_kib(self.pid, "VmHWM")
        if hwm is not None:
            self.peak_kib = max(self.peak_kib, hwm)
        self._stop.set()
        self._thread.join(1)

    @property
    def held_bytes(self) -> int:
        """Peak RSS above the RSS before the run."""
        return max(0, self.peak_kib - self.baseline_kib) * 1024


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
