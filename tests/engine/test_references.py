"""Reference expressions (SPEC 8): the grammar's trees and each malformed form's code and column."""

from __future__ import annotations

import pytest

from s2o_kernel.bounds import MAX_REFERENCE_DEPTH
from s2o_kernel.engine import S2OError, Session
from s2o_kernel.engine.language.references import And, Or, Ref, is_reference, parse_reference, show

D = "\u2020"


@pytest.mark.parametrize(("text", "tree"), [
    (f"{D}conv.userInput", Ref("conv", ("userInput",), 0)),
    (f"{D}sys.inputs", Ref("sys.inputs", (), 0)),
    (f"{D}result", Ref("result", (), 0)),
    (f"{D}agent.cart['my key'][0].name", Ref("agent", ("cart", "my key", 0, "name"), 0)),
    (f'{D}local.x["k"]', Ref("local", ("x", "k"), 0)),
    (f"  {D}sys.inputs.city  ", Ref("sys.inputs", ("city",), 2)),
    (f"{D}conv.a || {D}agent.b", Or((Ref("conv", ("a",), 0), Ref("agent", ("b",), 11)))),
    (f"{D}conv.a&&{D}agent.b&&{D}result", And((Ref("conv", ("a",), 0), Ref("agent", ("b",), 9),
                                               Ref("result", (), 19)))),
    (f"({D}conv.a && {D}conv.b) || {D}agent.c",
     Or((And((Ref("conv", ("a",), 1), Ref("conv", ("b",), 12))), Ref("agent", ("c",), 24)))),
    (f"(({D}result))", Ref("result", (), 2)),
])
def test_well_formed_expressions_parse_to_their_tree(text: str, tree: object) -> None:
    assert parse_reference(text) == tree


@pytest.mark.parametrize(("text", "code", "col"), [
    (f"Hello {D}conv.name", "ref-text", 0),
    (f"{D}conv.name is here", "ref-text", 11),
    (f"{D}conv.a {D}conv.b", "ref-text", 8),
    (f"{D}user.name", "ref-scope", 1),
    (f"{D}sys.secret", "ref-scope", 1),
    (f"{D}sys.inputsX", "ref-scope", 1),
    (f"{D} conv.a", "ref-scope", 1),
    (f"{D}agent", "ref-path", 0),
    (f"{D}local[0]", "ref-path", 0),
    (f"{D}agent.", "ref-path", 6),
    (f"{D}agent.1x", "ref-path", 6),
    (f"{D}agent.a[x]", "ref-path", 8),
    (f"{D}agent.a['k\"]", "ref-path", 8),
    (f"{D}agent.a[-1]", "ref-path", 8),
    (f"{D}conv.a | {D}conv.b", "ref-operator", 8),
    (f"{D}conv.a & {D}conv.b", "ref-operator", 8),
    (f"{D}conv.a ||| {D}conv.b", "ref-operator", 10),
    (f"{D}conv.a || {D}conv.b && {D}conv.c", "ref-mixed", 19),
    (f"{D}conv.a && {D}conv.b || {D}conv.c", "ref-mixed", 19),
    (f"{D}conv.a ||", "ref-empty", 8),
    (f"|| {D}conv.a", "ref-empty", 0),
    (f"{D}conv.a || || {D}conv.b", "ref-empty", 8),
    (f"{D}conv.a || ()", "ref-empty", 11),
    (f"({D}conv.a ||)", "ref-empty", 9),
    (f"({D}conv.a", "ref-paren", 0),
    (f"{D}conv.a)", "ref-paren", 7),
    (f"{D}conv._secret", "underscore", 6),
    (f"{D}agent.a['_k']", "underscore", 10),
    ("(" * (MAX_REFERENCE_DEPTH + 1) + f"{D}result" + ")" * (MAX_REFERENCE_DEPTH + 1), "too-deep", MAX_REFERENCE_DEPTH),
])
def test_each_malformed_form_has_its_code_and_column(text: str, code: str, col: int) -> None:
    with pytest.raises(S2OError) as info:
        parse_reference(text)
    assert (info.value.code, info.value.col, info.value.line, info.value.stage) == (code, col, 1, "validate")


def test_a_string_without_a_dagger_is_never_a_reference() -> None:
    assert not is_reference("conv.a || agent.b")
    session = Session()
    run = session.run_fragment({"var": {"x": "conv.a || agent.b"}})
    assert run.code == "success"
    assert session.locals == {"x": "conv.a || agent.b"}


def test_show_writes_a_tree_back_canonically() -> None:
    text = f"({D}conv.a&&{D}agent['b c'])  ||  {D}result[0]"
    assert show(parse_reference(text)) == f"({D}conv.a && {D}agent['b c']) || {D}result[0]"
    assert parse_reference(show(parse_reference(text))) == Or((
        And((Ref("conv", ("a",), 1), Ref("agent", ("b c",), 12))), Ref("result", (0,), 30)))


def test_the_field_path_and_column_reach_the_run_result() -> None:
    run = Session().run_fragment([{"log": "x"}, {"var": {"x": f"{D}conv.a | {D}conv.b"}}])
    assert run.error is not None
    assert (run.error.code, run.error.path, run.error.col, run.error.stage) == ("ref-operator", "[1].var.x", 8,
                                                                              "validate")
    assert run.logs == []  # refused before anything ran


def test_every_malformed_reference_of_a_fragment_is_reported_at_once() -> None:
    run = Session().run_fragment({"var": {"a": f"{D}x.y", "b": f"{D}conv.a ||", "c": [f"{D}conv.a hi"]}})
    assert run.error is not None
    errors = getattr(run.error, "errors", [])
    assert [(e.code, e.path) for e in errors] == [("ref-scope", "var.a"), ("ref-empty", "var.b"),
                                                  ("ref-text", "var.c[0]")]
