"""Display through a real kernel (SPEC 9): what JupyterLab and the console receive for a result.

One kernel of each kind (contained, the default, and in-process): the contained kernel only sees a
result's repr text and JSON form, the in-process one the value itself; both must show the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.lib.pretty import pretty as ipython_pretty
from kernel_harness import MODES, drain, execute, result_data, running_kernel

from s2o_kernel.bounds import ROW_CAP

pytestmark = pytest.mark.timeout(120)


ROWS = "[{'id': i, 'name': f'person {i}', 'email': f'p{i}@example.org'} for i in range(3)]"


@pytest.fixture(scope="module", params=list(MODES))
def kc(request: pytest.FixtureRequest, kernels_dir: Path, kernel_cwd: Path) -> Iterator[Any]:
    env = {"S2O_KERNEL_ISOLATED": MODES[request.param], "S2O_DATA_DIR": str(kernel_cwd / "data")}
    with running_kernel(kernels_dir, kernel_cwd, env=env) as (_km, client):
        yield client


def run(kc: Any, code: str) -> dict[str, Any]:
    drain(kc)
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", reply
    return result_data(outputs)


def test_a_number_is_text_only(kc: Any) -> None:
    assert run(kc, "1 + 1") == {"text/plain": "2"}


def test_a_long_list_is_pretty_printed(kc: Any) -> None:
    assert run(kc, "list(range(40))") == {"text/plain": "[" + ",\n ".join(str(i) for i in range(40)) + "]"}
    data = run(kc, "{'b': list(range(30)), 'a': {'z', 'y', 'x'}}")
    lines = data["text/plain"].splitlines()
    assert lines[:3] == ["{'b': [0,", "  1,", "  2,"]  # dict keys in their order, nested one space more
    assert lines[-1] == " 'a': {'x', 'y', 'z'}}"  # set items sorted
    assert list(data) == ["text/plain"]


@pytest.mark.parametrize(("code", "value"), [
    ("list(range(3000))", list(range(3000))),
    ("list(range(200000))", list(range(200000))),  # was one 1 MB line ending "… (truncated)"
    ("[(i, str(i)) for i in range(1500)]", [(i, str(i)) for i in range(1500)]),  # not JSON: the worker's text
    ("{i: list(range(1200)) for i in range(3)}", {i: list(range(1200)) for i in range(3)}),  # nested too
    ("set(range(2000))", set(range(2000))),
])  # fmt: skip
def test_a_long_result_stops_at_1000_items_as_in_ipython(kc: Any, code: str, value: Any) -> None:
    """IPython's pretty printer shows 1,000 items of a container (``max_seq_length``), then ``...``."""
    data = run(kc, code)
    assert data["text/plain"] == ipython_pretty(value)
    assert "...]" in data["text/plain"] or "...}" in data["text/plain"]
    assert len(data["text/plain"]) < 200_000


def test_a_5000_row_query_shows_1000_rows_and_a_table_of_100(kc: Any) -> None:
    drain(kc)
    sql = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000) SELECT n, 'row ' || n AS name FROM c"
    reply, _ = execute(kc, f'{{"db": {{"profile": "demo", "sql": "{sql}"}}}}')
    assert reply["status"] == "ok", reply
    data = run(kc, "result")
    lines = data["text/plain"].splitlines()
    assert len(lines) == 1001 and lines[-1] == " ...]"
    assert lines[999] == " {'n': 1000, 'name': 'row 1000'},"
    table = data["text/html"]
    assert table.count("<tr>") == ROW_CAP + 1  # the header and ROW_CAP rows
    assert f"<tr><td>{ROW_CAP}</td>" in table and f"<tr><td>{ROW_CAP + 1}</td>" not in table
    assert table.endswith(f"<p>… {5000 - ROW_CAP} more rows</p>")
    assert run(kc, "len(result)") == {"text/plain": "5000"}  # the value itself is whole


def test_rows_carry_a_table(kc: Any) -> None:
    data = run(kc, ROWS)
    assert data["text/plain"] == (
        "[{'id': 0, 'name': 'person 0', 'email': 'p0@example.org'},\n"
        " {'id': 1, 'name': 'person 1', 'email': 'p1@example.org'},\n"
        " {'id': 2, 'name': 'person 2', 'email': 'p2@example.org'}]"
    )
    html = data["text/html"]
    assert "<tr><th>id</th><th>name</th><th>email</th></tr>" in html
    assert "<tr><td>2</td><td>person 2</td><td>p2@example.org</td></tr>" in html
    assert "application/json" not in data


def test_display_json_adds_the_json_form(kc: Any) -> None:
    assert run(kc, "%display") == {"text/plain": "display: plain (results as text/plain, rows also as an html table)"}
    drain(kc)
    reply, _ = execute(kc, "%display json")
    assert reply["status"] == "ok"
    try:
        data = run(kc, ROWS)
        assert data["application/json"][2] == {"id": 2, "name": "person 2", "email": "p2@example.org"}
        assert run(kc, "'a'") == {"text/plain": "'a'", "application/json": "a"}
        assert run(kc, "(1, 2)") == {"text/plain": "(1, 2)", "application/json": [1, 2]}
    finally:
        execute(kc, "%display plain")
    assert run(kc, "'a'") == {"text/plain": "'a'"}


def test_vars_is_a_table(kc: Any) -> None:
    drain(kc)
    execute(kc, "%reset")
    reply, _ = execute(kc, '{"var": {"price": 4, "agent.visits": 2}}')
    assert reply["status"] == "ok", reply
    data = run(kc, "%vars")
    assert data["text/plain"] == "scope   name    value\nlocals  price   4\nagent   visits  2"
    assert "<tr><td>agent</td><td>visits</td><td>2</td></tr>" in data["text/html"]
