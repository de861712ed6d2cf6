"""IPython habits through a real kernel (issue 31, items 7 and 8): ``%timeit``, ``%who``, unknown magics
that name what to use here, and ``\\dagger<Tab>`` completing to the reference dagger.

Each test meets the kernel as the trial did, through jupyter_client, in both kinds of kernel (contained,
the default, where ``%timeit``'s loops run in the evaluation worker, and in-process). ``%timeit``'s line is
held to IPython's own ``TimeitResult`` text; its timing bounds are containment bounds (the time limit plus
2 s), never speeds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.magics.execution import TimeitResult
from kernel_harness import MODES, collect_iopub, drain, execute, result_data, running_kernel, shell_reply

from s2o_kernel.kernel.magics.timeit_magic import report
from s2o_kernel.kernel.render import INTERRUPTED

pytestmark = pytest.mark.timeout(180)

#: IPython's ``%timeit`` line (its ``TimeitResult``), with the micro sign this kernel's ``%time`` uses.
LINE = re.compile(r"^(?P<mean>\d+(\.\d+)? (ns|µs|ms|s)) ± \d+(\.\d+)? (ns|µs|ms|s) per loop "
                  r"\(mean ± std\. dev\. of (?P<runs>\d+) runs?, (?P<loops>[\d,]+) loops? each\)\n$")
COUNT = "{ (agent.count if sys.exists('agent', 'count') else 0) + 1 }"


@pytest.fixture(scope="module", params=list(MODES))
def kernel(request: pytest.FixtureRequest, kernels_dir: Path, kernel_cwd: Path) -> Iterator[tuple[Any, Any]]:
    with running_kernel(kernels_dir, kernel_cwd, env={"S2O_KERNEL_ISOLATED": MODES[request.param]}) as pair:
        yield pair


@pytest.fixture
def kc(kernel: tuple[Any, Any]) -> Iterator[Any]:
    client = kernel[1]
    drain(client)
    yield client
    execute(client, '%limits {"time": 30}')
    execute(client, "%reset")


def stdout(outputs: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in outputs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def timeit(kc: Any, code: str) -> re.Match[str]:
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", reply
    assert [m["msg_type"] for m in outputs] == ["stream"], outputs  # one line, no result (as in IPython)
    found = LINE.match(stdout(outputs))
    assert found, stdout(outputs)
    return found


# -- %timeit -------------------------------------------------------------------------------------


def test_the_line_is_ipythons() -> None:
    runs = [1.2e-3, 1.1e-3, 1.5e-3, 1e-3, 1.3e-3, 1.0e-3, 1.1e-3]
    for loops, times in ((1000, runs), (1, [0.31]), (10, runs[:2])):
        ipython = str(TimeitResult(loops, len(times), min(times), max(times), times, 0, 3))
        assert report(times, loops) == ipython.replace("\u03bc", "\u00b5") + "\n"


def test_timeit_runs_each_loop_as_a_cell_in_the_session(kc: Any) -> None:
    found = timeit(kc, f'%timeit -n 3 -r 2 {{"var": {{"agent.count": "{COUNT}"}}}}')
    assert (found["runs"], found["loops"]) == ("2", "3")
    assert result_data(execute(kc, "agent.count")[1]) == {"text/plain": "6"}  # 2 runs of 3 loops, in the session
    found = timeit(kc, '%timeit -n 4 -r 1 "{ agent.count * 2 }"')  # a dynamic string
    assert (found["runs"], found["loops"]) == ("1", "4")
    found = timeit(kc, "%%timeit -r 3 -n 20\nagent.count + 1")  # the cell form, options on the first line
    assert (found["runs"], found["loops"]) == ("3", "20")


def test_timeit_chooses_its_loops_and_makes_seven_runs(kc: Any) -> None:
    found = timeit(kc, "%timeit slow_answer(0.25)")  # one loop takes 0.2 s or more: 1 loop a run
    assert (found["runs"], found["loops"]) == ("7", "1")
    assert found["mean"].endswith(" ms") and 250 <= float(found["mean"].split()[0]) < 400


def test_timeit_stops_within_the_time_limit(kc: Any) -> None:
    assert execute(kc, '%limits {"time": 1}')[0]["status"] == "ok"
    start = time.monotonic()
    found = timeit(kc, "%timeit slow_answer(0.3)")  # seven runs of 0.3 s do not fit in 1 s
    assert 1 <= int(found["runs"]) <= 3 and found["loops"] == "1"
    assert time.monotonic() - start < 1 + 2
    start = time.monotonic()
    reply, _ = execute(kc, "%timeit -n 10 slow_answer(0.3)")  # not one run of 10 loops fits
    assert (reply["status"], reply["ename"]) == ("error", "timedOut"), reply
    assert "limits.time = 1 s" in reply["evalue"]
    assert time.monotonic() - start < 1 + 2
    reply, _ = execute(kc, "%timeit sum(endless())")  # a loop past the limit: its own timedOut
    assert (reply["status"], reply["ename"]) == ("error", "timedOut"), reply


def test_timeit_ends_with_the_error_of_its_text(kc: Any) -> None:
    reply, outputs = execute(kc, "%timeit 1/0")
    assert (reply["status"], reply["ename"]) == ("error", "runtime")
    assert stdout(outputs) == ""
    reply, _ = execute(kc, '%timeit {"fail": "no"}')
    assert (reply["status"], reply["ename"]) == ("error", "failCommand"), reply
    for code in ("%timeit", "%timeit -n 0 1", "%timeit %vars"):
        reply, _ = execute(kc, code)
        assert (reply["status"], reply["ename"]) == ("error", "magic"), (code, reply)


def test_an_interrupt_stops_timeit_and_keeps_the_session(kernel: tuple[Any, Any], kc: Any) -> None:
    km = kernel[0]
    assert execute(kc, '{"var": {"kept": 41}}')[0]["status"] == "ok"
    msg_id = kc.execute("%timeit -n 1000 slow_answer(0.2)")
    time.sleep(1.0)
    start = time.monotonic()
    km.interrupt_kernel()
    reply = shell_reply(kc, msg_id, timeout=10)["content"]
    collect_iopub(kc, msg_id, timeout=10)
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "stopped", INTERRUPTED)
    assert time.monotonic() - start < 2
    assert result_data(execute(kc, "kept + 1")[1]) == {"text/plain": "42"}


# -- %who and unknown magics ----------------------------------------------------------------------


def test_who_shows_the_variables_as_vars_does(kc: Any) -> None:
    assert execute(kc, '{"var": {"price": 4, "agent.visits": 2}}')[0]["status"] == "ok"
    who = result_data(execute(kc, "%who")[1])
    assert who == result_data(execute(kc, "%vars")[1])
    assert who["text/plain"] == "scope   name    value\nlocals  price   4\nagent   visits  2"
    lsmagic = result_data(execute(kc, "%lsmagic")[1])["text/plain"]
    assert "  %who " in lsmagic and "  %timeit " in lsmagic and "  %%timeit " in lsmagic
    assert result_data(execute(kc, "%help who")[1])["text/plain"].startswith("%who: show the variables")


@pytest.mark.parametrize(("code", "closest"), [
    ("%debug", "Closest: %trace, %validate (an error shows its code, the expression with a caret"),
    ("%tb", "Closest: %trace (an error shows its code, the expression with a caret"),
    ("%%capture\n1 + 1", "Closest: a trailing ';' runs a cell and shows no result, as in IPython."),
    ("%whos", "Closest: %vars, %who."),
    ("%limit", "Closest: %limits"),
    ("%timit 1", "Closest: %timeit."),
    ("%hist", "Closest: %history."),
    ("%srav", "Closest: %vars."),  # the same letters in another order: the engine's rule for keys too
    ("%VARS", "Closest: %vars."),
])  # fmt: skip
def test_an_unknown_magic_names_the_closest(kc: Any, code: str, closest: str) -> None:
    reply, _ = execute(kc, code)
    assert (reply["status"], reply["ename"]) == ("error", "magic")
    assert closest in reply["evalue"], reply["evalue"]
    assert reply["evalue"].endswith("(%lsmagic lists them).")


def test_a_name_like_no_magic_gets_no_closest(kc: Any) -> None:
    reply, _ = execute(kc, "%zzqx")
    assert "Closest" not in reply["evalue"] and reply["evalue"].startswith("Unknown magic %zzqx. Known magics:")


# -- the dagger -----------------------------------------------------------------------------------


def complete(kc: Any, code: str, cursor: int | None = None) -> dict[str, Any]:
    msg_id = kc.complete(code, len(code) if cursor is None else cursor)
    return shell_reply(kc, msg_id)["content"]


def test_backslash_dagger_tab_completes_to_the_dagger(kc: Any) -> None:
    code = '{"var": {"x": "\\dagger'
    reply = complete(kc, code)
    assert reply["matches"] == ["\u2020"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (code.index("\\"), len(code))
    # what the front end makes of it runs: a reference to a conversation variable
    cell = code[:reply["cursor_start"]] + reply["matches"][0] + 'conv.city || \u2020agent.home"}}'
    assert execute(kc, '{"var": {"agent.home": "Oslo"}}')[0]["status"] == "ok"
    assert execute(kc, cell)[0]["status"] == "ok"
    assert result_data(execute(kc, "x")[1]) == {"text/plain": "'Oslo'"}
    assert execute(kc, '{"var": {"y": "\\u2020agent.home"}}')[0]["status"] == "ok"  # the JSON escape, as the docs say
    assert result_data(execute(kc, "y")[1]) == {"text/plain": "'Oslo'"}


def test_part_of_the_name_completes_to_the_name(kc: Any) -> None:
    code = '"\\dag'
    reply = complete(kc, code)
    assert reply["matches"] == ["\\dagger"] and reply["cursor_start"] == 1
    assert complete(kc, "\\dagger x", cursor=7)["matches"] == ["\u2020"]  # the cursor inside the cell
    assert complete(kc, "'\\xyz")["matches"] == []  # a backslash name of no symbol: nothing, no variable
