"""``%replay`` through real kernels (SPEC 13, issue 32): record a notebook's calls, then replay them.

A kernel that knows its notebook (``JPY_SESSION_NAME``, as Jupyter's server sets it) records into the
cassette beside it; a new kernel for the same notebook replays from it by default, with no request
reaching the real HTTP server on 127.0.0.1, an ``ask`` answered through a real ``input_request`` while
recording answered from the cassette where nobody can answer (as under nbval), and the recorded model
turns written as a scripted profile that gives the same result. Both kernel modes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import MODES, collect_iopub, execute, result_data, running_kernel, shell_reply

pytestmark = pytest.mark.timeout(180)

CALLS = json.dumps([
    {"api": {"profile": "crm", "method": "POST", "path": "/json/orders", "body": {"qty": 2}}},
    {"var": {"posted": "{ result['body'] }"}},
    {"llm": {"profile": "scripted", "input": "Hello", "streamOutput": True}},
    {"ask": {"inputs": [{"name": "who"}, {"name": "pin", "type": "password"}]}},
    {"return": "{ [posted, result['who']] }"},
])


def _env(mode: str, notebook: Path, **more: str) -> dict[str, str]:
    return {"S2O_KERNEL_ISOLATED": MODES[mode], "JPY_SESSION_NAME": str(notebook), "CI": "", "S2O_REPLAY": "",
            **more}


def _texts(outputs: list[dict[str, Any]]) -> list[str]:
    """The cell's text: streams and its result (a watched cell's progress display left out)."""
    return [m["content"].get("text") or m["content"].get("data", {}).get("text/plain", "") for m in outputs
            if m["msg_type"] in ("stream", "execute_result")]


@pytest.mark.parametrize("mode", list(MODES))
def test_record_then_replay_a_notebook(mode: str, kernels_dir: Path, tmp_path: Path, http_server: Any) -> None:
    (tmp_path / "s2o.toml").write_text(f'[profiles.api.crm]\nurl = "{http_server.url}"\nallow_path = true\n')
    notebook = tmp_path / "orders.ipynb"
    cassette = tmp_path / "orders.cassette.json"
    with running_kernel(kernels_dir, tmp_path, env=_env(mode, notebook)) as (_km, kc):
        assert "Replay is off" in result_data(execute(kc, "%replay")[1])["text/plain"]
        reply, outputs = execute(kc, "%replay record")
        assert reply["status"] == "ok", reply
        assert outputs == []  # silent, as %config is
        report = result_data(execute(kc, "%replay")[1])["text/plain"]
        assert report == "Mode: record\nCassette: orders.cassette.json (0 entries)"
        msg_id = kc.execute(CALLS, allow_stdin=True)
        kc.get_stdin_msg(timeout=20)
        kc.input("ada")
        kc.get_stdin_msg(timeout=20)
        kc.input("pin-4412")
        assert shell_reply(kc, msg_id)["content"]["status"] == "ok"
        live = _texts(collect_iopub(kc, msg_id))
        report = result_data(execute(kc, "%replay")[1])["text/plain"]
        assert report == "Mode: record\nCassette: orders.cassette.json (3 entries)\nEvery entry was used."
        reply, outputs = execute(kc, "%replay to-script scripted clerk.toml")
        assert reply["status"] == "ok", reply
    recorded = cassette.read_text()
    script = (tmp_path / "clerk.toml").read_text()
    assert 'adapter = "scripted"' in script and 'text = "You said: Hello"' in script, script
    assert "pin-4412" not in recorded and http_server.url not in recorded
    before = len(http_server.requests)
    with running_kernel(kernels_dir, tmp_path, env=_env(mode, notebook)) as (_km, kc):  # replays by default
        report = result_data(execute(kc, "%replay")[1])["text/plain"]
        assert report.startswith("Mode: replay\n") and "Not used by any call yet: 0 (api on 'crm'), 1 (llm" in report
        reply, outputs = execute(kc, CALLS, allow_stdin=False)  # nobody can answer: the cassette does
        assert reply["status"] == "ok", reply
        assert _texts(outputs) == live, (_texts(outputs), live, outputs)
        changed = CALLS.replace('"qty": 2', '"qty": 5')
        reply, _ = execute(kc, changed)
        assert (reply["status"], reply["ename"]) == ("error", "replay-miss")
        assert "differs in body.qty" in reply["evalue"]
        reply, _ = execute(kc, "%config clerk.toml")  # the recorded turns as a scripted profile
        assert reply["status"] == "ok", reply
        reply, _ = execute(kc, "%replay off")
        assert reply["status"] == "ok", reply
        reply, outputs = execute(kc, '[{"llm": {"profile": "scripted", "input": "Bye"}}, {"return": "{ result }"}]')
        assert result_data(outputs)["text/plain"] == "'You said: Hello'"  # the recorded turn, whatever is said
    assert len(http_server.requests) == before
    assert cassette.read_text() == recorded


def test_ci_refuses_a_mode_that_makes_calls(kernels_dir: Path, tmp_path: Path) -> None:
    with running_kernel(kernels_dir, tmp_path, env=_env("contained", tmp_path / "n.ipynb", CI="true")) as (_km, kc):
        reply, _ = execute(kc, "%replay record")
        assert (reply["status"], reply["ename"]) == ("error", "replay-mode")
        assert "CI=true" in reply["evalue"]
        assert execute(kc, "%replay replay other.cassette.json")[0]["status"] == "ok"


def test_a_headless_kernel_is_told_to_name_the_cassette(kernels_dir: Path, tmp_path: Path) -> None:
    with running_kernel(kernels_dir, tmp_path, env={"JPY_SESSION_NAME": "", "CI": ""}) as (_km, kc):
        reply, _ = execute(kc, "%replay record")
        assert (reply["status"], reply["ename"]) == ("error", "magic")
        assert "%replay record FILE" in reply["evalue"]
