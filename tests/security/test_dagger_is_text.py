"""A dagger inside text is text (SPEC 8, issue 30 "Notation and files").

A string is a reference expression only when, spaces (and a group's opening parentheses) aside, it starts
with ``†`` and reads whole as one; any other string is plain text, wherever a fragment reads a dynamic
value: a ``var`` value at any depth, a ``log`` line, a loop's body (the fast path of
``fragments/fastpath.py``), the fragment parser's validation and ``%dataflow``. Before the fix any string
holding a dagger had to be a whole reference: ``"Price† incl. VAT"`` failed the run with ``ref-text``.

The table gives each string once and what it means: ``TEXT`` (the string itself), ``REF`` (the value of
``agent.token``, which the session holds) or the code and column of its refusal. Escaped forms: JSON's
``\\u2020`` is the dagger itself (a reference when it starts the string), and text that must start with
a dagger is written as a dynamic string of its literal, ``"{ '\\u2020agent.token' }"``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from s2o_kernel.engine import S2OError, Session
from s2o_kernel.engine.language.references import is_reference

D = "\u2020"
TOKEN = "s3cret-token"
TEXT, REF = "text", "ref"

#: (string, meaning): TEXT, REF, or (code, column) of the refusal.
TABLE: list[tuple[str, Any]] = [
    # a dagger inside text: at the end, in the middle, several, before a space, before a whole reference
    (f"Price{D} incl. VAT", TEXT),
    (f"Hello {D} world", TEXT),
    (f"total{D}", TEXT),
    (f"see {D}agent.token", TEXT),
    (f"a {D} b {D}{D} c {D}", TEXT),
    (f"x {D}agent.token || {D}agent.other", TEXT),
    (f"{{x}} {D}agent.token", TEXT),  # braces and a dagger inside text: neither reading applies
    (f"(see {D}agent.token)", TEXT),  # a parenthesis, then text: no group of references
    (f"\u00a0{D}agent.token", TEXT),  # a no-break space is a character, not white space of the notation
    (f"x\n{D}agent.token", TEXT),
    # the escaped form: the text of a dynamic string's literal, which may start with a dagger
    ("{ '\\u2020agent.token' }", f"{D}agent.token"),
    ("{ 'Price\\u2020' }", f"Price{D}"),
    # a string that starts with a dagger and reads whole as a reference
    (f"{D}agent.token", REF),
    (f"  {D}agent.token\t", REF),
    (f"{D}agent.missing || {D}agent.token", REF),
    (f"({D}agent.missing || {D}agent.token)", REF),
    (f" (({D}agent.token))", REF),
    # a string that starts with a dagger but is no reference: the malformed form's own code and column
    (f"{D}agent.token and more", ("ref-text", 13)),
    (f"{D} agent.token", ("ref-scope", 1)),  # the dagger, then a space
    (f"{D}", ("ref-scope", 1)),
    (f"{D}{D}", ("ref-scope", 1)),
    (f"{D}agent.token{D}", ("ref-scope", 13)),
    (f"{D}agent.token | {D}agent.other", ("ref-operator", 13)),
    (f"({D}agent.token", ("ref-paren", 0)),
    (f"{D}agent.token x {D}agent.other", ("ref-text", 13)),
]
IDS = [json.dumps(text, ensure_ascii=False) for text, _ in TABLE]


def _session() -> Session:
    return Session(agent={"token": TOKEN})


def _expected(text: str, meaning: Any) -> Any:
    if meaning == TEXT:
        return text
    return TOKEN if meaning == REF else meaning


@pytest.mark.parametrize(("text", "meaning"), TABLE, ids=IDS)
def test_each_string_means_what_the_table_says_in_a_var_a_log_and_a_loop(text: str, meaning: Any) -> None:
    fragment = [{"var": {"x": text, "deep": {"k": [text]}}}, {"log": text},
                {"for": {"item": "n", "in": [1, 2], "commands": {"var": {"looped": text}}}}]
    session = _session()
    run = session.run_fragment(fragment)
    if isinstance(meaning, tuple):
        assert run.error is not None and run.logs == []  # refused whole before anything ran
        errors = getattr(run.error, "errors", [run.error])
        assert {(e.code, e.col, e.stage) for e in errors} == {(*meaning, "validate")}
        assert [e.path for e in errors] == ["[0].var.x", "[0].var.deep.k[0]", "[1].log",
                                            "[2].for.commands.var.looped"]
        return
    value = _expected(text, meaning)
    assert run.code == "success", run.error
    assert (session.locals["x"], session.locals["deep"], session.locals["looped"]) == (value, {"k": [value]}, value)
    assert run.logs == [str(value)]


@pytest.mark.parametrize(("text", "meaning"), TABLE, ids=IDS)
def test_validation_and_the_data_flow_agree_with_the_run(text: str, meaning: Any) -> None:
    session = _session()
    fragment = {"var": {"x": text}}
    if isinstance(meaning, tuple):
        with pytest.raises(S2OError) as info:
            session.dataflow(fragment)
        assert (info.value.code, info.value.col, info.value.path) == (*meaning, "var.x")
        return
    reads = [a.data for a in session.dataflow(fragment).accesses if a.mode == "read"]
    assert reads == (["agent.token"] if meaning == REF and "missing" not in text
                     else ["agent.missing", "agent.token"] if meaning == REF else [])


def test_json_s_escape_is_the_dagger_itself() -> None:
    """``\\u2020`` in a fragment's JSON text is the same string as ``†``: a reference when it starts one."""
    fragment = json.loads('[{"var": {"x": "\\u2020agent.token", "y": "Price\\u2020 incl. VAT"}}]')
    session = _session()
    assert session.run_fragment(fragment).code == "success"
    assert (session.locals["x"], session.locals["y"]) == (TOKEN, f"Price{D} incl. VAT")


def test_an_output_path_is_a_reference_or_refused() -> None:
    """``outputPath`` is written to, so text there is ``ref-output``, a dagger inside it or not."""
    session = _session()
    assert session.run_fragment({"functions": {"main": {"commands": []}, "f": {"commands": {"return": 1}}}}).code \
        == "success"
    for text in (f"agent.x {D}", "agent.x", f"see {D}agent.x"):
        run = session.run_fragment({"call": {"function": "f", "outputPath": text}})
        assert run.error is not None and run.error.code == "ref-output", text
    assert session.run_fragment({"call": {"function": "f", "outputPath": f" {D}agent.x"}}).code == "success"
    assert session.agent_vars["x"] == 1


def test_is_reference_is_linear_and_takes_only_the_start() -> None:
    assert is_reference(f"{D}agent.x") and is_reference(f" \t(({D}") and not is_reference(f"x{D}")
    assert not is_reference("(" * 200_000 + "x" + D)  # a long run of parentheses, then text
    assert not is_reference("")


def test_state_load_sets_values_as_data(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``%state load`` values are data (SPEC 8): a saved string that starts with a dagger stays that string."""
    from s2o_kernel import engine
    from s2o_kernel.kernel.runner import CellRunner

    monkeypatch.chdir(tmp_path)
    saved = {"agent": {"quote": f"{D}agent.token", "grouped": f"({D}agent.token)"}, "conv": {"said": f"Hi {D}"}}
    (tmp_path / "state.json").write_text(json.dumps(saved))
    session = _session()
    out = CellRunner(session, engine).run("%state load state.json")
    assert out.ok, out.error
    assert session.agent_vars == {"token": TOKEN, **saved["agent"]} and session.conv_vars == saved["conv"]
    assert CellRunner(session, engine).run('{"var": {"q": "{ agent.quote }"}}').ok
    assert session.locals["q"] == f"{D}agent.token"
