"""Expressions with no call still reach Python code, and the time limit covers it (SPEC 6, 12; red team).

Before this, an expression with no call, comprehension or ``await`` (``Engine.simple``), and the rest of
an expression whose calls are C methods (``limits.unwatched_calls``), ran with the watchdog disarmed: its
operators, subscripts, attribute reads, ``*``-unpacking and f-string values were taken to run no Python
code. They run the operands' own dunders, and values of audited standard-library classes have Python ones
that loop over their contents: ``Counter.__add__``, ``__eq__`` and unary ``+``, ``ChainMap.__contains__``,
``IPv4Network.__iter__`` (an IPv6 network's never ends), ``Counter.__repr__`` through the f-string helper,
and ``agent.x``'s copy. Chained in one expression, each ran for seconds past ``limits.time``, and
``Session.interrupt`` did nothing (no deadline was armed for it to fire). Each payload here runs cold
(compiled by this run) and hot (cached), and must end ``timedOut`` (or ``stopped``) with the session intact.
"""

from __future__ import annotations

import pytest
from interrupting import assert_interrupt_stops
from kernel_harness import MODES, execute, install_spec, result_data, running_kernel

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings

ALLOWLIST = "collections\nipaddress\nrange\nlist"
LIMIT = 0.3

#: Locals built once per session (under the time limit of their own run) by fragments.
SETUP = {
    "c": "{collections.Counter(range(300000))}",
    "cm": "{collections.ChainMap(*([{}] * 300000))}",
    "net": "{ipaddress.ip_network('10.0.0.0/12')}",
    "name": "ab",
}

CHAIN = 40


def session(limit: float = LIMIT) -> Session:
    s = Session(Engine(bare_settings({"allowlist": ALLOWLIST, "limits": {"time": 60}})), agent={"kept": 1})
    for name, value in SETUP.items():
        run = s.run_fragment({"var": {name: value}})
        assert run.error is None, run.error
    run = s.run_fragment({"var": {"agent.big": "{list(range(300000))}"}})
    assert run.error is None, run.error
    s.update_settings({"limits": {"time": limit}})
    return s


PAYLOADS = [
    pytest.param(" + ".join(["c"] * CHAIN), id="counter-add"),
    pytest.param(" and ".join(["c == c"] * CHAIN), id="counter-eq"),
    pytest.param("+" * CHAIN + "c", id="counter-unary"),
    # ChainMap's ``in`` is the cheapest per term (0.5 s for 40 on an idle machine of this kind; CI's ran it within
    # the 0.3 s limit once): ten times the terms keep every payload at least 5x past the limit
    pytest.param(" and ".join(["'k' not in cm"] * (CHAIN * 10)), id="chainmap-contains"),
    pytest.param("[" + ", ".join(["*net"] * CHAIN) + "]", id="network-unpacking"),
    pytest.param("f'" + "{c}" * CHAIN + "'", id="fstring-repr"),
    pytest.param(" and ".join(["agent.big == agent.big"] * CHAIN), id="agent-copy"),
    pytest.param("name.upper() and [" + ", ".join(["*net"] * CHAIN) + "]", id="after-a-c-method"),
    pytest.param("name.count('a') and " + " + ".join(["c"] * CHAIN), id="c-method-then-operators"),
]


@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize("source", PAYLOADS)
def test_operators_on_python_classes_stop_at_the_time_limit(source):
    s = session()
    for _ in range(2):  # cold (compiled by this run), then hot (cached)
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "timedOut", err.value
    assert s.evaluate("name + '!'") == "ab!"
    assert s.evaluate("agent.kept") == 1
    assert s.evaluate("name.upper()") == "AB"


@pytest.mark.timeout(120, method="thread")
def test_an_interrupt_stops_an_operator_chain():
    s = session(limit=60)
    source = " and ".join(["c == c"] * 400)
    assert_interrupt_stops(s, source)
    assert s.evaluate("name") == "ab"


@pytest.mark.timeout(180, method="thread")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_kernel_cell_of_operators_stops_at_the_time_limit(mode, tmp_path):
    """The same hole through a real kernel, as a notebook user meets it: in-process the cell ran on long
    past ``limits.time`` (the contained worker was killed at the limit + 1 s); now both end ``timedOut``
    and keep the session."""
    kernels = install_spec(tmp_path / "prefix")
    with running_kernel(kernels, tmp_path, env={"S2O_KERNEL_ISOLATED": MODES[mode]}) as (_km, kc):
        for cell in ("%%allowlist\ncollections\nrange\nlen",
                     '{"var": {"c": "{collections.Counter(range(300000))}", "agent.kept": 1}}',
                     '%limits {"time": 1}'):
            reply, _ = execute(kc, cell, timeout=60)
            assert reply["status"] == "ok", reply
        chain = " and ".join(["c == c"] * 400)  # about a minute in-process before
        reply, outputs = execute(kc, chain, timeout=20)
        assert reply["status"] == "error" and reply["ename"] == "timedOut", reply
        reply, outputs = execute(kc, "agent.kept + len(c)", timeout=20)
        assert result_data(outputs)["text/plain"] == "300001"
