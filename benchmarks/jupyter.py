"""Kernels for the kernel and scale sections: temporary kernelspecs, starting, timing, memory (issue 12).

Three kernels are compared, each launched by ``jupyter_client`` from a kernelspec written to a
temporary folder (:func:`kernelspecs`), with this interpreter and this checkout on ``PYTHONPATH``:

* ``s2o`` — ``python -m s2o_kernel`` (cells contained in its worker, the default);
* ``python3`` — ipykernel's own IPython kernel (``python -m ipykernel_launcher``);
* ``floor`` — :mod:`benchmarks.floor_kernel`, a minimal ``Kernel`` subclass returning a constant.

Memory is read from ``/proc/PID/smaps_rollup`` of the kernel process and every process below it
(the s2o worker; ipykernel starts none), summed: ``Rss``, ``Pss`` (shared pages divided among the
processes that map them) and USS (``Private_Clean + Private_Dirty``), in MiB.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from queue import Empty
from typing import Any

import psutil
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

#: The checkout (``s2o_kernel`` and ``benchmarks`` import from here in every kernel).
ROOT = Path(__file__).resolve().parents[1]
#: Kernel name → its ``argv`` before ``-f {connection_file}``.
KERNELS: dict[str, list[str]] = {
    "s2o": [sys.executable, "-m", "s2o_kernel"],
    "python3": [sys.executable, "-m", "ipykernel_launcher"],
    "floor": [sys.executable, "-m", "benchmarks.floor_kernel"],
}
TIMEOUT = 60.0
MiB = 1 << 20


def kernel_env() -> dict[str, str]:
    """The environment every kernel gets: this checkout first on ``PYTHONPATH``, no ``S2O_CONFIG``."""
    env = {k: v for k, v in os.environ.items() if k != "S2O_CONFIG"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


@contextmanager
def kernelspecs() -> Iterator[Path]:
    """A temporary ``kernels`` folder holding one kernelspec per :data:`KERNELS` entry (removed after)."""
    with tempfile.TemporaryDirectory(prefix="s2o-bench-") as tmp:
        kernels = Path(tmp) / "share" / "jupyter" / "kernels"
        for name, argv in KERNELS.items():
            folder = kernels / name
            folder.mkdir(parents=True)
            spec = {"argv": [*argv, "-f", "{connection_file}"], "display_name": f"bench {name}",
                    "language": "python" if name == "python3" else name, "interrupt_mode": "signal"}
            (folder / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
        yield kernels


@dataclass
class Running:
    """A started kernel: its manager, a blocking client, and the seconds to its first ``kernel_info_reply``."""

    manager: KernelManager
    client: BlockingKernelClient
    start: float

    @property
    def pid(self) -> int:
        """The kernel process id."""
        return int(self.manager.provisioner.process.pid)

    def stop(self) -> None:
        """Shut the kernel down (a ``shutdown_request``, then a kill if it does not go)."""
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=False)


def start(kernels: Path, name: str, cwd: str) -> Running:
    """Start kernel ``name`` and time it: from ``start_kernel`` to the first ``kernel_info_reply``.

    Like ``jupyter_client``'s ``wait_for_ready`` it sends ``kernel_info_request`` and waits for the
    reply; unlike it, the clock stops at the reply itself (no wait for IOPub to connect, which is
    waited for afterwards, untimed).
    """
    manager = KernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    t0 = time.perf_counter()
    manager.start_kernel(env=kernel_env(), cwd=cwd)
    client = manager.client()
    client.start_channels()
    msg_id = client.kernel_info()
    deadline = t0 + TIMEOUT
    while True:
        try:
            msg = client.get_shell_msg(timeout=max(0.01, deadline - time.perf_counter()))
        except Empty:
            manager.shutdown_kernel(now=True)
            raise RuntimeError(f"kernel {name} did not answer kernel_info within {TIMEOUT:g} s") from None
        if msg["parent_header"].get("msg_id") == msg_id:
            break
    elapsed = time.perf_counter() - t0
    client.wait_for_ready(timeout=TIMEOUT)  # IOPub connected too (untimed)
    return Running(manager, client, elapsed)


def execute(client: BlockingKernelClient, code: str, *, store_history: bool = True) -> tuple[float, dict[str, Any]]:
    """Run one cell; seconds from sending ``execute_request`` to having both its reply and IOPub ``idle``.

    Returns ``(seconds, reply content)``; the ``execute_result`` text, if any, is added as ``"result"``.
    """
    t0 = time.perf_counter()
    msg_id = client.execute(code, store_history=store_history)
    reply: dict[str, Any] | None = None
    idle = False
    result = None
    while reply is None or not idle:
        if not idle:
            msg = client.get_iopub_msg(timeout=TIMEOUT)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "execute_result":
                result = msg["content"]["data"].get("text/plain")
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        else:
            got = client.get_shell_msg(timeout=TIMEOUT)
            if got["parent_header"].get("msg_id") == msg_id:
                reply = got["content"]
    elapsed = time.perf_counter() - t0
    return elapsed, {**reply, "result": result}


def execute_many(client: BlockingKernelClient, code: str, count: int, *, window: int = 64) -> None:
    """Run ``code`` ``count`` times as fast as the kernel answers: up to ``window`` requests in flight.

    Raises ``RuntimeError`` on the first reply whose status is not ``ok``.
    """
    sent = done = 0
    while done < count:
        while sent < count and sent - done < window:
            client.execute(code, store_history=True)
            sent += 1
        reply = client.get_shell_msg(timeout=TIMEOUT)
        if reply["msg_type"] != "execute_reply":
            continue
        if reply["content"].get("status") != "ok":
            raise RuntimeError(f"execute {done} failed: {reply['content']}")
        done += 1
        drain(client, 0)
    drain(client)


def drain(client: BlockingKernelClient, wait: float = 0.2) -> None:
    """Read and drop what IOPub holds until it is quiet for ``wait`` seconds (so nothing piles up)."""
    while True:
        try:
            client.get_iopub_msg(timeout=wait)
        except Empty:
            return


def _rollup(pid: int) -> dict[str, int]:
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                values[key] = int(parts[0]) * 1024
    return values


def memory(pid: int) -> dict[str, float]:
    """``{"rss", "pss", "uss", "processes"}`` of process ``pid`` and all below it, in MiB (processes: count)."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    total = {"rss": 0.0, "pss": 0.0, "uss": 0.0}
    counted = 0
    for proc in procs:
        try:
            r = _rollup(proc.pid)
        except (OSError, psutil.Error):
            continue  # ended meanwhile
        counted += 1
        total["rss"] += r.get("Rss", 0) / MiB
        total["pss"] += r.get("Pss", 0) / MiB
        total["uss"] += (r.get("Private_Clean", 0) + r.get("Private_Dirty", 0)) / MiB
    return {**total, "processes": float(counted)}
