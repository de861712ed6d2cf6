"""Dangerous values reached through granted objects (issue 8, SPEC 12): refused whatever path leads there.

The payloads follow simpleeval's own security tests: a module, a refused built-in or an instance of a
refused class handed out by a granted host object through an attribute, a property, a call's return
value, a container item, an operator, an awaited result or iteration never reaches the expression.
Each payload runs in-process and through the worker (`IsolatedSession`), and nothing it aims at
(a marker file, a process) happens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, make_settings

HERE = Path(__file__).resolve().parents[1] / "support"
HOSTS = "s2o_reach_hosts"
ALLOWLIST = f"""
list
len
str
next
iter
sorted
map
{HOSTS}.thing as thing
{HOSTS}.c as c
{HOSTS}.get_evil as get_evil
{HOSTS}.get_module as get_module
{HOSTS}.double as double
"""

PAYLOADS = [
    "thing.p.os.popen('id').read()",
    "thing.p",
    "thing.e('open(\"s2o-markers/x\", \"w\")')",
    "c.get_os().popen('id').read()",
    "c.get_os()",
    "list(map(c.get_exec(), ['1']))",
    "c.evil('1')",
    "c.mod.popen('id')",
    "c.formatter().get_field('0.__class__', ['x'], {})",
    "list(map(c.popen_class(), [['true']]))",
    "list(map(c.funcs()[0], ['1']))",
    "list(map(c.nested()['nested']['funcs'][0], ['1']))",
    "c.nested()['nested']['mods']['p'].os",
    "c.tuple_of()[0].os.popen('id')",
    "list(map(next(c.iterate()), ['1']))",
    "[f('1') for f in c.iterate()]",
    "sorted(['1'], key=next(c.iterate()))",
    "[m.system('id') for m in c.generate()]",
    "(c + 1).popen('id')",
    "list(map(c < 1, ['1']))",
    "list(map(c['exec'], ['1']))",
    "list(map(*c.funcs()[:1], ['1']))",
    "double(**c.mapping())",
    "(await c.coro()).popen('id')",
    "list(map(get_evil(), ['1']))",
    "[get_evil()] and 1",
    "get_module().os.popen('id').read()",
]


@pytest.fixture(scope="module", autouse=True)
def hosts_on_path() -> None:
    import sys

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))


def _settings() -> dict[str, object]:
    return {"allowlist": ALLOWLIST}


@pytest.fixture(scope="module")
def isolated() -> IsolatedSession:
    s = IsolatedSession(make_settings(_settings()))
    yield s
    s.close()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_in_process(payload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    session = Session(Engine(make_settings(_settings())))
    assert session.engine.guarded
    with pytest.raises(S2OError) as err:
        session.evaluate(payload)
    assert err.value.code == "not-allowed", err.value
    assert not (tmp_path / "s2o-markers").exists()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_through_the_worker(payload: str, isolated: IsolatedSession) -> None:
    with pytest.raises(S2OError) as err:
        isolated.evaluate(payload)
    assert err.value.code == "not-allowed", err.value


def test_host_objects_still_work() -> None:
    session = Session(Engine(make_settings(_settings())))
    assert session.evaluate("double(21)") == 42
    assert session.evaluate("c.plain()") == {"a": [1, 2.5, "x"], "b": None}
    assert session.evaluate("[x * 2 for x in c.plain()['a'][:1]]") == [2]
    assert session.evaluate("c['key']") == "key"
    assert session.evaluate("'abc'.upper() + str(len(c.plain()))") == "ABC2"


def test_a_host_object_given_as_a_local_guards_the_session() -> None:
    import sys

    sys.path.insert(0, str(HERE))
    import s2o_reach_hosts as hosts

    session = Session(Engine(make_settings({"allowlist": "len"})))
    assert not session.engine.guarded
    session.set_local("box", hosts.Container())
    assert session.engine.guarded
    with pytest.raises(S2OError) as err:
        session.evaluate("box.get_os().system('id')")
    assert err.value.code == "not-allowed"
    assert session.evaluate("len(box.plain())") == 2


@pytest.mark.parametrize("value", ["os", "exec", "formatter"])
def test_dangerous_locals_are_refused_when_given(value: str) -> None:
    import os
    import string

    given = {"os": os, "exec": exec, "formatter": string.Formatter()}[value]
    session = Session(Engine(make_settings({"allowlist": ""})))
    with pytest.raises(S2OError) as err:
        session.set_local("x", given)
    assert err.value.code == "not-allowed"
    assert "x" not in session.locals


def test_an_instance_of_a_refused_class_is_refused_when_the_allowlist_loads(tmp_path: Path) -> None:
    (tmp_path / "s2o_reach_fmt.py").write_text("import string\nfmt = string.Formatter()\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    with pytest.raises(S2OError) as err:
        Engine(make_settings({"allowlist": "s2o_reach_fmt.fmt as fmt"}))
    assert err.value.code == "refused-entry"
    assert "string.Formatter" in err.value.message


def test_the_teaching_configuration_runs_unguarded() -> None:
    from s2o_kernel.engine import default_settings

    assert not Engine(default_settings()).guarded
