"""papermill parameters are data (SPEC 8, issue 30 "Notation and files").

A parameter's value arrives in the notebook as exactly the value given, whatever it holds: a dagger
anywhere (``-p greeting "†agent.token"`` copied ``agent.token`` into the notebook; ``"Hello † world"``
failed it with ``ref-text``), braces, quotes, a comment sign, at any depth of a list or dict. A
parameter's name is one local variable (``agent.token`` as a name would write the agent's variable).
And ``import s2o_kernel.parameters`` before papermill was a circular import (papermill loads its engine
entry points while it is imported, and the entry point named a module half imported).

The table runs through the translator and the engine in-process (fast, every value), then a real
``papermill`` run of a small notebook on this checkout's ``s2o`` kernel with the hostile values.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernel_harness import install_spec, kernel_env

from s2o_kernel.engine import Session
from s2o_kernel.engine.language import references
from s2o_kernel.parameters import DAGGER, S2OTranslator

pytestmark = pytest.mark.timeout(180)

D = "\u2020"
TOKEN = "s3cret-token"

#: Hostile values: each must arrive as itself.
HOSTILE: dict[str, Any] = {
    "greeting": f"{D}agent.token",
    "hello": f"Hello {D} world",
    "spaced": f"  {D}agent.token  ",
    "grouped": f"({D}agent.missing || {D}agent.token)",
    "ored": f"{D}conv.nothing || {D}agent.token",
    "escaped": "\\u2020agent.token",
    "braced": "{ agent.token }",
    "dict_display": '{"a": agent.token}',
    "quotes": "'\"} { ' + agent.token + '",
    "comment": "# not a comment",
    "magic": "%state save /tmp/x",
    "lines": f"line one\n{D}agent.token\r\n\tend",
    "only_dagger": D,
    "open_brace": "{",
    "close_brace": "}",
    "empty": "",
    "unicode": f"caf\u00e9 {D} \U0001f600 \u2028",
    "deep": {"k": [f"{D}agent.token", {"{ agent.token }": f"x {D}agent.token"}], f"{D}key": "{}"},
    "listed": [f"{D}agent.token", "{agent.token}", 1, None, True, 0.5],
}


def _cell_fragment(text: str) -> Any:
    """The fragment of an injected cell: its JSON after the ``# Parameters`` and ``%%parameters`` lines."""
    first, magic, rest = text.split("\n", 2)
    assert (first, magic) == ("# Parameters", "%%parameters")
    return json.loads(rest)


def test_every_hostile_value_arrives_as_itself_in_process() -> None:
    session = Session(agent={"token": TOKEN})
    run = session.run_fragment(_cell_fragment(S2OTranslator.codify(HOSTILE)))
    assert run.code == "success", run.error
    assert {name: session.locals[name] for name in HOSTILE} == HOSTILE
    assert session.agent_vars == {"token": TOKEN}


@pytest.mark.parametrize("name", ["agent.token", "conv.x", "x['k']", "x[0]", "x.y", "1x", "", "a b", 3])
def test_a_name_is_one_local_variable(name: Any) -> None:
    with pytest.raises(ValueError, match="local variable names"):
        S2OTranslator.codify({name: "v"})


def test_the_translator_s_dagger_is_the_engine_s() -> None:
    assert DAGGER == references.DAGGER


@pytest.mark.parametrize("first", ["s2o_kernel.parameters", "papermill"])
def test_any_module_may_be_imported_first(first: str) -> None:
    code = (f"import {first}\nimport papermill\nfrom papermill.translators import papermill_translators\n"
            "from s2o_kernel.parameters import S2OTranslator\n"
            "assert papermill_translators.find_translator('s2o', 's2o') is S2OTranslator\n"
            "from papermill.engines import papermill_engines\n"
            "from s2o_kernel.parameters import S2OEngine\n"
            "assert papermill_engines.get_engine('s2o') is S2OEngine\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=kernel_env())
    assert proc.returncode == 0, proc.stderr


def _notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "s2o", "display_name": "Search2o expressions", "language": "s2o"}
    secret = nbformat.v4.new_code_cell(json.dumps({"var": {"agent.token": TOKEN}}))
    defaults = nbformat.v4.new_code_cell(json.dumps({"var": dict.fromkeys(HOSTILE, "default")}))
    defaults.metadata["tags"] = ["parameters"]
    shown = nbformat.v4.new_code_cell("[" + ", ".join(HOSTILE) + "]")
    nb.cells = [secret, defaults, shown]
    return nb


def test_papermill_runs_a_notebook_with_hostile_parameters(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    install_spec(prefix, name="s2o")
    source, executed = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(_notebook(), source)
    plain = {name: value for name, value in HOSTILE.items() if isinstance(value, str)}  # `-p` keeps any text
    args = [arg for name, value in plain.items() for arg in ("-p", name, value)]
    rest = {name: value for name, value in HOSTILE.items() if name not in plain}
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", str(source), str(executed), "-k", "s2o", *args,
         "-y", json.dumps(rest, ensure_ascii=False), "--cwd", str(tmp_path)],
        env=kernel_env({"JUPYTER_PATH": str(prefix / "share" / "jupyter")}),
        capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nb = nbformat.read(executed, as_version=4)
    shown = nb.cells[-1].outputs
    assert len(shown) == 1, shown
    values = ast.literal_eval(shown[0]["data"]["text/plain"])
    assert dict(zip(HOSTILE, values, strict=True)) == HOSTILE
    assert TOKEN not in json.dumps([c.get("outputs", []) for c in nb.cells])
