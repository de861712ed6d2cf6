"""How results look (SPEC 9): the pretty-printed ``text/plain``, the rows table, ``%display``.

The pretty printer is held to IPython's own (``IPython.lib.pretty``, installed with ipykernel) as an
independent oracle: for any value built of JSON-like parts, tuples and sets, the kernel's text of
``repr(value)`` must equal what IPython prints for the value itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_session import API, SECRET, FakeSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.lib.pretty import pretty as ipython_pretty

from s2o_kernel.engine import S2OError, shown_text
from s2o_kernel.kernel import render
from s2o_kernel.kernel.pretty import (
    PRETTY_MAX_CHARS,
    ROW_CAP,
    pretty_text,
    rows_table,
    rows_text,
    without_addresses,
)
from s2o_kernel.kernel.runner import CellRunner


def results(outcome: Any) -> list[dict[str, Any]]:
    return [c["data"] for t, c in outcome.outputs if t == "execute_result"]


# -- the pretty printer against IPython's ---------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**12),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
_hashables = st.one_of(st.integers(-1000, 1000), st.text(max_size=8))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=6),
    st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=8), inner, max_size=5),
    st.dictionaries(st.integers(-5, 5), inner, max_size=2),
    st.sets(_hashables, max_size=5),
    st.frozensets(_hashables, max_size=4),
), max_leaves=60)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_values, st.sampled_from([5, 12, 20, 40, 79]))
def test_pretty_text_is_ipythons_look(value: Any, width: int) -> None:
    assert pretty_text(repr(value), width) == ipython_pretty(value, max_width=width, max_seq_length=0)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_values, st.sampled_from([5, 20, 79]), st.integers(1, 4))
def test_long_containers_are_cut_as_ipython_cuts_them(value: Any, width: int, each: int) -> None:
    """At most ``each`` items of any container, then ``...`` (IPython's ``max_seq_length``): cut where the
    value is (``shown_text``, as the engine and the worker write it) or, from a whole ``repr``, here."""
    want = ipython_pretty(value, max_width=width, max_seq_length=each)
    assert pretty_text(shown_text(value, each), width, each) == want
    assert pretty_text(repr(value), width, each) == want


def test_shown_text_is_the_repr_up_to_the_cut() -> None:
    assert shown_text(list(range(5)), 3) == "[0, 1, 2, ...]"
    assert shown_text({i: i for i in range(5)}, 3) == "{0: 0, 1: 1, 2: 2, ...}"  # as IPython writes it
    assert shown_text((1,), 3) == "(1,)" and shown_text(tuple(range(4)), 3) == "(0, 1, 2, ...)"
    assert shown_text(frozenset(range(5)), 2) == "frozenset({0, 1, ...})"
    looped: list[Any] = [1, 2, 3]
    looped.append(looped)
    assert shown_text(looped, 2) == "[1, 2, ...]" and shown_text([looped], 3) == "[[1, 2, 3, ...]]"
    assert shown_text([looped, *range(3)], 3) == "[[1, 2, 3, ...], 0, 1, ...]"
    deep: list[Any] = []
    for _ in range(5000):  # deeper than Python's own repr goes: written all the same, or a placeholder
        deep = [deep, 0, 0, 0]
    assert shown_text(deep, 3).startswith("[[[[")
    value = [{"a": [1, (2,), {3}], "b": None}, (), [], {}, set(), frozenset(), "x", 1.5]
    assert shown_text(value, 8) == repr(value)  # no container of more than 8 items: repr itself


@pytest.mark.parametrize(("text", "shown"), [
    ("{'a': 1, ...}", "{'a': 1, ...}"),                  # a dict cut as IPython writes it
    ("['{1: 2, ...}', ...]", "['{1: 2, ...}', ...]"),    # in a string: text
    ("{1, ...}", "{1, ...}"),                            # a set
    ("{'a': {...}}", "{'a': {...}}"),                    # a dict's own cycle, as repr writes it
    ("[[...]]", "[[...]]"),
])  # fmt: skip
def test_cut_texts_read_back(text: str, shown: str) -> None:
    assert pretty_text(text) == shown


def test_long_containers_one_item_a_line() -> None:
    assert pretty_text(repr(list(range(30)))) == "[" + ",\n ".join(str(i) for i in range(30)) + "]"
    text = pretty_text(repr({"a": 1, "b": list(range(30)), "c": "x" * 70}))
    assert text.splitlines()[:3] == ["{'a': 1,", " 'b': [0,", "  1,"]
    assert text.splitlines()[-1] == " 'c': 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'}"
    rows = [{"id": i, "name": f"person {i}", "email": f"p{i}@example.org"} for i in range(3)]
    assert pretty_text(repr(rows)) == (
        "[{'id': 0, 'name': 'person 0', 'email': 'p0@example.org'},\n"
        " {'id': 1, 'name': 'person 1', 'email': 'p1@example.org'},\n"
        " {'id': 2, 'name': 'person 2', 'email': 'p2@example.org'}]"
    )
    assert pretty_text("[1, 2]") == "[1, 2]"  # a short one stays on its line, as written


def test_set_items_are_sorted_whatever_order_the_repr_had() -> None:
    # a set of strings reprs in hash order, which changes from process to process
    assert pretty_text("{'b', 'c', 'a'}") == "{'a', 'b', 'c'}"
    assert pretty_text("frozenset({'b', 'a'})") == "frozenset({'a', 'b'})"
    assert pretty_text("[set(), frozenset()]") == "[set(), frozenset()]"


def test_parts_that_are_not_literals_stay_as_written() -> None:
    text = "[Decimal('1.50'), nan, datetime.date(2024, 1, 2), -1, 1+2j, <Opaque>]"
    assert pretty_text(text) == text  # not an expression: as it is
    text = "[Decimal('1.50'), nan, datetime.date(2024, 1, 2), -1, 1+2j]"
    assert pretty_text(text) == text
    long = "[" + ", ".join(["Decimal('1.50')"] * 8) + "]"
    assert pretty_text(long) == "[" + ",\n ".join(["Decimal('1.50')"] * 8) + "]"


@pytest.mark.parametrize("text", [
    "<Opaque>",
    "{1: 2, 1: 3}",           # a custom repr repeating a key: shown as written
    "{1, 1}",
    "{[1]: 2}",               # unhashable key
    "[" * 300 + "]" * 300,    # deeper than the parser goes
    "[1,\n 2]",               # already on several lines
    "{**x}",
])
def test_texts_shown_as_they_are(text: str) -> None:
    assert pretty_text(text, width=4) == text


def test_literals_written_otherwise_are_kept_verbatim() -> None:
    # a custom repr may write a literal as Python would not: it is laid out, never rewritten
    assert pretty_text("[1, 1_000, 0x10, 1.50, \"a\"]", width=4) == '[1,\n 1_000,\n 0x10,\n 1.50,\n "a"]'


def test_too_long_a_repr_is_shown_as_it_is() -> None:
    text = repr(list(range(PRETTY_MAX_CHARS // 3)))
    assert len(text) > PRETTY_MAX_CHARS and pretty_text(text) == text


# -- rows --------------------------------------------------------------------------------


def test_rows_table() -> None:
    table = rows_table([{"id": 1, "name": "<Ada>", "ok": True}, {"ok": None, "name": "Bob & co", "id": 2.5}])
    assert table is not None
    assert "<tr><th>id</th><th>name</th><th>ok</th></tr>" in table
    assert "<tr><td>1</td><td>&lt;Ada&gt;</td><td>True</td></tr>" in table
    assert "<tr><td>2.5</td><td>Bob &amp; co</td><td>None</td></tr>" in table  # cells in the header's order
    assert "more row" not in table


@pytest.mark.parametrize("value", [[], [{}], [{"a": 1}, {"b": 1}], [{"a": 1}, 2], {"a": 1}, "rows", None,
                                   [{"a": 1}, {"a": 1, "b": 2}]])
def test_not_rows(value: Any) -> None:
    assert rows_table(value) is None


def test_rows_table_caps_rows_and_redacts() -> None:
    rows = [{"n": i, "token": SECRET} for i in range(ROW_CAP + 7)]
    table = rows_table(rows, lambda t: t.replace(SECRET, "***"))
    assert table is not None and SECRET not in table
    assert table.count("<tr>") == ROW_CAP + 1
    assert table.endswith("<p>… 7 more rows</p>")
    one_more = rows_table(rows[: ROW_CAP + 1])
    assert one_more is not None and one_more.endswith("<p>… 1 more row</p>")


def test_rows_text() -> None:
    assert rows_text([{"a": "1", "long name": "x"}, {"a": "22", "long name": ""}]) == "a   long name\n1   x\n22"
    assert rows_text([]) == ""


# -- bundles and %display ---------------------------------------------------------------


def test_value_bundle_rows_and_json() -> None:
    rows = [{"id": 1}, {"id": 2}]
    data = render.value_bundle(rows, as_json=API.as_json)
    assert list(data) == ["text/plain", "text/html"]
    assert data["text/plain"] == "[{'id': 1}, {'id': 2}]" and "<th>id</th>" in data["text/html"]
    data = render.value_bundle(rows, as_json=API.as_json, with_json=True)
    assert data["application/json"] == rows
    # text/plain is redacted before it is laid out, so a secret cannot be split over lines
    data = render.value_bundle([SECRET * 3] * 3, redact=lambda t: t.replace(SECRET, "***"))
    assert data == {"text/plain": "['*********', '*********', '*********']"}


def test_display_magic() -> None:
    session = FakeSession()
    runner = CellRunner(session, API)
    assert results(runner.run("%display")) == [
        {"text/plain": "display: plain (results as text/plain, rows also as an html table)"}]
    assert results(runner.run("[1, 2]")) == [{"text/plain": "[1, 2]"}]
    assert runner.run("%display json").ok and runner.display == "json"
    assert results(runner.run("[1, 2]")) == [{"text/plain": "[1, 2]", "application/json": [1, 2]}]
    assert "application/json" in results(runner.run("%limits"))[0]
    assert runner.run("%reset").ok and runner.display == "json"  # configuration stays
    assert results(runner.run("%display"))[0]["text/plain"].startswith("display: json")
    bad = runner.run("%display tree")
    assert (bad.error.ename, runner.display) == ("magic", "json")
    assert "plain or json" in bad.error.evalue
    assert runner.run("%display plain").ok
    assert results(runner.run("[1, 2]")) == [{"text/plain": "[1, 2]"}]
    assert results(runner.run("1")) == [{"text/plain": "1"}]
    res = runner.evaluate_user_expressions({"a": "[1]"})
    assert res["a"]["data"] == {"text/plain": "[1]"}


class _Plain:
    """An object with the default repr (its address)."""


def _method_holder() -> Any:
    class Holder:
        def act(self) -> None:
            """A method."""

    return Holder().act


@pytest.mark.parametrize(("value", "text"), [
    (_Plain(), f"<{__name__}._Plain object>"),
    (_method_holder(), f"<bound method _method_holder.<locals>.Holder.act of <{__name__}._method_holder."
                       "<locals>.Holder object>>"),
    ([_Plain, _Plain(), {"k": _Plain()}], f"[<class '{__name__}._Plain'>, <{__name__}._Plain object>, "
                                          f"{{'k': <{__name__}._Plain object>}}]"),
    ("a <b at 0x1234>", "'a <b at 0x1234>'"),  # a string value keeps its text
    (len, "<built-in function len>"),
])  # fmt: skip
def test_results_show_no_memory_addresses(value: Any, text: str) -> None:
    """A stored notebook output compares equal on every run (nbval): no ``at 0x…`` of a default repr."""
    assert render.value_bundle(value)["text/plain"] == text


def test_a_function_result_shows_as_ipython_shows_it() -> None:
    assert without_addresses("<function fetch_weather at 0x7f3a12345678>") == "<function fetch_weather>"


def test_errors_and_vars_show_no_memory_addresses(runner: CellRunner, session: FakeSession) -> None:
    info = render.error_info(S2OError("runtime", "ValueError: <function f at 0x7f6ae842fec0> is not in list"))
    assert info.evalue == "ValueError: <function f> is not in list"
    assert info.traceback[0] == "runtime: ValueError: <function f> is not in list"
    session.locals["thing"] = _Plain()
    outcome = runner.run("%vars")
    data = outcome.outputs[-1][1]["data"]
    assert data["text/plain"].splitlines()[-1].split() == ["locals", "thing", f"<{__name__}._Plain", "object>"]
    assert "0x" not in data["text/html"]
