"""Fifth red team of the store guard (SPEC 12), 2026-12-05: writes of a fragment, not calls of an expression.

The invariant of the earlier red teams: whatever a run does (a value, or a coded error), no variable of the session
is left holding a value the set-time check (:func:`.reach.check_kept` = ``check_value`` + ``reach.check``) refuses,
since later hot reads of a variable are not checked again.

Class of route found: *state a fragment writes outside* ``Session.set_local``'s *check-then-store*.

* **Item targets mutate first, check after** (``commands/var.py: assign``, ``fragments/wiring.py: write``): a
  ``var`` target ``xs[0]`` / ``d['k']`` and an ``outputPath`` target ``†local.xs[0]`` take the variable's live
  value, store the new item in it in place (``holder[key] = value`` / ``holder.append(value)``), and only then call
  ``set_variable`` (``check_kept``) on the root. When that check refuses, the run ends ``not-allowed`` but the
  container was already changed, and ``Session.snapshot``/``restore`` is shallow: the refused item stays. The
  value has passed only the result check (``check_value``), so what slips through is what ``reach.check`` alone
  refuses: a ``_json.Scanner`` (``json.JSONDecoder(parse_int=countdown(3)).scan_once``, **embedded default
  allowlist**), an ``_sre.SRE_Scanner``, a method of a ``json.encoder`` object. The scanner keeps the live granted
  iterator as ``parse_int``: ``xs[0].parse_int`` (a read with no call) returns it, ``sum(xs[0].parse_int)`` is 6
  and then 0 in the next run. And a read with no call is not result-checked at all, so a second item write
  ``{"var": {"ys[0]": "{xs[0].parse_int}"}}`` leaves the granted iterator itself in ``ys``.
* **``result`` is stored unchecked** (``Session.set_result``): ``call`` sets ``result`` to the function's return
  value, which had only the result check, so a function returning the scanner leaves it in ``result``, read back
  hot (``result.parse_int`` → the live iterator) with no error at all (**default allowlist**).

What held (kept below as passing tests): item targets given a value ``check_value`` refuses (``countdown(1)``,
a generator expression) never change the holder (the result check comes first); ordinary item writes
(append past the end, replace, nested keys) give Python's result; ``for``/``if`` fragments over variables, ``await``
in stored arguments (``xs.append(await slow_answer(0))``), coroutines handed to keeping calls
(``xs.extend(map(fetch_weather, ['Oslo']))`` → ``not-awaited``), ``getattr(xs, 'append')`` as a hook and
``getattr(json, 'nope', countdown(1))`` as a kept default were all refused or ran as Python does. No crash
(non-``S2OError``) was found.
"""

from __future__ import annotations

from typing import Any

import pytest
from stores_harness import assert_clean, assert_read_clean, make_session

from s2o_kernel.engine import S2OError, Session

D = "\u2020"
ALLOWLIST = "\n".join([
    "itertools", "functools", "operator", "collections", "json", "heapq", "bisect", "re", "datetime", "statistics",
    "list", "dict", "map", "filter", "sorted", "set", "len", "min", "max", "iter", "str", "sum",
    "s2o_kernel.examples.countdown as countdown", "s2o_kernel.examples.slow_answer as slow_answer",
])
STATE = {"xs": "{[]}", "d": "{ {} }", "n": "{ {'a': [1]} }", "ys": "{[0]}"}
#: A value the result check (``check_value``) accepts and the set-time check (``reach.check``) refuses; it keeps a
#: live granted iterator readable as ``.parse_int``.
SCANNER = "{json.JSONDecoder(parse_int=countdown(3)).scan_once}"


def _session(allowlist: str | None = None, state: dict | None = None) -> Session:
    return make_session(allowlist, STATE if state is None else state)


_assert_clean = assert_clean
_assert_read_clean = assert_read_clean



def _run(s: Session, fragment: Any) -> None:
    """Run ``fragment`` twice (cold, then hot): a coded error is fine, an internal one is not."""
    for _ in range(2):
        try:
            run = s.run_fragment(fragment)
        except S2OError as err:  # pragma: no cover - run_fragment reports errors in the run
            assert err.code, err
            continue
        assert run.error is None or run.error.code, run.error


# -- item targets: the holder is changed before the set-time check ----------------------------------------------

ITEM_TARGETS = [
    pytest.param("xs[0]", "xs", "xs[0].parse_int", id="append-past-the-end"),
    pytest.param("ys[0]", "ys", "ys[0].parse_int", id="replace-an-item"),
    pytest.param("d['k']", "d", "d['k'].parse_int", id="dict-key"),
    pytest.param("n['a'][1]", "n", "n['a'][1].parse_int", id="nested"),
]


@pytest.mark.parametrize("target, name, read", ITEM_TARGETS)
def test_a_var_item_target_refused_after_the_write_default_allowlist(target: str, name: str, read: str) -> None:
    """``var`` ``xs[0]``: ``assign`` stores the item in the live list, then ``set_variable`` refuses the root;
    the refusal is reported but the item stays, and the scanner's live iterator is read back with no call."""
    s = _session()
    _run(s, {"var": {target: SCANNER}})
    _assert_clean(s, [name])
    _assert_read_clean(s, read)


def test_a_granted_iterator_carried_between_runs_by_an_item_target_default_allowlist() -> None:
    """The iterator kept through the scanner is live: each run consumes what the last one left."""
    s = _session()
    s.run_fragment({"var": {"xs[0]": SCANNER}})
    answers = []
    for _ in range(2):
        try:
            answers.append(s.evaluate("sum(xs[0].parse_int)"))
        except S2OError as err:
            answers.append(err.code)
    assert answers[0] == answers[1], f"a generator's state is carried between runs: {answers}"


def test_a_second_item_write_keeps_the_granted_iterator_itself_default_allowlist() -> None:
    """``{xs[0].parse_int}`` is a read with no call (no result check): written as an item, the granted iterator
    itself lands in ``ys`` before ``set_local`` refuses it."""
    s = _session()
    s.run_fragment({"var": {"xs[0]": SCANNER}})
    s.run_fragment({"var": {"ys[0]": "{xs[0].parse_int}"}})
    _assert_clean(s, ["ys"])


@pytest.mark.parametrize("value", [
    pytest.param("{re.compile('a').scanner('a')}", id="sre-scanner"),
    pytest.param("{json.JSONEncoder().iterencode}", id="json-encoder-method"),
    pytest.param(SCANNER, id="json-scanner"),
])
def test_a_var_item_target_refused_after_the_write_wide_allowlist(value: str) -> None:
    s = _session(ALLOWLIST)
    _run(s, {"var": {"xs[0]": value}})
    _assert_clean(s, ["xs"])


def _with_maker(s: Session) -> None:
    run = s.run_fragment({"functions": {"main": {"commands": []},
                                        "mk": {"args": {}, "commands": {"return": SCANNER.replace("{", "{ ")}}}})
    assert run.error is None, run.error


@pytest.mark.parametrize("target, name, read", [
    pytest.param(f"{D}local.xs[0]", "xs", "xs[0].parse_int", id="append-past-the-end"),
    pytest.param(f"{D}local.d.k", "d", "d['k'].parse_int", id="dict-key"),
])
def test_an_output_path_item_target_refused_after_the_write_default_allowlist(target: str, name: str,
                                                                               read: str) -> None:
    """``wiring.write`` (``outputPath``) has the same order: ``holder.append(value)``, then ``set_variable``."""
    s = _session()
    _with_maker(s)
    _run(s, [{"call": {"function": "mk", "args": {}, "outputPath": target}}])
    _assert_clean(s, [name])
    _assert_read_clean(s, read)


# -- result: set by call without the set-time check -----------------------------------------------------------

def test_result_keeps_what_a_call_returns_unchecked_default_allowlist() -> None:
    """``Session.set_result`` stores the function's return value with no ``check_kept``: the run succeeds and
    ``result`` holds the scanner, its live iterator read back hot."""
    s = _session()
    _with_maker(s)
    _run(s, [{"call": {"function": "mk", "args": {}}}])
    try:
        s.evaluate("result")
    except S2OError as err:  # refused as it was set: never set
        assert err.code == "not-set", err
        return
    _assert_clean(s, ["result"])
    _assert_read_clean(s, "result.parse_int")


# -- what held -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target, name", [("xs[0]", "xs"), ("ys[0]", "ys"), ("d['k']", "d"), ("n['a'][1]", "n")])
@pytest.mark.parametrize("value", ["{countdown(1)}", "{[countdown(1)]}", "{(c for c in 'ab')}"])
def test_an_item_target_given_a_value_the_result_check_refuses_changes_nothing(target: str, name: str,
                                                                               value: str) -> None:
    s = _session()
    before = s.evaluate(name)
    run = s.run_fragment({"var": {target: value}})
    assert run.error is not None and run.error.code == "not-allowed", run.error
    assert s.evaluate(name) == before
    _assert_clean(s, [name])


def test_item_targets_write_as_python_does() -> None:
    s = _session()
    run = s.run_fragment([{"var": {"xs[0]": "{[1, 2]}", "ys[0]": "{len(xs)}", "d['k']": "{sorted('ba')}",
                                   "n['a'][1]": "{ {'b': d['k']} }"}},
                          {"var": {"xs[1]": "{json.loads('[3]')}", "n['a'][0]": "{max(ys[0], 5)}"}}])
    assert run.error is None, run.error
    assert s.evaluate("[xs, ys, d, n]") == [[[1, 2], [3]], [1], {"k": ["a", "b"]}, {"a": [5, {"b": ["a", "b"]}]}]


@pytest.mark.parametrize("source, expected", [
    ("xs.append(await slow_answer(0))", None),
    ("d.update(k=await fetch_weather('Oslo'))", None),
    ("xs.append(urllib.parse.urlparse('http://a/b').netloc)", None),
    ("xs.extend(zip('ab', [1, 2]))", None),
])
def test_async_and_ordinary_stores_run_as_python_does_default_allowlist(source: str, expected: Any) -> None:
    s = _session()
    assert s.evaluate(source) == expected
    _assert_clean(s, ["xs", "d"])


@pytest.mark.parametrize("source, code", [
    ("xs.extend(map(fetch_weather, ['Oslo']))", "not-awaited"),
    ("list(map(xs.append, map(fetch_weather, ['Oslo'])))", "not-awaited"),
    ("d.update(k=getattr(json, 'nope', countdown(1)))", "not-allowed"),
    ("xs.append(min([], default=endless()))", "not-allowed"),
    ("json.loads('{\"a\": 1}', parse_int=countdown, object_pairs_hook=getattr(d, 'update'))", "not-allowed"),
])
def test_routes_that_held_default_allowlist(source: str, code: str) -> None:
    s = _session()
    for _ in range(2):
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == code
    _assert_clean(s, ["xs", "d"])
