"""Instances of standard-library classes are opened by the values check and the written size (red team 2,
2026-12-02; SPEC 12: no value returned or stored holds a generator; SPEC 9: a value shows).

With ``collections`` granted (an audited "container types" entry), ``collections.UserList([g])`` returned
a generator ``g`` as the result (the check opened only built-in containers and a few named types; a
``UserList`` keeps its items in ``data``, an instance attribute), and sixty ``x = UserList([x, x])``
measured 1 item written out, so showing ``x`` wrote 2**60 items for good. Now an instance of a class of
the standard library is opened through its ``__dict__`` (not asyncio's, not classes).
"""

from __future__ import annotations

import pytest

from s2o_kernel.engine import WRITTEN_LIMIT, Engine, S2OError, Session, bare_settings, written_size

ALLOWLIST = "collections\nrange\nstring.Template\ngraphlib"


@pytest.fixture
def session() -> Session:
    return Session(Engine(bare_settings({"allowlist": ALLOWLIST})))


@pytest.mark.parametrize("expr", [
    "collections.UserList([(i for i in range(3))])",
    "collections.UserDict(a=(i for i in range(3)))",
    "string.Template((i for i in range(3)))",
    "graphlib.TopologicalSorter({(i for i in range(3)): []})",
])
def test_a_generator_inside_a_stdlib_instance_is_refused(session: Session, expr: str) -> None:
    with pytest.raises(S2OError) as err:
        session.evaluate(expr)
    assert err.value.code == "not-allowed"
    assert "generator" in err.value.message


def test_plain_stdlib_instances_still_work(session: Session) -> None:
    assert session.evaluate("collections.UserList([1, 2])") == [1, 2]
    assert session.evaluate("string.Template('a $b').substitute(b=1)") == "a 1"


def test_a_doubled_user_list_is_measured(session: Session) -> None:
    run = session.run_fragment([{"var": {"x": "{ [1] }"}}, {"for": {"item": "i", "in": "{ range(60) }", "commands": [
        {"var": {"x": "{ collections.UserList([x, x]) }"}}]}}])
    assert run.code == "success", run.error
    assert written_size(session.locals["x"]) > WRITTEN_LIMIT
