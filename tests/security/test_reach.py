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

from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, bare_settings

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
zip
bool
staticmethod
filter
getattr
operator
itertools
functools
{HOSTS}.thing as thing
{HOSTS}.c as c
{HOSTS}.registry as registry
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

#: The escape of the red-team pass: a value C code gets from one granted function and hands to
#: another, never passing compiled code (an iterator, a lazy ``map``, a host iterable, a key wrapper).
#: Each of these ran ``exec`` or ``eval`` on a string before the fix, in-process and in the worker.
C_CHAINS = [
    "list(map(list, map(map, c.iterate(), [['1']])))",
    "list(map(list, map(map, iter(get_evil, 1), [['1']])))",
    "list(map(list, map(map, map(operator.getitem, [c], ['exec']), [['1']])))",
    "list(map(list, map(map, map(getattr, [thing], ['e']), [['1']])))",
    "list(map(list, map(map, registry, [['1'], ['1']])))",
    "list(itertools.chain.from_iterable(map(map, registry, [['1'], ['1']])))",
    "list(map(list, itertools.starmap(map, zip(registry, [['1'], ['1']]))))",
    "list(map(list, map(functools.partial(map), registry, [['1'], ['1']])))",
    "[list(f()) for f in map(functools.partial, [map, map], registry, [['1'], ['1']])]",
    "[f(['1']) for f in map(functools.partial, [map, map], registry)]",
    "sorted([{}, '1'], key=next(map(functools.cmp_to_key, registry)))",
    "list(map(list, map(iter, map(functools.partial, registry, ['1', 'None']), [None, None])))",
    "list(map(list, filter(bool, map(map, registry, [['1'], ['1']]))))",
    "[f('1') for f in map(staticmethod, registry)]",
    "[f('1') for f in map(functools.lru_cache, registry)]",
    "[f('1') for f in map(functools.singledispatch, registry)]",
]
PAYLOADS += C_CHAINS


@pytest.fixture(scope="module", autouse=True)
def hosts_on_path() -> None:
    import sys

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))


def _settings() -> dict[str, object]:
    return {"allowlist": ALLOWLIST}


@pytest.fixture(scope="module")
def isolated() -> IsolatedSession:
    s = IsolatedSession(bare_settings(_settings()))
    yield s
    s.close()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_in_process(payload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    session = Session(Engine(bare_settings(_settings())))
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


def test_a_c_chain_runs_no_code_and_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The escape itself: ``exec`` reached through C code walks to the real ``open`` and writes a marker."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s2o-markers").mkdir()
    walk = ("[k for k in ().__class__.__base__.__subclasses__() if k.__name__ == 'catch_warnings'][0]()"
            "._module.__builtins__['open']('s2o-markers/c-chain', 'w').write('escaped')")
    session = Session(Engine(bare_settings(_settings())))
    with pytest.raises(S2OError) as err:
        session.evaluate(f"list(map(list, map(map, c.iterate(), [[{walk!r}]])))")
    assert err.value.code == "not-allowed", err.value
    assert not (tmp_path / "s2o-markers" / "c-chain").exists()


def test_c_chains_of_harmless_values_still_work() -> None:
    session = Session(Engine(bare_settings(_settings())))
    assert session.evaluate("list(map(list, map(map, [str, len], [['a'], ['bc']])))") == [["a"], [2]]
    assert session.evaluate("list(itertools.chain.from_iterable(map(map, [str], [[1, 2]])))") == ["1", "2"]
    assert session.evaluate("sorted([3, 1, 2], key=functools.cmp_to_key(operator.sub))") == [1, 2, 3]
    assert session.evaluate("[x for x in zip([1, 2], 'ab')]") == [(1, "a"), (2, "b")]
    assert session.evaluate("list(map(double, c.iterate_numbers()))") == [2, 4]


def test_a_c_chain_is_refused_through_a_real_kernel(tmp_path: Path) -> None:
    """The same escape in a notebook: the cell ends with ``not-allowed`` and the worker survives it."""
    import json
    import os

    from kernel_harness import execute, install_spec, start_kernel, stop_kernel

    config = tmp_path / "hosts.toml"
    config.write_text(f"allowlist = {json.dumps(ALLOWLIST)}\n[limits]\ntime = 5\n")
    pythonpath = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    km, kc = start_kernel(install_spec(tmp_path / "prefix"), tmp_path,
                          env={"S2O_CONFIG": str(config), "PYTHONPATH": pythonpath, "S2O_KERNEL_ISOLATED": ""})
    try:
        walk = "len(().__class__.__base__.__subclasses__())"
        reply, _ = execute(kc, f"list(map(list, map(map, registry, [['1'], [{walk!r}]])))")
        assert reply["status"] == "error", reply
        assert reply["ename"] == "not-allowed", reply
        reply, _ = execute(kc, "list(map(list, map(map, [str, len], [['a'], ['bc']])))")
        assert reply["status"] == "ok", reply
    finally:
        stop_kernel(km, kc)


def test_host_objects_still_work() -> None:
    session = Session(Engine(bare_settings(_settings())))
    assert session.evaluate("double(21)") == 42
    assert session.evaluate("c.plain()") == {"a": [1, 2.5, "x"], "b": None}
    assert session.evaluate("[x * 2 for x in c.plain()['a'][:1]]") == [2]
    assert session.evaluate("c['key']") == "key"
    assert session.evaluate("'abc'.upper() + str(len(c.plain()))") == "ABC2"


def test_a_host_object_given_as_a_local_guards_the_session() -> None:
    import sys

    sys.path.insert(0, str(HERE))
    import s2o_reach_hosts as hosts

    session = Session(Engine(bare_settings({"allowlist": "len"})))
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
    session = Session(Engine(bare_settings({"allowlist": ""})))
    with pytest.raises(S2OError) as err:
        session.set_local("x", given)
    assert err.value.code == "not-allowed"
    assert "x" not in session.locals


def test_an_instance_of_a_refused_class_is_refused_when_the_allowlist_loads(tmp_path: Path) -> None:
    (tmp_path / "s2o_reach_fmt.py").write_text("import string\nfmt = string.Formatter()\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    with pytest.raises(S2OError) as err:
        Engine(bare_settings({"allowlist": "s2o_reach_fmt.fmt as fmt"}))
    assert err.value.code == "refused-entry"
    assert "string.Formatter" in err.value.message


def test_the_teaching_configuration_runs_unguarded() -> None:
    from s2o_kernel.engine import default_settings

    assert not Engine(default_settings()).guarded
