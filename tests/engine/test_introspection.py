"""Introspection for tools (SPEC 9): what completion and ``name?`` see of granted modules and of the
runtime namespaces (SPEC 5)."""

from __future__ import annotations

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, make_settings


@pytest.fixture
def session() -> Session:
    return Session(Engine(make_settings({"const": {"vat": 0.25}})))


def test_a_granted_module_shows_only_its_members(session: Session) -> None:
    # the namespace's own path and kind sit in its instance dictionary; none of these may show them
    text = session.describe("math")
    assert text is not None and text.startswith("math: granted module\nmembers: acos, ")
    assert "_Namespace" not in text
    assert "_Namespace__path" not in session.member_names("math")
    assert session.member_names("math")[0] == "acos"
    assert not [n for n in dir(session.engine.allowlist.names["math"]) if n.startswith("_")]
    with pytest.raises(S2OError) as err:
        session.evaluate("math()")
    assert err.value.code == "not-allowed"
    assert "(granted: math.acos, " in err.value.message and "_Namespace" not in err.value.message


def test_runtime_namespaces_have_help(session: Session) -> None:
    assert session.describe("sys") == (
        "sys: read-only runtime values; sys.exists(scope, name) asks whether a variable is set\n"
        "members: exists, inputs, query, secret")
    assert session.describe("const") == "const: read-only constants of the agent (the settings' [const], %sys)\nmembers: vat"
    assert session.describe("agent") is not None and session.describe("agent").endswith("members: (none set)")
    session.run_fragment({"var": {"conv.topic": "x"}})
    assert session.describe("conv") == (
        "conv: conversation variables, shared by every agent; set with var conv.NAME\nmembers: topic")
    assert session.describe("conv.topic") == "conv.topic: str = 'x'"
