"""OS confinement of the containment worker (SPEC 12, "containment in depth").

Even a full escape of the language rules must reach nothing: the worker
process cannot start processes or run another program, open network sockets,
write outside its own scratch folder, or change its limits; its memory is
capped by ``limits.memory``. Outside calls (SPEC 7.1) are made by the kernel
process on the worker's behalf, so the worker needs none of these rights.
:func:`apply` confines the calling process, once, before it reads its first
request, in layers that each stand alone:

* ``no_new_privs`` — ``PR_SET_NO_NEW_PRIVS`` (:mod:`.process`), needed by the
  two below and never cleared;
* ``landlock.fs``, ``landlock.net``, ``landlock.scope`` — Landlock
  (:mod:`.landlock`): read everywhere, write only beneath the scratch folder,
  execute nothing, no TCP bind or connect, no signal or abstract socket out of
  the worker;
* ``capabilities`` — every capability dropped (:mod:`.process`), which
  matters when the kernel runs as root;
* ``seccomp`` — a seccomp-bpf filter (:mod:`.seccomp`): no ``execve``, no
  ``fork``/``vfork``/``clone`` without ``CLONE_THREAD`` (threads still work),
  no sockets but an ``AF_UNIX`` pair, no change of limits, no ``ptrace`` or
  signals to other processes, no ``io_uring``, mounts or namespaces.

The memory cap is set by the kernel process (:func:`.process.cap_address_space`),
since the worker may not change its own limits. :func:`apply` never raises for
a kernel that lacks a mechanism: its :class:`Report` says which layers are in
force and why the others are not, and the worker returns
:attr:`Report.warnings` with its ``init`` reply, which the kernel shows once
at start.

**Why a ctypes layer and not a binding.** Landlock and seccomp are each a
handful of system calls with stable, versioned kernel ABIs; the filter is a
few dozen classic-BPF instructions. The bindings on offer are a development
release (``landlock`` 1.0.0.dev5 on PyPI), a 2021 ``ctypes`` wrapper of
libseccomp that needs the C library installed (``pyseccomp``), or Debian's
``python3-seccomp``, which a virtual environment cannot install. This package
has no dependency, is read in one sitting, states its policy as data
(:data:`.seccomp.RULES`, :data:`.landlock.READ`/:data:`.landlock.SCRATCH`), and
``tests/security/test_confine.py`` checks both the BPF program (on every architecture
it knows, with a BPF interpreter) and the confined process (real attempts).

**Turning it off** is for debugging only: ``S2O_CONFINE=0`` (or ``false``,
``no``, ``off``) in the environment of the kernel (``python -m s2o_kernel
install --env S2O_CONFINE 0``) or of the worker leaves the worker unconfined
apart from its memory cap, and the kernel says so at start.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..settings import switched_off
from . import landlock, seccomp
from .process import cap_address_space, drop_capabilities, no_new_privs, vm_size
from .syscalls import current_arch

__all__ = ["LAYERS", "MECHANISMS", "OFF_ENV", "SCRATCH_ENV", "Report", "apply", "cap_address_space", "requested",
           "scratch_folder", "vm_size"]

#: Environment variable that turns the confinement off when ``0``, ``false``, ``no`` or ``off`` (debugging only).
OFF_ENV = "S2O_CONFINE"
#: Environment variable naming the worker's scratch folder (made and removed by the kernel process).
SCRATCH_ENV = "S2O_WORKER_SCRATCH"
#: Everything :func:`apply` may put in force, in the order it does.
MECHANISMS = ("no_new_privs", *landlock.PARTS, "capabilities", "seccomp")
#: Layers a caller may choose (tests apply one at a time to show each stands alone).
LAYERS = ("landlock", "capabilities", "seccomp")


@dataclass(frozen=True)
class Report:
    """What :func:`apply` put in force: ``active`` and ``unavailable`` map each of :data:`MECHANISMS` to what
    it enforces or why it is not in force; ``seconds`` is the time :func:`apply` took."""

    active: Mapping[str, str] = field(default_factory=dict)
    unavailable: Mapping[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def warnings(self) -> list[str]:
        """One line per reason a mechanism is not in force (SPEC 12: said once at start); empty when all are."""
        by_reason: dict[str, list[str]] = {}
        for name, why in self.unavailable.items():
            by_reason.setdefault(why, []).append(name)
        return [f"the worker's OS confinement lacks {', '.join(names)}: {why}" for why, names in by_reason.items()]

    def to_dict(self) -> dict[str, Any]:
        """``{"active": {…}, "unavailable": {…}, "seconds": s}``, JSON-ready."""
        return {"active": dict(self.active), "unavailable": dict(self.unavailable), "seconds": self.seconds}


def requested(environ: Mapping[str, str] | None = None) -> bool:
    """True unless :data:`OFF_ENV` turns the confinement off (the default is on)."""
    value = (os.environ if environ is None else environ).get(OFF_ENV, "")
    return not switched_off(value)


def scratch_folder() -> Path:
    """The worker's scratch folder: ``$S2O_WORKER_SCRATCH`` (the kernel process makes it and removes it after
    the worker ends), else a new temporary folder (left behind: a confined worker cannot remove it)."""
    named = os.environ.get(SCRATCH_ENV)
    if named:
        return Path(named)
    import tempfile

    return Path(tempfile.mkdtemp(prefix="s2o-worker-"))


def _use_for_temporary_files(scratch: Path) -> None:
    os.environ["TMPDIR"] = str(scratch)
    if "tempfile" in sys.modules:  # a tempfile loaded later reads TMPDIR
        import tempfile

        tempfile.tempdir = str(scratch)


def _confine(scratch: Path, layers: Collection[str]) -> tuple[dict[str, str], dict[str, str]]:
    arch = current_arch()
    active: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    try:
        no_new_privs()
        active["no_new_privs"] = "no privilege gained through exec"
    except OSError as exc:
        unavailable["no_new_privs"] = f"prctl(PR_SET_NO_NEW_PRIVS) failed: {exc.strerror}"
    if "landlock" in layers:
        done, missing = landlock.restrict(scratch)
        active.update(done)
        unavailable.update(missing)
    for layer in ("capabilities", "seccomp"):
        if layer not in layers:
            continue
        if arch is None:
            unavailable[layer] = f"no system-call table for this machine ({os.uname().machine})"
            continue
        try:
            if layer == "capabilities":
                drop_capabilities(arch)
                active[layer] = "every capability dropped"
            else:
                seccomp.install(arch, seccomp.program(arch, os.getpid()))
                active[layer] = f"{len(seccomp.RULES)} system calls refused or checked ({arch.name})"
        except OSError as exc:
            unavailable[layer] = f"the kernel refused it: {exc.strerror}"
    return active, unavailable


def apply(scratch: Path, *, layers: Collection[str] = LAYERS) -> Report:
    """Confine the calling process for good (see the module docstring); ``scratch`` is made if missing.

    ``layers`` chooses among :data:`LAYERS` (all by default); a layer not
    chosen is reported unavailable. Points ``TMPDIR`` and :mod:`tempfile` at
    ``scratch``, even when the confinement is turned off. Call it while the
    process has one thread (Landlock confines the calling thread and those
    it starts). Never raises
    for a missing mechanism: the :class:`Report` says what is in force.
    Raises ``OSError`` only when ``scratch`` cannot be made, ``ValueError``
    for a layer not in :data:`LAYERS` (before anything is applied).
    """
    unknown = sorted(set(layers) - set(LAYERS))
    if unknown:
        raise ValueError(f"unknown confinement layers {unknown}; the layers are {list(LAYERS)}")
    started = time.perf_counter()
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    _use_for_temporary_files(scratch)
    if not requested():
        why = f"turned off by {OFF_ENV}={os.environ.get(OFF_ENV, '')} (for debugging only)"
        return Report({}, dict.fromkeys(MECHANISMS, why), time.perf_counter() - started)
    if not sys.platform.startswith("linux"):
        return Report({}, dict.fromkeys(MECHANISMS, f"not Linux ({sys.platform})"), time.perf_counter() - started)
    active, unavailable = _confine(scratch, layers)
    for name in MECHANISMS:
        if name not in active and name not in unavailable:
            unavailable[name] = "not requested"
    return Report(active, unavailable, time.perf_counter() - started)
