"""Start the s2o kernel from the *current* interpreter for protocol tests.

The kernelspec is installed with ``python -m s2o_kernel install --prefix TMP``
(which also exercises the installer) and found through a
``KernelSpecManager`` restricted to that directory, so the tests work in a
fresh virtual environment and never pick up another installed ``s2o`` spec.
The kernel runs with ``PYTHONPATH`` pointing at the ``s2o_kernel`` package
the tests import, and in a scratch working directory (no stray
``s2o.toml``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from queue import Empty
from typing import Any

import zmq
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

import s2o_kernel

PACKAGE_ROOT = Path(s2o_kernel.__file__).resolve().parents[1]
TIMEOUT = 30


#: ``S2O_KERNEL_ISOLATED`` for each kind of kernel a test runs on ("" is the default: contained).
MODES = {"contained": "", "in-process": "0"}


def install_spec(prefix: Path, name: str = "s2o-test") -> Path:
    """Install the kernelspec under ``prefix`` with the CLI; return the kernels dir."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-m", "s2o_kernel", "install", "--prefix", str(prefix), "--name", name],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kernelspec install failed: {proc.stdout}\n{proc.stderr}")
    return prefix / "share" / "jupyter" / "kernels"


def kernel_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "S2O_CONFIG"}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    env.update(extra or {})
    return env


def start_kernel(
    kernels_dir: Path,
    cwd: Path,
    name: str = "s2o-test",
    env: dict[str, str] | None = None,
) -> tuple[KernelManager, BlockingKernelClient]:
    ksm = KernelSpecManager(kernel_dirs=[str(kernels_dir)])
    for attempt in range(2):  # jupyter_client picks free TCP ports before the kernel binds them: another
        km = KernelManager(kernel_name=name, kernel_spec_manager=ksm)  # process may take one in between
        km.start_kernel(env=kernel_env(env), cwd=str(cwd))
        kc = km.client()
        # Receive every IOPub message however slowly the test reads (ZeroMQ's default high-water mark of
        # 1,000 messages drops the rest; the kernel's own side never drops, see kernel.launch).
        kc.context.setsockopt(zmq.RCVHWM, 0)
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
        except RuntimeError:
            alive = km.is_alive()
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            if alive or attempt:  # a kernel that runs but does not answer is the test's finding
                raise
            continue  # it died at start (a port taken meanwhile): once more, on new ports
        return km, kc
    raise AssertionError("unreachable")


@contextlib.contextmanager
def running_kernel(
    kernels_dir: Path, cwd: Path, name: str = "s2o-test", env: dict[str, str] | None = None
) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """``(manager, client)`` of a kernel started by :func:`start_kernel`, stopped when the block ends."""
    km, kc = start_kernel(kernels_dir, cwd, name, env)
    try:
        yield km, kc
    finally:
        stop_kernel(km, kc)


def stop_kernel(km: KernelManager, kc: BlockingKernelClient) -> None:
    kc.stop_channels()
    km.shutdown_kernel(now=False)


def drain(kc: BlockingKernelClient) -> None:
    for get in (kc.get_shell_msg, kc.get_iopub_msg):
        while True:
            try:
                get(timeout=0.05)
            except Empty:
                break


def collect_iopub(kc: BlockingKernelClient, msg_id: str, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """IOPub messages for ``msg_id`` up to (excluding) its idle status."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no idle for {msg_id}")
        msg = kc.get_iopub_msg(timeout=remaining)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
        out.append(msg)


def shell_reply(kc: BlockingKernelClient, msg_id: str, timeout: float = TIMEOUT) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no reply for {msg_id}")
        msg = kc.get_shell_msg(timeout=remaining)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def execute(
    kc: BlockingKernelClient, code: str, timeout: float = TIMEOUT, **kwargs: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``code``; return (reply content, IOPub outputs without status/execute_input)."""
    msg_id = kc.execute(code, **kwargs)
    reply = shell_reply(kc, msg_id, timeout)
    msgs = collect_iopub(kc, msg_id, timeout)
    outputs = [m for m in msgs if m["msg_type"] not in ("status", "execute_input")]
    return reply["content"], outputs


def result_data(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    results = [m["content"]["data"] for m in outputs if m["msg_type"] == "execute_result"]
    assert len(results) == 1, outputs
    return results[0]
