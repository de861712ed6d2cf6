"""The code registry (s2o_kernel.engine.codes): one home for every code, used everywhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from s2o_kernel.engine import S2OError
from s2o_kernel.engine.codes import CODES, UnknownCode, lookup, markdown_table

ROOT = Path(__file__).resolve().parents[2]

#: Codes SPEC sections 3, 6, 7, 9 and 10 name (copied from SPEC, not from the registry).
SPEC_CODES = {
    "syntax", "underscore", "format", "lambda", "walrus", "call-target", "non-ascii", "comprehension-depth",
    "comprehension-clauses", "operator", "sys", "sys-member", "secret-key", "command-field", "unknown-name",
    "missing-secret", "attribute", "too-long", "too-deep", "not-awaited", "not-allowed", "not-set", "not-json",
    "runtime", "timedOut", "loop-limit", "row-limit", "cost-limit", "memory-limit", "stopped", "settings",
    "allowlist", "refused-entry", "success", "ask", "failCommand", "errorInAgent", "callFailed", "unexpected",
}


def test_every_spec_code_is_registered() -> None:
    assert SPEC_CODES - set(CODES) == set()


def test_an_unregistered_code_is_a_bug() -> None:
    with pytest.raises(UnknownCode):
        S2OError("no-such-code", "x")


def test_lookup_refuses_str_subclasses() -> None:
    class Lying(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    with pytest.raises(UnknownCode):
        lookup(Lying("syntax"))
    assert lookup("syntax").name == "syntax"


def _literal_codes(tree: ast.AST) -> set[str]:
    """First string arguments of calls to S2OError and code= keywords in the package's source."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            value = getattr(node.func, "value", None)
            owner = getattr(value, "id", getattr(value, "attr", ""))
            if name == "error" and owner in {"log", "logger", "logging"}:
                continue
            if name in {"S2OError", "CellError", "error", "RunResult"} and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
            for kw in node.keywords:
                if kw.arg == "code" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    found.add(kw.value.value)
    return found


def test_every_code_written_in_the_source_is_registered() -> None:
    written: set[str] = set()
    for path in (ROOT / "s2o_kernel").rglob("*.py"):
        written |= _literal_codes(ast.parse(path.read_text()))
    assert written, "the scan found no codes: it is broken"
    assert written - set(CODES) == set()


def test_docs_table_is_generated_from_the_registry() -> None:
    text = (ROOT / "docs" / "codes.md").read_text()
    assert markdown_table() in text
