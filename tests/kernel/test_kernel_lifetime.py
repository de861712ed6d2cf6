"""Through a real kernel: a run ends with everything it started (SPEC 12, issue 8).

A granted ``asyncio.gather`` whose first child fails, and a host function that starts a task of its
own, used to leave work burning CPU after the cell ended (8.5 s of CPU in the next 10 s, measured).
The worker's CPU time after the cell is the observable: it must stay still.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import PACKAGE_ROOT, execute, install_spec, result_data, start_kernel, stop_kernel

SUPPORT = Path(__file__).resolve().parents[1] / "support"
CONFIG = """
allowlist = '''
asyncio.gather
s2o_lifetime_hosts.burn as burn
s2o_lifetime_hosts.fail as fail
s2o_lifetime_hosts.spawn as spawn
s2o_lifetime_hosts.pair as pair
'''
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("lifetime")
    (root / "s2o.toml").write_text(CONFIG)
    kernels = install_spec(root / "kernels")
    km, kc = start_kernel(kernels, root, env={"PYTHONPATH": os.pathsep.join((str(SUPPORT), str(PACKAGE_ROOT)))})
    yield km, kc
    stop_kernel(km, kc)


def _children_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid``'s child processes (the worker)."""
    total = 0.0
    tick = 100.0
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _cpu_after(km: Any, seconds: float) -> float:
    pid = km.provisioner.process.pid
    before = _children_cpu_seconds(pid)
    time.sleep(seconds)
    return _children_cpu_seconds(pid) - before


def test_gather_children_stop_when_a_sibling_fails(kernel: Any) -> None:
    km, kc = kernel
    reply, _ = execute(kc, "await asyncio.gather(*pair())")
    assert (reply["status"], reply["ename"]) == ("error", "runtime")
    assert "ValueError" in reply["evalue"]
    assert _cpu_after(km, 1.0) < 0.3
    _, outputs = execute(kc, "1 + 1")
    assert result_data(outputs)["text/plain"] == "2"


def test_a_task_a_host_function_starts_ends_with_the_cell(kernel: Any) -> None:
    km, kc = kernel
    _, outputs = execute(kc, "spawn()")
    assert result_data(outputs)["text/plain"] == "'started'"
    assert _cpu_after(km, 1.0) < 0.3
