"""Red team of the hot path, 2026-12-04 (docs/security.md, docs/performance.md "Red team of the hot path").

From its second run in a session an expression runs as a function (:mod:`s2o_kernel.engine.functions`): a
tested one without the time limit when the exact types it needs hold, else the plain one, armed. Each test
failed on the code before its fix:

* a bounded operator's helper ran unwatched (``a % b`` on two big ints: a remainder is quadratic C work, 32 of
  them ran ~12 s past a 1 s limit, interrupts ignored): now the tested function runs only the native fast
  path on small numbers and gives way (``Unsure``) where it would call the helper;
* an error was mapped with a start of 0.0, so a call's own ``TimeoutError`` read as the time limit;
* a session bound the functions of an expression the engine had compiled for another session, or before a
  reset, and ran it until it read a name not set, where a first run refuses it before anything runs;
* a SIGINT during the probe of the functions' binding escaped ``Session.evaluate`` as ``KeyboardInterrupt``.
"""

from __future__ import annotations

import _thread
import ast
import threading
import time
from typing import Any

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, default_settings, functions, unwatched
from s2o_kernel.engine.settings import make_settings

#: A 1,000,000-bit int and a ~500,000-bit one, both within the integer bound (a cell makes them with
#: ``2 ** 999999`` and ``3 ** 315000``): their remainder takes CPython ~0.35 s (schoolbook division).
BIG_A = 2 ** 1_000_000 - 1
BIG_B = 3 ** 315_000
CHAIN = "(" + ", ".join(["a % b"] * 8) + ")"


def outcome(s: Session, source: str) -> tuple[Any, ...]:
    try:
        value = s.evaluate(source)
    except S2OError as exc:
        return ("error", exc.code, exc.line, exc.col)
    if type(value) is int:  # no repr: a big int's text is past CPython's 4,300 digits
        return ("value", "int", value.bit_length())
    return ("value", type(value).__name__, len(value) if type(value) is tuple else repr(value))


@pytest.mark.parametrize("source", [CHAIN, "(" + ", ".join(["a * b"] * 8) + ")", "a % b + 0 and a % b",
                                    "(a % b, b * a, a % 7, 3 * b)"])
def test_bounded_operators_on_big_ints_obey_the_time_limit_on_the_hot_path(source):
    s = Session(Engine(make_settings({"limits": {"time": 0.5}})), locals={"a": 7, "b": 3})
    assert outcome(s, source)[0] == "value"  # cold, small ints
    assert outcome(s, source)[0] == "value"  # hot: the tested function narrowed to (int, int) is made
    s.set_local("a", BIG_A)
    s.set_local("b", BIG_B)
    for _ in range(2):  # the narrowed function gives way, then the wider one: armed from then on
        started = time.monotonic()
        got = outcome(s, "(" + ", ".join([source] * 4) + ")")
        took = time.monotonic() - started
        assert took < 2.0, (got, round(took, 2))
    started = time.monotonic()
    got = outcome(s, source)  # a value, or an error of the bound (a product past it) or of the limit
    assert got[:2] in {("error", "runtime"), ("error", "timedOut")} or got[0] == "value"
    assert time.monotonic() - started < 1.5, got


def test_an_interrupt_stops_big_int_remainders_on_the_hot_path():
    s = Session(Engine(make_settings({"limits": {"time": 30}})), locals={"a": 7, "b": 3})
    outcome(s, CHAIN)
    outcome(s, CHAIN)
    s.set_local("a", BIG_A)
    s.set_local("b", BIG_B)
    timer = threading.Timer(0.3, s.interrupt)
    timer.start()
    started = time.monotonic()
    try:
        got = outcome(s, CHAIN)
    finally:
        timer.cancel()
    assert got[:2] == ("error", "stopped") and time.monotonic() - started < 1.2, got


def test_small_numbers_still_multiply_unwatched():
    """The fast path's native operation runs unwatched on small ints and floats; a str operand runs the
    helper, armed, with the same value."""
    s = Session(Engine(default_settings()), locals={"a": 6, "b": 7, "x": 2.5, "t": "ab"})
    for _ in range(3):
        assert s.evaluate("(a * b, a % 4, x * b, b % x)") == (42, 2, 17.5, 2.0)
        assert s.evaluate("t * 2") == "abab"
    assert s._unwatched["(a * b, a % 4, x * b, b % x)"] is not None


def test_a_timeout_error_of_a_call_is_runtime_on_every_run():
    s = Session(Engine(make_settings({"allowlist": "s2o_hot_hosts.fetch as fetch", "limits": {"time": 5}})))
    assert [outcome(s, "fetch('x')") for _ in range(3)] == [("error", "runtime", 1, 0)] * 3


def test_an_unknown_name_is_refused_before_running_in_a_second_session_of_the_engine():
    engine = Engine(default_settings())
    assert outcome(Session(engine, locals={"xs": [1], "y": 1}), "xs[5] + y")[:2] == ("error", "runtime")
    assert outcome(Session(engine, locals={"xs": [1]}), "xs[5] + y") == ("error", "unknown-name", 1, 8)


def test_an_unknown_name_is_refused_before_running_after_a_reset_or_a_restore():
    s = Session(Engine(default_settings()), locals={"xs": [1], "y": 1})
    for _ in range(2):
        outcome(s, "xs[5] + y")
    s.reset()
    s.set_local("xs", [1])
    assert outcome(s, "xs[5] + y") == ("error", "unknown-name", 1, 8)
    snap = s.snapshot()
    s.set_local("y", 1)
    for _ in range(2):
        outcome(s, "xs[5] + y")
    s.restore(snap)  # as after a failed command that had set y
    assert outcome(s, "xs[5] + y") == ("error", "unknown-name", 1, 8)


def test_an_expression_refused_for_an_unknown_name_runs_nothing(capsys):
    engine = Engine(default_settings())
    Session(engine, locals={"y": 1}).evaluate("print('RAN') or y")
    capsys.readouterr()
    assert outcome(Session(engine), "print('RAN') or y")[:2] == ("error", "unknown-name")
    assert "RAN" not in capsys.readouterr().out


def test_a_sigint_during_the_probe_ends_the_evaluation_stopped(monkeypatch):
    """A real SIGINT (``_thread.interrupt_main``) taken while the binding's probe runs (the probe held in a
    loop, as a long one would be): ``stopped``, never a bare ``KeyboardInterrupt``; the session goes on."""
    real = functions.observed

    def interrupted_probe(*args: Any) -> Any:
        _thread.interrupt_main()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the KeyboardInterrupt lands here
            pass
        return real(*args)

    s = Session(Engine(default_settings()), locals={"xs": [1], "n": 2})
    source = "xs[0] + n"
    assert s.evaluate(source) == 3  # cold: the functions are made at the next run, with a probe
    monkeypatch.setattr(functions, "observed", interrupted_probe)
    with pytest.raises(S2OError) as err:
        s.evaluate(source)
    assert err.value.code == "stopped"
    monkeypatch.setattr(functions, "observed", real)
    assert [s.evaluate(source) for _ in range(3)] == [3, 3, 3]


@pytest.mark.parametrize("source", [
    "len(collections.deque('a') * 10000001)", "len(10000001 * collections.deque('a'))",
    "len(collections.UserList([1]) * 10000001)", "len(collections.UserString('a') * 10000001)",
    "len(collections.UserString('%10000001d') % 1)", "len(collections.UserString('a').center(10000001))",
    "len(collections.UserString('a\\tb').expandtabs(10000001))",
    "(fractions.Fraction(n) * n).numerator.bit_length()", "(n * fractions.Fraction(n, 3)).numerator.bit_length()",
])
def test_bounded_operators_bound_the_standard_librarys_sequences_and_fractions(source):
    """The same bound as the builtin twin (``'a' * 10000001``, ``'%10000001d' % 1``, ``'a'.center(10000001)``,
    ``n * n``): the standard library's sequences repeat, pad and format their data in one C call, and a
    ``Fraction``'s terms multiply (red team of 2026-12-04, by capability rather than by builtin type)."""
    s = Session(Engine(make_settings({"allowlist": "collections\nfractions\nlen", "limits": {"time": 10}})),
                locals={"n": 2 ** 999_999})
    with pytest.raises(S2OError) as err:
        s.evaluate(source)
    assert err.value.code == "runtime" and "OverflowError" in err.value.message


def test_small_repetitions_of_the_standard_librarys_sequences_still_work():
    s = Session(Engine(make_settings({"allowlist": "collections\nfractions\nlen\nlist\nstr"})))
    assert s.evaluate("list(collections.deque('ab') * 3)") == list("ababab")
    assert s.evaluate("str(collections.UserString('%5d') % 42)") == "   42"
    assert s.evaluate("str(collections.UserString('ab').center(6))") == "  ab  "
    assert s.evaluate("fractions.Fraction(1, 3) * 3") == 1


def test_a_second_run_of_long_method_calls_times_out_as_the_first():
    """Fifth round: four ``upper()`` of a long text were planned unwatched, so from the second run all four ran
    (3 s past a 1 s limit, the value returned) where the first run timed out after the call during which the
    time ran out. One method call at most runs unwatched: every run of it is armed, and times out."""
    engine = Engine(make_settings({"limits": {"time": 0.2}}))
    source = "s.upper() == t or s.upper() == t or s.upper() == t or s.upper() == t"
    assert engine.compile(source).unwatched is None
    assert engine.compile("s.upper() == t").unwatched is not None  # one call: the hot path keeps it
    text = "\u0149" * 10_000_000  # its upper() is two characters a character: ~0.25 s a call
    s = Session(engine, locals={"s": text, "t": "x"})
    for _ in range(3):
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "timedOut"



def test_a_second_run_over_long_texts_times_out_as_the_first():
    """Sixth round: each operation an unwatched run may hold is linear in its operands' length, so 30 ``+`` of a
    10 M-character text and one ``upper()`` ran 2.4 s past a 1 s limit and returned a value from the second run,
    where the first, armed, timed out at the call. A text, list, tuple or dict operated on (anything but indexed)
    now runs unwatched only when shorter than ``unwatched.UNWATCHED_SIZE``: every run of this is armed."""
    s = Session(Engine(make_settings({"limits": {"time": 0.1}})), locals={"s": "a" * 2_000_000, "t": "x"})
    source = " + ".join(["s"] * 40) + " == t.upper()"  # ~1.6 GB of copying before the call
    for _ in range(3):
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "timedOut"


@pytest.mark.parametrize("source", [
    "s + s == t.upper()",
    "s[1:] == t.upper()",  # a slice copies
    "d['k'] + t == t.upper()",  # an item operated on
    "d['k'][1:] == t.upper()",  # an item sliced
    "t.count(s) == 1",  # an argument is read whole
])
def test_short_texts_run_unwatched_and_long_ones_give_way(source):
    s = Session(Engine(default_settings()), locals={"s": "ab", "t": "x", "d": {"k": "ab"}})
    for _ in range(3):
        assert s.evaluate(source) is False
    assert s._unwatched[source] is not None  # narrowed: it runs unwatched
    long = "a" * unwatched.UNWATCHED_SIZE
    s.set_local("s", long)
    s.set_local("d", {"k": long})
    assert s.evaluate(source) is False  # gave way to the armed function
    assert s._unwatched[source] is None


def test_values_only_indexed_are_not_measured():
    """Indexing is constant time: ``items[numbers[42]]['name'][0]`` tests no length."""
    plan = unwatched.plan(ast.parse("items[numbers[42]]['name'][0]", mode="eval"))
    assert plan is not None and plan.sized == frozenset() and plan.sized_items == frozenset({0})


@pytest.mark.parametrize("source", [
    "(c and s)[::-1][0]",  # seventh round: a value carried to a slice (the last operand of and)
    "(s if c else s)[::-1][0]",  # an if's branch
    "xs[0][n[0]:][0]",  # an item sliced, with a subscript in the slice's bound
])
def test_a_value_carried_to_a_slice_is_measured(source):
    """Seventh round: the slice's copy is linear in the value's length, but a value carried to it (an ``if``'s
    branch, the last operand of ``and``) or an item sliced with a subscript in its bound was not measured: eight
    ``(c and s)[::-1][0]`` over 50 M items ran 1.7 s past a 1 s limit and returned a value from the second run."""
    short, long = [0, 1], [0] * unwatched.UNWATCHED_SIZE
    s = Session(Engine(default_settings()), locals={"s": short, "c": True, "xs": [short], "n": [1]})
    for _ in range(3):
        s.evaluate(source)
    assert s._unwatched[source] is not None  # narrowed: it runs unwatched
    s.set_local("s", long)
    s.set_local("xs", [long])
    s.evaluate(source)  # gave way to the armed function
    assert s._unwatched[source] is None
