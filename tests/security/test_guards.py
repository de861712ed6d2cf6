"""Guards that trust nothing (SPEC 12, issue 8): lying subclasses and class-building calls.

The escape this file pins: with ``abc`` added to the teaching allowlist, an
expression built a ``str`` subclass whose ``startswith`` was ``{}.get`` (always
``None``) with ``abc.ABCMeta('S', (str,), {...})``; the guarded ``getattr``
asked the name ``startswith('_')`` and believed it, and the real ``getattr``
then read ``json.dumps.__globals__`` and from there the real builtins and
``open``. Three things close the class:

* every guard decides on exact built-in types (a ``str`` subclass given as a
  name is refused; ``**`` mappings are copied into a plain ``dict`` through
  ``dict.items``; results and locals are walked through the base types' own
  methods);
* calls of metaclasses (``type``, ``abc.ABCMeta`` …) are refused at run time,
  so an expression cannot build such a class;
* metaclasses, and modules holding them (``abc``, ``enum``), are refused when
  the allowlist loads (``refused-entry``).

Each test runs the payload for real: in-process, and through an
``IsolatedSession`` where the issue saw the file written.
"""

from __future__ import annotations

import abc
import json
import types
from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, bare_settings, default_settings
from s2o_kernel.engine.policy.allowlist import load_allowlist
from s2o_kernel.engine.policy.denylist import is_class, is_metaclass, name_violation
from s2o_kernel.engine.policy.guards import (
    check_attribute,
    guard_kwargs,
    guarded_call,
    guarded_gather,
    guarded_getattr,
    guarded_hasattr,
    guarded_import,
)
from s2o_kernel.engine.policy.values import check_value

#: The teaching allowlist (the embedded default) with only ``abc`` added, as in the issue.
TEACHING_PLUS_ABC = default_settings().allowlist + "\nabc\n"

#: The issue's payload: a str subclass with a lying ``startswith`` reads ``__globals__`` and opens a file.
#: (``map`` calls the real ``open``: a call of a subscript would be refused by the call-target rule.)
EXPLOIT = ("[list(map(getattr(json.dumps, S('__globals__'))['__builtins__']['open'], ['s2o-markers/escaped'], ['w'])) "
           "for S in [abc.ABCMeta('S', (str,), {'startswith': {}.get})]]")
#: The same class built without a direct call of the metaclass: ``map`` calls it.
EXPLOIT_VIA_MAP = ("[list(map(getattr(json.dumps, S('__globals__'))['__builtins__']['open'], ['s2o-markers/escaped'], "
                   "['w'])) for S in map(abc.ABCMeta, ['S'], [(str,)], [{'startswith': {}.get}])]")


class LyingStr(str):
    """What the payload builds: ``startswith`` always says no, ``__eq__`` always yes."""

    def startswith(self, *args: Any) -> bool:  # type: ignore[override]
        return False

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


@pytest.fixture
def arena(tmp_path, monkeypatch):
    (tmp_path / "s2o-markers").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _unsafe(allowlist: str) -> Any:
    return bare_settings({"allowlist": allowlist, "allow_unsafe_entries": True, "limits": {"time": 5}})


# -- the exploit, reproduced --------------------------------------------------------------------

def test_the_lying_name_fooled_the_old_check():
    """The payload's subclass really does defeat a check that calls the name's own methods."""
    lying = abc.ABCMeta("S", (str,), {"startswith": {}.get})("__globals__")
    assert not lying.startswith("_")  # what a trusting guard saw
    assert getattr(json.dumps, lying) is vars(json)  # what the real getattr then read
    assert name_violation(lying) is not None and name_violation(lying)[0] == "attribute"


def test_teaching_allowlist_with_abc_is_refused_at_load():
    with pytest.raises(S2OError) as err:
        Engine(bare_settings({"allowlist": TEACHING_PLUS_ABC}))
    assert err.value.code == "refused-entry" and err.value.stage == "load"
    assert "builds classes" in err.value.details["lines"]["abc"]


@pytest.mark.parametrize("entry", ["abc.ABCMeta", "enum.EnumType", "abc.ABCMeta as M", "type", "enum"])
def test_metaclass_entries_are_refused(entry):
    with pytest.raises(S2OError) as err:
        load_allowlist(entry)
    assert err.value.code == "refused-entry"
    assert "classes" in err.value.details["lines"][entry]


def test_exploit_is_contained_in_process_even_with_unsafe_entries(arena):
    """With abc forced in (allow_unsafe_entries), the metaclass call and the lying name are both refused."""
    s = Session(Engine(_unsafe(TEACHING_PLUS_ABC)))
    with pytest.raises(S2OError) as err:
        s.evaluate(EXPLOIT)
    assert (err.value.code, err.value.stage) == ("not-allowed", "run") and "metaclass" in err.value.message
    with pytest.raises(S2OError) as err:
        s.evaluate(EXPLOIT_VIA_MAP)  # map builds the class: the store guard's check refuses it when it is handed
    assert (err.value.code, err.value.stage) == ("not-allowed", "run")  # on (the guarded getattr's own refusal
    assert "builds classes" in err.value.message  # of the lying name is tested above, by name_violation)
    assert list((arena / "s2o-markers").iterdir()) == []
    assert s.evaluate("1 + 1") == 2


def test_exploit_is_contained_in_the_worker(arena):
    session = IsolatedSession(_unsafe(TEACHING_PLUS_ABC))
    try:
        for expr, code in ((EXPLOIT, "not-allowed"), (EXPLOIT_VIA_MAP, "not-allowed")):
            with pytest.raises(S2OError) as err:
                session.evaluate(expr)
            assert err.value.code == code, expr
        assert session.evaluate("len([1, 2])") == 2
    finally:
        session.close()
    assert list((arena / "s2o-markers").iterdir()) == []


def test_teaching_allowlist_with_abc_is_refused_by_the_worker():
    with pytest.raises(S2OError) as err:
        IsolatedSession(bare_settings({"allowlist": TEACHING_PLUS_ABC}))
    assert err.value.code == "refused-entry"


# -- metaclass calls -----------------------------------------------------------------------------

@pytest.mark.parametrize("expr", [
    "type('S', (str,), {})",
    "type(*['S', (str,), {}])",
    "type('S', *[(str,), {}])",
    "[type(n, b, d) for n, b, d in [('S', (), {})]]",
])
def test_calls_that_build_classes_are_refused(expr):
    s = Session(Engine(_unsafe("type\nstr")))
    with pytest.raises(S2OError) as err:
        s.evaluate(expr)
    assert err.value.code == "not-allowed" and "metaclass 'type'" in err.value.message


def test_ordinary_calls_with_many_arguments_still_work():
    s = Session(Engine(bare_settings({"allowlist": "max\nsorted\nround\nstr\ntype", "allow_unsafe_entries": True})))
    assert s.evaluate("max(1, 5, 3)") == 5
    assert s.evaluate("max(*[1, 5, 3])") == 5
    assert s.evaluate("sorted(*[[3, 1]], **{'reverse': True})") == [3, 1]
    assert s.evaluate("str.replace('aXa', 'X', 'b', 1)") == "aba"
    assert s.evaluate("type(1)") is int  # one argument: the type of a value, no class built
    with pytest.raises(S2OError) as err:
        s.evaluate("max(1, 2, 'a')")
    assert err.value.code == "runtime" and err.value.message.startswith("TypeError") and err.value.col == 0


def test_guarded_call_is_not_fooled_by_a_fake_class_attribute():
    class Disguised:
        @property
        def __class__(self) -> type:  # type: ignore[override]
            return int

    assert guarded_call(max, 1, 2, 3) == 3
    assert not is_metaclass(Disguised()) and not is_class(Disguised())
    assert is_metaclass(abc.ABCMeta) and is_metaclass(type) and not is_metaclass(abc.ABC) and is_class(abc.ABC)
    with pytest.raises(S2OError):
        guarded_call(abc.ABCMeta, "S", (str,), {})


# -- each guard, handed lying subclasses -----------------------------------------------------------

def test_getattr_and_hasattr_refuse_any_str_subclass():
    for name in (LyingStr("__globals__"), LyingStr("real")):
        for guard in (guarded_getattr, guarded_hasattr):
            with pytest.raises(S2OError) as err:
                guard(1, name)
            assert err.value.code == "attribute"
    with pytest.raises(S2OError) as err:
        check_attribute(1, 5)
    assert err.value.code == "runtime"
    assert guarded_getattr(1, "real") == 1


def test_kwargs_guard_reads_the_real_contents_and_returns_a_plain_dict():
    class LyingDict(dict):
        def keys(self) -> Any:  # type: ignore[override]
            return ["x"]

        def items(self) -> Any:  # type: ignore[override]
            return [("x", 1)]

    with pytest.raises(S2OError) as err:
        guard_kwargs(LyingDict(_one_shot=True))
    assert err.value.code == "underscore"

    class Shifty:
        """A mapping whose keys() changes between the guard's call and Python's."""

        def __init__(self) -> None:
            self.calls = 0

        def keys(self) -> list[str]:
            self.calls += 1
            return ["x"] if self.calls == 1 else ["_one_shot"]

        def __getitem__(self, key: str) -> int:
            return 1

    out = guard_kwargs(Shifty())
    assert out == {"x": 1} and type(out) is dict
    with pytest.raises(S2OError) as err:
        guard_kwargs({LyingStr("_one_shot"): 1})
    assert err.value.code == "underscore"
    keys = list(guard_kwargs({LyingStr("sep"): "-"}))
    assert keys == ["sep"] and type(keys[0]) is str


def test_kwargs_guard_through_a_session():
    s = Session(Engine(bare_settings({"allowlist": "sorted"})), locals={"opts": {"reverse": True}})
    assert s.evaluate("sorted([1, 3, 2], **opts)") == [3, 2, 1]


def test_gather_refuses_anything_but_false():
    class Falsy(int):
        def __bool__(self) -> bool:
            return False

    coro = guarded_gather(return_exceptions=Falsy(1))
    with pytest.raises(S2OError) as err:
        coro.send(None)
    assert err.value.code == "not-allowed"


def test_import_guard_refuses_lying_names():
    class Harmless(str):
        def split(self, *args: Any) -> list[str]:  # type: ignore[override]
            return ["time"]

    with pytest.raises(S2OError) as err:
        guarded_import(Harmless("os"))
    assert err.value.code == "not-allowed" and "'os'" in err.value.message
    assert guarded_import("time") is __import__("time")


def _generator() -> Any:
    return (x for x in [1])


@pytest.mark.parametrize("make", [
    lambda g: type("L", (list,), {"__iter__": lambda self: iter([])})([g]),
    lambda g: type("T", (tuple,), {"__iter__": lambda self: iter(())})((g,)),
    lambda g: type("D", (dict,), {"keys": lambda self: [], "values": lambda self: [],
                                  "__iter__": lambda self: iter([])})({"k": g}),
    lambda g: type("D", (dict,), {"keys": lambda self: []})({g: 1}),
    lambda g: type("S", (frozenset,), {"__iter__": lambda self: iter([])})([g]),
    lambda g: {"k": g}.values(),
    lambda g: {g: 1}.keys(),
    lambda g: ValueError("x", [g]),
    lambda g: types.MappingProxyType({"k": [g]}),
    lambda g: [[[g]]],
], ids=["list", "tuple", "dict-values", "dict-keys", "frozenset", "values-view", "keys-view", "exception-args",
        "mappingproxy", "nested"])
def test_result_and_locals_check_sees_through_subclasses_and_views(make):
    gen = _generator()
    with pytest.raises(S2OError) as err:
        check_value(make(gen), "the result")
    assert err.value.code == "not-allowed" and "generator" in err.value.message
    s = Session(Engine(bare_settings({"allowlist": ""})))
    with pytest.raises(S2OError):
        s.set_local("hidden", make(_generator()))
    assert "hidden" not in s.locals


def test_result_check_refuses_metaclasses_and_module_subclasses():
    class Mod(types.ModuleType):
        pass

    for value in (abc.ABCMeta, [type], Mod("m")):
        with pytest.raises(S2OError) as err:
            check_value(value, "the result")
        assert err.value.code == "not-allowed"
    check_value([abc.ABC, int, {"a": (1, "b")}], "the result")  # classes that build nothing are values


def test_allowlist_loader_and_lookup_read_exact_strings():
    class LyingText(str):
        def splitlines(self, *args: Any) -> list[str]:  # type: ignore[override]
            return ["len"]

    with pytest.raises(S2OError) as err:
        load_allowlist(LyingText("eval"))
    assert err.value.code == "refused-entry"

    class LyingPath(str):
        def split(self, *args: Any) -> list[str]:  # type: ignore[override]
            return ["json", "dumps"]

    al = load_allowlist("json")
    assert al.lookup(LyingPath("json.codecs")) is None
    assert al.grants("json.dumps") and not al.grants("json.codecs")


def test_sys_exists_with_a_lying_name_through_a_session():
    s = Session(Engine(_unsafe("json\nabc\nstr")))
    # the class cannot be built any more; the name goes in as a plain string
    with pytest.raises(S2OError):
        s.evaluate("sys.exists('allowlist', abc.ABCMeta('S', (str,), {'split': {'.': ['json']}.get})('json.codecs'))")
    assert s.evaluate("sys.exists('allowlist', 'json.codecs')") is False

