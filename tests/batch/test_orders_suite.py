"""The orders suite kept in the repository (``notebooks/examples/orders-suite/``, docs/batch.md): its cases
pass offline from their cassette, as the user guide says, and the JUnit XML it writes counts them."""

from __future__ import annotations

from pathlib import Path

import pytest
from junitparser import JUnitXml

from s2o_kernel.batch.__main__ import main

SUITE = Path(__file__).resolve().parents[2] / "notebooks" / "examples" / "orders-suite"


def test_the_orders_suite_passes_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    status = main([str(SUITE / "agent.json"), str(SUITE), "--workers", "2", "--no-progress",
                   "--results", str(tmp_path / "results.jsonl"), "--junit", str(tmp_path / "junit.xml")])
    assert status == 0, capsys.readouterr().out
    assert capsys.readouterr().out.startswith("5 cases: 5 passed, 0 failed, 0 errors")
    [suite] = list(JUnitXml.fromfile(str(tmp_path / "junit.xml")))
    assert (suite.tests, suite.failures, suite.errors) == (5, 0, 0)
