"""The hot path (an expression already compiled) keeps every guard (issue 12, ``docs/performance.md``):
the time limit and interrupts stop a cached expression as they stop a new one, a run that timed out
leaves the next run armed, and the native f-string path formats only plain values, never a secret."""

from __future__ import annotations

import threading
import time

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, make_settings
from s2o_kernel.engine.run.scopes import SecretText

HELPERS = "s2o_conformance_helpers"


def session(allowlist="", **kw):
    locs = kw.pop("locals", None)
    return Session(Engine(make_settings({"allowlist": allowlist, **kw})), locals=locs)


def test_a_cached_expression_is_stopped_at_the_time_limit_again_and_again():
    s = session(allowlist=f"sum\n{HELPERS}.endless as endless", limits={"time": 0.3}, locals={"kept": 1})
    for _ in range(3):  # the first run compiles; the next ones take the hot path
        t0 = time.monotonic()
        with pytest.raises(S2OError) as err:
            s.evaluate("sum(endless())")
        assert err.value.code == "timedOut" and time.monotonic() - t0 < 0.3 + 0.5
        assert s.evaluate("[kept for k in [1]]") == [1]  # armed again, and finishes
    assert s.evaluate("kept + 1") == 2


def test_a_cached_expression_is_interrupted_from_another_thread():
    s = session(allowlist=f"sum\n{HELPERS}.endless as endless", limits={"time": 30})
    with pytest.raises(S2OError):
        threading.Timer(0.2, s.interrupt).start()
        s.evaluate("sum(endless())")
    threading.Timer(0.2, s.interrupt).start()
    t0 = time.monotonic()
    with pytest.raises(S2OError) as err:
        s.evaluate("sum(endless())")
    assert err.value.code == "stopped" and time.monotonic() - t0 < 5
    time.sleep(0.3)  # an interrupt with nothing running does nothing
    s.interrupt()
    assert s.evaluate("sum([1, 2])") == 3


def test_a_secret_text_local_takes_the_helper_and_stays_secret():
    s = session(secrets={"K": "sk-secret-123"})
    s.run_fragment({"var": {"token": "{ f\"Bearer {sys.secret['K']}\" }"}})
    for _ in range(2):  # compile, then hot
        value = s.evaluate("f'{token}'")
        assert type(value) is SecretText
        assert "sk-secret-123" not in repr(value) and "***" in repr(value)
    s.run_fragment({"var": {"token": "plain"}})
    assert s.evaluate("f'{token}'") == "plain"  # the same code, now on the native path


@pytest.mark.parametrize("expr, locs, expected", [
    ("f'{a}-{b!r}-{c:>6.2f}-{d}'", {"a": "x", "b": "y", "c": 1.5, "d": None}, "x-'y'-  1.50-None"),
    ("f'{a}{a}{n:03d}'", {"a": True, "n": 7}, "TrueTrue007"),
    ("[f'{v}' for v in vs]", {"vs": [1, "a", 2.5, [1]]}, ["1", "a", "2.5", "[1]"]),
])
def test_native_and_helper_paths_format_the_same(expr, locs, expected):
    assert session(locals=locs).evaluate(expr) == expected


def test_a_wide_constant_format_width_is_still_refused_on_the_hot_path():
    s = session(locals={"x": 1})
    for _ in range(2):
        with pytest.raises(S2OError) as err:
            s.evaluate("f'{x:>100001}'")
        assert err.value.code == "runtime" and "OverflowError" in err.value.message


@pytest.mark.parametrize("expr", [
    "[s * n for s in texts]",           # repetition: the helper's bound
    "[a * a for a in bigs]",            # a product past the integer bound
    "[f * n for f in ['%0100001d']]",   # not numbers: the helper
    "[t % n for t in ['%0100001d']]",   # a %-format width past the bound
    "[t % n for t in formats]",
])
def test_operators_in_comprehensions_keep_their_bounds(expr):
    s = session(allowlist="", locals={"texts": ["ab"], "n": 10**8, "bigs": [1 << 600_000],
                                      "formats": ["%0100001d"]},
                rules={"operators": {"*": "bounded_mult", "%": "bounded_mod"}})
    for _ in range(2):
        with pytest.raises(S2OError) as err:
            s.evaluate(expr)
        assert err.value.code == "runtime" and "OverflowError" in err.value.message, err.value


def test_numbers_in_comprehensions_multiply_natively_and_exactly():
    s = session(locals={"xs": [3, -2, 2.5, True, 1 << 61, 1 << 70]},
                rules={"operators": {"*": "bounded_mult", "%": "bounded_mod"}})
    assert s.evaluate("[x * x for x in xs]") == [x * x for x in [3, -2, 2.5, True, 1 << 61, 1 << 70]]
    assert s.evaluate("[x % 7 for x in xs]") == [x % 7 for x in [3, -2, 2.5, True, 1 << 61, 1 << 70]]
    code = s.engine.compile("[x * x for x in xs]").code
    inner = next(c for c in code.co_consts if hasattr(c, "co_names"))
    assert "__s2o_exact_int" in inner.co_names and "__s2o_op_mul" in inner.co_names
