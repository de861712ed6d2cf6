"""Expression functions (issue 12; ``s2o_kernel/engine/functions.py``): the hot path's form of an expression.

From its second evaluation in a session, an expression runs as a Python function bound to the session's
globals (``def <expr>(): return EXPR``), and one that may run without the watchdog as a *tested* function
that checks its names' exact types first. These tests hold the function form to what ``eval`` of the
compiled code gives (every shared conformance expression, three times in one session), check that the
type test compares by identity (no ``__hash__`` or ``__eq__`` of a metaclass runs unwatched), and that a
function never outlives the engine whose builtins it holds.
"""

from __future__ import annotations

import ast
import copy
import types
from pathlib import Path

import pytest
from hot import Meta, Odd, bound_functions, has_functions, only_armed, outcome

from s2o_kernel.conformance import load_cases
from s2o_kernel.engine import Engine, S2OError, Session, bare_settings, default_settings, functions, unwatched

CASE_DIR = Path(__file__).resolve().parents[1] / "conformance"
EXPR_CASES = [c for c in load_cases(CASE_DIR / "expressions.jsonl")
              if "expr" in c and not c.get("helpers") and "class" not in c]


@pytest.mark.parametrize("case", EXPR_CASES, ids=[c["id"] for c in EXPR_CASES])
def test_every_conformance_expression_gives_the_same_outcome_cold_and_hot(case):
    """Three sessions of one engine, each from the case's state: the first compiles the expression and
    runs ``eval`` of its code; the second runs its function (tested, when it has one); the third its plain
    function under the time limit."""
    engine = Engine(bare_settings({k: case[k] for k in ("allowlist", "rules", "limits", "sys", "secrets", "const")
                                   if k in case}))
    source = case["expr"]

    def session() -> Session:
        return Session(engine, **{k: copy.deepcopy(case[k]) for k in ("locals", "agent", "conv") if k in case})
    cold = outcome(session(), source)
    hot_session = session()
    hot = outcome(hot_session, source)
    armed_session = session()
    compiled = engine.compiled.get(source)
    if compiled is not None:
        armed_session.execution._bind(source, compiled)  # made, not run: then only the plain function is kept
        only_armed(armed_session.execution)
    armed = outcome(armed_session, source)
    assert cold == hot == armed
    if compiled is not None and not compiled.is_coroutine_code and compiled.local_names <= hot_session.globals.keys():
        # it compiled and its names are set: the later runs were functions (a name not set is refused first)
        assert has_functions(hot_session.execution, source) and has_functions(armed_session.execution, source)


def test_the_functions_read_names_as_eval_does():
    """Globals first, then the engine's builtins; a local set later, or an allowlist name shadowed by a
    local, is seen by the function made before."""
    s = Session(Engine(bare_settings({"allowlist": "len"})), locals={"xs": [1, 2]})
    for _ in range(3):
        assert s.evaluate("len(xs) + 1") == 3
    s.set_local("xs", [1, 2, 3, 4])
    assert s.evaluate("len(xs) + 1") == 5
    with pytest.raises(S2OError) as raised:
        s.evaluate("total * 2")
    assert raised.value.code == "unknown-name"
    s.set_local("total", 4)
    assert [s.evaluate("total * 2") for _ in range(3)] == [8, 8, 8]
    s.reset()
    with pytest.raises(S2OError) as raised:
        s.evaluate("total * 2")  # the tested function's read of an unset name: unknown-name, at the name
    assert (raised.value.code, raised.value.line, raised.value.col) == ("unknown-name", 1, 0)


def test_the_type_test_compares_by_identity_and_runs_no_metaclass_code():
    s = Session(Engine(bare_settings({"allowlist": "len", "allow_unsafe_entries": True})),
                locals={"name": "ab", "n": 2})
    for _ in range(3):
        assert s.evaluate("name.upper()") == "AB"
        assert s.evaluate("n + n") == 4
    s.set_local("name", Odd())
    s.set_local("n", Odd())
    Meta.calls = 0
    for source in ("name.upper()", "n + n"):
        with pytest.raises(S2OError):
            s.evaluate(source)  # not a str: the tested function is unsure, the plain one fails, armed
    assert Meta.calls == 0


def test_a_tested_function_checks_every_name_it_was_asked_for():
    tree = ast.parse("a + b", mode="eval")
    plain = functions.plain_code(tree, "<s2o>")
    found = unwatched.Plan((("a", frozenset({int})), ("b", frozenset({str, float}))), ())
    tested = functions.tested_code(tree, found, None, "<s2o>")
    builtins = {**functions.HIDDEN, "__s2o_type": type}
    run = types.FunctionType
    assert run(tested, {"__builtins__": builtins, "a": 1, "b": 2.5})() == 3.5
    for a, b in ((1, 2), (True, 2.5)):  # exact: an int is not a float, a bool is not an int
        with pytest.raises(functions.Unsure):
            run(tested, {"__builtins__": builtins, "a": a, "b": b})()
    assert run(plain, {"__builtins__": builtins, "a": 1, "b": 2})() == 3


def test_a_narrowed_function_checks_one_type_a_name_and_decides_the_rewrites_tests():
    """Narrowed to ``price`` a float: its one test is ``type(price) is float``, and the numeric fast path of
    ``*`` (one float operand is enough) is decided, so the product is the native one; any other type is Unsure."""
    engine = Engine(default_settings())
    source = "price * quantity"
    compiled = engine.compile(source)
    codes = engine.functions_of(compiled)
    assert codes is not None and codes[1] is not None
    narrowed = engine.narrowed_of(compiled, (float, int))
    assert narrowed is not None
    names = set(narrowed.co_names)
    assert "__s2o_op_mul" not in names and "__s2o_exact_str" not in names  # decided: no helper, one type a name
    g = {"__builtins__": engine.builtins, "price": 2.5, "quantity": 4}
    assert types.FunctionType(narrowed, g)() == 10.0
    for price, quantity in ((2, 4), (2.5, 4.0), ("ab", 4)):
        with pytest.raises(functions.Unsure):
            types.FunctionType(narrowed, {**g, "price": price, "quantity": quantity})()
    # str * int would take the bounded helper, which never runs unwatched: a type the plan does not allow
    assert engine.narrowed_of(compiled, (str, int)) is None and engine.narrowed_of(compiled, (list, int)) is None
    ints = engine.narrowed_of(compiled, (int, int))
    assert ints is not None and types.FunctionType(ints, {**g, "price": 3, "quantity": 4})() == 12
    for price in (2 ** 40, -(2 ** 30), 10 ** 400):  # past the fast path's bound: the helper's place gives way
        with pytest.raises(functions.Unsure):
            types.FunctionType(ints, {**g, "price": price, "quantity": 4})()


def test_a_function_never_outlives_the_builtins_it_was_made_with():
    """A host object turns the session guarded (a new engine, new builtins): no function made before runs."""
    s = Session(Engine(default_settings()), locals={"name": "ab", "xs": [3, 1]})
    for _ in range(3):
        assert s.evaluate("name.upper()") == "AB"
        assert s.evaluate("sorted(xs)") == [1, 3]
    made = bound_functions(s.execution)
    assert made and all(f.__builtins__ is s.engine.builtins for f in made)

    class Host:
        pass
    s.set_local("host", Host())
    assert s.engine.guarded
    for _ in range(3):
        assert s.evaluate("name.upper()") == "AB"
        assert s.evaluate("sorted(xs)") == [1, 3]
    now = bound_functions(s.execution)
    assert now and all(f.__builtins__ is s.engine.builtins for f in now)
    assert not any(f in made for f in now)


@pytest.mark.parametrize("a, b", [
    (3, 4), ((1 << 30) - 2, (1 << 30) - 2), ((1 << 30) - 1, 5), (1 << 30, -(1 << 30)), (1 << 61, 1 << 61),
    (1 << 5000, 1 << 5000), (2.5, 1 << 70), (1e308, 10.0), (True, 3), ("ab", 3), ("ab", 10 ** 9), ([1], 2),
])
def test_a_function_multiplies_as_the_bounded_operator_does(a, b):
    """In a function every ``*`` and ``%`` gets the numeric fast path (a float, or an int within
    ±(2**30-1)); anything else takes ``bounded_mult``/``bounded_mod``: the same value, or the same refusal."""
    s = Session(Engine(default_settings()), locals={"a": a, "b": b})
    for source in ("a * b", "b * a", "a % 7 if a else 0"):
        outcomes = {repr(outcome(s, source)) for _ in range(3)}  # cold, then the functions
        assert len(outcomes) == 1, (source, outcomes)
    if type(a) is int and type(b) is int and a.bit_length() + b.bit_length() <= 124:
        assert s.evaluate("a * b") == a * b
