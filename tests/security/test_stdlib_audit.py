"""Refused entries by class, and the audited standard library (SPEC 12, issue 8).

One payload per class at least, each run for real in-process and through an
``IsolatedSession``: entries that evaluate text as code, resolve or import by
name, walk attributes through format strings, change the process, outlive the
run, build classes, or change state that later cells or the host see; a
standard-library module the table does not list is "not audited". Then the
table itself: it names real members, grants no module, metaclass or shared
mutable container at any public hop, and leaves the teaching allowlist and the
tour's allowlist loading without a warning.
"""

from __future__ import annotations

import html.entities
import importlib
import random
import sys
import textwrap
import types
from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, bare_settings, default_settings
from s2o_kernel.engine.policy import stdlib_audit as audit
from s2o_kernel.engine.policy.allowlist import load_allowlist
from s2o_kernel.engine.policy.denylist import is_class, is_metaclass

#: One entry per class of SPEC 12, with a word its refusal must give.
REFUSED_BY_CLASS = [
    ("timeit", "as code"), ("timeit.timeit", "as code"), ("cProfile.run", "as code"), ("profile", "as code"),
    ("doctest", "as code"), ("code.interact", "as code"), ("runpy", "as code"),
    ("pydoc.locate", "by name"), ("pkgutil.resolve_name", "by name"), ("logging.config", "by name"),
    ("pickle.loads", "by name"), ("importlib.import_module", "by name"),
    ("logging.Formatter", "format strings"), ("string.Formatter", "format strings"),
    ("str.format as fmt", "format strings"), ("str.format_map", "format strings"),
    ("operator.attrgetter", "attributes"),
    ("inspect", "frames"), ("traceback", "frames"), ("gc", "frames"),
    ("resource.setrlimit", "process"), ("os", "process"), ("signal", "process"), ("subprocess.run", "process"),
    ("atexit.register", "outlives"), ("atexit", "outlives"), ("concurrent.futures", "outlives"),
    ("asyncio.create_task", "outlives"), ("asyncio.ensure_future", "outlives"), ("asyncio.shield", "outlives"),
    ("abc.ABCMeta", "classes"), ("enum", "classes"), ("collections.namedtuple", "classes"),
    ("random.seed", "state"), ("calendar.setfirstweekday", "state"), ("decimal.setcontext", "state"),
    ("decimal.getcontext", "state"), ("warnings.simplefilter", "state"), ("textwrap.TextWrapper", "state"),
    ("wave", "not audited"), ("json.codecs", "not audited"), ("urllib.request", "not audited"),
    ("asyncio.Queue", "not audited"),
]


@pytest.mark.parametrize("entry,word", REFUSED_BY_CLASS, ids=[e for e, _ in REFUSED_BY_CLASS])
def test_entries_are_refused_by_class(entry, word):
    with pytest.raises(S2OError) as err:
        load_allowlist(f"len\n{entry}")
    assert (err.value.code, err.value.stage) == ("refused-entry", "load")
    message = err.value.details["lines"][entry]
    path = entry.split(" as ")[0]
    assert f"'{path}' is refused" in message and word in message, message


def test_unsafe_entries_are_accepted_with_a_warning():
    al = load_allowlist("timeit\nwave\nrandom.seed", allow_unsafe_entries=True)
    assert {"timeit", "wave", "random"} <= set(al.names)
    assert len([w for w in al.warnings if "accepted although unsafe" in w]) == 3


@pytest.mark.parametrize("entry", ["timeit", "logging.Formatter", "resource", "atexit", "abc", "wave"])
def test_refusals_hold_in_the_worker(entry):
    with pytest.raises(S2OError) as err:
        IsolatedSession(bare_settings({"allowlist": entry}))
    assert err.value.code == "refused-entry"


# -- granted modules leave no state a cell can change ------------------------------------------------

def _session(allowlist: str, kind: str) -> Any:
    settings = bare_settings({"allowlist": allowlist, "limits": {"time": 5}})
    return Session(Engine(settings)) if kind == "in-process" else IsolatedSession(settings)


@pytest.mark.parametrize("kind", ["in-process", "worker"])
def test_random_uses_a_generator_of_its_own(kind):
    session = _session("random\nrange", kind)
    try:
        random.seed(12345)
        expected = [random.random() for _ in range(3)]
        random.seed(12345)
        drawn = session.evaluate("[random.random() for i in range(5)] + [random.randint(1, 6)]")
        assert len(drawn) == 6
        assert [random.random() for _ in range(3)] == expected  # the host's sequence is untouched
        for expr in ("random.seed(1)", "random.setstate(None)"):
            with pytest.raises(S2OError) as err:
                session.evaluate(expr)
            assert err.value.code == "not-allowed"
    finally:
        if kind == "worker":
            session.close()


@pytest.mark.parametrize("kind", ["in-process", "worker"])
def test_module_tables_are_read_only_copies(kind):
    session = _session("html.entities\nkeyword\nlen", kind)
    size = len(html.entities.html5)
    try:
        for expr in ("html.entities.html5.clear()", "keyword.kwlist.append('x')",
                     "html.entities.name2codepoint.update(a=1)"):
            with pytest.raises(S2OError) as err:
                session.evaluate(expr)
            assert err.value.code == "runtime" and "AttributeError" in err.value.message, expr
        assert session.evaluate("html.entities.html5['amp;']") == "&"
        assert session.evaluate("len(keyword.kwlist)") == len(importlib.import_module("keyword").kwlist)
    finally:
        if kind == "worker":
            session.close()
    assert len(html.entities.html5) == size and "x" not in importlib.import_module("keyword").kwlist


def test_shared_state_mutators_are_left_out_of_whole_modules():
    al = load_allowlist("calendar\ndecimal\nrandom\nfunctools\ntextwrap\ncsv\nre")
    members = {name: set(vars(al.names[name])) for name in ("calendar", "decimal", "random", "functools",
                                                            "textwrap", "csv", "re")}
    assert "setfirstweekday" not in members["calendar"] and "month" in members["calendar"]
    assert not {"getcontext", "setcontext", "localcontext", "DefaultContext"} & members["decimal"]
    assert "Decimal" in members["decimal"]
    assert not {"seed", "setstate", "getstate"} & members["random"] and "choice" in members["random"]
    assert "total_ordering" not in members["functools"] and "reduce" in members["functools"]
    assert "TextWrapper" not in members["textwrap"] and "fill" in members["textwrap"]
    assert "register_dialect" not in members["csv"] and "purge" not in members["re"]
    assert any(w.startswith("calendar: granted without") and "setfirstweekday" in w for w in al.warnings)


def test_calendar_first_weekday_stays_the_hosts():
    import calendar

    s = Session(Engine(bare_settings({"allowlist": "calendar"})))
    before = calendar.firstweekday()
    with pytest.raises(S2OError):
        s.evaluate("calendar.setfirstweekday(3)")
    assert calendar.firstweekday() == before
    assert s.evaluate("calendar.isleap(2024)") is True


# -- your own packages --------------------------------------------------------------------------------

OWN_MODULE = '''
"""A package of one's own that re-exports dangerous things next to its own functions."""
import abc
import logging
import subprocess
from random import seed

run = subprocess.run
formatter = logging.Formatter("{message}", style="{")
Meta = abc.ABCMeta
reseed = seed


class Builder(type):
    """A metaclass of one's own."""


def price(x):
    return x * 2
'''


@pytest.fixture
def own_package(tmp_path, monkeypatch):
    name = f"s2o_own_pkg_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(OWN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_own_package_whole_leaves_refused_objects_out(own_package):
    al = load_allowlist(own_package)
    members = set(vars(al.names[own_package]))
    assert "price" in members
    assert not {"run", "formatter", "Meta", "Builder", "reseed"} & members
    warning = next(w for w in al.warnings if w.startswith(own_package))
    assert all(name in warning for name in ("run", "formatter", "Meta", "Builder", "reseed"))


@pytest.mark.parametrize("member,word", [("run", "subprocess"), ("formatter", "logging"), ("Meta", "classes"),
                                         ("Builder", "classes"), ("reseed", "state")])
def test_own_package_members_are_refused_singly(own_package, member, word):
    entry = f"{own_package}.{member}"
    with pytest.raises(S2OError) as err:
        load_allowlist(entry)
    assert err.value.code == "refused-entry" and word in err.value.details["lines"][entry]


def test_own_package_functions_are_granted_as_written(own_package):
    s = Session(Engine(bare_settings({"allowlist": f"{own_package}.price as price"})))
    assert s.evaluate("price(21)") == 42


# -- the table itself ------------------------------------------------------------------------------------

def _granted(module_path: str) -> dict[str, Any]:
    row = audit.STDLIB[module_path]
    module = importlib.import_module(module_path)
    if row.only is not None:
        return {n: audit.stdlib_member(module_path, module, n, o) for n, o in audit.public_members(module).items()
                if n in row.only}
    return audit.stdlib_members(module_path, module)[0]


@pytest.mark.parametrize("module_path", sorted(audit.STDLIB))
def test_audited_rows_name_real_members(module_path):
    row = audit.STDLIB[module_path]
    module = importlib.import_module(module_path)
    assert audit.is_stdlib(module_path) and row.grants
    public = set(audit.public_members(module))
    assert set(row.left_out) <= public, set(row.left_out) - public
    if row.only is not None:
        assert row.only <= public and row.whole
    for name in row.left_out:
        assert audit.member_refusal(module_path, name) == row.left_out[name]


@pytest.mark.parametrize("module_path", sorted(audit.STDLIB))
def test_audited_rows_grant_no_module_metaclass_or_shared_container(module_path):
    """Two public hops from each granted member: no module, no metaclass, no mutable container shared
    with the host (a cell could change it for everyone)."""
    problems = []
    for name, obj in _granted(module_path).items():
        hops: list[tuple[str, Any]] = [(name, obj)]
        if is_class(obj):
            for attr in dir(obj):
                if not attr.startswith("_"):
                    try:
                        hops.append((f"{name}.{attr}", getattr(obj, attr)))
                    except Exception:
                        continue
        for where, value in hops:
            if isinstance(value, types.ModuleType) or is_metaclass(value):
                problems.append(f"{module_path}.{where} is {value!r}")
            if type(value) in (dict, list, set, bytearray):
                problems.append(f"{module_path}.{where} is a shared {type(value).__name__}")
            if audit.object_refusal(value) is not None and where == name:
                problems.append(f"{module_path}.{where}: {audit.object_refusal(value)}")
    assert not problems


def test_refused_modules_are_standard_library_modules():
    for module_path in audit.REFUSED_MODULES:
        assert audit.is_stdlib(module_path), module_path
        assert module_path not in audit.STDLIB, module_path


def test_teaching_and_tour_allowlists_load_without_warnings():
    tour = ("len\nsum\nround\nsorted\nint\nstr.join\nmath.sqrt\njson\nstatistics.*\ndatetime.date as date\n"
            "s2o_kernel.examples.fetch_weather as fetch_weather\ns2o_kernel.examples.endless as endless")
    for text in (default_settings().allowlist, tour):
        assert load_allowlist(text).warnings == []


def test_textwrap_functions_still_work_without_the_class():
    s = Session(Engine(bare_settings({"allowlist": "textwrap"})))
    assert s.evaluate("textwrap.fill('a b c', 3)") == textwrap.fill("a b c", 3)


def test_security_doc_holds_the_generated_table():
    """docs/security.md shows the audited table as the engine holds it (python -m s2o_kernel.engine.policy.stdlib_audit)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    assert audit.markdown() in doc
