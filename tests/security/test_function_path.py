"""Red team of the expression functions (red 3, 2026-12-02; ``engine/functions.py``, docs/performance.md).

From an expression's second evaluation in a session it runs as a function, and one whose names hold exact
builtin values runs its *tested* function without the watchdog. Three holes, each payload evaluated three
times in one session (the first run is ``eval`` of the compiled code, the later ones the functions):

* the tested function read every name its test asks about before the expression ran, so a name that is
  not set (``result``, ``exc``) and sits in a branch the run does not take made the second evaluation fail
  ``not-set`` where the first gave a value, and an unset name was reported at the expression's start
  (col 0) instead of its own position;
* ``%`` of a ``str`` ran ``bounded_mod``'s %-format width check, a Python loop over the text, without the
  watchdog: ``s % () == s % () and …`` over a long ``s`` ran for many times ``limits.time`` and ignored
  ``Session.interrupt`` (the first run, armed, stopped at the limit);
* a chain of C calls or operators (``s.count('b') == 0 and …`` 300 times over a 20 MB ``s``) ran without the
  watchdog as long as the definition length allowed: each call is C, but the chain is bytecode between them
  that only an armed run stops. An expression with more than ``unwatched.MAX_UNWATCHED_OPERATIONS``
  operations now runs under the time limit.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hot import outcome
from interrupting import assert_interrupt_stops

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings, default_settings, unwatched
from s2o_kernel.engine.settings import make_settings

LIMIT = 0.3


def thrice(s: Session, source: str) -> list[Any]:
    return [outcome(s, source) for _ in range(3)]


def session(limit: float = 30.0, **locals_: Any) -> Session:
    s = Session(Engine(default_settings()), locals=locals_)
    s.update_settings({"limits": {"time": limit}})
    return s


@pytest.mark.parametrize("source, expected", [
    ("'none' if flag else result.upper()", ("value", str, "'none'")),
    ("flag or result + 1", ("value", bool, "True")),
    ("name.upper() if flag else exc.code", ("value", str, "'AB'")),
    ("'a' + result", ("error", "not-set", "'result' has not been set: no command has produced a result yet", 1, 6)),
    ("n * result", ("error", "not-set", "'result' has not been set: no command has produced a result yet", 1, 4)),
])
def test_an_unset_name_gives_the_same_outcome_every_run(source, expected):
    s = session(flag=True, name="ab", n=5)
    assert thrice(s, source) == [expected] * 3


def test_a_local_removed_by_reset_is_unknown_on_the_function_path():
    s = session(name="ab")
    assert thrice(s, "name.upper()") == [("value", str, "'AB'")] * 3
    s.reset()
    assert {o[1] for o in thrice(s, "name.upper()")} == {"unknown-name"}


@pytest.mark.parametrize("source", ["s % ()", "s % n", "s.upper() % 1", "(s + s) % 2"])
def test_percent_of_text_is_never_unwatched(source):
    needs = Engine(default_settings()).compile(source).unwatched
    assert needs is None or all(not kinds & {str} for name, kinds in needs if name == "s")


def test_percent_of_numbers_stays_unwatched():
    assert Engine(default_settings()).compile("n % 2").unwatched == (("n", unwatched.FAST_OPERAND_TYPES),)


def test_more_than_a_few_method_calls_are_watched():
    """Each listed method is one C call over a value of any length: unwatched, all of them run, armed the
    watchdog stops between two (red team of 2026-12-04, third round: 24 ``s.split()`` of 10 MB ran 3 s past
    a 0.5 s limit from the second run)."""
    engine = Engine(default_settings())
    calls = unwatched.MAX_UNWATCHED_CALLS
    assert engine.compile(" and ".join(["s.isdigit()"] * calls)).unwatched is not None
    assert engine.compile(" and ".join(["s.isdigit()"] * (calls + 1))).unwatched is None
    assert engine.compile("[" + ", ".join(["s.split()"] * (calls + 1)) + "][0]").unwatched is None
    s = Session(Engine(make_settings({"limits": {"time": 0.5}})))
    s.set_local("s", "a " * 5_000_000)
    source = "[" + ", ".join(["s.split()"] * 24) + "][0][0]"
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "timedOut" and time.monotonic() - started < 1.5


@pytest.mark.parametrize("source", ["a // b", "a + a // b", "(a // 2, b)"])
def test_operators_whose_work_grows_faster_than_their_operands_are_never_unwatched(source):
    """``//`` of two big ints is quadratic C work, like ``%`` (red team of 2026-12-04, third round: a chain of
    them ran unwatched from the second run where the first timed out): armed, a second run behaves as the
    first; ``*``, ``%``, ``**`` and ``<<`` left native by the settings likewise."""
    assert Engine(default_settings()).compile(source).unwatched is None
    native = Engine(bare_settings({}))  # SPEC 10's bare defaults: no operator rewritten
    for operator in ("*", "%", "**", "<<"):
        assert native.compile(f"a {operator} b").unwatched is None, operator


@pytest.mark.parametrize("method", ["rfind", "rindex", "rpartition", "rsplit"])
def test_backward_searches_are_watched(method):
    """CPython 3.11 searches backwards in O(n·m) (a 20 KB needle in 200 KB: 0.6 s a call): armed, as a first
    run is, so a second run is stopped as the first (red team of 2026-12-04, fourth round)."""
    assert Engine(default_settings()).compile(f"s.{method}(p)").unwatched is None
    s = Session(Engine(make_settings({"limits": {"time": 0.5}})), locals={"s": "a" * 200_000, "p": "ab" + "a" * 20_000})
    for _ in range(2):  # eight calls, ~5 s unwatched; watched, one call at most runs past the limit
        started = time.monotonic()
        with pytest.raises(S2OError) as err:
            s.evaluate(" + ".join(["s.rfind(p)"] * 8))
        assert err.value.code in ("timedOut", "stopped") and time.monotonic() - started < 2.5  # SPEC 12: limit + 2 s


def test_a_long_chain_of_c_calls_is_watched():
    chain = " and ".join(["s.count('b') == 0"] * (unwatched.MAX_UNWATCHED_OPERATIONS + 1))
    assert Engine(default_settings()).compile(chain).unwatched is None
    assert Engine(default_settings()).compile("s.count('b') == 0 and s == t").unwatched is not None


PAYLOADS = [
    pytest.param(" and ".join(["s % () == s % ()"] * 40), {"s": "%%" * 2_500_000}, id="percent-format-check"),
    pytest.param(" and ".join(["s.count('b') == 0"] * 900), {"s": "a" * 20_000_000}, id="c-method-chain"),
]


@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize("source, values", PAYLOADS)
def test_the_function_path_stops_at_the_time_limit(source, values):
    s = session(LIMIT, **values)
    for _ in range(3):  # eval (armed), then the functions
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "timedOut", err.value
    assert s.evaluate("s[:1]") in ("a", "%")


@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize("source, values", PAYLOADS[:2])
def test_an_interrupt_stops_the_function_path(source, values):
    s = session(60.0, **values)
    assert_interrupt_stops(s, source, times=3)
