"""``%dataflow`` and reference expressions in a real s2o kernel (SPEC 8, 9.1), driven with jupyter_client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_harness import collect_iopub, drain, execute, install_spec, result_data, running_kernel, shell_reply
from svg_reader import svg_blocks

pytestmark = pytest.mark.timeout(120)

D = "\u2020"
SVG = "image/svg+xml"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    kernels_dir = install_spec(tmp_path_factory.mktemp("prefix"))
    with running_kernel(kernels_dir, tmp_path_factory.mktemp("cwd")) as (_km, kc):
        yield kc


@pytest.fixture
def kc(kernel: Any) -> Any:
    drain(kernel)
    return kernel


def _displays(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]


def _error(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert len(errors) == 1, outputs
    return errors[0]


def test_a_fragment_argument_shows_its_listing_and_diagram(kc: Any) -> None:
    fragment = {"var": {"x": f"{D}conv.userInput || {D}agent.default", "agent.seen": "{ x }"}}
    reply, outputs = execute(kc, "%dataflow " + json.dumps(fragment))
    assert reply["status"] == "ok", outputs
    assert _displays(outputs) == [{"text/plain": "\n".join([
        "reads:  agent.default, conv.userInput, local.x",
        "writes: agent.seen, local.x",
        "",
        "var",
        "  <- conv.userInput  (reference, x)",
        "  <- agent.default  (reference, x)",
        "  -> local.x  (var, x)",
        "  <- local.x  (expression, agent.seen)",
        "  -> agent.seen  (var, agent.seen)",
    ])}]
    # A notebook draws the SVG; a terminal (jupyter console) prints the text/plain graph.
    graph = "\n".join([
        "data flow: paths read --> [command] --> paths written (..+ read by an expression)",
        "",
        "conv.userInput --+--> [var] --+--> local.x",
        "agent.default  --+            +--> agent.seen",
        "local.x        ..+",
    ])
    # JupyterLab draws the SVG in a trusted notebook and shows the text graph in an untrusted one; no
    # Mermaid source, which JupyterLab would draw first and save as its own image/svg+xml (docs/design.md).
    data = result_data(outputs)
    assert set(data) == {SVG, "text/plain"}
    assert data["text/plain"] == graph
    assert svg_blocks(data[SVG]) == [(
        [("conv.userInput", False), ("agent.default", False), ("local.x", True)], "var",
        [("local.x", ""), ("agent.seen", "")])]


def test_without_an_argument_it_shows_the_last_fragment_cell(kc: Any) -> None:
    reply, outputs = execute(kc, "%reset")
    assert reply["status"] == "ok", outputs
    cell = json.dumps({"functions": {
        "main": {"commands": [{"call": {"function": "double", "args": {"n": 21},
                                        "outputPath": f"{D}agent.answer || {D}agent.problem"}}]},
        "double": {"args": {"n": "int"}, "commands": {"return": "{ n * 2 }"}}}})
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "ok", outputs
    reply, outputs = execute(kc, "agent.answer")
    assert result_data(outputs)["text/plain"] == "42"
    reply, outputs = execute(kc, "%dataflow")
    assert reply["status"] == "ok", outputs
    listing = _displays(outputs)[0]["text/plain"]
    assert listing.startswith("reads:  local.n\nwrites: agent.answer, agent.problem, result\n")
    assert "  -> agent.problem  (outputPath, on failure)" in listing
    assert result_data(outputs)["text/plain"].splitlines()[2:] == [
        "[functions.main.commands[0].call] --+--> result",
        "                                    +-- on success --> agent.answer",
        "                                    +-- on failure --> agent.problem",
        "",
        "local.n ..+--> [functions.double.commands.return]",
    ]
    assert svg_blocks(result_data(outputs)[SVG]) == [
        ([], "functions.main.commands[0].call",
         [("result", ""), ("agent.answer", "on success"), ("agent.problem", "on failure")]),
        ([("local.n", True)], "functions.double.commands.return", []),
    ]


def test_a_secret_value_in_a_path_is_masked_in_every_form(kc: Any) -> None:
    """Redaction comes before escaping: once escaped (``k&lt;3y&amp;9``) the value would no longer be found."""
    secret = "k<3y&9"
    msg_id = kc.execute("%secret DATAFLOW_TOKEN", allow_stdin=True)
    assert kc.get_stdin_msg(timeout=10)["msg_type"] == "input_request"
    kc.input(secret)
    assert shell_reply(kc, msg_id)["content"]["status"] == "ok"
    collect_iopub(kc, msg_id)
    reply, outputs = execute(kc, "%dataflow " + json.dumps({"var": {"x": f"{D}conv.cfg['{secret}']"}}))
    assert reply["status"] == "ok", outputs
    shown = json.dumps([m["content"] for m in outputs])
    assert "3y" not in shown, shown
    data = result_data(outputs)
    assert svg_blocks(data[SVG]) == [([("conv.cfg['***']", False)], "var", [("local.x", "")])]
    assert "conv.cfg['***']" in data["text/plain"]


def test_the_cell_form_reads_the_body(kc: Any) -> None:
    reply, outputs = execute(kc, "%%dataflow\n" + json.dumps([{"log": f"{D}sys.inputs.city"}]))
    assert reply["status"] == "ok", outputs
    assert _displays(outputs)[0]["text/plain"].startswith("reads:  sys.inputs.city\nwrites: (nothing)")


def test_a_malformed_reference_is_its_coded_error_with_path_and_column(kc: Any) -> None:
    reply, outputs = execute(kc, "%dataflow " + json.dumps({"var": {"x": f"{D}conv.a | {D}conv.b"}}))
    assert reply["status"] == "error"
    err = _error(outputs)
    assert err["ename"] == "ref-operator"
    assert "var.x" in "\n".join(err["traceback"])


def test_json_that_is_no_fragment_and_no_fragment_at_all_are_refused(kc: Any) -> None:
    reply, outputs = execute(kc, '%dataflow {"x": 1}')
    assert (reply["status"], _error(outputs)["ename"]) == ("error", "fragment")
    reply, outputs = execute(kc, "%dataflow {nope")
    assert (reply["status"], _error(outputs)["ename"]) == ("error", "syntax")


def test_references_run_in_fragment_cells(kc: Any) -> None:
    cell = json.dumps([{"var": {"conv.userInput": ""}},
                       {"var": {"said": f"{D}conv.userInput || {D}agent.missing"}}])
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "ok", outputs
    reply, outputs = execute(kc, "said")
    assert result_data(outputs)["text/plain"] == "''"
    reply, outputs = execute(kc, json.dumps({"log": f"{D}conv.userInput says hello"}))
    assert (reply["status"], _error(outputs)["ename"]) == ("error", "ref-text")
    reply, outputs = execute(kc, json.dumps([{"log": f"Hello {D}conv.userInput"}, {"return": "done"}]))
    assert reply["status"] == "ok", outputs  # a dagger inside text is text (SPEC 8)


def test_help_names_the_magic(kc: Any) -> None:
    reply, outputs = execute(kc, "%help dataflow")
    assert reply["status"] == "ok", outputs
    text = json.dumps([m["content"] for m in outputs])
    assert "show the paths a fragment reads and writes" in text


def test_validate_lists_what_a_fragment_reads_and_writes(kc: Any) -> None:
    fragment = {"var": {"agent.total": f"{D}conv.subtotal && {D}agent.rate"}}
    reply, outputs = execute(kc, "%validate " + json.dumps(fragment))
    assert reply["status"] == "ok", outputs
    assert result_data(outputs)["text/plain"] == ("ok: the fragment passes validation\n"
                                                  "reads: agent.rate, conv.subtotal\nwrites: agent.total")
    reply, outputs = execute(kc, "%validate " + json.dumps({"var": {"x": f"{D}conv.a ||"}}))
    assert (reply["status"], _error(outputs)["ename"]) == ("error", "ref-empty")
    reply, outputs = execute(kc, "%validate [1, 2]")  # JSON that is no fragment is an expression
    assert result_data(outputs)["text/plain"].startswith("ok: the expression passes validation")


def test_every_command_that_produces_a_result_writes_result(kc: Any) -> None:
    """Issue 31 item 5: ``db``, ``api``, ``llm``, ``ask`` and ``call`` write ``result`` (and ``ask`` writes
    ``sys.inputs``), so the flow from one command to the next shows, after an ``ask`` cell too."""
    reply, outputs = execute(kc, '%sys {"inputs": {"city": "Oslo"}}')
    assert reply["status"] == "ok", outputs
    cell = json.dumps([{"ask": {"message": "Where?", "inputs": [{"name": "city"}]}},
                       {"db": {"profile": "demo", "sql": "select 1 as one"}},
                       {"api": {"profile": "echo", "method": "GET", "path": "/x"}},
                       {"llm": {"profile": "scripted", "prompt": "demo", "input": "hi"}},
                       {"return": "{ [result, sys.inputs['city']] }"}])
    reply, outputs = execute(kc, f"%dataflow {cell}")
    assert reply["status"] == "ok", outputs
    listing = _displays(outputs)[0]["text/plain"]
    assert listing.startswith("reads:  result, sys.inputs.city\nwrites: result, sys.inputs.city\n"), listing
    for command in ("[0].ask", "[1].db", "[2].api", "[3].llm"):
        block = listing.split(f"\n{command}\n", 1)[1].split("\n\n", 1)[0]
        assert "  -> result  (result)" in block, (command, listing)
    assert "  -> sys.inputs.city  (ask, inputs[0].name)" in listing
    reply, outputs = execute(kc, json.dumps([{"ask": {"message": "Where?", "inputs": [{"name": "city"}]}},
                                             {"return": "{ result['city'] }"}]))
    assert result_data(outputs)["text/plain"] == "'Oslo'", outputs
    reply, outputs = execute(kc, "%dataflow")
    assert reply["status"] == "ok", outputs
    assert result_data(outputs)["text/plain"].splitlines()[2:] == [
        "[[0].ask] --+--> sys.inputs.city",
        "            +--> result",
        "",
        "result ..+--> [[1].return]",
    ]
