"""``python -m s2o_kernel.batch`` (SPEC 15, issue 34): an agent over recorded cases in contained workers.

The suite: the orders agent (a scripted model that calls ``get_order``, which calls the built-in echo API),
its calls for orders 7 and 3 recorded into a cassette by a real recording run; cases with every kind of
expectation, passing and failing, and cases that end on a limit (a loop past its limit, a worker past its
memory, which kills it, a run past its time). Each of those fails alone, with its code, and the others
pass. The results file has each case once; the JUnit XML is read by
``junitparser``; ``--resume`` and ``--rerun-failed`` run only what they say; bad input exits 2 naming the
file and line; under replay no process of the run connects a socket (an audit hook logs every connect).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from batch_suite import AGENT, CASES, make_suite
from connect_log import SITECUSTOMIZE
from junitparser import Error, Failure, JUnitXml

from s2o_kernel.batch.__main__ import main

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]

@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite (``tests/support/batch_suite.py``) in a folder of the module's."""
    return make_suite(tmp_path_factory.mktemp("suite"))


def run_batch(suite: Path, *more: str) -> tuple[int, list[dict[str, Any]]]:
    """The exit status of a batch run of the suite, and its results file's lines."""
    status = main([str(suite / "agent.json"), str(suite / "cases.jsonl"), "--results",
                   str(suite / "results.jsonl"), "--no-progress", *more])
    lines = (suite / "results.jsonl").read_text().splitlines()
    return status, [json.loads(line) for line in lines if line.startswith('{"id": ') and line.endswith("}")]


def test_every_kind_of_expectation_and_every_limit_fails_alone(suite: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    status, lines = run_batch(suite, "--workers", "2", "--junit", str(suite / "junit.xml"))
    assert status == 1
    assert sorted(line["id"] for line in lines) == sorted(CASES)  # each case once
    got = {line["id"]: line for line in lines}
    assert {i: got[i]["outcome"] for i in CASES} == {i: outcome for i, (_, outcome) in CASES.items()}, \
        {i: (got[i]["outcome"], got[i]["diff"]) for i in CASES}
    assert (got["loop-limit"]["error"], got["memory"]["error"], got["slow"]["code"]) == (
        "loop-limit", "memory-limit", "timedOut")
    assert got["code-fail"]["diff"] == ["code: expected errorInAgent, got success"]
    assert got["cost-fail"]["diff"][0].startswith("max_cost: the run cost $0.000500, more than $0.000001")
    assert got["plain"]["trace"]["root"]["spans"][4]["name"] == "llm" and got["plain"]["cost"] > 0
    assert "no-cassette" in capsys.readouterr().out  # named in the summary
    xml = JUnitXml.fromfile(str(suite / "junit.xml"))
    [suite_xml] = list(xml)
    failures = sum(1 for case in suite_xml for r in case.result if isinstance(r, Failure))
    errors = sum(1 for case in suite_xml for r in case.result if isinstance(r, Error))
    expected = [outcome for _, outcome in CASES.values()]
    assert (suite_xml.tests, failures, errors) == (len(CASES), expected.count("fail"), expected.count("error"))


def test_resume_runs_only_the_cases_not_in_the_results_and_rerun_failed_only_those(
        suite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    fast = [i for i, (case, _) in CASES.items() if "settings" not in case]
    done = [json.dumps({"id": i, "outcome": "pass", "diff": [], "code": "success", "error": None,
                        "duration": 0.0, "cost": 0.0, "trace": None}) for i in fast[:5]]
    (suite / "results.jsonl").write_text("\n".join(done) + '\n{"id": "cut-by-a-cra')  # a crash cut the last line
    status, lines = run_batch(suite, "--resume")
    ran = [line["id"] for line in lines[5:]]
    assert sorted(ran) == sorted(set(CASES) - set(fast[:5])) and status == 1
    before = len(lines)
    status, lines = run_batch(suite, "--rerun-failed")
    rerun = [line["id"] for line in lines[before:]]
    marked = set(fast[:5])  # passed by the results written above, whatever they would do
    assert sorted(rerun) == sorted(i for i, (_, outcome) in CASES.items() if outcome != "pass" and i not in marked)
    assert status == 1


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a"}\n{"id": "a"}', "cases.jsonl:2: the id 'a' is already the id of the case at"),
    ('{"id": "a", "expect": {"valu": 1}}', "cases.jsonl:1: expect.valu: Extra inputs are not permitted"),
    ('{"id": "a"}\nnot json', "cases.jsonl:2: not JSON"),
    ('[1]', "cases.jsonl:1: a case is a JSON object"),
])
def test_bad_input_exits_2_naming_the_file_and_line(line: str, message: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "agent.json").write_text(json.dumps(AGENT))
    (tmp_path / "cases.jsonl").write_text(line + "\n")
    status = main([str(tmp_path / "agent.json"), str(tmp_path / "cases.jsonl"), "--no-progress",
                   "--results", str(tmp_path / "r.jsonl")])
    assert status == 2
    assert message in capsys.readouterr().err




def test_no_process_of_a_replayed_batch_connects_a_socket(suite: Path, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "connects.log"
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": i, "inputs": {"order_id": 7},
                                         "cassette": str(suite / "orders.cassette.json")}) + "\n" for i in "abcd"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{hooks}:{ROOT}", "S2O_TEST_CONNECT_LOG": str(log),
           "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "s2o_kernel.batch", str(suite / "agent.json"), str(cases),
                           "--workers", "2", "--results", str(tmp_path / "r.jsonl"), "--no-progress"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 cases: 4 passed" in done.stdout
    probe = subprocess.run([sys.executable, "-c", "import socket; socket.create_connection(('127.0.0.1', 9))"],
                           env=env, capture_output=True, timeout=30, check=False)  # the hook logs a connect
    assert probe.returncode != 0 and "9)" in log.read_text()  # so an empty log above means no connect
    assert log.read_text().count("\n") == 1


def test_a_case_whose_worker_cannot_start_errs_alone(suite: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault outside any run (here a worker that cannot start, injected for one case's settings) is that
    case's ``error``; the batch goes on and the other cases pass."""
    from s2o_kernel.batch import runner

    real = runner.IsolatedSession

    def starting(settings: Any, **kwargs: Any) -> Any:
        if settings.limits.time == 7:
            raise OSError("no worker could start")
        return real(settings, **kwargs)
    monkeypatch.setattr(runner, "IsolatedSession", starting)
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    cases = tmp_path / "cases.jsonl"
    cassette = str(suite / "orders.cassette.json")
    cases.write_text("".join(json.dumps(case) + "\n" for case in [
        {"id": "ok-1", "inputs": {"order_id": 7}, "cassette": cassette},
        {"id": "broken", "inputs": {"order_id": 7}, "cassette": cassette, "settings": {"limits": {"time": 7}}},
        {"id": "ok-2", "inputs": {"order_id": 7}, "cassette": cassette}]))
    status = main([str(suite / "agent.json"), str(cases), "--results", str(tmp_path / "r.jsonl"), "--no-progress"])
    lines = {line["id"]: line for line in map(json.loads, (tmp_path / "r.jsonl").read_text().splitlines())}
    assert status == 1
    assert (lines["ok-1"]["outcome"], lines["ok-2"]["outcome"]) == ("pass", "pass")
    assert (lines["broken"]["outcome"], lines["broken"]["diff"]) == (
        "error", ["unexpected: OSError: no worker could start"])
