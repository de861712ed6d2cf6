"""nbval on the s2o kernel: a changed result fails with both values in the report (issue 11).

A notebook whose stored outputs were written by hand, each differing from what the kernel produces
(a number, a bool, a string, rows, an error code), runs under nbval in a pytest subprocess on the
``s2o`` kernelspec of this checkout. Every cell must fail, and each failure must name the stored
value and the produced one (with ``application/json`` results, nbval 0.11 failed on a changed
number with ``sequence item 2: expected str instance, float found`` and showed no value).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from kernel_harness import install_spec, kernel_env

pytestmark = pytest.mark.timeout(180)


def _result(source: str, data: dict[str, str]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("execute_result", data=data, execution_count=1)]
    return cell


ROWS_HTML = (
    '<table class="s2o-rows">\n<thead>\n<tr><th>id</th><th>name</th></tr>\n</thead>\n<tbody>\n'
    "<tr><td>0</td><td>Ada</td></tr>\n<tr><td>1</td><td>Bob</td></tr>\n</tbody>\n</table>"
)

#: (cell id, source, stored outputs, the stored value and the produced value as the report shows them)
CASES = [
    ("number", _result("6 * 7", {"text/plain": "41"}), "41", "42"),
    ("bool", _result("1 < 2", {"text/plain": "False"}), "False", "True"),
    ("string", _result("'Hello ' + 'Ada'", {"text/plain": "'Hello Bob'"}), "'Hello Bob'", "'Hello Ada'"),
    ("rows", _result("[{'id': i, 'name': ['Ada', 'Eve'][i]} for i in range(2)]",
                     {"text/plain": "[{'id': 0, 'name': 'Ada'}, {'id': 1, 'name': 'Bob'}]", "text/html": ROWS_HTML}),
     "Bob", "Eve"),
]  # fmt: skip


def _error_cell() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("price.__class__")
    cell.metadata["tags"] = ["raises-exception"]
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("error", ename="unknown-name", evalue="an old message",
                                           traceback=["unknown-name: an old message"])]  # fmt: skip
    return cell


def test_nbval_reports_stored_and_produced_values(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    install_spec(prefix, name="s2o")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "s2o", "display_name": "Search2o expressions", "language": "s2o"}
    nb.cells = [case[1] for case in CASES] + [_error_cell()]
    path = tmp_path / "changed.ipynb"
    nbformat.write(nb, path)
    env = kernel_env({"JUPYTER_PATH": str(prefix / "share" / "jupyter")})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "--color=no",
         "--nbval", "--nbval-kernel-name", "s2o", "-o", "addopts=", "--rootdir", str(tmp_path), path.name],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    report = proc.stdout
    assert proc.returncode == 1, report + proc.stderr
    assert re.search(r"\b5 failed\b", report), report
    assert "expected str instance" not in report
    # one section per failing cell, in order: each names the stored and the produced value
    sections = re.split(r"_{3,} changed\.ipynb::Cell \d+ _{3,}", report)[1:]
    assert len(sections) == 5, report
    for (name, _cell, stored, produced), section in zip(CASES, sections, strict=False):
        assert stored in section and produced in section, f"{name}:\n{section}"
    error = sections[4]
    assert "mismatch 'ename'" in error and "'unknown-name' == 'underscore'" in error, error


#: Cells whose outputs once differed from run to run: a run past 2 s (its progress display, which nbval
#: reads as its first report, "running for 2.1 s", where the stored notebook holds the cleared line) and
#: results holding a function (its address). The string keeps its " at 0x" text: it is a value.
STABLE = [
    "await slow_answer(2.4)",
    "fetch_weather",
    "[str.upper, fetch_weather, 'a <b at 0x1234>']",
    '[{"log": "a log line"}, {"output": "a part"}, {"return": "{ 6 * 7 }"}]',
    "print('printed')",
]


def test_a_notebook_stored_headless_passes_nbval_twice(tmp_path: Path) -> None:
    """The guide's way to keep a regression notebook (docs/testing.md): store its outputs with
    ``nbconvert --execute`` (nbclient), then run ``pytest --nbval`` on it, twice: nothing in an output may
    depend on the run."""
    prefix = tmp_path / "prefix"
    install_spec(prefix, name="s2o")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "s2o", "display_name": "Search2o expressions", "language": "s2o"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in STABLE]
    path = tmp_path / "stable.ipynb"
    nbformat.write(nb, path)
    env = kernel_env({"JUPYTER_PATH": str(prefix / "share" / "jupyter")})
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--ExecutePreprocessor.kernel_name=s2o", path.name],
                   cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    stored = nbformat.read(path, as_version=4)
    assert [o["output_type"] for o in stored.cells[0].outputs] == ["execute_result"]  # no progress display
    assert stored.cells[1].outputs[0]["data"]["text/plain"] == "<function fetch_weather>"
    assert stored.cells[2].outputs[0]["data"]["text/plain"] == (
        "[<method 'upper' of 'str' objects>, <function fetch_weather>, 'a <b at 0x1234>']")
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "--color=no",
             "--nbval", "--nbval-kernel-name", "s2o", "-o", "addopts=", "--rootdir", str(tmp_path), path.name],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"{len(STABLE)} passed" in proc.stdout and "unhandled iopub" not in proc.stdout, proc.stdout
