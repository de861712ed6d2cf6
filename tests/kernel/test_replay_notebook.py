"""A real agent's notebook recorded once, then a regression test with every server out of reach (SPEC 13, 14).

The notebook's agent calls a real HTTP server on 127.0.0.1, a throwaway PostgreSQL and an
OpenAI-compatible server that streams its reply and calls one of the agent's functions as a tool. It is
run once by nbconvert with ``S2O_REPLAY=record`` and the model's key in the environment (its outputs stored,
its calls recorded into the cassette its first cell names), recorded again with ``rewrite`` to the same
bytes, and then run under nbval with the model's server stopped, no key, and every Python process watched
by an audit hook that logs each ``socket.connect``: nbval passes, nothing connected anywhere (the same hook
logged the servers' ports while recording, so it sees them), and the HTTP server counted no request. Its
last cell is ``%trace``, whose stored output passes nbval live (every call made again) and replayed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from connect_log import SITECUSTOMIZE
from kernel_harness import install_spec, kernel_env

pytestmark = pytest.mark.timeout(300)

KEY = "sk-record-2b7e9d41c3"


AGENT = {"functions": {
    "lookUp": {"args": {"orderId": "int"}, "commands": [{"return": "{ {'id': orderId, 'status': 'shipped'} }"}]},
    "main": {"args": {"orderId": "int"}, "commands": [
        {"llm": {"profile": "gpt", "input": "{ f'Where is order {orderId}?' }", "functions": ["lookUp"],
                 "streamOutput": True}},
        {"return": "{ result }"}]}}}

CELLS = [
    "%replay replay orders.cassette.json",
    json.dumps([{"api": {"profile": "crm", "method": "POST", "path": "/json/orders", "body": {"qty": 2}}},
                {"return": "{ result['body'] }"}]),
    json.dumps([{"db": {"profile": "shop", "sql": "SELECT n, n * n AS square FROM generate_series(1, 3) AS n"}},
                {"return": "{ result }"}]),
    '%sys {"inputs": {"orderId": 2}}',
    json.dumps(AGENT),
    "%trace",
]


def _replies(fake_llm: Any) -> None:
    fake_llm.replies = [{"calls": [("lookUp", {"orderId": 2})], "usage": (40, 6)},
                        {"text": "Order 2 has shipped.", "usage": (60, 7)}]


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=240, check=False)


def test_a_recorded_notebook_passes_nbval_with_every_server_out_of_reach(
        tmp_path: Path, http_server: Any, postgres: Any) -> None:
    from fake_llm import FakeLLM

    nbval = ["pytest", "-p", "no:cacheprovider", "--color=no", "--nbval", "--nbval-kernel-name", "s2o",
             "-o", "addopts=", "--rootdir"]
    with FakeLLM() as fake_llm:
        log, work, notebook, base, recorded, calls = _record(tmp_path, http_server, postgres, fake_llm)
        trace = nbformat.read(notebook, as_version=4).cells[-1].outputs[0]["data"]["text/plain"]
        assert trace.splitlines()[0] == "run (agent) · ok · 113 tokens (100 in, 13 out) · $0.000304", trace
        assert "    tool lookUp (call call_0) · functions.lookUp · ok" in trace.splitlines(), trace
        _replies(fake_llm)  # live: every call made again (rewrite), the stored %trace compared as it is
        done = _run([*nbval, str(work), notebook.name], work, {**base, "S2O_REPLAY": "rewrite",
                                                              "S2O_SECRET_OPENAI_KEY": KEY})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "6 passed" in done.stdout and len(fake_llm.requests) == 6, done.stdout[-2000:]
        calls = len(http_server.requests)
        log.unlink()
    # the model's server is gone; the others stay up, so a call that went out would be counted as well
    done = _run([*nbval, str(work), notebook.name], work, {**base, "CI": "true"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "6 passed" in done.stdout, done.stdout[-2000:]
    assert len(http_server.requests) == calls
    assert not log.exists() or log.read_text() == "", log.read_text()  # no socket connected, anywhere
    assert (work / "orders.cassette.json").read_bytes() == recorded


def _record(tmp_path: Path, http_server: Any, postgres: Any, fake_llm: Any) -> tuple[Any, ...]:
    """Record the notebook (outputs stored), then rewrite it to the same bytes; the paths, environment,
    cassette bytes and the HTTP server's request count after."""
    prefix = tmp_path / "prefix"
    install_spec(prefix, name="s2o")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    work = tmp_path / "work"
    work.mkdir()
    (work / "s2o.toml").write_text(f"""
[profiles.api.crm]
url = "{http_server.url}"
allow_path = true

[profiles.db.shop]
url = "{postgres.url}"

[profiles.llm.gpt]
adapter = "openai"
model = "fake-model"
url = "{fake_llm.url}"
key = "{{ sys.secret['OPENAI_KEY'] }}"
price_input = 2.0
price_output = 8.0
""")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "s2o", "display_name": "Search2o expressions", "language": "s2o"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    notebook = work / "orders.ipynb"
    nbformat.write(nb, notebook)
    log = tmp_path / "connects.log"
    base = kernel_env({"JUPYTER_PATH": str(prefix / "share" / "jupyter"), "S2O_TEST_CONNECT_LOG": str(log),
                       "CI": ""})
    base["PYTHONPATH"] = f"{hooks}:{base['PYTHONPATH']}"
    base.pop("S2O_SECRET_OPENAI_KEY", None)
    execute = ["nbconvert", "--to", "notebook", "--execute", "--inplace", notebook.name]

    _replies(fake_llm)
    done = _run(execute, work, {**base, "S2O_REPLAY": "record", "S2O_SECRET_OPENAI_KEY": KEY})
    assert done.returncode == 0, done.stderr[-3000:]
    stored = nbformat.read(notebook, as_version=4)
    shown = json.dumps([cell.outputs for cell in stored.cells])
    assert "Order 2 has shipped." in shown and "square" in shown and '\\"qty\\":2' in shown, shown
    cassette = work / "orders.cassette.json"
    recorded = cassette.read_bytes()
    assert KEY.encode() not in recorded and http_server.url.encode() not in recorded
    assert len(fake_llm.requests) == 2 and fake_llm.requests[1]["body"]["messages"][-1]["role"] == "tool"
    connected = log.read_text()
    for port in (http_server.url.rsplit(":", 1)[1], str(postgres.port), fake_llm.url.split(":")[2].split("/")[0]):
        assert f", {port})" in connected, (port, connected)  # the hook sees the servers being called

    _replies(fake_llm)
    done = _run(execute, work, {**base, "S2O_REPLAY": "rewrite", "S2O_SECRET_OPENAI_KEY": KEY})
    assert done.returncode == 0, done.stderr[-3000:]
    assert cassette.read_bytes() == recorded  # made every call again, no change of behaviour: the same bytes

    log.unlink()
    return log, work, notebook, base, recorded, len(http_server.requests)
