"""Reference expressions never run code of the values they go through (SPEC 8, 12).

A reference descends only into dicts by key and lists and tuples by index, with the base types' own
methods, so a subclass that overrides ``__getitem__``, ``__contains__`` or ``__len__`` is read as the
data it holds; writing (``outputPath``) goes only through exact dicts and lists.
"""

from __future__ import annotations

from typing import Any, NoReturn

from s2o_kernel.engine import Session

D = "\u2020"
CALLED: list[str] = []


def _trap(name: str) -> Any:
    def method(self: Any, *args: Any) -> NoReturn:
        CALLED.append(name)
        raise AssertionError(f"{name} ran")
    return method


class TrapDict(dict):  # type: ignore[type-arg]
    __getitem__ = _trap("dict.__getitem__")
    __contains__ = _trap("dict.__contains__")
    __setitem__ = _trap("dict.__setitem__")
    get = _trap("dict.get")


class TrapList(list):  # type: ignore[type-arg]
    __getitem__ = _trap("list.__getitem__")
    __len__ = _trap("list.__len__")
    __setitem__ = _trap("list.__setitem__")


def _session() -> Session:
    session = Session()
    session.set_vars(locals={"d": TrapDict(inner=TrapList([10, 20])), "plain": {"x": 1}})
    return session


def test_reading_through_overriding_containers_runs_none_of_their_methods() -> None:
    CALLED.clear()
    session = _session()
    run = session.run_fragment({"var": {"got": f"{D}local.d.inner[1]", "none": f"{D}local.d.nope || {D}local.plain.x",
                                        "past": f"{D}local.d.inner[2] || {D}local.plain.x"}})
    assert run.code == "success", run.error
    assert (session.locals["got"], session.locals["none"], session.locals["past"]) == (20, 1, 1)
    assert CALLED == []


def test_writing_into_an_overriding_container_is_refused_without_calling_it() -> None:
    CALLED.clear()
    session = _session()
    assert session.run_fragment({"functions": {"main": {"commands": []},
                                               "one": {"commands": {"return": 1}}}}).code == "success"
    run = session.run_fragment({"call": {"function": "one", "outputPath": f"{D}local.d.k || {D}local.err"}})
    assert run.code == "success", run.error
    assert session.locals["err"]["code"] == "runtime"
    assert "TrapDict" in session.locals["err"]["message"]
    assert CALLED == []
