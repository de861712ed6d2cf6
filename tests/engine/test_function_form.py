"""The one code form of an expression (``s2o_kernel/engine/language/compiled.py``; SPEC 2, 6).

Every expression is compiled once into the body of a function, ``def <expr>(): return EXPR`` (``async def``
for one that awaits), which a session binds to its globals on the first run and calls on every run. These
tests hold that form to the expression's meaning: every shared conformance expression gives the same
outcome on a first run, in a session whose engine compiled it for another session, and on a later run of
the kept function; names resolve as ``eval`` resolves them; a function never outlives the builtins it was
made with; ``*`` and ``%`` give what the bounded operators give.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import pytest
from hot import bound_functions, has_function, outcome

from s2o_kernel.conformance import load_cases
from s2o_kernel.engine import Engine, S2OError, Session, bare_settings, default_settings

CASE_DIR = Path(__file__).resolve().parents[1] / "conformance"
EXPR_CASES = [c for c in load_cases(CASE_DIR / "expressions.jsonl")
              if "expr" in c and not c.get("helpers") and "class" not in c]


@pytest.mark.parametrize("case", EXPR_CASES, ids=[c["id"] for c in EXPR_CASES])
def test_every_conformance_expression_gives_the_same_outcome_on_every_run(case):
    """Three sessions of one engine, each from the case's state: the first compiles the expression; the
    second binds what the engine compiled; the third runs the function it kept from a run before (made
    and kept without running, so the case's state is the same)."""
    engine = Engine(bare_settings({k: case[k] for k in ("allowlist", "rules", "limits", "sys", "secrets", "const")
                                   if k in case}))
    source = case["expr"]

    def session() -> Session:
        return Session(engine, **{k: copy.deepcopy(case[k]) for k in ("locals", "agent", "conv") if k in case})
    cold = outcome(session(), source)
    second = outcome(session(), source)
    kept_session = session()
    with contextlib.suppress(S2OError):  # refused before it runs: as every run is
        kept_session.execution._function_of(source)
    kept = outcome(kept_session, source)
    assert cold == second == kept
    if cold[0] == "value":
        assert has_function(kept_session.execution, source)


def test_the_functions_read_names_as_eval_does():
    """Globals first, then the engine's builtins; a local set later, or an allowlist name shadowed by a
    local, is seen by the function made before."""
    s = Session(Engine(bare_settings({"allowlist": "len"})), locals={"xs": [1, 2]})
    for _ in range(3):
        assert s.evaluate("len(xs) + 1") == 3
    s.set_local("xs", [1, 2, 3, 4])
    assert s.evaluate("len(xs) + 1") == 5
    s.set_local("len", lambda _: 0)
    assert s.evaluate("len(xs) + 1") == 1
    with pytest.raises(S2OError) as raised:
        s.evaluate("total * 2")
    assert raised.value.code == "unknown-name"
    s.set_local("total", 4)
    assert [s.evaluate("total * 2") for _ in range(3)] == [8, 8, 8]
    s.reset()
    with pytest.raises(S2OError) as raised:
        s.evaluate("total * 2")
    assert (raised.value.code, raised.value.line, raised.value.col) == ("unknown-name", 1, 0)


def test_an_awaiting_expression_is_an_async_function_awaited_for_you():
    s = Session(Engine(default_settings()))
    for _ in range(3):
        assert s.evaluate("await fetch_weather('Oslo')") == {"city": "Oslo", "celsius": 7}
        assert s.evaluate("fetch_weather('Oslo')") == {"city": "Oslo", "celsius": 7}  # one call: awaited for you
    with pytest.raises(S2OError) as raised:
        s.evaluate("[fetch_weather('Oslo')]")
    assert raised.value.code == "not-awaited"


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
    """Every ``*`` and ``%`` has the numeric fast path (a float, or an int within ±(2**30-1)); anything else
    takes ``bounded_mult``/``bounded_mod``: the same value, or the same refusal, on every run."""
    s = Session(Engine(default_settings()), locals={"a": a, "b": b})
    for source in ("a * b", "b * a", "a % 7 if a else 0", "[a * b for _x in [1]][0]"):
        outcomes = {repr(outcome(s, source)) for _ in range(3)}
        assert len(outcomes) == 1, (source, outcomes)
    if type(a) is int and type(b) is int and a.bit_length() + b.bit_length() <= 124:
        assert s.evaluate("a * b") == a * b
