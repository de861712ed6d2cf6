"""Protocol tests: a real s2o kernel process driven with jupyter_client.

One kernel serves most tests (module fixture, contained by default; set
``S2O_KERNEL_ISOLATED=0`` to run them on the in-process session); the
interrupt and time-limit tests run on one kernel of each kind, the
containment tests on a contained one, and the settings-error test starts its
own. The kernels run the real engine with its embedded default settings
(teaching allowlist, which grants the offline example generator ``endless``
and the async ``slow_answer`` used for interrupts).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import (
    MODES,
    collect_iopub,
    drain,
    execute,
    result_data,
    running_kernel,
    shell_reply,
    start_kernel,
    stop_kernel,
)

from s2o_kernel.kernel.render import INTERRUPTED

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def kernel(kernels_dir: Path, kernel_cwd: Path) -> Iterator[Any]:
    with running_kernel(kernels_dir, kernel_cwd) as (_km, kc):
        yield kc




@pytest.fixture(scope="module", params=list(MODES))
def manager_and_client(
    request: pytest.FixtureRequest, kernels_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A separate kernel for interrupts (needs the manager to send SIGINT), of each kind."""
    env = {"S2O_KERNEL_ISOLATED": MODES[request.param]}
    with running_kernel(kernels_dir, tmp_path_factory.mktemp("cwd-int"), env=env) as (km, kc):
        yield km, kc


@pytest.fixture(scope="module")
def contained(kernels_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A kernel with the default session (contained) for the containment tests."""
    km, kc = start_kernel(
        kernels_dir, tmp_path_factory.mktemp("cwd-contained"), env={"S2O_KERNEL_ISOLATED": ""}
    )
    try:
        yield km, kc
    finally:
        stop_kernel(km, kc)


@pytest.fixture
def kc(kernel: Any) -> Any:
    drain(kernel)
    return kernel


# -- installer -------------------------------------------------------------------


def test_installer_writes_absolute_interpreter(kernels_dir: Path) -> None:
    spec = json.loads((kernels_dir / "s2o-test" / "kernel.json").read_text())
    assert spec["argv"][0] == os.path.abspath(sys.executable)
    assert os.path.isabs(spec["argv"][0])
    assert spec["argv"][1:] == ["-m", "s2o_kernel", "-f", "{connection_file}"]
    assert spec["language"] == "s2o"
    assert spec["interrupt_mode"] == "signal"
    assert "debugger" not in spec["metadata"]
    names = {p.name for p in (kernels_dir / "s2o-test").iterdir()}
    assert {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg", "kernel.json"} <= names


# -- kernel_info -------------------------------------------------------------------


def test_kernel_info(kc: Any) -> None:
    msg_id = kc.kernel_info()
    info = shell_reply(kc, msg_id)["content"]
    assert info["status"] == "ok"
    assert info["implementation"] == "s2o"
    assert info["language_info"] == {
        "name": "s2o",
        "version": info["implementation_version"],
        "mimetype": "text/x-python",
        "codemirror_mode": "python",
        "pygments_lexer": "python3",
        "file_extension": ".s2o",
    }
    assert "debugger" not in info.get("supported_features", [])
    assert "kernel subshells" not in info.get("supported_features", [])
    assert info["banner"].startswith("s2o ")
    assert info["help_links"] and all({"text", "url"} <= set(h) for h in info["help_links"])


def test_kernel_info_never_loads_debugpy(manager_and_client: Any) -> None:
    """The kernel has no debugger, so answering kernel_info must not import debugpy (ipykernel's own
    kernel_info does: its compiled pydevd then sits in the kernel's memory, and pydevd's frozen-modules
    warning was seen in ``jupyter console``)."""
    import importlib.util

    assert importlib.util.find_spec("debugpy") is not None  # installed (ipykernel needs it): the check means something
    km, kc = manager_and_client
    drain(kc)
    info = shell_reply(kc, kc.kernel_info())["content"]
    assert info["status"] == "ok" and info["supported_features"] == []
    assert info["protocol_version"].startswith("5.")
    reply, _ = execute(kc, "1 + 1")  # a cell too: nothing on the way to a result imports it either
    assert reply["status"] == "ok"
    with open(f"/proc/{km.provisioner.process.pid}/maps") as fh:
        assert "debugpy" not in fh.read()


def test_create_subshell_is_refused(kc: Any) -> None:
    msg = kc.session.msg("create_subshell_request", {})
    kc.control_channel.send(msg)
    reply = kc.control_channel.get_msg(timeout=10)
    assert reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]
    assert reply["msg_type"] == "create_subshell_reply"
    assert reply["content"]["status"] == "error"


# -- execute -----------------------------------------------------------------------


def test_execute_result_bundle(kc: Any) -> None:
    reply, outputs = execute(kc, "1 + 2")
    assert reply["status"] == "ok"
    assert [m["msg_type"] for m in outputs] == ["execute_result"]
    content = outputs[0]["content"]
    assert content["data"] == {"text/plain": "3"}  # SPEC 9: text/plain only, unless %display json
    assert content["execution_count"] == reply["execution_count"]


def test_dynamic_string_cell(kc: Any) -> None:
    reply, outputs = execute(kc, '"Hello {name}"')
    assert reply["status"] == "ok"
    assert result_data(outputs) == {"text/plain": "'Hello {name}'"}
    reply, outputs = execute(kc, '"{ 6 * 7 }"')
    assert result_data(outputs)["text/plain"] == "42"


def test_braces_cell_is_dynamic_string_form(kc: Any) -> None:
    _, outputs = execute(kc, "{ 6 * 7 }")
    assert result_data(outputs)["text/plain"] == "42"
    _reply, outputs = execute(kc, '{"a": 1}')
    assert result_data(outputs) == {"text/plain": "{'a': 1}"}


def test_error_cell_iopub_and_reply(kc: Any) -> None:
    reply, outputs = execute(kc, "x.__class__")
    assert reply["status"] == "error"
    assert reply["ename"] == "underscore"
    assert reply["traceback"][0] == f"underscore: {reply['evalue']}"
    assert not any('File "' in line or "Traceback" in line for line in reply["traceback"])
    assert "\x1b" not in reply["ename"] + reply["evalue"]
    errors = [m for m in outputs if m["msg_type"] == "error"]
    assert len(outputs) == 1 and len(errors) == 1
    assert errors[0]["content"] == {k: reply[k] for k in ("ename", "evalue", "traceback")}


def test_nbval_markers_in_expression_and_json_cells(kc: Any) -> None:
    reply, _ = execute(kc, "# NBVAL_RAISES_EXCEPTION\nx.__class__")
    assert (reply["status"], reply["ename"]) == ("error", "underscore")
    reply, outputs = execute(kc, '# NBVAL_IGNORE_OUTPUT\n{"var": {"marked": 5}}')
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, '# NBVAL_CHECK_OUTPUT\n[\n  # a comment inside JSON\n  {"var": {"marked2": "{ marked + 1 }"}}\n]')
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "# NBVAL_CHECK_OUTPUT\nmarked2")
    assert result_data(outputs)["text/plain"] == "6"


def test_var_fragment_then_expression(kc: Any) -> None:
    reply, outputs = execute(kc, '{"var": {"x": 1}}')
    assert reply["status"] == "ok" and outputs == []
    reply, outputs = execute(kc, "x + 1")
    assert result_data(outputs) == {"text/plain": "2"}


def test_error_aborts_queued_cells(kc: Any) -> None:
    # An error reply (status "error") lets ipykernel abort the queued cells.
    first = kc.execute("x.__class__")
    second = kc.execute('{"var": {"never_set": 1}}')
    assert shell_reply(kc, first)["content"]["status"] == "error"
    assert shell_reply(kc, second)["content"]["status"] != "ok"
    drain(kc)
    reply, _ = execute(kc, "never_set")
    assert (reply["status"], reply["ename"]) == ("error", "unknown-name")


def test_fragment_outputs_logs_and_value(kc: Any) -> None:
    reply, outputs = execute(
        kc,
        '[{"output": "hello"}, {"log": "trace {1}"}, {"output": {"html": "<b>x</b>"}},'
        ' {"log": "{ 1 + 1 }"}, {"return": "{ 6 * 7 }"}]',
    )
    assert reply["status"] == "ok", reply
    assert [m["msg_type"] for m in outputs] == ["display_data", "display_data", "stream", "execute_result"]
    assert outputs[0]["content"]["data"] == {"text/plain": "hello"}
    assert outputs[1]["content"]["data"] == {"text/html": "<b>x</b>", "text/plain": "x"}
    assert outputs[2]["content"] == {"name": "stderr", "text": "trace {1}\n2\n"}
    assert outputs[3]["content"]["data"] == {"text/plain": "42"}


def test_fragment_fail_keeps_earlier_outputs(kc: Any) -> None:
    reply, outputs = execute(kc, '[{"output": "before"}, {"fail": "no stock"}]')
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "failCommand", "no stock")
    assert reply["traceback"][0] == "failCommand: no stock"
    assert any(line.startswith("  at ") for line in reply["traceback"])
    assert [m["msg_type"] for m in outputs] == ["display_data", "error"]


def test_silent_execution_publishes_nothing(kc: Any) -> None:
    msg_id = kc.execute("1 + 41", silent=True)
    reply = shell_reply(kc, msg_id)
    msgs = collect_iopub(kc, msg_id)
    assert reply["content"]["status"] == "ok"
    assert [m["msg_type"] for m in msgs] == ["status"]  # busy only (idle ends the list)
    msg_id = kc.execute("x.__class__", silent=True)
    reply = shell_reply(kc, msg_id)
    msgs = collect_iopub(kc, msg_id)
    assert reply["content"]["status"] == "error"
    assert [m["msg_type"] for m in msgs] == ["status"]


def test_user_expressions(kc: Any) -> None:
    reply, _ = execute(kc, "1", user_expressions={"ok": "2 * 21", "bad": "y.__dict__"})
    ue = reply["user_expressions"]
    assert ue["ok"] == {"status": "ok", "data": {"text/plain": "42"}, "metadata": {}}
    assert ue["bad"]["status"] == "error" and ue["bad"]["ename"] == "underscore"


def test_magics_round_trip(kc: Any) -> None:
    reply, outputs = execute(kc, "%limits")
    assert json.loads(result_data(outputs)["text/plain"])["time"] == 30
    reply, _ = execute(kc, '%limits {"loop_iterations": 500}')
    assert reply["status"] == "ok"
    reply, outputs = execute(kc, "%limits")
    assert json.loads(result_data(outputs)["text/plain"])["loop_iterations"] == 500
    reply, _ = execute(kc, '%limits {"loop_iterations": }')
    assert (reply["status"], reply["ename"]) == ("error", "syntax")
    reply, _ = execute(kc, "%nosuchmagic")
    assert (reply["status"], reply["ename"]) == ("error", "magic")
    reply, outputs = execute(kc, "%lsmagic")
    assert "%%allowlist" in result_data(outputs)["text/plain"]


def test_failed_allowlist_changes_nothing(kc: Any) -> None:
    _, outputs = execute(kc, "%allowlist")
    before = result_data(outputs)["text/plain"]
    reply, outputs = execute(kc, "%%allowlist\n# NBVAL_RAISES_EXCEPTION\nlen\nnosuchmodule\nmath.* as m")
    assert (reply["status"], reply["ename"]) == ("error", "allowlist")
    assert "  nosuchmodule: Could not be imported." in reply["traceback"]
    assert "  math.* as m: A star import cannot be renamed with 'as'." in reply["traceback"]
    _, outputs = execute(kc, "%allowlist")
    assert result_data(outputs)["text/plain"] == before


def test_print_from_evaluation_has_cell_parent(kc: Any) -> None:
    # Anything the evaluation writes to sys.stdout must be attached to the cell.
    reply, _ = execute(kc, "%%allowlist\nlen\nprint")
    assert reply["status"] == "ok", reply
    try:
        reply, outputs = execute(kc, "print('hello, world')")
        assert reply["status"] == "ok"
        streams = [m for m in outputs if m["msg_type"] == "stream"]
        assert "".join(m["content"]["text"] for m in streams) == "hello, world\n"
    finally:
        execute(kc, "%reset")
        # Back to the embedded teaching allowlist for the other tests.
        from s2o_kernel.engine import default_settings

        text = default_settings().allowlist
        reply, _ = execute(kc, "%%allowlist\n" + text)
        assert reply["status"] == "ok", reply


def test_history_tail(kc: Any) -> None:
    execute(kc, "40 + 2")
    msg_id = kc.history(hist_access_type="tail", n=1, output=True, raw=True)
    hist = shell_reply(kc, msg_id)["content"]["history"]
    assert hist[-1][2] == ["40 + 2", "42"]


# -- completion, inspect, is_complete ---------------------------------------------------


def _complete(kc: Any, code: str, pos: int | None = None) -> dict[str, Any]:
    msg_id = kc.complete(code, len(code) if pos is None else pos)
    return shell_reply(kc, msg_id)["content"]


def test_completion_replies(kc: Any) -> None:
    reply = _complete(kc, "math.sq")
    assert reply["status"] == "ok"
    assert reply["matches"] == ["math.sqrt"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (0, 7)
    types = reply["metadata"]["_jupyter_types_experimental"]
    assert [t["text"] for t in types] == reply["matches"]
    reply = _complete(kc, "%lim")
    assert reply["matches"] == ["%limits"]
    reply = _complete(kc, "le", 10_000)  # out-of-range cursor is clamped
    assert "len" in reply["matches"] and reply["cursor_end"] == 2
    reply = _complete(kc, "'\u00e9' + le")
    assert "len" in reply["matches"] and reply["cursor_start"] == 6


def test_inspect_reply(kc: Any) -> None:
    msg_id = kc.inspect("len(x)", 2)
    content = shell_reply(kc, msg_id)["content"]
    assert content["status"] == "ok" and content["found"] is True
    assert "len" in content["data"]["text/plain"]
    msg_id = kc.inspect("nothing_here", 3)
    assert shell_reply(kc, msg_id)["content"]["found"] is False
    # on the magic that starts a cell: its help, as %help NAME shows it (a new user's trial, 2026-12-04)
    for code, pos, expected in (("%limits", 3, "%limits / %%limits"), ("# c\n%%allowlist\nlen", 8, "%%allowlist")):
        content = shell_reply(kc, kc.inspect(code, pos))["content"]
        assert content["found"] is True and expected in content["data"]["text/plain"], content
    for code, pos in (("%nosuch", 3), ("%vars   ", 8), ("%expr nothing_here", 8)):
        assert shell_reply(kc, kc.inspect(code, pos))["content"]["found"] is False, code


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("1 + 2", "complete"),
        ('{"var": {"x": 1}', "incomplete"),
        ("len(x", "incomplete"),
        ("1 +", "invalid"),
        ('{"var" 1}', "invalid"),
        ("%%allowlist", "incomplete"),
        ("%vars", "complete"),
    ],
)
def test_is_complete_replies(kc: Any, code: str, status: str) -> None:
    t0 = time.monotonic()
    msg_id = kc.is_complete(code)
    content = shell_reply(kc, msg_id)["content"]
    assert content["status"] == status
    assert time.monotonic() - t0 < 1.0


# -- interrupt and limits ------------------------------------------------------------


def _interrupt_after(km: Any, kc: Any, code: str, delay: float = 0.5) -> tuple[dict[str, Any], float]:
    drain(kc)
    msg_id = kc.execute(code)
    time.sleep(delay)
    t0 = time.monotonic()
    km.interrupt_kernel()
    reply = shell_reply(kc, msg_id, timeout=10)
    elapsed = time.monotonic() - t0
    collect_iopub(kc, msg_id, timeout=10)
    return reply["content"], elapsed


def test_interrupt_cpu_loop_keeps_session(manager_and_client: Any) -> None:
    km, kc = manager_and_client
    reply, _ = execute(kc, '{"var": {"kept": 41}}')
    assert reply["status"] == "ok"
    reply, elapsed = _interrupt_after(km, kc, "sum(endless())")
    assert reply["status"] == "error"
    assert (reply["ename"], reply["evalue"]) == ("stopped", INTERRUPTED)
    assert elapsed < 2.0
    reply, outputs = execute(kc, "kept + 1")
    assert reply["status"] == "ok"
    assert result_data(outputs)["text/plain"] == "42"


def test_interrupt_while_awaiting(manager_and_client: Any) -> None:
    km, kc = manager_and_client
    reply, elapsed = _interrupt_after(km, kc, "slow_answer(60)")
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "stopped", INTERRUPTED)
    assert elapsed < 2.0
    assert km.is_alive()
    reply, outputs = execute(kc, "kept")
    assert result_data(outputs)["text/plain"] == "41"


def test_a_second_interrupt_while_the_run_unwinds_is_still_one_stopped_cell(manager_and_client: Any) -> None:
    """Two interrupts 50 ms apart, the second while the stopped run unwinds: one ``stopped`` cell, the
    command's variables as before it, and the next cells run normally (no stray interrupt later)."""
    km, kc = manager_and_client
    reply, _ = execute(kc, '{"var": {"twice": 1}}')
    assert reply["status"] == "ok"
    drain(kc)
    msg_id = kc.execute('{"var": {"twice": 2, "late": "{ slow_answer(30) }"}}')
    time.sleep(0.5)
    km.interrupt_kernel()
    time.sleep(0.05)
    km.interrupt_kernel()
    reply = shell_reply(kc, msg_id, timeout=10)["content"]
    collect_iopub(kc, msg_id, timeout=10)
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "stopped", INTERRUPTED)
    for _ in range(3):
        reply, outputs = execute(kc, "[await slow_answer(0.1), twice][1]")
        assert reply["status"] == "ok", reply
        assert result_data(outputs)["text/plain"] == "1"


def test_time_limit_stops_endless_work(manager_and_client: Any) -> None:
    _km, kc = manager_and_client
    reply, _ = execute(kc, '%limits {"time": 1}')
    assert reply["status"] == "ok"
    try:
        t0 = time.monotonic()
        reply, outputs = execute(kc, "sum(endless())")
        assert time.monotonic() - t0 < 3.5
        assert (reply["status"], reply["ename"]) == ("error", "timedOut")
        assert [m["msg_type"] for m in outputs] == ["error"]
        # Output parts are streamed as the run goes, so they survive a timeout.
        reply, outputs = execute(kc, '[{"output": "started"}, {"var": {"t": "{ sum(endless()) }"}}]')
        assert (reply["status"], reply["ename"]) == ("error", "timedOut")
        assert [m["msg_type"] for m in outputs] == ["display_data", "error"]
        assert outputs[0]["content"]["data"] == {"text/plain": "started"}
    finally:
        execute(kc, '%limits {"time": 30}')
    reply, outputs = execute(kc, "kept")
    assert result_data(outputs)["text/plain"] == "41"


# -- settings that fail to load ----------------------------------------------------------


def test_bad_settings_file_does_not_crash(kernels_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[limits]\nnot_a_limit = 3\n')
    km, kc = start_kernel(
        kernels_dir, tmp_path, env={"S2O_CONFIG": str(bad), "S2O_KERNEL_ISOLATED": ""}
    )
    kernel_pid = km.provisioner.process.pid  # type: ignore[union-attr]
    try:
        reply, outputs = execute(kc, "1 + 1")
        assert reply["status"] == "error"
        assert reply["ename"] == "settings"
        assert "embedded default" in reply["evalue"]
        assert [m["msg_type"] for m in outputs] == ["error"]
        reply, outputs = execute(kc, "1 + 1")
        assert reply["status"] == "ok"
        assert result_data(outputs)["text/plain"] == "2"
        workers = _children(kernel_pid)
        assert len(workers) == 1  # the contained session's worker
    finally:
        t0 = time.monotonic()
        stop_kernel(km, kc)
        shutdown_time = time.monotonic() - t0
    # The kernel exits by itself after shutdown_reply (jupyter_client would
    # SIGTERM it after 2.5 s otherwise).
    assert shutdown_time < 1.5
    assert not _alive(workers[0])  # the kernel closed its worker




def _children(pid: int) -> list[int]:
    """Child processes of ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


# -- containment (the default session, SPEC 12) ---------------------------------------------


def test_contained_c_level_loop_times_out_and_keeps_state(contained: Any) -> None:
    _km, kc = contained
    reply, _ = execute(kc, '{"var": {"kept": 41, "agent.visits": 3, "conv.turns": 2}}')
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, "%%allowlist\nmax\nitertools\ns2o_kernel.examples.endless as endless")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, '%limits {"time": 1}')
    assert reply["status"] == "ok", reply
    try:
        # A C-level endless loop cannot be stopped in-process: the worker is killed.
        t0 = time.monotonic()
        reply, outputs = execute(kc, "max(itertools.count())")
        # limits.time + 1 s, then the worker is killed (about 2.4 s here; slack for busy CI).
        assert time.monotonic() - t0 < 3.5
        assert (reply["status"], reply["ename"]) == ("error", "timedOut")
        assert [m["msg_type"] for m in outputs] == ["error"]
        reply, outputs = execute(kc, "kept + agent.visits + conv.turns")
        assert result_data(outputs)["text/plain"] == "46"
    finally:
        execute(kc, '%limits {"time": 30}')


def test_contained_interrupt_of_c_level_loop(contained: Any) -> None:
    km, kc = contained
    reply, _ = execute(kc, '{"var": {"kept2": 7}}')
    reply, _ = execute(kc, "%%allowlist\nmax\nsum\nitertools\ns2o_kernel.examples.endless as endless")
    assert reply["status"] == "ok", reply
    # The worker answers an interrupt of Python-level work itself...
    reply, elapsed = _interrupt_after(km, kc, "sum(endless())")
    assert (reply["ename"], reply["evalue"]) == ("stopped", INTERRUPTED)
    assert elapsed < 1.0
    # ...and is killed when it cannot (C-level loop): the same error, 1 s later.
    reply, elapsed = _interrupt_after(km, kc, "max(itertools.count())")
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "stopped", INTERRUPTED)
    assert elapsed < 2.5
    assert any("worker was stopped and restarted" in line for line in reply["traceback"])
    assert km.is_alive()
    reply, outputs = execute(kc, "kept2")
    assert result_data(outputs)["text/plain"] == "7"


@pytest.mark.parametrize(
    ("rules", "cell"),
    [("{}", "[str(x) for x in range(10**7)]"), ('{"operators": {"*": "on"}}', "'x' * 10**9")],
)
def test_contained_memory_bomb(contained: Any, rules: str, cell: str) -> None:
    km, kc = contained
    reply, _ = execute(kc, '{"var": {"kept3": [1, 2], "agent.a": "x"}}')
    assert reply["status"] == "ok", reply
    for setup in ("%%allowlist\nstr\nlen\nrange", '%limits {"memory": 104857600}', f"%rules {rules}"):
        reply, _ = execute(kc, setup)
        assert reply["status"] == "ok", (setup, reply)
    try:
        reply, outputs = execute(kc, cell)
        assert (reply["status"], reply["ename"]) == ("error", "memory-limit")
        assert "limits.memory = 100 MiB" in reply["evalue"]  # the cap it ran into, as timedOut names its limit
        assert km.is_alive()
        reply, outputs = execute(kc, "len(kept3) + len(agent.a)")
        assert result_data(outputs)["text/plain"] == "3"
    finally:
        execute(kc, '%limits {"memory": 1073741824}')
        execute(kc, '%rules {"operators": {"*": "bounded_mult"}}')


# -- files and secrets ----------------------------------------------------------------------


AGENT = {
    "functions": {
        "main": {
            "args": {"name": "str"},
            "commands": [
                {"output": "{ 'Hello ' + name }"},
                {"log": "greeted"},
                {"output": {"html": "<b>{ name }</b>"}},
                {"return": "{ len(name) }"},
            ],
        },
        "refuse": {"commands": [{"output": "checking"}, {"fail": "out of stock"}]},
        "broken": {"commands": [{"var": {"x": "{ 1 / 0 }"}}]},
    }
}


def test_run_magic(kc: Any, kernel_cwd: Path) -> None:
    (kernel_cwd / "agent.json").write_text(json.dumps(AGENT))
    reply, outputs = execute(kc, '%run agent.json --inputs {"name": "Ann"}')
    assert reply["status"] == "ok", reply
    assert [m["msg_type"] for m in outputs] == ["display_data", "display_data", "stream", "execute_result"]
    assert outputs[0]["content"]["data"] == {"text/plain": "Hello Ann"}
    assert outputs[2]["content"] == {"name": "stderr", "text": "greeted\n"}
    assert outputs[3]["content"]["data"] == {"text/plain": "3"}
    reply, outputs = execute(kc, "%run agent.json --function refuse")
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "failCommand", "out of stock")
    assert [m["msg_type"] for m in outputs] == ["display_data", "error"]
    reply, _ = execute(kc, "%run agent.json --function broken")
    assert (reply["ename"], reply["evalue"]) == ("runtime", "ZeroDivisionError: division by zero")
    reply, _ = execute(kc, "%run no-such-file.json")
    assert reply["ename"] == "magic"
    reply, _ = execute(kc, "%run agent.json --inputs {oops}")
    assert reply["ename"] == "syntax"


def test_state_and_config_magics(kc: Any, kernel_cwd: Path) -> None:
    reply, _ = execute(kc, '{"var": {"agent.cart": "{ [\'{not evaluated}\'] }", "conv.n": 2}}')
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "%state save state.json")
    assert reply["status"] == "ok", reply
    saved = json.loads((kernel_cwd / "state.json").read_text())
    assert saved["agent"]["cart"] == ["{not evaluated}"] and saved["conv"]["n"] == 2
    execute(kc, "%reset")
    reply, _ = execute(kc, "%state load state.json")
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "agent.cart + [conv.n]")
    assert result_data(outputs)["text/plain"] == "['{not evaluated}', 2]"
    (kernel_cwd / "extra.toml").write_text("[limits]\nloop_iterations = 321\n")
    reply, _ = execute(kc, "%config extra.toml")
    assert reply["status"] == "ok", reply
    try:
        _, outputs = execute(kc, "%limits")
        assert json.loads(result_data(outputs)["text/plain"])["loop_iterations"] == 321
    finally:
        execute(kc, '%limits {"loop_iterations": 10000}')


def test_secret_through_the_password_prompt(kc: Any) -> None:
    msg_id = kc.execute("%secret PROTO_TOKEN", allow_stdin=True)
    request = kc.get_stdin_msg(timeout=10)
    assert request["msg_type"] == "input_request"
    assert request["content"]["password"] is True
    assert "PROTO_TOKEN" in request["content"]["prompt"]
    kc.input("tok-proto-987")
    reply = shell_reply(kc, msg_id)["content"]
    assert reply["status"] == "ok", reply
    msgs = collect_iopub(kc, msg_id)
    assert "tok-proto-987" not in json.dumps([m["content"] for m in msgs])
    reply, outputs = execute(kc, "f'Bearer {sys.secret[\"PROTO_TOKEN\"]}'")
    # text formatted from a secret stays opaque: its repr masks the secret and it has no JSON form
    assert result_data(outputs) == {"text/plain": "'Bearer ***'"}
    # A front end that cannot prompt gets a coded error that says what to do instead.
    reply, _ = execute(kc, "%secret OTHER_TOKEN", allow_stdin=False)
    assert (reply["status"], reply["ename"]) == ("error", "magic")
    assert "S2O_SECRET_OTHER_TOKEN" in reply["evalue"]
    # History keeps the cell, never the value.
    msg_id = kc.history(hist_access_type="tail", n=50, output=True, raw=True)
    assert "tok-proto-987" not in json.dumps(shell_reply(kc, msg_id)["content"])
