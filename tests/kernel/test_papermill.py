"""papermill on the s2o kernel: parameters injected as a ``var`` fragment (issue 11).

The translator's text is checked directly; then the ``papermill`` command line runs a notebook with
a ``parameters`` cell on this checkout's ``s2o`` kernelspec with ``-p`` and ``-y`` parameters of
every JSON type, and the executed notebook must show the values the parameters gave.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from kernel_harness import install_spec, kernel_env
from papermill.translators import papermill_translators

from s2o_kernel.parameters import S2OTranslator

pytestmark = pytest.mark.timeout(180)


def test_translator_writes_one_parameters_cell_of_a_var_fragment() -> None:
    assert papermill_translators.find_translator("s2o", "s2o") is S2OTranslator
    assert papermill_translators.find_translator("s2o-test", "s2o") is S2OTranslator  # by language
    text = S2OTranslator.codify({"name": "Ada", "n": 3, "x": 0.5, "ok": True, "none": None,
                                 "items": [1, "{a}"], "cfg": {"{k}": "{ 1 + 1 }", "plain": "a {b} c"}})  # fmt: skip
    assert text == (
        "# Parameters\n"
        "%%parameters\n"
        "{\n"
        '  "var": {\n'
        '    "name": "Ada",\n'
        '    "n": 3,\n'
        '    "x": 0.5,\n'
        '    "ok": true,\n'
        '    "none": null,\n'
        '    "items": [\n'
        "      1,\n"
        "      \"{ '{a}' }\"\n"
        "    ],\n"
        '    "cfg": {\n'
        "      \"{k}\": \"{ '{ 1 + 1 }' }\",\n"
        '      "plain": "a {b} c"\n'
        "    }\n"
        "  }\n"
        "}\n"
    )
    fragment = json.loads(S2OTranslator.codify({"s": "{é}", "t": "é"}).split("\n", 2)[2])
    assert fragment == {"var": {"s": "{ '{\\xe9}' }", "t": "é"}}  # an expression is ASCII only (SPEC 3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "a"}, {"a": [object()]}])
def test_translator_refuses_values_json_cannot_hold(bad: object) -> None:
    with pytest.raises(ValueError, match="s2o parameter 'p'"):
        S2OTranslator.codify({"p": bad})


def test_translator_inspects_a_var_cell() -> None:
    cell = nbformat.v4.new_code_cell('# defaults\n{"var": {"name": "Ada", "n": 2, "s": "{ \'{x}\' }", "e": "{ n + 1 }"}}')
    params = S2OTranslator.inspect(cell)
    assert [(p.name, p.inferred_type_name, p.default) for p in params] == [
        ("name", "str", '"Ada"'), ("n", "int", "2"), ("s", "str", '"{x}"'), ("e", "str", '"{ n + 1 }"')]
    assert S2OTranslator.inspect(nbformat.v4.new_code_cell("1 + 1")) == []
    written = nbformat.v4.new_code_cell(S2OTranslator.codify({"name": "Ada"}))  # the cell it writes reads back
    assert [(p.name, p.default) for p in S2OTranslator.inspect(written)] == [("name", '"Ada"')]


def _notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "s2o", "display_name": "Search2o expressions", "language": "s2o"}
    defaults = nbformat.v4.new_code_cell('{"var": {"name": "nobody", "count": 0}}')
    defaults.metadata["tags"] = ["parameters"]
    nb.cells = [
        defaults,
        nbformat.v4.new_code_cell("[name, count, ratio, flag, nothing, items, cfg, braced]"),
        nbformat.v4.new_code_cell("\"{ f'{name} x {count * 2}' }\""),
        nbformat.v4.new_code_cell('{"functions": {"main": {"args": {"name": "str", "count": "int"}, '
                                  '"commands": [{"return": "{ name.upper() * count }"}]}}}'),
        nbformat.v4.new_code_cell("[result, sys.inputs['name'], sys.inputs['cfg']['a']]"),
    ]
    return nb


def test_papermill_runs_an_s2o_notebook_with_parameters(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    install_spec(prefix, name="s2o")
    source, executed = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(_notebook(), source)
    yaml = json.dumps({"items": [1, "two", None, 2.5], "cfg": {"a": {"b": "{x}"}, "ok": False, "é": "{é}"},
                       "braced": "{ 1 + 1 }"})  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", str(source), str(executed), "-k", "s2o",
         "-p", "name", "Ada", "-p", "count", "3", "-p", "ratio", "0.5", "-p", "flag", "True",
         "-p", "nothing", "None", "-y", yaml, "--cwd", str(tmp_path)],
        env=kernel_env({"JUPYTER_PATH": str(prefix / "share" / "jupyter")}),
        capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nb = nbformat.read(executed, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and injected[0].source.startswith("# Parameters\n%%parameters\n{\n  \"var\": {")
    values = nb.cells[[c.metadata.get("tags", []) for c in nb.cells].index(["injected-parameters"]) + 1]
    assert values.outputs[0]["data"] == {"text/plain": (
        "['Ada',\n 3,\n 0.5,\n True,\n None,\n [1, 'two', None, 2.5],\n {'a': {'b': '{x}'}, 'ok': False, 'é': '{é}'},\n"
        " '{ 1 + 1 }']")}  # fmt: skip
    assert nb.cells[-3].outputs[0]["data"] == {"text/plain": "'Ada x 6'"}
    # issue 31 item 2: the parameters reach an agent definition's main through sys.inputs, its value result
    assert nb.cells[-2].outputs[0]["data"] == {"text/plain": "'ADAADAADA'"}
    assert nb.cells[-1].outputs[0]["data"] == {"text/plain": "['ADAADAADA', 'Ada', {'b': '{x}'}]"}
