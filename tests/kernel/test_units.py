"""Unit tests of the kernel's pure modules: cells, magics, render, completion, runner, install.

They run against a small stand-in session that implements the kernel's
contract with the engine (``s2o_kernel.kernel.contract.SessionLike``;
``tests/kernel/test_contract.py`` checks it), so the kernel's own logic is
tested independently of the engine. Errors, validation results and run
results are the engine's own types.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_session import API, SECRET, BadRepr, FakeSession, Opaque, fake_as_json, fake_fragment_kind
from hypothesis import given, settings
from hypothesis import strategies as st

from s2o_kernel.engine import ErrorGroup, RunResult, S2OError
from s2o_kernel.kernel import cells, completion, install, magics, render
from s2o_kernel.kernel.render import INTERRUPTED
from s2o_kernel.kernel.runner import CellRunner

ROOT = Path(__file__).resolve().parents[2]


def results(outcome) -> list[dict[str, Any]]:
    return [c["data"] for t, c in outcome.outputs if t == "execute_result"]


def streams(outcome, name: str) -> str:
    return "".join(c["text"] for t, c in outcome.outputs if t == "stream" and c["name"] == name)


# -- cells -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "kind", "text"),
    [
        ("", cells.EMPTY, ""),
        ("   \n# only a comment\n  # NBVAL_SKIP", cells.EMPTY, ""),
        ("1 + 2", cells.EXPRESSION, "1 + 2"),
        ("# NBVAL_RAISES_EXCEPTION\nx.__class__", cells.EXPRESSION, "x.__class__"),
        ('"Hello {name}"', cells.DYNAMIC, "Hello {name}"),
        ('# NBVAL_IGNORE_OUTPUT\n"{ 1 + 2 }"', cells.DYNAMIC, "{ 1 + 2 }"),
        ("{ price * 2 }", cells.DYNAMIC, "{ price * 2 }"),
        ('{"a": 1}', cells.DYNAMIC, '{"a": 1}'),
        ('{"var": {"x": 1}}', cells.FRAGMENT, '{"var": {"x": 1}}'),
        ('# NBVAL_CHECK_OUTPUT\n[{"var": {"x": 1}},\n # comment\n {"log": "hi"}]', cells.FRAGMENT,
         '[{"var": {"x": 1}},\n {"log": "hi"}]'),
        ("[1, 2]", cells.EXPRESSION, "[1, 2]"),
        ("'single'", cells.EXPRESSION, "'single'"),
        ("len?", cells.HELP, "len?"),
        ("%vars", cells.LINE_MAGIC, "%vars"),
        ("%%allowlist\nlen", cells.CELL_MAGIC, "%%allowlist\nlen"),
    ],
)  # fmt: skip
def test_classify(code: str, kind: str, text: str) -> None:
    cell = cells.classify(code, fake_fragment_kind)
    assert cell.kind == kind
    assert cell.text == text


@pytest.mark.parametrize("code, expected", [
    ('len("""abc\n# not a comment\nxyz""")', 'len("""abc\n# not a comment\nxyz""")'),
    ("'''line1\n#tag\nline3'''\n# a comment\nx", "'''line1\n#tag\nline3'''\nx"),
    ('x = "a # b"\n# c\n"""q\n # in """  # after\n#gone', 'x = "a # b"\n"""q\n # in """  # after'),
    ('"\\\\"""\n# c', '"\\\\"""'),  # a string of one backslash, then an empty one: no triple quote
    ('"""a \\""" # b\n# still in\n"""', '"""a \\""" # b\n# still in\n"""'),  # an escaped quote
    ("# '''\nx\n# '''", "x"),  # quotes in a comment open nothing
])
def test_strip_comments_keeps_the_lines_of_triple_quoted_strings(code: str, expected: str) -> None:
    """A line that begins inside a triple-quoted string is text, not a comment (a new user's trial,
    2026-12-04: a triple-quoted string's line starting with ``#`` was dropped, changing the value)."""
    assert cells.strip_comments(code) == expected


@pytest.mark.parametrize("code", ['{"var": {"x": NaN}}', '[{"var": {"x": Infinity}}]', '{"var": {"x": -Infinity}}'])
def test_a_fragment_with_a_token_json_has_not_is_not_json(code: str) -> None:
    """Python's ``json`` reads ``NaN`` and ``Infinity``; JSON has neither, so such a cell is no fragment (a new
    user's trial, 2026-12-04: ``{"var": {"x": NaN}}`` set a local ``nan``); it is read as an expression, whose
    unknown name the JSON hint then explains."""
    cell = cells.classify(code, fake_fragment_kind)
    assert cell.kind != cells.FRAGMENT and cell.json_error is not None and "is not JSON" in cell.json_error
    with pytest.raises(S2OError) as err:
        cells.parse_json_argument(code, "The body")
    assert err.value.code == "syntax" and "is not JSON" in err.value.message


@pytest.mark.parametrize("code", ['"a\u2028b"', '{"log": "x\u2028# y"}', '{"log": "x\x85# y"}', '{"log": "x\x0c# y"}'])
def test_a_line_break_python_knows_but_json_has_not_is_kept_inside_a_cell(code: str) -> None:
    """Lines end at ``\\n`` only: ``str.splitlines`` also breaks at U+2028, U+0085 or a form feed, valid inside
    a JSON string, and dropped what followed as a comment line (red team of 2026-12-04, third round)."""
    assert cells.strip_comments(code) == code
    assert cells.classify(code, fake_fragment_kind).kind in (cells.DYNAMIC, cells.FRAGMENT)
    assert completion.is_complete(code)["status"] == "complete"


def test_a_string_continued_by_a_backslash_keeps_its_next_line() -> None:
    code = "'abc\\\n# def'"
    assert cells.strip_comments(code) == code
    assert cells.strip_comments("'abc'\n# def") == "'abc'"  # no backslash: the string ended with its line


@pytest.mark.parametrize("code", ["# note\n\n%%fragment\n[1,\n\n", "# note\n\n%%expr\n(1 +\n\n",
                                  "  \n# note\n  \n%%fragment\n[1,\n\n"])
def test_is_complete_of_a_cell_magic_after_a_comment_and_a_blank_line(code: str) -> None:
    """A comment line and a blank line before the magic: the body is checked as without them (red team of
    2026-12-04, fourth round: the blank line came first and the magic's name read as '')."""
    assert completion.is_complete(code)["status"] == completion.is_complete(code.replace("# note\n", ""))["status"]
    assert completion.is_complete(code)["status"] == "incomplete"


def test_strip_comments_keeps_a_backslash_continued_string_line_with_crlf() -> None:
    code = "'a\\\r\n# part of the string'\r\n"
    assert "# part of the string" in cells.strip_comments(code)


def test_strip_comments_keeps_code_lines_exactly() -> None:
    code = "  # a\nx +\n   # b\n  y  # trailing comment stays\n#c"
    assert cells.strip_comments(code) == "x +\n  y  # trailing comment stays"


def test_magic_parsing() -> None:
    line = cells.classify('# NBVAL_SKIP\n%rules {"max_for_clauses": 2,\n "x": 1}')
    assert (line.kind, line.magic) == (cells.LINE_MAGIC, "rules")
    assert json.loads(line.arg) == {"max_for_clauses": 2, "x": 1}
    cell = cells.classify("%%allowlist\n# keep me\nlen\nmath")
    assert (cell.kind, cell.magic, cell.arg) == (cells.CELL_MAGIC, "allowlist", "")
    assert cell.body == "len\nmath"
    assert cell.raw_body == "# keep me\nlen\nmath"


def test_help_cells() -> None:
    assert cells.classify("?math.sqrt").arg == "math.sqrt"
    assert cells.classify("len??").arg == "len"
    assert cells.classify("a ? b").kind == cells.EXPRESSION


def test_fragment_kind_failure_means_expression() -> None:
    def broken(obj: Any) -> str:
        raise RuntimeError("engine bug")

    assert cells.classify("[1]", broken).kind == cells.EXPRESSION


def test_json_hint_only_for_json_looking_text() -> None:
    assert cells.classify('{"var": {"x": 1}').json_error is not None
    assert cells.classify("{ x + }").json_error is None


def test_parse_json_argument_error_position() -> None:
    with pytest.raises(S2OError) as info:
        cells.parse_json_argument('{"a": 1,\n "b" 2}', "The argument")
    err = info.value
    assert err.code == "syntax"
    assert (err.line, err.col) == (2, 5)
    assert "not valid JSON" in err.message


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_classify_never_raises(code: str) -> None:
    cell = cells.classify(code, fake_fragment_kind)
    assert cell.kind in {cells.EMPTY, cells.LINE_MAGIC, cells.CELL_MAGIC, cells.HELP,
                         cells.DYNAMIC, cells.FRAGMENT, cells.EXPRESSION, cells.EXIT}  # fmt: skip


# -- render ----------------------------------------------------------------------


def test_error_info_coded_with_caret_and_path() -> None:
    err = S2OError("underscore", "names starting with '_' are not allowed",
                    line=2, col=4, path="var.total", source="1 +\n  x.__class__")  # fmt: skip
    info = render.error_info(err)
    assert info.ename == "underscore"
    assert info.evalue == "names starting with '_' are not allowed"
    assert info.traceback == [
        "underscore: names starting with '_' are not allowed",
        "  at var.total",
        "      x.__class__",
        "        ^",
    ]
    assert "\x1b" not in info.ename + info.evalue


def test_control_characters_are_escaped_in_what_a_terminal_prints() -> None:
    """Red team 3: a fail message, an output part or a log line ran its escape sequences in a console."""
    assert render.escape_controls("a\x1b[2J\x07\x9b\x00\x7f\tb\r\nc") == "a\\x1b[2J\\x07\\x9b\\x00\\x7f\tb\r\nc"
    assert render.escape_controls("plain") == "plain"
    info = render.error_info(S2OError("failCommand", "bye\x1b]0;owned\x07", source="x\x1b", line=1, col=0))
    assert "\x1b" not in info.evalue + "".join(info.traceback) and info.evalue == "bye\\x1b]0;owned\\x07"
    assert render.terminal_text("stream", {"name": "stdout", "text": "\x1bc"}) == {"name": "stdout", "text": "\\x1bc"}
    bundle = render.terminal_text("display_data", {"data": {"text/plain": "\x9b1m", "text/html": "<b>"}})
    assert bundle["data"] == {"text/plain": "\\x9b1m", "text/html": "<b>"}


def test_caret_keeps_tabs() -> None:
    assert render.caret_line("\tab", 2) == "\t ^"


def test_error_info_group_lists_every_error() -> None:
    group = ErrorGroup([
        S2OError("underscore", "first", line=1, col=0, source="_a", path="var.a"),
        S2OError("lambda", "second", line=1, col=3, source="f(lambda: 1)"),
    ])  # fmt: skip
    info = render.error_info(group)
    assert info.ename == "underscore"
    assert info.traceback[0] == "underscore: first (and 1 more)"
    text = "\n".join(info.traceback)
    assert "[1] underscore: first" in text
    assert "[2] lambda: second" in text
    assert "  at var.a" in text
    assert "    f(lambda: 1)\n       ^" in text


def test_error_info_interrupt_and_unexpected() -> None:
    info = render.error_info(KeyboardInterrupt())
    assert (info.ename, info.evalue) == ("stopped", INTERRUPTED)
    info = render.error_info(ZeroDivisionError("division by zero"))
    assert info.ename == "unexpected"
    assert info.evalue == "ZeroDivisionError: division by zero"
    assert not any('File "' in line for line in info.traceback)


def test_error_info_redacts() -> None:
    info = render.error_info(S2OError("runtime", f"bad {SECRET}"), lambda t: t.replace(SECRET, "***"))
    assert SECRET not in json.dumps(info.content())


def test_error_details_listed_one_a_line() -> None:
    err = S2OError("allowlist", "the allowlist did not load: nosuchmodule: Could not be imported.; "
                    "math.* as m: A star import cannot be renamed with 'as'.",
                    details={"lines": {"nosuchmodule": "Could not be imported.",
                                       "math.* as m": "A star import cannot be renamed with 'as'."}})  # fmt: skip
    assert render.error_info(err).traceback[1:] == [
        "  nosuchmodule: Could not be imported.",
        "  math.* as m: A star import cannot be renamed with 'as'.",
    ]
    two = S2OError("settings", "two problems", details={"problems": ["a is unknown", "b is unknown"]})
    assert render.error_info(two).traceback[1:] == ["  a is unknown", "  b is unknown"]


def test_value_bundle() -> None:
    # text/plain only by default (SPEC 9); application/json when the session asks for it
    assert render.value_bundle(3, as_json=fake_as_json) == {"text/plain": "3"}
    assert render.value_bundle(3, as_json=fake_as_json, with_json=True) == {"text/plain": "3", "application/json": 3}
    assert render.value_bundle("Hello {name}", as_json=fake_as_json, with_json=True) == {
        "text/plain": "'Hello {name}'",
        "application/json": "Hello {name}",
    }
    assert render.value_bundle(Opaque(), as_json=fake_as_json) == {"text/plain": "<Opaque>"}
    assert "repr failed" in render.value_bundle(BadRepr())["text/plain"]
    red = render.value_bundle({"k": SECRET}, as_json=fake_as_json, redact=lambda t: t.replace(SECRET, "***"))
    assert SECRET not in json.dumps(red)


def test_output_parts() -> None:
    assert render.output_part_bundle({"type": "text", "text": "hi"}) == {"text/plain": "hi"}
    assert render.output_part_bundle({"type": "html", "html": "<b>x</b>"}) == {"text/html": "<b>x</b>",
                                                                             "text/plain": "x"}
    png = b"\x89PNG\r\n"
    data = render.output_part_bundle({"type": "image", "data": png, "mime": "image/png"})
    assert base64.b64decode(data["image/png"]) == png
    assert "text/plain" in data
    already = render.output_part_bundle({"type": "image", "data": "aGk="})
    assert already["image/png"] == "aGk="


# -- runner ----------------------------------------------------------------------


def test_expression_result(runner: CellRunner) -> None:
    out = runner.run("1 + 2")
    assert out.ok
    assert results(out) == [{"text/plain": "3"}]


def test_none_shows_nothing(runner: CellRunner) -> None:
    out = runner.run("None")
    assert out.ok and out.outputs == []


def test_comment_lines_stripped_in_every_kind(runner: CellRunner, session: FakeSession) -> None:
    out = runner.run('# NBVAL_RAISES_EXCEPTION\n{"var": {"x": 1}}')
    assert out.ok and session.locals == {"x": 1}
    out = runner.run("# NBVAL_CHECK_OUTPUT\nx + 1")
    assert results(out)[0]["text/plain"] == "2"


def test_dynamic_string_cells(runner: CellRunner, session: FakeSession) -> None:
    assert results(runner.run('"Hello {name}"'))[0]["text/plain"] == "'Hello {name}'"
    session.locals["price"] = 4
    assert results(runner.run("{ price * 2 }"))[0]["text/plain"] == "8"
    assert ("dynamic", "{ price * 2 }") in session.evaluated
    assert results(runner.run('{"a": 1}')) == [{"text/plain": "{'a': 1}"}]


def test_fragment_outputs_logs_and_value(runner: CellRunner) -> None:
    out = runner.run(
        '[{"output": {"type": "text", "text": "one"}}, {"log": "trace"},'
        ' {"output": {"type": "html", "html": "<i>two</i>"}}, {"return": [1, 2]}]'
    )
    assert out.ok
    kinds = [t for t, _ in out.outputs]
    assert kinds == ["display_data", "display_data", "stream", "execute_result"]
    assert out.outputs[0][1]["data"] == {"text/plain": "one"}
    assert out.outputs[1][1]["data"] == {"text/html": "<i>two</i>", "text/plain": "two"}
    assert out.outputs[2][1] == {"name": "stderr", "text": "trace\n"}
    assert out.outputs[3][1]["data"] == {"text/plain": "[1, 2]"}


def test_fragment_parts_stream_while_running(session: FakeSession) -> None:
    r = CellRunner(session, API)
    sent: list[tuple[str, dict[str, Any]]] = []
    r.publisher = lambda msg_type, content: sent.append((msg_type, content))
    r.pending_warnings = ["w"]
    out = r.run('[{"output": {"type": "text", "text": "a"}}, {"output": {"type": "text", "text": "b"}},'
                ' {"stop": true}]')  # fmt: skip
    assert session.on_output_given
    # The pending warning and both parts went out in order while the run was going,
    # and the runner kept none of them (a cell's output never piles up in the kernel).
    assert [(t, c.get("text") or c["data"]["text/plain"]) for t, c in sent] == [
        ("stream", "warning: w\n"), ("display_data", "a"), ("display_data", "b")]  # fmt: skip
    assert out.published == 3 and out.outputs == []
    assert out.error.ename == "stopped"
    # Silent cells publish nothing.
    sent.clear()
    r.run('{"output": {"type": "text", "text": "c"}}', silent=True)
    assert sent == []


def test_parts_shown_after_run_without_streaming(session: FakeSession) -> None:
    def no_stream(obj: Any, *, on_output: Any = None, inputs: Any = None, function: Any = None,
                  on_print: Any = None) -> RunResult:
        return RunResult(outputs=[{"type": "text", "text": "late"}])  # parts not handed to on_output

    session.run_fragment = no_stream  # type: ignore[method-assign]
    out = CellRunner(session, API).run('{"output": "late"}')
    assert [c["data"] for t, c in out.outputs] == [{"text/plain": "late"}]


def test_fragment_error_after_outputs(runner: CellRunner) -> None:
    out = runner.run('[{"output": {"type": "text", "text": "before"}}, {"fail": "no stock"}]')
    assert not out.ok
    assert out.error.ename == "failCommand" and out.error.evalue == "no stock"
    assert out.error.traceback[:2] == ["failCommand: no stock", "  at fail"]
    assert [t for t, _ in out.outputs] == ["display_data"]


def test_error_triple(runner: CellRunner) -> None:
    out = runner.run("x.__class__")
    assert out.error.ename == "underscore"
    assert out.error.traceback[0] == "underscore: names starting with '_' are not allowed"
    assert out.error.traceback[1:] == ["    x.__class__", "      ^"]


def test_interrupt_keeps_session(runner: CellRunner, session: FakeSession) -> None:
    runner.run('{"var": {"keep": 41}}')
    session.interrupt_next = True
    out = runner.run("keep")
    assert (out.error.ename, out.error.evalue) == ("stopped", INTERRUPTED)
    assert results(runner.run("keep + 1"))[0]["text/plain"] == "42"
    out = runner.run('{"interrupt": 1}')
    assert out.error.ename == "stopped"


def test_unexpected_exception(runner: CellRunner) -> None:
    out = runner.run("crash")
    assert out.error.ename == "unexpected"
    assert out.error.evalue == "TypeError: internal bug"
    assert out.error.traceback == ["unexpected: TypeError: internal bug"]


def test_json_hint_on_syntax_error(runner: CellRunner) -> None:
    out = runner.run('{"var": {"x": 1}')
    assert out.error.ename == "syntax"
    assert any("as JSON it is not valid either" in line for line in out.error.traceback)


def test_fragment_with_json_mistake_is_flagged(runner: CellRunner, session: FakeSession) -> None:
    out = runner.run('{"var": {"x": 1},}')  # trailing comma: a Python dict, not JSON
    assert out.ok and "x" not in session.locals
    assert "not valid JSON" in streams(out, "stderr")
    assert streams(runner.run('{"a": 1}'), "stderr") == ""


def test_secret_values_redacted(runner: CellRunner) -> None:
    out = runner.run("secret")
    assert SECRET not in json.dumps(out.outputs)
    assert results(out)[0]["text/plain"] == "'***'"


def test_pending_error_reported_once(session: FakeSession) -> None:
    pending = S2OError("settings", "unknown key 'limts'", stage="load")
    r = CellRunner(session, API, pending_error=pending)
    silent = r.run("1", silent=True)
    assert silent.ok
    first = r.run("1 + 1")
    assert first.error.ename == "settings" and first.error.evalue == "unknown key 'limts'"
    assert results(r.run("1 + 1"))[0]["text/plain"] == "2"


def test_no_session_reports_startup_error() -> None:
    r = CellRunner(None, None, startup_error=ImportError("no engine"))
    out = r.run("1")
    assert out.error.ename == "unexpected"
    assert "ImportError: no engine" in out.error.evalue
    assert r.run("").ok


def test_user_expressions(runner: CellRunner) -> None:
    res = runner.evaluate_user_expressions({"a": "1 + 1", "b": "y.__dict__", "c": "opaque"})
    assert res["a"] == {"status": "ok", "data": {"text/plain": "2"}, "metadata": {}}
    assert res["b"]["status"] == "error" and res["b"]["ename"] == "underscore"
    assert res["c"]["data"] == {"text/plain": "<Opaque>"}


def test_help_cell_pages(runner: CellRunner) -> None:
    out = runner.run("len?")
    assert out.payload == [{"source": "page", "data": {"text/plain": "len(obj, /)\nReturn the number of items."},
                            "start": 0}]  # fmt: skip
    out = runner.run("nothing?")
    assert out.ok and "No help" in streams(out, "stdout")


# -- magics ----------------------------------------------------------------------


def test_limits_help_names_every_limit() -> None:
    from s2o_kernel.engine.settings import Limits
    from s2o_kernel.kernel.magics.limits_magic import MAGIC

    keys = MAGIC.doc.split("Keys:", 1)[1]
    assert [name for name in Limits.model_fields if name not in keys] == []


def test_allowlist_show_and_replace(runner: CellRunner, session: FakeSession) -> None:
    assert results(runner.run("%allowlist")) == [{"text/plain": "len\nmath"}]
    out = runner.run("%%allowlist\n# teaching list\nlen\ntime.sleep")
    assert out.ok
    assert session.patches[-1] == {"allowlist": "# teaching list\nlen\ntime.sleep"}
    assert streams(out, "stderr") == "warning: time.sleep blocks the event loop\n"
    assert runner.run("%allowlist extra").error.ename == "magic"
    patches = len(session.patches)
    for empty in ("%%allowlist", "%%allowlist\n", "%%allowlist\n  \n\n"):  # would take every entry away
        out = runner.run(empty)
        assert out.error.ename == "magic" and "comment line only" in out.error.evalue
    assert len(session.patches) == patches  # nothing changed
    assert runner.run("%%allowlist\n# nothing granted").ok and session.patches[-1] == {"allowlist": "# nothing granted"}
    # Other settings magics do not repeat the allowlist's warnings.
    out = runner.run('%limits {"time": 3}')
    assert out.ok and streams(out, "stderr") == ""


def test_settings_magics_show_and_merge(runner: CellRunner, session: FakeSession) -> None:
    shown = results(runner.run("%limits"))[0]
    assert list(shown) == ["text/plain"]
    assert json.loads(shown["text/plain"]) == {"time": 30.0, "loop_iterations": 10000}
    assert runner.run("%display json").ok
    shown = results(runner.run("%limits"))[0]
    assert shown["application/json"] == {"time": 30.0, "loop_iterations": 10000}
    assert json.loads(shown["text/plain"]) == shown["application/json"]
    assert runner.run('%limits {"time": 5}').ok
    assert session.patches[-1] == {"limits": {"time": 5}}
    assert runner.run('%%rules\n{"max_for_clauses": 2}').ok
    assert session.patches[-1] == {"rules": {"max_for_clauses": 2}}
    assert runner.run('%rules {"operators": {"<<": "off"}}').ok


def test_settings_magic_errors(runner: CellRunner) -> None:
    bad = runner.run('%limits {"time": }')
    assert bad.error.ename == "syntax"
    assert "not valid JSON" in bad.error.evalue
    assert runner.run("%limits [1]").error.ename == "magic"
    refused = runner.run('%limits {"nope": 1}')
    assert (refused.error.ename, refused.error.evalue) == ("settings", "unknown key limits.nope")


def test_sys_magic_splits_const(runner: CellRunner, session: FakeSession) -> None:
    assert runner.run('%sys {"inputs": {"query": "hi"}, "const": {"rate": 2}}').ok
    assert session.patches[-1] == {"const": {"rate": 2}, "sys": {"inputs": {"query": "hi"}}}
    assert runner.run('%sys {"const": {"rate": 3}}').ok
    assert session.patches[-1] == {"const": {"rate": 3}}
    shown = results(runner.run("%sys"))[0]
    assert list(shown) == ["text/plain"]
    assert json.loads(shown["text/plain"]) == {"inputs": {"query": "hi"}, "const": {"rate": 3}}


def test_vars_and_reset(runner: CellRunner, session: FakeSession) -> None:
    session.locals.update(x=1, o=Opaque())
    session.agent_vars["visits"] = 2
    session.conv_vars["note"] = "<b>" + "x" * 120 + SECRET
    out = results(runner.run("%vars"))[0]
    assert out["text/plain"] == (
        "scope   name    value\n"
        "locals  x       1\n"
        "locals  o       <Opaque>\n"
        "agent   visits  2\n"
        "conv    note    '<b>" + "x" * 95 + "…"
    )
    assert out["text/html"].count("<tr>") == 5 and "<th>scope</th><th>name</th><th>value</th>" in out["text/html"]
    assert "<td>&#x27;&lt;b&gt;xxx" in out["text/html"]  # escaped
    assert "application/json" not in out
    runner.run("%display json")
    assert "application/json" not in results(runner.run("%vars"))[0]  # a local is not JSON
    session.locals.pop("o")
    session.conv_vars.clear()
    assert results(runner.run("%vars"))[0]["application/json"] == {
        "locals": {"x": 1}, "agent": {"visits": 2}, "conv": {}}  # fmt: skip
    assert runner.run("%reset").ok
    assert session.locals == {} and session.agent_vars == {}
    assert results(runner.run("%vars")) == [{"text/plain": "(no variables)"}]
    assert runner.run("%vars now").error.ename == "magic"


def test_validate_magic(runner: CellRunner) -> None:
    assert list(results(runner.run("%validate len(x)"))[0]) == ["text/plain"]
    runner.run("%display json")
    ok = results(runner.run("%validate len(x) + secret"))[0]
    assert ok["application/json"] == {"ok": True, "allowlist_names": ["len"], "local_names": ["x"],
                                      "secrets": ["KEY"]}  # fmt: skip
    assert "allowlist names: len" in ok["text/plain"]
    bad = runner.run("%validate f(lambda: y.__x)")
    assert bad.error.ename == "underscore"
    joined = "\n".join(bad.error.traceback)
    assert "[1] underscore" in joined and "[2] lambda" in joined
    assert runner.run("%validate").error.ename == "magic"


def test_expr_and_fragment_magics(runner: CellRunner, session: FakeSession) -> None:
    assert results(runner.run('%%expr\n{"a": 1}'))[0]["text/plain"] == "{'a': 1}"
    assert ("dynamic", '{"a": 1}') not in session.evaluated
    assert runner.run('%%fragment\n{"var": {"y": 5}}').ok and session.locals["y"] == 5
    bad = runner.run('%%fragment\n{"var": {"y": 5},\n  oops}')
    assert bad.error.ename == "syntax"
    assert "line 2" in bad.error.evalue
    assert runner.run("%%fragment\n[1, 2]").error.ename == "fragment"


@pytest.mark.parametrize(("cell", "named"), [("%expr", "%expr needs"), ("%%expr", "%expr needs"),
                                             ("%fragment", "%fragment needs"), ("%fragment 5", "%fragment argument"),
                                             ("%%fragment\n5", "%%fragment body")])
def test_an_empty_or_wrong_expr_or_fragment_magic_names_the_magic_as_typed(runner: CellRunner, cell: str,
                                                                          named: str) -> None:
    """A line magic's error names the line magic (it said ``%%expr needs … in the cell body``; a new
    user's trial, 2026-12-04)."""
    bad = runner.run(cell)
    assert bad.error.ename in ("magic", "fragment") and named in bad.error.evalue
    assert "%%expr needs" not in bad.error.evalue
    assert ("%%fragment body" in bad.error.evalue) == cell.startswith("%%fragment")


def test_an_unknown_command_word_prints_the_usage_and_starts_no_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    from s2o_kernel.__main__ import main

    assert main(["bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'bogus'" in err and "usage: python -m s2o_kernel install" in err


def test_profile_lines_leave_out_fields_not_given() -> None:
    from s2o_kernel.kernel.magics.profiles_magic import profile_lines

    profiles = {"llm": {"orders": {"adapter": "scripted", "key": None, "headers": {}, "script": [
        {"text": None, "call": "get_order", "args": {"order_id": 7}, "input_tokens": None},
        {"text": "Shipped.", "call": None, "args": {}, "input_tokens": 3}]}}}
    assert profile_lines(profiles) == [
        "profiles.llm.orders",
        '  adapter = "scripted"',
        '  script = [{"call": "get_order", "args": {"order_id": 7}}, {"text": "Shipped.", "args": {}, "input_tokens": 3}]',
    ]
    assert profile_lines({}) == ["(no profiles)"]


def test_lsmagic_help_and_unknown(runner: CellRunner) -> None:
    text = results(runner.run("%lsmagic"))[0]["text/plain"]
    for name in ("allowlist", "rules", "limits", "sys", "vars", "reset", "validate", "lsmagic", "help"):
        assert f"%{name}" in text
    assert "%%fragment" in text and "%%expr" in text
    assert "%%allowlist" in results(runner.run("%help allowlist"))[0]["text/plain"]
    assert "Each cell is one of" in results(runner.run("%help"))[0]["text/plain"]
    unknown = runner.run("%nosuch 1")
    assert unknown.error.ename == "magic" and "%lsmagic" in unknown.error.evalue
    assert runner.run("%%vars\nx").error.ename == "magic"
    assert runner.run("%help nosuch").error.ename == "magic"
    assert runner.run("%").error.ename == "magic"


def test_magic_registry_names() -> None:
    assert "allowlist" in magics.line_magic_names() and "allowlist" in magics.cell_magic_names()
    assert "vars" not in magics.cell_magic_names()


def test_magic_help_is_its_module_docstring() -> None:
    import importlib
    import inspect

    names = set(magics.line_magic_names()) | set(magics.cell_magic_names())
    assert len(names) == 25  # %dataflow (issue 10) the sixteenth; %profiles (issue 9); %display, %time and %history
    # (issue 11); %timeit, %who and %%parameters (issue 31); %replay (issue 32)
    for name in names:
        module = importlib.import_module(f"s2o_kernel.kernel.magics.{name}_magic")
        magic = magics.REGISTRY.get(name)
        assert module.MAGIC is magic
        summary, _, usage = inspect.cleandoc(module.__doc__).partition("\n")
        text = magic.help_text()
        assert text.startswith((f"%{name}", f"%%{name}")) and f": {summary}\n\n" in text  # a cell-only magic: %%
        assert text.endswith(usage.strip()), name


def test_magic_argument_parser_never_exits() -> None:
    from s2o_kernel.kernel.magics.arguments import MagicArgumentParser

    parser = MagicArgumentParser("demo")
    parser.add_argument("file", metavar="FILE")
    for text in ("-h", "--help", "", "a b"):
        with pytest.raises(S2OError) as info:
            parser.parse_words(text)
        assert info.value.code == "magic" and info.value.message.endswith("usage: %demo FILE"), text
    with pytest.raises(S2OError):
        parser.exit(2, "bye")
    assert parser.parse_words("'a b'").file == "a b"


def test_split_words_reads_json_values_whole() -> None:
    from s2o_kernel.kernel.magics.arguments import split_words

    text = """a "b c" {"x": [1, 2]} --o={"y": "z  w"} '{"q": 1}' [1,\n 2] d\\ e"""
    assert split_words(text) == ["a", "b c", '{"x": [1, 2]}', '--o={"y": "z  w"}', '{"q": 1}', "[1,\n 2]", "d e"]
    assert split_words("x {oops} tail") == ["x", "{oops} tail"]  # the option's type reports where it is wrong
    assert split_words("  ") == []
    with pytest.raises(ValueError):
        split_words("'open")


# -- completion ------------------------------------------------------------------


def _types_aligned(reply: dict[str, Any]) -> None:
    types = reply["metadata"]["_jupyter_types_experimental"]
    assert [t["text"] for t in types] == reply["matches"]
    for t in types:
        assert (t["start"], t["end"]) == (reply["cursor_start"], reply["cursor_end"])


def test_complete_names(session: FakeSession) -> None:
    reply = completion.complete("1 + pri", None, session)
    assert reply["matches"] == ["price", "priority"]
    assert (reply["cursor_start"], reply["cursor_end"]) == (4, 7)
    assert reply["metadata"]["_jupyter_types_experimental"][0]["type"] == "variable"
    _types_aligned(reply)


def test_complete_members(session: FakeSession) -> None:
    reply = completion.complete("math.s", 6, session)
    assert reply["matches"] == ["math.sqrt"]
    assert reply["cursor_start"] == 0
    reply = completion.complete("agent.", 6, session)
    assert reply["matches"] == ["agent.name", "agent.visits"]
    assert completion.complete("nothing.x", 9, session)["matches"] == []
    assert completion.complete("f().x", 5, session)["matches"] == []
    _types_aligned(reply)


def test_complete_magics(session: FakeSession) -> None:
    reply = completion.complete("%li", 3, session, line_magics=["limits", "lsmagic"], cell_magics=["limits"])
    assert reply["matches"] == ["%limits"] and reply["cursor_start"] == 0
    reply = completion.complete("# c\n%%", 6, session, line_magics=["vars"], cell_magics=["expr"])
    assert reply["matches"] == ["%%expr"] and reply["cursor_start"] == 4
    _types_aligned(reply)
    # %help explains magics: it is offered their names, not the session's (a new user's trial, 2026-12-04)
    for code, matches in (("%help ", ["allowlist", "limits", "lsmagic", "vars"]), ("%help l", ["limits", "lsmagic"]),
                          ("%help %%al", ["allowlist"]), ("%help x", [])):
        reply = completion.complete(code, len(code), session, line_magics=["limits", "lsmagic", "vars"],
                                    cell_magics=["allowlist", "limits"])
        assert reply["matches"] == matches and reply["cursor_end"] == len(code), (code, reply)


def test_complete_unicode_offsets_and_clamp(session: FakeSession) -> None:
    code = "'é' + pr"
    reply = completion.complete(code, len(code), session)
    assert reply["cursor_start"] == 6 and reply["cursor_end"] == 8
    reply = completion.complete("pri", 10**6, session)
    assert reply["cursor_end"] == 3 and reply["matches"] == ["price", "priority"]
    assert completion.complete("pri", -5, session)["cursor_end"] == 0


def test_complete_json_keywords(session: FakeSession) -> None:
    code = '{"va'
    assert "var" in completion.complete(code, len(code), session)["matches"]


def test_complete_never_fails() -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("boom")

    reply = completion.complete("le", 2, Broken())
    assert reply["status"] == "ok" and reply["matches"] == []
    assert reply["metadata"] == {"_jupyter_types_experimental": []}


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(min_value=-5, max_value=200))
def test_complete_any_input(code: str, pos: int) -> None:
    reply = completion.complete(code, pos, FakeSession(), line_magics=["vars"], cell_magics=["expr"])
    assert reply["status"] == "ok"
    assert 0 <= reply["cursor_start"] <= reply["cursor_end"] <= len(code)
    _types_aligned(reply)


def test_inspect(session: FakeSession) -> None:
    found = completion.inspect("1 + len(x)", 6, session)
    assert found["found"] and found["data"]["text/plain"].startswith("len(obj")
    assert completion.inspect("len(", 4, session)["found"]
    assert completion.inspect("math.sqrt(2)", 3, session)["data"]["text/plain"] == "sqrt(x)"
    assert completion.inspect("zzz", 1, session) == {"status": "ok", "found": False, "data": {},
                                                     "metadata": {}}  # fmt: skip
    assert completion.inspect("", 0, session)["found"] is False


# -- is_complete ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("", "complete"),
        ("# only comment", "complete"),
        ("1 + 2", "complete"),
        ("len(x", "incomplete"),
        ("1 +", "invalid"),
        ("x = 1", "invalid"),
        ("await fetch(1)", "complete"),
        ('{"var": {"x": 1}}', "complete"),
        ('{"var": {"x": 1}', "incomplete"),
        ('[{"var": {"x": "abc', "invalid"),  # a JSON string cannot go on over a line break
        ('"Hello {name}', "invalid"),
        ('{"var": {"x": "abc",', "incomplete"),
        ('"""a long\nPython string', "incomplete"),
        ('{"var" {"x": 1}}', "invalid"),
        ('# NBVAL_SKIP\n{"var":\n', "incomplete"),
        ("{ price * 2 }", "complete"),
        ("{'a': 1}", "complete"),
        ('"Hello {name}"', "complete"),
        ("%vars", "complete"),
        ('%limits {"time":', "incomplete"),
        ("%%allowlist", "incomplete"),
        # a cell magic's body ends with a blank line, as in IPython (a console sends the cell when Enter is
        # pressed on one): a new user's trial, 2026-12-04, saw %%allowlist run after its first entry
        ("%%allowlist\n", "incomplete"),
        ("%%allowlist\nlen", "incomplete"),
        ("%%allowlist\nlen\nmath", "incomplete"),
        ("%%allowlist\nlen\nmath\n", "complete"),
        ("%%allowlist\n\n", "complete"),  # two blank lines: not waiting for ever (the magic refuses it)
        ("%%fragment\n[", "incomplete"),
        ("%%fragment\n[\n", "incomplete"),
        ("%%fragment\n[]", "incomplete"),
        ("%%fragment\n[]\n", "complete"),
        ("%%expr\n(1 +\n", "incomplete"),
    ],
)
def test_is_complete(code: str, status: str) -> None:
    assert completion.is_complete(code)["status"] == status


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_is_complete_any_input(code: str) -> None:
    assert completion.is_complete(code)["status"] in {"complete", "incomplete", "invalid", "unknown"}


# -- install ---------------------------------------------------------------------


def test_kernel_dict_absolute_interpreter() -> None:
    spec = install.kernel_dict()
    assert os.path.isabs(spec["argv"][0])
    assert spec["argv"][1:] == ["-m", "s2o_kernel", "-f", "{connection_file}"]
    assert spec["language"] == "s2o" and spec["interrupt_mode"] == "signal"
    assert spec["metadata"] == {}


def test_shipped_kernelspec() -> None:
    res = install.resource_dir()
    spec = json.loads((res / "kernel.json").read_text())
    assert spec == {
        "argv": ["python", "-m", "s2o_kernel", "-f", "{connection_file}"],
        "display_name": "Search2o expressions",
        "language": "s2o",
        "interrupt_mode": "signal",
        "metadata": {},
    }
    assert (res / "logo-32x32.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (res / "logo-64x64.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (res / "logo-svg.svg").read_bytes()


def test_valid_names() -> None:
    assert install.valid_name("s2o") and install.valid_name("s2o-dev_1.2")
    assert not install.valid_name("S2O bad") and not install.valid_name("") and not install.valid_name("a/b")


def test_install_into_prefix(tmp_path: Path) -> None:
    dest = install.install(prefix=str(tmp_path), kernel_name="s2o-unit", env={"S2O_CONFIG": "/x.toml"})
    dest_path = Path(dest)
    assert dest_path == tmp_path / "share" / "jupyter" / "kernels" / "s2o-unit"
    spec = json.loads((dest_path / "kernel.json").read_text())
    assert spec["argv"][0] == os.path.abspath(sys.executable)
    assert spec["display_name"] == "s2o-unit"
    assert spec["env"] == {"S2O_CONFIG": "/x.toml"}
    assert {p.name for p in dest_path.iterdir()} == {"kernel.json", "logo-32x32.png", "logo-64x64.png",
                                                    "logo-svg.svg"}  # fmt: skip
    with pytest.raises(ValueError):
        install.install(prefix=str(tmp_path), kernel_name="bad name")


def test_install_cli_rejects_bad_name(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "s2o_kernel", "install", "--prefix", str(tmp_path), "--name", "no way"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "invalid --name" in proc.stderr
    assert not (tmp_path / "share").exists()


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_main_help_is_the_kernels_own(flag: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "s2o_kernel", flag], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m s2o_kernel install")
    assert "jupyter console --kernel s2o" in proc.stdout
    assert "IPython" not in proc.stdout + proc.stderr


def test_pure_modules_do_not_import_jupyter() -> None:
    code = (
        "import sys\n"
        "import s2o_kernel, s2o_kernel.kernel.runner, s2o_kernel.kernel.completion\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('ipykernel', 'jupyter_client', 'zmq', 'IPython')]\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


# -- startup ---------------------------------------------------------------------


def test_startup_warnings_shown_once(session: FakeSession) -> None:
    r = CellRunner(session, API, startup_warnings=["time.sleep blocks the event loop"])
    assert streams(r.run("1", silent=True), "stderr") == ""  # kept for the first visible cell
    first = r.run("1 + 1")
    assert streams(first, "stderr") == "warning: time.sleep blocks the event loop\n"
    assert results(first)[0]["text/plain"] == "2"
    assert streams(r.run("1 + 1"), "stderr") == ""


def test_isolation_flag() -> None:
    from s2o_kernel.kernel.startup import isolation_requested

    # Containment is the default; only an explicit "off" value turns it off.
    assert isolation_requested({})
    assert isolation_requested({"S2O_KERNEL_ISOLATED": ""})
    assert isolation_requested({"S2O_KERNEL_ISOLATED": "1"})
    assert isolation_requested({"S2O_KERNEL_ISOLATED": "True"})
    for off in ("0", "false", "No", " off "):
        assert not isolation_requested({"S2O_KERNEL_ISOLATED": off})


def test_start_session_with_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from s2o_kernel.kernel.startup import start_session

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("S2O_KERNEL_ISOLATED", "0")  # in-process; contained: test_kernel_contained
    monkeypatch.delenv("S2O_CONFIG", raising=False)
    ok = start_session()
    assert ok.session is not None and ok.pending_error is None and ok.startup_error is None
    assert ok.session.evaluate("1 + 2") == 3

    (tmp_path / "s2o.toml").write_text('allowlist = "len\\ntime.sleep"\n')
    warned = start_session()
    assert warned.pending_error is None
    assert any("time.sleep" in w for w in warned.warnings)

    bad = tmp_path / "bad.toml"
    bad.write_text("[limits]\nnope = 1\n")
    monkeypatch.setenv("S2O_CONFIG", str(bad))
    broken = start_session()
    assert broken.session is not None  # runs with the embedded default
    assert broken.pending_error is not None and broken.pending_error.code == "settings"
    assert "embedded default" in broken.pending_error.message
    assert broken.session.evaluate("len([1, 2])") == 2


@pytest.mark.parametrize(("root", "argv", "user", "prefix"), [
    (False, [], True, None),
    (True, [], False, sys.prefix),
    (False, ["--sys-prefix"], False, sys.prefix),
    (True, ["--user"], True, None),
    (False, ["--prefix", "/opt/x"], False, "/opt/x"),
])  # fmt: skip
def test_install_cli_default_location(monkeypatch: pytest.MonkeyPatch, root: bool, argv: list[str],
                                      user: bool, prefix: str | None) -> None:  # fmt: skip
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(install, "_is_root", lambda: root)
    monkeypatch.setattr(install, "install", lambda **kw: calls.append(kw) or "/dest")
    assert install.main([*argv, "--name", "S2O-Dev", "--display-name", "Dev"]) == 0
    assert calls == [{"user": user, "prefix": prefix, "kernel_name": "s2o-dev", "display_name": "Dev",
                      "env": None}]  # fmt: skip


# -- interrupts and run results ------------------------------------------------------


def test_stopped_has_one_evalue_however_it_lands() -> None:
    assert INTERRUPTED == "the run was interrupted; the session keeps its variables"
    engine = render.error_info(S2OError("stopped", INTERRUPTED))
    assert (engine.ename, engine.evalue, engine.traceback) == ("stopped", INTERRUPTED,
                                                              [f"stopped: {INTERRUPTED}"])  # fmt: skip
    restarted = "the run was interrupted; the worker was restarted with the agent and conversation variables"
    worker = render.error_info(S2OError("stopped", restarted, path="var.x"))
    assert (worker.ename, worker.evalue) == ("stopped", INTERRUPTED)
    assert worker.traceback == [f"stopped: {INTERRUPTED}", f"  ({restarted})", "  at var.x"]
    assert render.error_info(KeyboardInterrupt("Interrupted by user")).evalue == INTERRUPTED


@pytest.mark.parametrize(("code", "error", "ename"), [
    ("failCommand", S2OError("failCommand", "no stock", path="fail"), "failCommand"),
    ("timedOut", S2OError("timedOut", "too long"), "timedOut"),
    ("stopped", S2OError("stopped", "worker restarted"), "stopped"),
    ("errorInAgent", S2OError("runtime", "ZeroDivisionError: division by zero", path="var.x"), "runtime"),
    ("errorInAgent", S2OError("not-json", "agent.x must be JSON"), "not-json"),
    ("errorInAgent", S2OError("loop-limit", "more than 10 iterations"), "loop-limit"),
    ("errorInAgent", None, "errorInAgent"),
    ("ask", None, "ask"),
    ("callFailed", S2OError("api-status", "the API answered 401"), "api-status"),
    ("callFailed", S2OError("llm-failed", "no reply"), "llm-failed"),
    ("timedOut", S2OError("memory-limit", "killed"), "timedOut"),
])  # fmt: skip
def test_run_error_names(code: str, error: Any, ename: str) -> None:
    from s2o_kernel.kernel.runner import run_error

    err = run_error(RunResult(code=code, error=error))
    info = render.error_info(err)
    assert info.ename == ename
    if error is not None:
        assert info.evalue == (INTERRUPTED if ename == "stopped" else error.message)
        if error.path:
            assert f"  at {error.path}" in info.traceback
    if error is not None and ename not in (error.code, "stopped"):
        assert f"(error code: {error.code})" in info.traceback
    if code == "callFailed":  # named by its own code, as onError's exc.code; the run's code noted
        assert "(the run's result code: callFailed)" in info.traceback


def test_run_error_keeps_groups() -> None:
    from s2o_kernel.kernel.runner import run_error

    group = ErrorGroup([S2OError("underscore", "first", path="var.a"), S2OError("lambda", "second")])
    assert run_error(RunResult(code="errorInAgent", error=group)) is group


# -- %run -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("agent.json", ("agent.json", None, None)),
    ('agent.json --inputs {"q": "a b", "n": [1, 2]}', ("agent.json", {"q": "a b", "n": [1, 2]}, None)),
    ('"my agent.json" --function greet --inputs={"x": 1}', ("my agent.json", {"x": 1}, "greet")),
    ('a.json --inputs {\n  "q": 1\n}\n--function=main', ("a.json", {"q": 1}, "main")),
])  # fmt: skip
def test_run_arguments(text: str, expected: tuple[Any, ...]) -> None:
    assert magics.parse_run_arguments(text) == expected


@pytest.mark.parametrize(("text", "code", "fragment"), [
    # argparse's wording where argparse finds the problem (issue 7: %run parses with shlex + argparse)
    ("", "magic", "arguments are required: FILE"),
    ("--inputs {}", "magic", "arguments are required: FILE"),
    ("a.json --inputs", "magic", "--inputs: expected one argument"),
    ("a.json --inputs --function f", "magic", "--inputs: expected one argument"),
    ("a.json --inputs [1]", "magic", "JSON object"),
    ("a.json --inputs {} --inputs {}", "magic", "twice"),
    ("a.json --verbose", "magic", "unexpected argument"),
    ("a.json --function 1x", "magic", "not a function name"),
    ('"a.json', "magic", "no closing quotation"),
])  # fmt: skip
def test_run_argument_errors(text: str, code: str, fragment: str) -> None:
    with pytest.raises(S2OError) as info:
        magics.parse_run_arguments(text)
    assert info.value.code == code and fragment in info.value.message


def test_run_bad_inputs_json_has_position() -> None:
    with pytest.raises(S2OError) as info:
        magics.parse_run_arguments('a.json --inputs {"q":\n  oops}')
    err = info.value
    assert (err.code, err.line, err.col) == ("syntax", 2, 2)
    assert "--inputs" in err.message and "line 2, column 3" in err.message


AGENT = {"functions": {
    "main": {"commands": [{"output": {"type": "text", "text": "hi"}}, {"log": "step"}, {"return": 42}]},
    "greet": {"commands": [{"return": "hello"}]},
}}  # fmt: skip


def test_run_magic(runner: CellRunner, session: FakeSession, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.json").write_text(json.dumps(AGENT))
    out = runner.run('%run agent.json --inputs {"q": "hi"}')
    assert out.ok, out.error
    assert [t for t, _ in out.outputs] == ["display_data", "stream", "execute_result"]
    assert out.outputs[1][1] == {"name": "stderr", "text": "step\n"}
    assert results(out) == [{"text/plain": "42"}]
    assert session.run_args == {"fragment": AGENT, "inputs": {"q": "hi"}, "function": None}
    out = runner.run("%run agent.json --function greet")
    assert results(out) == [{"text/plain": "'hello'"}]
    assert session.run_args["function"] == "greet" and session.run_args["inputs"] is None
    # The cell form: the JSON inputs below the first line.
    assert runner.run('%%run agent.json --inputs\n{"q": 1}').ok
    assert session.run_args["inputs"] == {"q": 1}


def test_run_magic_results_and_errors(runner: CellRunner, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fails.json").write_text('[{"output": {"type": "text", "text": "x"}}, {"fail": "nope"}]')
    out = runner.run("%run fails.json")
    assert (out.error.ename, out.error.evalue) == ("failCommand", "nope")
    assert [t for t, _ in out.outputs] == ["display_data"]
    missing = runner.run("%run missing.json")
    assert missing.error.ename == "magic" and "cannot read missing.json" in missing.error.evalue
    assert str(tmp_path) in missing.error.evalue
    assert runner.run(f"%run {tmp_path}").error.ename == "magic"  # a directory
    (tmp_path / "bad.json").write_text('{"var": {"x": 1},\n  oops}')
    bad = runner.run("%run bad.json")
    assert bad.error.ename == "syntax" and "bad.json is not valid JSON" in bad.error.evalue
    assert "line 2, column 3" in bad.error.evalue
    # the position, never the file's text: a file that is not JSON may be any file (issue 8)
    assert bad.error.traceback[1:] == []
    (tmp_path / "list.json").write_text("[1, 2]")
    assert runner.run("%run list.json").error.ename == "fragment"
    (tmp_path / "cmd.json").write_text('{"var": {"x": 1}}')
    assert runner.run("%run cmd.json --function main").error.ename == "magic"
    (tmp_path / "latin.json").write_bytes(b'"caf\xe9"')
    assert "not UTF-8" in runner.run("%run latin.json").error.evalue


# -- %secret ----------------------------------------------------------------------


def test_secret_magic_prompts_and_never_echoes(runner: CellRunner, session: FakeSession) -> None:
    prompts: list[str] = []
    runner.getpass = lambda prompt: prompts.append(prompt) or "tok-123"
    out = runner.run("%secret API_TOKEN")
    assert out.ok, out.error
    assert prompts == ["Value of the secret API_TOKEN: "]
    assert session.patches[-1] == {"secrets": {"API_TOKEN": "tok-123"}}
    assert "tok-123" not in json.dumps(out.outputs)
    assert "sys.secret['API_TOKEN']" in streams(out, "stdout")


def test_secret_magic_errors(runner: CellRunner, session: FakeSession) -> None:
    out = runner.run("%secret API_TOKEN")  # no prompt: allow_stdin is false
    assert out.error.ename == "magic"
    assert "S2O_SECRET_API_TOKEN" in out.error.evalue and "s2o.toml" in out.error.evalue
    assert runner.run("%secret").error.ename == "magic"
    assert runner.run("%secret two names").error.ename == "magic"
    assert runner.run("%secret bad-name").error.ename == "magic"
    runner.getpass = lambda prompt: ""
    assert "empty" in runner.run("%secret K").error.evalue

    def eof(prompt: str) -> str:
        raise EOFError

    runner.getpass = eof
    assert "no value" in runner.run("%secret K").error.evalue

    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt("Interrupted by user")

    runner.getpass = interrupted
    assert runner.run("%secret K").error.ename == "stopped"
    assert session.patches == []


# -- %config ----------------------------------------------------------------------


def test_config_magic(runner: CellRunner, session: FakeSession, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "more.toml").write_text('allowlist = "len\\ntime.sleep"\n[limits]\ntime = 5\n')
    out = runner.run("%config more.toml")
    assert out.ok, out.error
    assert session.patches[-1] == {"allowlist": "len\ntime.sleep", "limits": {"time": 5}}
    assert streams(out, "stderr") == "warning: time.sleep blocks the event loop\n"
    (tmp_path / "empty.toml").write_text("")
    assert runner.run("%config empty.toml").ok and len(session.patches) == 1
    missing = runner.run("%config nope.toml")
    assert missing.error.ename == "settings" and "nope.toml" in missing.error.evalue
    (tmp_path / "bad.toml").write_text("[limits\n")
    assert runner.run("%config bad.toml").error.ename == "settings"
    (tmp_path / "refused.toml").write_text("[limits]\nnope = 1\n")
    assert runner.run("%config refused.toml").error.ename == "settings"
    assert runner.run("%config").error.ename == "magic"
    assert runner.run("%config a.toml b.toml").error.ename == "magic"


# -- %state -----------------------------------------------------------------------


def test_state_magic_save_and_load(runner: CellRunner, session: FakeSession, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    session.agent_vars.update(visits=3, name="Ann")
    session.conv_vars["turns"] = [1, 2]
    out = runner.run("%state save state.json")
    assert out.ok, out.error
    assert json.loads((tmp_path / "state.json").read_text()) == {
        "agent": {"visits": 3, "name": "Ann"}, "conv": {"turns": [1, 2]}}  # fmt: skip
    assert streams(out, "stdout") == "Saved 2 agent and 1 conversation variables to state.json.\n"
    session.reset()
    out = runner.run("%state load state.json")
    assert out.ok, out.error
    assert session.agent_vars == {"visits": 3, "name": "Ann"} and session.conv_vars == {"turns": [1, 2]}


def test_state_magic_errors(runner: CellRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for cell in ("%state", "%state save", "%state keep x.json", "%state load a b"):
        assert runner.run(cell).error.ename == "magic", cell
    assert runner.run("%state load missing.json").error.ename == "magic"
    (tmp_path / "bad.json").write_text('{"agent": ')
    assert runner.run("%state load bad.json").error.ename == "syntax"
    for text in ('[1]', '{"locals": {}}', '{"agent": [1]}'):
        (tmp_path / "shape.json").write_text(text)
        assert runner.run("%state load shape.json").error.ename == "magic", text
    assert runner.run(f"%state save {tmp_path}/no/such/dir/s.json").error.ename == "magic"
    (tmp_path / "empty.json").write_text('{"agent": {}, "conv": {}}')
    assert "Loaded 0 agent" in streams(runner.run("%state load empty.json"), "stdout")


def test_lsmagic_lists_every_spec_magic(runner: CellRunner) -> None:
    text = results(runner.run("%lsmagic"))[0]["text/plain"]
    for name in ("allowlist", "rules", "limits", "sys", "secret", "vars", "validate", "reset",
                 "config", "state", "run", "lsmagic", "help", "time", "history"):  # fmt: skip
        assert f"  %{name} " in text, name
        assert results(runner.run(f"%help {name}"))[0]["text/plain"].startswith(f"%{name}")
    assert "%%run" in text


def test_run_inputs_may_be_quoted_as_in_a_shell():
    from s2o_kernel.kernel.magics import parse_run_arguments

    assert parse_run_arguments("""a.json --inputs '{"name": "Ada"}' --function main""") == (
        "a.json", {"name": "Ada"}, "main")
    assert parse_run_arguments("""a.json --inputs {"name": "Ada"}""") == ("a.json", {"name": "Ada"}, None)


def test_json_too_deep_to_read_says_so() -> None:
    """JSON past Python's stack was read as an expression whose error spoke only of parentheses (a new
    user's trial, 2026-12-04): the note says the JSON nests too deeply."""
    import s2o_kernel.engine as api
    from s2o_kernel.engine import Engine, Session, default_settings

    outcome = CellRunner(Session(Engine(default_settings())), api).run(
        '{"var": {"d": ' + "[" * 1500 + "]" * 1500 + "}}")
    assert outcome.error.ename == "too-deep"
    assert "as JSON it is not valid either: it nests too deeply to read" in "\n".join(outcome.error.traceback)


def test_a_key_twice_in_a_fragment_object_is_noted() -> None:
    """JSON keeps the last of two equal keys, silently (a new user's trial, 2026-12-04): the kernel says so."""
    import s2o_kernel.engine as api
    from s2o_kernel.engine import Engine, Session, default_settings

    runner = CellRunner(Session(Engine(default_settings())), api)
    outcome = runner.run('{"var": {"x": 1, "x": 2, "y": 3}}')
    assert outcome.ok and "note: 'x' appears more than once in one object of this fragment" in streams(outcome, "stderr")
    assert results(runner.run("x")) == [{"text/plain": "2"}]
    assert streams(runner.run('{"var": {"z": 1}}'), "stderr") == ""
