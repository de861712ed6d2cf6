"""The outside world through the real kernel and its containment worker (issue 9, SPEC 7.1, 9.1).

One kernel, started by ``jupyter_client`` with a settings file that adds an api profile to a real HTTP
server on 127.0.0.1 whose ``Authorization`` header reads a secret given as ``S2O_SECRET_TOKEN``, and a
fresh ``S2O_DATA_DIR`` for the demo database. Cells: ``%profiles``, a ``db`` cell on ``demo``, an ``api``
cell on ``echo`` and on the real server, a failing call (``callFailed``) and ``%reset`` between calls.
No output of any cell shows the secret.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import drain, execute, result_data, start_kernel, stop_kernel

pytestmark = pytest.mark.timeout(180)

TOKEN = "tok-kernel-5b7d-secret"


@pytest.fixture(scope="module")
def kc(kernels_dir: Path, kernel_cwd: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from http_fixture import HttpServer

    server = HttpServer()
    config = kernel_cwd / "outside.toml"
    config.write_text(f'[profiles.api.srv]\nurl = "{server.url}"\n'
                      '[profiles.api.srv.headers]\nAuthorization = "{ f\'Bearer {sys.secret[\\"TOKEN\\"]}\' }"\n')
    env = {"S2O_CONFIG": str(config), "S2O_SECRET_TOKEN": TOKEN,
           "S2O_DATA_DIR": str(tmp_path_factory.mktemp("s2o-data")), "S2O_KERNEL_ISOLATED": ""}
    km, client = start_kernel(kernels_dir, kernel_cwd, env=env)
    client.http_server = server
    try:
        yield client
    finally:
        stop_kernel(km, client)
        server.stop()


@pytest.fixture
def kernel(kc: Any) -> Any:
    """The module's kernel with results also as ``application/json`` (``%display json``, SPEC 9), which
    these tests compare as data."""
    drain(kc)
    reply, _ = execute(kc, "%display json")
    assert reply["status"] == "ok", reply
    return kc


def _no_token(outputs: list[dict[str, Any]], reply: dict[str, Any]) -> None:
    assert TOKEN not in json.dumps([outputs, reply], default=str)


def test_profiles_lists_every_profile_with_credentials_masked(kernel: Any) -> None:
    reply, outputs = execute(kernel, "%profiles")
    assert reply["status"] == "ok", reply
    data = result_data(outputs)
    text = data["text/plain"]
    for name in ("profiles.api.echo", "profiles.api.srv", "profiles.db.demo"):
        assert name in text
    assert data["application/json"]["api"]["srv"]["headers"] == {"Authorization": "***"}
    _no_token(outputs, reply)


def test_a_db_cell_on_the_demo_database(kernel: Any) -> None:
    reply, outputs = execute(kernel, '[{"db": {"profile": "demo", "sql": "SELECT id, name FROM customers '
                                     'WHERE id <= :n ORDER BY id", "params": {"n": 2}}}, {"return": "{ result }"}]')
    assert reply["status"] == "ok", reply
    assert result_data(outputs)["application/json"] == [{"id": 1, "name": "Ada Lovelace"},
                                                        {"id": 2, "name": "Alan Turing"}]
    assert "<td>Ada Lovelace</td>" in result_data(outputs)["text/html"]  # rows also show as a table


def test_api_cells_on_echo_and_on_a_real_server(kernel: Any) -> None:
    reply, outputs = execute(kernel, '[{"api": {"profile": "echo", "method": "POST", "path": "/o/1", '
                                     '"body": {"n": "{ 6 * 7 }"}}}, {"return": "{ result }"}]')
    assert reply["status"] == "ok", reply
    assert result_data(outputs)["application/json"] == {"method": "POST", "path": "/o/1", "query": {},
                                                        "body": {"n": 42}}
    server = kernel.http_server
    sent = len(server.requests)
    reply, outputs = execute(kernel, '[{"api": {"profile": "srv", "path": "/whoami"}}, {"log": "{ result }"}, '
                                     '{"output": {"text": "{ str(result) }"}}, {"return": "{ result }"}]')
    assert reply["status"] == "ok", reply
    assert server.requests[sent][2]["Authorization"] == f"Bearer {TOKEN}"
    assert result_data(outputs)["application/json"] == {"auth": "***"}
    _no_token(outputs, reply)


def test_a_failed_call_fails_the_cell_with_call_failed_and_keeps_the_session(kernel: Any) -> None:
    assert execute(kernel, '{"var": {"kept": 5}}')[0]["status"] == "ok"
    reply, outputs = execute(kernel, '{"api": {"profile": "srv", "path": "/status/401"}}')
    assert (reply["status"], reply["ename"]) == ("error", "api-status"), reply
    assert "401" in reply["evalue"] and any("callFailed" in line for line in reply["traceback"])
    _no_token(outputs, reply)
    reply, outputs = execute(kernel, '{"api": {"profile": "nope"}}')
    assert (reply["status"], reply["ename"]) == ("error", "unknown-profile"), reply
    assert execute(kernel, "%reset")[0]["status"] == "ok"
    reply, outputs = execute(kernel, '[{"db": {"profile": "demo", "sql": "SELECT count(*) AS n FROM orders"}}, '
                                     '{"return": "{ result[0][\'n\'] > 0 }"}]')
    assert reply["status"] == "ok" and result_data(outputs)["text/plain"] == "True"


OUTSIDE = ("db", "api", "llm", "ask")


def _outside_examples(text: str) -> list[str]:
    """The lines of ``text`` that are one JSON command object of the outside world."""
    examples = []
    for line in text.splitlines():
        if line.strip().startswith('{"') and line.strip().split('"')[1] in OUTSIDE:
            examples.append(line.strip())
    return examples


def _run_examples(kernel: Any, examples: list[str]) -> dict[str, Any]:
    """Run each example; ``db``/``api``/``llm`` must succeed and set ``result``, an ``ask`` with no stdin
    must end with ``ask``. Returns each kind's ``result``."""
    results: dict[str, Any] = {}
    for example in examples:
        kind = next(iter(json.loads(example)))
        reply, outputs = execute(kernel, example, allow_stdin=False)
        if kind == "ask":
            assert reply["status"] == "error" and reply["ename"] == "ask", (example, reply)
            continue
        assert reply["status"] == "ok", (example, reply)
        reply, outputs = execute(kernel, "result")
        assert reply["status"] == "ok", (example, reply)
        results[kind] = result_data(outputs)["application/json"]
    return results


def test_the_outside_examples_of_help_run_on_the_embedded_default(kernel: Any) -> None:
    """Every fragment ``%help`` quotes as an example of the outside world runs as written."""
    reply, outputs = execute(kernel, "%help")
    assert reply["status"] == "ok", reply
    examples = _outside_examples(result_data(outputs)["text/plain"])
    assert [next(iter(json.loads(e))) for e in examples] == list(OUTSIDE)
    results = _run_examples(kernel, examples)
    assert results["db"] and results["api"]["path"] == "/orders/7"
    assert results["llm"] == "You said: Hello"


def test_the_outside_examples_of_the_guide_run_on_the_embedded_default(kernel: Any) -> None:
    """The guide's examples on the embedded default's profiles (docs/outside-world.md) run as written, with
    the results it names."""
    page = (Path(__file__).parents[2] / "docs" / "outside-world.md").read_text(encoding="utf-8")
    block = page.split("these run as written", 1)[1].split("```", 2)[1]
    examples = _outside_examples(block)
    assert [next(iter(json.loads(e))) for e in examples] == list(OUTSIDE)
    results = _run_examples(kernel, examples)
    assert results["db"] == [{"id": 1, "name": "Ada Lovelace"}, {"id": 2, "name": "Alan Turing"}]
    assert results["api"]["body"] == {"note": "hi"}
    assert "'You said: Hello'" in page and results["llm"] == "You said: Hello"
