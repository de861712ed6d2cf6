"""Issue 11's console habits on a real s2o kernel (jupyter_client): the ``ask_exit`` payload, printed
text in order with other output, ``%time``, ``%reset -f``, the progress display of a long run, and
history that survives a restart (two kernels in sequence on one history file).

The kernels run contained (the default) on the embedded default settings, whose allowlist grants
``print`` and the async ``slow_answer``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import MODES, execute, result_data, running_kernel, shell_reply, start_kernel, stop_kernel

from s2o_kernel.kernel.history import HISTORY_ENV

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def kc(kernels_dir: Path, kernel_cwd: Path) -> Iterator[Any]:
    with running_kernel(kernels_dir, kernel_cwd) as (_km, client):
        yield client


def test_exit_and_quit_ask_the_console_to_exit(kc: Any) -> None:
    for code in ("exit", "quit()"):
        reply, outputs = execute(kc, code)
        assert reply["status"] == "ok"
        assert reply["payload"] == [{"source": "ask_exit", "keepkernel": False}]
        assert outputs == []
    reply, _ = execute(kc, "1 + 1")
    assert reply["payload"] == []  # the kernel goes on: the console ends it


@pytest.fixture(scope="module", params=list(MODES))
def each_kc(request: pytest.FixtureRequest, kernels_dir: Path, kernel_cwd: Path) -> Iterator[Any]:
    """A kernel contained and one in-process (``S2O_KERNEL_ISOLATED=0``)."""
    with running_kernel(kernels_dir, kernel_cwd, env={"S2O_KERNEL_ISOLATED": MODES[request.param]}) as (_km, client):
        yield client


def test_print_is_granted_and_printed_text_keeps_its_place(each_kc: Any) -> None:
    kc = each_kc
    reply, outputs = execute(kc, "print('hello', 42, sep=', ')")
    assert reply["status"] == "ok", reply
    assert [(m["msg_type"], m["content"]) for m in outputs] == [
        ("stream", {"name": "stdout", "text": "hello, 42\n"})]
    reply, outputs = execute(
        kc, '[{"output": "first"}, {"var": {"p": "{ print(\'second\') }"}}, {"output": "third"}]')
    assert reply["status"] == "ok", reply
    shown = [m["content"].get("text") or m["content"]["data"]["text/plain"] for m in outputs]
    assert shown == ["first", "second\n", "third"]
    reply, _ = execute(kc, "print('x', file=None)")
    assert reply["status"] == "error"  # print writes to the cell only
    reply, _ = execute(kc, "print('x', end=1)")
    assert (reply["status"], reply["ename"]) == ("error", "runtime")


def test_time_and_reset_f(kc: Any) -> None:
    reply, outputs = execute(kc, "%time sum(range(1000))")
    assert reply["status"] == "ok", reply
    assert outputs[0]["msg_type"] == "stream"
    assert re.fullmatch(r"Wall time: \d+(\.\d+)? (s|ms|µs|ns)\n", outputs[0]["content"]["text"])
    assert result_data(outputs)["text/plain"] == "499500"
    execute(kc, '{"var": {"kept": 1}}')
    reply, _ = execute(kc, "%reset -f")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, "kept")
    assert (reply["status"], reply["ename"]) == ("error", "unknown-name")


def test_a_long_run_shows_its_progress_in_one_display_and_clears_it(kc: Any) -> None:
    reply, outputs = execute(kc, "await slow_answer(3.5)")
    assert reply["status"] == "ok", reply
    progress = [m for m in outputs if m["msg_type"] in ("display_data", "update_display_data")]
    assert progress[0]["msg_type"] == "display_data"
    assert all(m["msg_type"] == "update_display_data" for m in progress[1:])
    ids = {m["content"]["transient"]["display_id"] for m in progress}
    assert len(ids) == 1
    assert progress[-1]["content"]["data"] == {}  # cleared when the run ended: the empty bundle
    texts = [m["content"]["data"]["text/plain"] for m in progress[:-1]]
    assert re.fullmatch(r"running for [2-9]\.\d s \(time limit 30 s\)", texts[0]), texts
    assert len(texts) >= 2  # at least one update in place before the end
    assert outputs[-1]["msg_type"] == "execute_result"
    assert result_data(outputs)["text/plain"] == "'done'"


def test_a_long_fragment_shows_its_loop_passes(kc: Any) -> None:
    loop = ('{"for": {"item": "i", "in": "{ list(range(14)) }", '
            '"commands": [{"var": {"w": "{ await slow_answer(0.2) }"}}]}}')
    reply, outputs = execute(kc, loop)
    assert reply["status"] == "ok", reply
    texts = [m["content"]["data"]["text/plain"] for m in outputs
             if m["msg_type"] in ("display_data", "update_display_data") and m["content"]["data"]]
    found = re.fullmatch(r"running for \d+\.\d s \(time limit 30 s\); (\d+) loop passes, "
                         r"the longest loop at \1 of 10,000", texts[0])
    assert found is not None and 1 <= int(found.group(1)) <= 14, texts


def test_a_headless_long_run_sends_no_progress(kc: Any) -> None:
    """``allow_stdin`` false (nbclient, nbval, papermill): nobody watches, and the stored outputs must not
    depend on whether the cell passed 2 s."""
    reply, outputs = execute(kc, "await slow_answer(2.8)", allow_stdin=False)
    assert reply["status"] == "ok", reply
    assert [m["msg_type"] for m in outputs] == ["execute_result"]


def test_a_quick_run_sends_no_progress(kc: Any) -> None:
    reply, outputs = execute(kc, "await slow_answer(0.3)")
    assert reply["status"] == "ok"
    assert [m["msg_type"] for m in outputs] == ["execute_result"]


def test_streamed_text_ends_its_line_for_whoever_watches_and_no_stored_output_changes(kc: Any) -> None:
    """Streamed text that leaves its line open, then the result: a watched cell (``jupyter console``,
    JupyterLab) gets a display of empty text, which the console prints as a newline, cleared at once to the
    empty bundle JupyterLab saves and nbval skips; a headless one (nbval, nbclient, papermill) gets nothing
    more, so a notebook's stored outputs stay as they were (issue 31)."""
    code = "[print('on its way.', end=''), 7][1]"
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", reply
    assert [m["msg_type"] for m in outputs] == ["stream", "display_data", "update_display_data", "execute_result"]
    assert outputs[0]["content"]["text"] == "on its way."  # the text as it was printed
    shown, cleared = outputs[1]["content"], outputs[2]["content"]
    assert (shown["data"], cleared["data"]) == ({"text/plain": ""}, {})
    assert shown["transient"] == cleared["transient"] and shown["transient"]["display_id"]
    reply, outputs = execute(kc, code, allow_stdin=False)
    assert [m["msg_type"] for m in outputs] == ["stream", "execute_result"]
    for ended in ("[print('a line'), 8][1]", "[print('no line', end=''), None][1]"):  # ended, or no result
        reply, outputs = execute(kc, ended)
        assert "display_data" not in [m["msg_type"] for m in outputs], ended


def _history(client: Any, **request: Any) -> list[Any]:
    msg_id = client.history(raw=True, output=False, **request)
    return shell_reply(client, msg_id)["content"]["history"]


def test_history_survives_a_restart(kernels_dir: Path, tmp_path: Path) -> None:
    env = {HISTORY_ENV: str(tmp_path / "history.sqlite")}
    km, client = start_kernel(kernels_dir, tmp_path, env=env)
    try:
        for code in ("6 * 7", "len('first kernel')", '{"var": {"x": 1}}'):
            assert execute(client, code)[0]["status"] == "ok"
        execute(client, "1 + 1", store_history=False)  # not kept
        first = _history(client, hist_access_type="tail", n=10)
    finally:
        stop_kernel(km, client)
    assert [h[2] for h in first] == ["6 * 7", "len('first kernel')", '{"var": {"x": 1}}']
    session = first[0][0]
    km, client = start_kernel(kernels_dir, tmp_path, env=env)
    try:
        execute(client, "len('second kernel')")
        tail = _history(client, hist_access_type="tail", n=3)
        assert [h[2] for h in tail] == ["len('first kernel')", '{"var": {"x": 1}}', "len('second kernel')"]
        assert tail[0][0] == session and tail[-1][0] != session
        found = _history(client, hist_access_type="search", pattern="len(*", n=10, unique=True)
        assert [h[2] for h in found] == ["len('first kernel')", "len('second kernel')"]
        earlier = _history(client, hist_access_type="range", session=-1, start=1, stop=3)
        assert [h[1:] for h in earlier] == [[1, "6 * 7"], [2, "len('first kernel')"]]
        reply, outputs = execute(client, "%history -g first")
        assert reply["status"] == "ok", reply
        assert outputs[0]["content"]["text"] == f"{session}/2".rjust(5) + ": len('first kernel')\n"
    finally:
        stop_kernel(km, client)
