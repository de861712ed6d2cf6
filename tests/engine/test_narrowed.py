"""Tested functions narrowed to the types they meet, and items tested where they are made (issue 12;
``s2o_kernel/engine/functions.py``, ``s2o_kernel/engine/unwatched.py``).

From its second run, an expression that may run without the watchdog runs a tested function *narrowed*
to the exact types its names held then (one identity test a name; the numeric and f-string fast paths
decided), with each subscript's item it uses tested where it is made, against the type a probe run saw.
When a type changes, the narrowed function is unsure and gives way to the wider tested function, and that
one to the plain function under the time limit. These tests hold every step of that to what ``eval`` of
the compiled code gives (a fresh session's first run), by hand and by random expressions over values of
every kind, and check that nothing untested runs unwatched: a Python ``__getitem__`` or a metaclass's
``__hash__``/``__eq__`` never runs with the watchdog disarmed.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hot import Meta, Odd, outcome
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings, default_settings, functions

ENGINE = Engine(default_settings())


class Spy(dict):  # type: ignore[type-arg]
    """Stands for the watchdog's table of armed deadlines: records every arming."""

    armed = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        Spy.armed += 1
        super().__setitem__(key, value)


def armed(s: Session, source: str) -> tuple[bool, Any]:
    """Whether evaluating ``source`` now armed the time limit, and its outcome."""
    spy = Spy()
    saved, s.execution._armed = s.execution._armed, spy
    Spy.armed = 0
    try:
        got = outcome(s, source)
    finally:
        s.execution._armed = saved
    return Spy.armed > 0, got


def cold(source: str, values: dict[str, Any], engine: Engine = ENGINE) -> Any:
    """What a session's first run of ``source`` gives (``eval`` of the compiled code, under the limit)."""
    return outcome(Session(engine, locals=dict(values)), source)


class Counting(dict):  # type: ignore[type-arg]
    """A dict whose ``__getitem__`` is Python code: must never run unwatched."""

    calls = 0

    def __getitem__(self, key: Any) -> Any:
        Counting.calls += 1
        return super().__getitem__(key)


def test_items_are_tested_where_they_are_made():
    data = {"items": [{"name": f"n{i}"} for i in range(50)], "numbers": list(range(50))}
    source = "items[numbers[42]]['name'][0]"
    s = Session(ENGINE, locals=data)
    assert outcome(s, source) == ("value", str, "'n'")
    assert armed(s, source) == (False, ("value", str, "'n'"))  # narrowed: list, list; items int, dict, str
    assert armed(s, source) == (False, ("value", str, "'n'"))
    expected = cold(source, {**data, "items": [Counting(name="xy")] * 50})
    s.set_local("items", [Counting(name="xy") for _ in range(50)])  # an item of another type: armed, Python runs
    Counting.calls = 0
    assert armed(s, source) == (True, expected)
    assert expected == ("value", str, "'x'") and Counting.calls == 1  # once, under the limit


def test_an_item_of_the_wrong_type_is_never_operated_on_unwatched():
    s = Session(ENGINE, locals={"rows": [{"k": 1}], "i": 0})
    for _ in range(3):
        assert s.evaluate("rows[i]['k'] + 1") == 2
    Counting.calls = 0
    s.set_local("rows", [Counting(k=5)])
    assert armed(s, "rows[i]['k'] + 1") == (True, ("value", int, "6"))
    assert Counting.calls == 1


def test_a_narrowed_function_widens_then_arms_when_types_change():
    s = Session(ENGINE, locals={"price": 2.5, "quantity": 4})
    source = "price * quantity"
    steps = [({"price": 2.5}, False), ({"price": 3}, False), ({"price": 2.5}, False),
             ({"price": 10**40}, True),  # a big int: the bounded helper, armed (its C work grows faster than
             ({"price": [1]}, True), ({"price": 2.5}, True)]  # the operands); then the wider test, then none
    assert outcome(s, source) == ("value", float, "10.0")
    assert armed(s, source)[0] is False
    for change, now_armed in steps:
        for name, value in change.items():
            s.set_local(name, value)
        expected = cold(source, {"price": s.locals["price"], "quantity": 4})
        assert armed(s, source) == (now_armed, expected), change


def test_unsure_never_reaches_the_caller():
    s = Session(ENGINE, locals={"xs": [[1]], "n": 0})
    for value in ([[1]], [["a"]], [{"k": 1}], [[[1]]], [[]], [1], "ab", [None]):
        s.set_local("xs", value)
        for _ in range(3):
            with contextlib.suppress(S2OError):
                s.evaluate("xs[n][0] + xs[n][0]")


def test_the_probe_and_the_observation_run_no_metaclass_code():
    s = Session(Engine(bare_settings({"allowlist": "len", "allow_unsafe_entries": True})),
                locals={"xs": [Odd()], "name": Odd()})
    Meta.calls = 0  # (the session's own check of its locals hashed their types)
    for source in ("xs[0] + 1", "xs[0][0]", "name.upper()", "name + 'a'"):
        for _ in range(3):
            with pytest.raises(S2OError):
                s.evaluate(source)
    assert Meta.calls == 0
    compiled = s.engine.compile("xs[0] + 1")
    assert s.engine.narrowed_of(compiled, (Odd,)) is None  # not an exact builtin type: refused before hashing
    assert s.engine.narrowed_of(compiled, [list, int]) is None  # type: ignore[arg-type]
    assert Meta.calls == 0


def test_a_failing_probe_leaves_the_wider_test():
    s = Session(ENGINE, locals={"xs": []})
    for _ in range(3):
        assert outcome(s, "xs[0] + 1") == cold("xs[0] + 1", {"xs": []})
    s.set_local("xs", [1])
    assert armed(s, "xs[0] + 1") == (False, ("value", int, "2"))


# -- random expressions over values of every kind, their types changing between runs --------------------

VALUES = st.one_of(
    st.integers(min_value=-5, max_value=5), st.sampled_from([2**31, -(2**30), 2**62, 10**30]),
    st.floats(allow_nan=False, width=32), st.booleans(), st.none(), st.sampled_from(["", "ab", "Oslo", "%s"]),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.lists(st.sampled_from(["a", "bc"]), min_size=1, max_size=2),
    st.sampled_from([{"k": 1}, {"k": "v"}, {"k": [1, 2]}, {"j": 1}, [[1, "a"], {"k": 2}], ({"k": 1.5},)]),
)
NAMES = ("a", "b", "c")
ATOMS = st.one_of(st.sampled_from(NAMES), st.sampled_from(["0", "1", "2", "'k'", "1.5", "'x'", "10**3"]))


def _expressions(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "%", "==", "<", " and ", " or "]), inner).map(
            lambda t: f"({t[0]}{t[1]}{t[2]})"),
        st.tuples(inner, st.sampled_from(["0", "1", "'k'", "-1", "a", "b"])).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.tuples(inner, st.sampled_from(["upper()", "strip()", "count('a')", "bit_length()", "is_integer()"])).map(
            lambda t: f"{t[0]}.{t[1]}"),
        inner.map(lambda e: f"(not {e})"),
        st.tuples(inner, inner).map(lambda t: f"f'{{{t[0]}}}-{{{t[1]}}}'"),
        st.tuples(inner, inner).map(lambda t: f"[{t[0]}, {t[1]}]"),
    )


EXPRESSIONS = st.recursive(ATOMS, _expressions, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=EXPRESSIONS, runs=st.lists(st.fixed_dictionaries({n: VALUES for n in NAMES}), min_size=2, max_size=5))
def test_random_expressions_give_what_eval_gives_as_their_types_change(source, runs):
    s = Session(ENGINE)
    for values in runs:
        for name, value in values.items():
            s.set_local(name, value)
        for _ in range(2):  # the second and later runs are functions: narrowed, widened, armed
            assert outcome(s, source) == cold(source, values), (source, values)


def test_hidden_names_of_the_function_forms_are_bound_in_the_builtins():
    for name in (functions.UNSURE_NAME, "__s2o_exact_dict", "__s2o_exact_int"):
        assert name in ENGINE.builtins
    with pytest.raises(functions.Unsure):
        ENGINE.builtins[functions.UNSURE_NAME]()
