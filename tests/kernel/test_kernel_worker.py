"""The worker protocol through a real, contained kernel (issue 8, SPEC 12).

One kernel process with its containment worker, started by ``jupyter_client``
(``tests/support/kernel_harness.py``). Its settings (``S2O_CONFIG``) are the embedded
default with a 2 s time limit and ``os`` granted as an unsafe entry, so a cell
can write to the worker's reply pipe the way a compromised worker would.

* A flood: a fragment with one output and 30 MB of log lines ends with its own
  result or a coded error, and the next three cells show their own results.
* A worker that answers with garbage, a wrong id, a line over the cap or a
  message cut short ends the cell with ``worker-protocol``; the worker is
  restarted and the session keeps its variables.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_harness import drain, execute, install_spec, result_data, start_kernel, stop_kernel

from s2o_kernel.engine import default_settings

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def kc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    kernels = install_spec(tmp_path_factory.mktemp("prefix"))
    cwd = tmp_path_factory.mktemp("cwd-worker")
    config = cwd / "unsafe.toml"
    allowlist = default_settings().allowlist + "\nos\n"
    config.write_text(f"allow_unsafe_entries = true\nallowlist = {json.dumps(allowlist)}\n[limits]\ntime = 2\n"
                      "output_bytes = 1073741824\n")  # the log flood's 30 MB passes the 16 MiB default
    km, client = start_kernel(kernels, cwd, env={"S2O_CONFIG": str(config), "S2O_KERNEL_ISOLATED": ""})
    try:
        reply, _ = execute(client, '{"var": {"kept": 41, "agent.visits": 3, "conv.turns": 2}}')
        assert reply["status"] == "ok", reply
        yield client
    finally:
        stop_kernel(km, client)


@pytest.fixture
def kernel(kc: Any) -> Any:
    drain(kc)
    return kc


def _answers_for_itself(kc: Any) -> None:
    """The next three cells show their own results, with the variables kept."""
    for i in (1, 2, 3):
        reply, outputs = execute(kc, f"kept + agent.visits + conv.turns + {i}")
        assert reply["status"] == "ok", reply
        assert result_data(outputs)["text/plain"] == str(46 + i)


def test_a_flood_of_log_lines_leaves_the_next_cells_their_own_results(kernel: Any) -> None:
    flood = [{"output": "one"}, {"for": {"item": "k", "in": "{ range(3000) }",
                                         "commands": [{"log": "{ 'x' * 10000 }"}]}}, {"return": "{ 5 }"}]
    reply, outputs = execute(kernel, json.dumps(flood), timeout=60)
    parts = [m["content"]["data"].get("text/plain") for m in outputs if m["msg_type"] == "display_data"]
    assert parts[:1] == ["one"], outputs
    if reply["status"] == "ok":
        assert result_data(outputs)["text/plain"] == "5"
    else:  # a slow machine may pass the 2 s limit: then a coded error, never a hang
        assert reply["ename"] == "timedOut", reply
    _answers_for_itself(kernel)


@pytest.mark.parametrize("forged", [
    "os.write(1, b'garbage\\n')",
    "os.write(1, b'{\"id\": 0, \"ok\": true, \"result\": {\"repr\": \"7\", \"json\": 7}}\\n')",
    "os.write(1, b''.join([b'x' * (1 << 20)] * 65))",
    "(os.write(1, b'{\"id\": 1, \"ok\": tr'), os.kill(os.getpid(), 15))",
], ids=["garbage", "wrong-id", "oversized", "cut-short"])
def test_a_worker_that_breaks_the_protocol_ends_the_cell_with_a_coded_error(kernel: Any, forged: str) -> None:
    reply, outputs = execute(kernel, forged, timeout=60)
    assert (reply["status"], reply["ename"]) == ("error", "worker-protocol"), reply
    assert any("restarted" in line for line in reply["traceback"]), reply["traceback"]
    assert [m["msg_type"] for m in outputs] == ["error"]
    _answers_for_itself(kernel)


def test_a_fragment_that_breaks_the_protocol_fails_the_cell(kernel: Any) -> None:
    cell = json.dumps([{"output": "before"}, {"var": {"x": "{ os.write(1, b'garbage\\n') }"}}])
    reply, _ = execute(kernel, cell, timeout=60)
    assert (reply["status"], reply["ename"]) == ("error", "worker-protocol"), reply
    _answers_for_itself(kernel)
