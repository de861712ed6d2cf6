"""``python -m s2o_kernel.conformance --isolated``: every case through the containment worker (SPEC 11, 12).

The shared expression and fragment cases pass as they do in-process, and every payload of the
adversarial corpus (``dos`` ones included) is contained as SPEC 12 defines it, judged by the runner
itself; the judge is shown to fail outcomes that are not contained.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from s2o_kernel.conformance import containment_problems, judge, load_cases, run_case

TESTS = Path(__file__).parent.parent
CASE_FILES = sorted(str(p) for p in (TESTS / "conformance").glob("*.jsonl"))
CORPUS = str(TESTS / "adversarial" / "corpus.jsonl")
N_CASES = sum(len(load_cases(f)) for f in CASE_FILES)
N_PAYLOADS = len(load_cases(CORPUS))


def runner(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "s2o_kernel.conformance", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.fixture
def arena(tmp_path):
    (tmp_path / "s2o-markers").mkdir()
    return tmp_path


def test_every_shared_case_passes_through_the_worker():
    proc = runner("--isolated", *CASE_FILES)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, "\n".join(line for line in lines if not line.startswith("PASS"))[-3000:]
    assert lines[-1] == f"{N_CASES} passed, 0 failed"


def test_every_adversarial_payload_is_contained_through_the_worker(arena):
    proc = runner("--isolated", "--time-limit", "2", CORPUS, cwd=arena)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, "\n".join(line for line in lines if not line.startswith("PASS"))[-3000:]
    assert lines[-1] == f"{N_PAYLOADS} passed, 0 failed"
    dos = {f"PASS {c['id']}" for c in load_cases(CORPUS) if c["class"] == "dos"}
    assert dos and dos <= set(lines)
    assert sorted(p.name for p in arena.iterdir()) == ["s2o-markers"] and not list((arena / "s2o-markers").iterdir())


def test_without_isolated_dos_payloads_are_skipped_and_the_rest_judged(arena):
    proc = runner("--time-limit", "2", CORPUS, cwd=arena)
    dos = sum(1 for c in load_cases(CORPUS) if c["class"] == "dos")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"{N_PAYLOADS - dos} passed, 0 failed, {dos} skipped"


def test_show_through_the_worker_describes_values_and_errors(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(json.dumps(c) for c in [
        {"id": "v", "expr": "(1, 2)"},
        {"id": "e", "expr": "x.__class__", "locals": {"x": 1}},
        {"id": "s", "expr": "f'Bearer {sys.secret[\"K\"]}'", "secrets": {"K": "k-123"}},
        {"id": "r", "fragment": {"var": {"y": "{ x + 1 }"}}, "locals": {"x": 1}},
    ]) + "\n")
    proc = runner("--isolated", "--show", str(f), timeout=120)
    out = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert out[0] == {"id": "v", "outcome": "value", "value": [1, 2], "repr": "(1, 2)"}
    assert (out[1]["outcome"], out[1]["code"], out[1]["stage"], out[1]["line"], out[1]["col"]) == \
        ("error", "underscore", "validate", 1, 0)
    assert out[2] == {"id": "s", "outcome": "value", "value": None, "repr": "'Bearer ***'"}
    assert "k-123" not in proc.stdout
    assert (out[3]["outcome"], out[3]["code"], out[3]["locals"]) == ("run", "success", {"x": 1, "y": 2})


def test_a_secret_result_is_judged_masked_through_the_worker():
    base = {"id": "s", "expr": "f'Bearer {sys.secret[\"K\"]}'", "secrets": {"K": "k-123"}, "_dir": str(TESTS / "conformance")}
    right = {**base, "expect": {"value": "Bearer k-123"}}
    wrong = {**base, "expect": {"value": "Token k-123"}}
    got = run_case(right, isolated=True)
    assert judge(right, got) is None
    assert judge(wrong, got) is not None


def test_a_payload_whose_value_shows_host_text_is_not_contained(arena, monkeypatch):
    monkeypatch.chdir(arena)
    case = {"id": "L", "expr": "'host-' + 'secret-7f3a'", "helpers": True, "class": "leak",
            "must": "raises a clean error at run time", "_dir": str(TESTS / "adversarial")}
    why = judge(case, run_case(case, isolated=True, time_limit=2))
    assert why is not None and "host text" in why


def test_the_containment_judge_fails_each_kind_of_escape():
    case = {"id": "c", "expr": "1", "secrets": {"K": "sk-abcdefgh-1234"}, "helpers": False, "_dir": str(TESTS / "conformance")}
    fine = {"elapsed": 0.1, "time_limit": 2.0, "two": "2", "kept": (1, 2), "new_files": []}
    value = {"outcome": "value", "value": 1, "repr": "1", "_containment": fine}
    assert containment_problems(case, value) == []
    assert containment_problems(case, {"outcome": "error", "code": "settings", "stage": "load",
                                       "message": "refused"}) == []
    bad = [
        {**value, "repr": "'…abcdefgh-1…'"},  # a slice of the secret
        {**value, "repr": "<module 'os' (built-in)>"},
        {"outcome": "error", "code": "unexpected", "stage": "run", "message": "boom", "_containment": fine},
        {"outcome": "error", "code": "runtime", "stage": "run", "message": "Traceback (most recent call last):",
         "_containment": fine},
        {**value, "_containment": {**fine, "elapsed": 4.5}},
        {**value, "_containment": {**fine, "kept": (None, 2)}},
        {**value, "_containment": {**fine, "two": "3"}},
        {**value, "_containment": {**fine, "unusable": "S2OError: unexpected"}},
        {**value, "_containment": {**fine, "new_files": ["s2o-markers/pwned"]}},
    ]
    for got in bad:
        assert containment_problems(case, got), got


def test_a_case_line_too_deep_to_read_is_reported_with_its_line(tmp_path):
    f = tmp_path / "deep.jsonl"
    f.write_text(json.dumps({"id": "ok", "expr": "1", "expect": {"value": 1}}) + "\n"
                 + '{"id": "deep", "fragment": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ValueError, match=r"deep\.jsonl:2: nests too deeply"):
        load_cases(f)
    proc = runner(str(f), timeout=60)
    assert proc.returncode == 2 and "deep.jsonl:2: nests too deeply" in proc.stderr
