"""Every shared conformance case (SPEC 11) passes, run through the runner's own functions and CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from s2o_kernel.conformance import judge, load_cases, run_case

CASE_DIR = Path(__file__).resolve().parents[1] / "conformance"
CASES = [case for path in sorted(CASE_DIR.glob("*.jsonl")) for case in load_cases(path)]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    got = run_case(case)
    assert judge(case, got) is None, judge(case, got)


def test_cli_reports_every_case_and_exits_zero():
    files = [str(p) for p in sorted(CASE_DIR.glob("*.jsonl"))]
    proc = subprocess.run([sys.executable, "-m", "s2o_kernel.conformance", *files],
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert lines[-1] == f"{len(CASES)} passed, 0 failed"
    assert sum(line.startswith("PASS ") for line in lines) == len(CASES)


def test_cli_fails_and_explains_a_wrong_expectation(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "wrong", "expr": "1 + 1", "expect": {"value": 3}}) + "\n"
                   + json.dumps({"id": "right", "expr": "1 + 1", "expect": {"value": 2}}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "s2o_kernel.conformance", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "FAIL wrong: expected value 3, got value 2" in proc.stdout
    assert "PASS right" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "1 passed, 1 failed"


def test_show_prints_one_outcome_object_per_case(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(json.dumps(c) for c in [
        {"id": "v", "expr": "(1, 2)"},
        {"id": "e", "expr": "x.__class__", "locals": {"x": 1}},
        {"id": "a", "allowlist_only": True, "allowlist": "len\nnosuchmodule"},
    ]) + "\n")
    proc = subprocess.run([sys.executable, "-m", "s2o_kernel.conformance", "--show", str(f)],
                          capture_output=True, text=True, timeout=60)
    out = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert out[0] == {"id": "v", "outcome": "value", "value": [1, 2], "repr": "(1, 2)"}
    assert out[1]["outcome"] == "error" and out[1]["code"] == "underscore" and out[1]["stage"] == "validate"
    assert out[1]["line"] == 1 and out[1]["col"] == 0
    assert out[2] == {"id": "a", "outcome": "allowlist", "errors": {"nosuchmodule": "Could not be imported."},
                      "warnings": []}


def test_value_comparison_keeps_bool_and_int_apart():
    case = {"id": "b", "expr": "1 == 1", "expect": {"value": 1}, "_dir": "."}
    assert judge(case, run_case(case)) is not None


def test_show_never_prints_a_secret_but_judging_compares_its_text(tmp_path):
    f = tmp_path / "s.jsonl"
    case = {"id": "s", "expr": "f'Bearer {sys.secret[\"K\"]}'", "secrets": {"K": "k-123"},
            "expect": {"value": "Bearer k-123"}}
    f.write_text(json.dumps(case) + "\n")
    judged = subprocess.run([sys.executable, "-m", "s2o_kernel.conformance", str(f)],
                            capture_output=True, text=True, timeout=60)
    assert judged.returncode == 0 and "PASS s" in judged.stdout
    shown = subprocess.run([sys.executable, "-m", "s2o_kernel.conformance", "--show", str(f)],
                           capture_output=True, text=True, timeout=60)
    assert "k-123" not in shown.stdout
    assert json.loads(shown.stdout) == {"id": "s", "outcome": "value", "value": None, "repr": "'Bearer ***'"}
