"""Expressions run without the watchdog (issue 12; ``docs/performance.md``, "Method calls").

``Execution.evaluate`` runs a cached expression without arming the time limit when it runs no bytecode:
nothing in it dispatches to a value's methods (``name``, ``[a, b]``), or the names it operates on hold
exact builtin scalars and its only calls are C methods of them or the engine's bounded helpers
(``name.upper()``, ``a + b``; :func:`s2o_kernel.engine.unwatched.plan`), tested at run time by the
values' exact types. These tests check the other side: everything that does not qualify — at compile
time (a call of a function, a sized helper, a method not listed, an argument that calls, a guarded
engine) or at run time (a subclass, a secret, a host object, a container operated on, a name not set)
— still runs under the time limit; and what does qualify gives exactly what the armed path gives.
``tests/security/test_operators_watched.py`` stops payloads that the call-free path used to run unwatched.
"""

from __future__ import annotations

import ast
import contextlib
import types
from typing import Any

import pytest
from hot import has_functions, only_armed

from s2o_kernel.engine import Engine, Session, bare_settings, default_settings, reach, unwatched
from s2o_kernel.engine.bounded import SIZED_METHODS
from s2o_kernel.engine.denylist import FORMAT_ATTRIBUTES
from s2o_kernel.engine.execution import Execution
from s2o_kernel.engine.values import check_value

STR, INT = frozenset({str}), frozenset({int, bool})
ARG = OP = unwatched.OPERAND_TYPES
SUB = unwatched.SUBSCRIBED_TYPES
NUM = unwatched.FAST_OPERAND_TYPES


def needs(source: str, **settings: Any) -> Any:
    """``Compiled.unwatched`` of ``source`` under the default settings (merged with ``settings``)."""
    return Engine(default_settings() if not settings else bare_settings(settings)).compile(source).unwatched


# -- what qualifies, at compile time -----------------------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    ("name.upper()", (("name", STR),)),
    ("text.split(',', 2)", (("text", STR),)),
    ("text.split(sep=None, maxsplit=n)", (("text", STR), ("n", ARG))),
    ("n.bit_length() + 1", (("n", INT),)),
    ("x.as_integer_ratio()", (("x", frozenset({int, bool, float})),)),
    ("name.upper() if flag else other", (("flag", OP), ("name", STR))),  # the test is tested for truth
    ("name.startswith(p) and name == p", (("name", STR), ("p", ARG))),
    # the numeric fast path of the bounded * and % on names of numbers and small constants (never the
    # helper), and f-strings: the engine's own helpers, on operated-on names
    ("n % 3", (("n", unwatched.FAST_OPERAND_TYPES),)), ("a * b", (("a", NUM), ("b", NUM))),
    ("x * 1.5 + 2 * x", (("x", NUM),)), ("2 * 3", ()), ("f'{name!r:>{w}}'", (("name", OP), ("w", OP))),
    # no call: every name operated on is tested, a name only carried is not
    ("a + b", (("a", OP), ("b", OP))), ("x if flag else y", (("flag", OP),)), ("[*a]", (("a", OP),)),
    ("row['name']", (("row", SUB),)), ("xs[0] + 1", (("xs", SUB),)), ("agent.x", (("agent", OP),)),
    ("{a}", (("a", OP),)), ("{'k': a}", ()), ("[a, (b, 1)]", ()), ("name", ()),
])
def test_method_calls_of_builtin_values_qualify(source, expected):
    assert needs(source) == expected


@pytest.mark.parametrize("source", [
    "len(name)",  # a call of a name: any function, Python code included
    # an operator's helper: its C work grows faster than its operands (a big int's remainder: quadratic)
    "name.upper() * 2", "n.bit_length() ** 2", "n ** 2", "n << 3", "n * 2 ** 70", "n % (2 ** 62)", "'-' * n",
    "name.replace('a', 'b')", "sep.join(parts)", "name.encode('idna')", "name.translate(table)",
    "name.zfill(5)", "name.center(9)", "name.expandtabs(4)", "n.to_bytes(2, 'big')",  # sized: a helper call
    "d.get('k')", "lst.sort()", "d.keys()",  # containers: items' dunders (lst.count(x) qualifies by its name:
    # the run-time test then finds a list, not a str; see test_only_exact_builtin_values_skip_the_time_limit)
    "name.upper().split().count(x)",  # list.count on the split's result
    # two method calls: each is one C call over a text of any length, and only the watchdog stops between
    # two (red team of 2026-12-04, fifth round; unwatched.MAX_UNWATCHED_CALLS)
    "name.strip().lower()", "name.upper().count(x)", "name.startswith(p) and name.endswith(p)",
    "name.split()[0].upper()", "d['k'].upper()", "agent.name.upper()", "sys.inputs.get('q')",
    "name.count(str(x))", "name.count(x.y)", "name.count(d['k'])", "name.count(*xs)", "name.strip(**kw)",
    "name.count([1][0])", "name.count(b'x')",
    "f'{name}'.upper()",  # a method of an f-string's value: its type is not known
    "[c.upper() for c in name]", "(c.upper() for c in name)", "{k: k.upper() for k in name}",
    "[x for x in name]", "name.upper() + str(1)",  # a second call
    "n.bit_length() % 3", "name.upper() % x",  # % of what may be text: its width check loops in Python
])
def test_anything_else_does_not_qualify(source):
    assert needs(source) is None


def test_await_and_guarded_code_do_not_qualify():
    s = Session(Engine(bare_settings({"allowlist": "asyncio.sleep"})))
    assert s.engine.compile("(await asyncio.sleep(0, name)).upper()").unwatched is None
    guarded = Engine(bare_settings({"allowlist": "len"}), guard=True)
    assert guarded.guarded and guarded.compile("name.upper()").unwatched is None


def test_a_guarded_engine_never_runs_unwatched_even_if_its_guards_missed_a_call(monkeypatch):
    """Two locks: a guarded tree's calls go through guard helpers (hidden names), and a guarded engine
    does not even ask."""
    monkeypatch.setattr(reach, "guard_tree", lambda tree: None)
    guarded = Engine(bare_settings({"allowlist": "str"}), guard=True)
    assert guarded.compile("name.title()").unwatched is None


def test_a_hidden_name_never_qualifies():
    """A name the rules' rewrites put in (a helper) disqualifies the whole expression, whatever it calls."""
    tree = ast.parse("__s2o_x.upper()", mode="eval")
    assert unwatched.needs(tree) is None
    assert unwatched.needs(ast.parse("name.count(__s2o_x)", mode="eval")) is None
    assert unwatched.needs(ast.parse("name.upper() + __s2o_x", mode="eval")) is None


def test_the_methods_listed_are_c_methods_never_bounded_or_refused():
    c_kinds = (types.MethodDescriptorType, types.BuiltinMethodType, types.ClassMethodDescriptorType,
               types.WrapperDescriptorType)
    for kind, names in unwatched.UNWATCHED_METHODS.items():
        assert kind in (str, int, bool, float)
        for name in names:
            assert isinstance(getattr(kind, name), c_kinds), (kind, name)
            assert name not in SIZED_METHODS and name not in FORMAT_ATTRIBUTES and not name.startswith("_")
    for name in unwatched.STR_RESULTS:
        assert name in unwatched.UNWATCHED_METHODS[str]
        assert type(getattr(" Ab_c ", name)(*(("A",) if name.startswith("remove") else ()))) is str


# -- what runs without the watchdog, at run time ----------------------------------------------------------

class Spy(dict):  # type: ignore[type-arg]
    """Stands for the watchdog's table of armed deadlines: records every arming."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        self.armed += 1
        super().__setitem__(key, value)


def armed_when_hot(s: Session, source: str) -> tuple[bool, Any]:
    """Whether the second (hot) evaluation of ``source`` armed the time limit, and its outcome."""
    with contextlib.suppress(Exception):
        s.evaluate(source)  # cold: compiled, and run under the limit
    spy = Spy()
    s.execution._armed = spy
    try:
        outcome: Any = s.evaluate(source)
    except Exception as exc:
        outcome = (type(exc).__name__, getattr(exc, "code", None))
    return bool(spy.armed), outcome


class Shouty(str):
    """A ``str`` subclass with a Python method of a listed name."""

    def upper(self) -> str:
        return "python code ran"


class Count(int):
    def bit_length(self) -> int:
        return -1


@pytest.mark.parametrize("locals_, source, armed", [
    ({"name": "ab"}, "name.upper()", False),
    ({"name": "ab", "x": "b"}, "name.count(x)", False),
    ({"name": "ab", "x": "b"}, "name.strip().count(x)", True),  # two method calls
    ({"n": 5}, "n.bit_length()", False),
    ({"n": True}, "n.bit_length()", False),
    ({"x": 2.5}, "x.is_integer()", False),
    ({"name": Shouty("ab")}, "name.upper()", True),  # a subclass: its method is Python code
    ({"n": Count(5)}, "n.bit_length()", True),
    ({"name": "ab", "x": Shouty("b")}, "name.count(x)", True),  # an argument of a subclass
    ({"name": "ab", "x": [1]}, "name.count(x)", True),  # an argument of another type
    ({"name": 5}, "name.upper()", True),  # a method of another type than the one the value is
    ({"x": "ab"}, "x.is_integer()", True),
    ({"name": ["ab"]}, "name.count('ab')", True),
    ({}, "name.upper()", False),  # not set: refused (unknown-name) before anything runs, nothing armed (red
    # team of 2026-12-04: a function ran until it read the name); a name not set in a branch not taken: below
    ({"name": None}, "name.upper()", True),
    # no call: operands, subscripts and attribute reads run the values' dunders
    ({"a": 1, "b": "x"}, "a == b", False),
    ({"name": "ab"}, "name", False),  # dispatches nothing: the simple path
    ({"name": Shouty("ab")}, "name", False),
    ({"name": Shouty("ab")}, "name + 'c'", True),
    ({"xs": [1], "d": {"k": 1}}, "(xs[0], d['k'])", False),
    # an item used is tested where it is made: an exact scalar runs unwatched, anything else armed
    ({"xs": [1], "d": {"k": 1}}, "xs[0] and d['k']", False),
    ({"xs": [[1]], "d": {"k": 1}}, "xs[0] and d['k']", True),
    ({"xs": [1]}, "xs[0] + 1", False),
    ({"xs": [Shouty("a")]}, "xs[0] + 'b'", True),
    ({"xs": [[1]]}, "xs[0] + 1", True),
    ({"xs": [[[1]]]}, "xs[0][0][0] + 1", False),
    ({"xs": [Shouty("ab")]}, "xs[0][0] + 'b'", True),  # an item subscripted again must be of an exact type
    ({"xs": [[1]]}, "xs[0][0] + 1", False),
    ({"xs": [1]}, "xs == xs", True),  # a list compares its items with their own __eq__
    ({"xs": [1]}, "[*xs]", True),
    ({"a": 1}, "f'{a}'", False),
    ({"a": [1]}, "f'{a}'", True),
    ({"a": None}, "a is None", True),  # None: the test cannot tell it from an allowlist name
])
def test_only_exact_builtin_values_skip_the_time_limit(locals_, source, armed):
    s = Session(Engine(bare_settings({"allowlist": "len", "allow_unsafe_entries": True})), locals=locals_)
    assert not s.engine.guarded
    assert armed_when_hot(s, source)[0] is armed


def test_a_python_method_of_a_subclass_still_runs_under_the_time_limit():
    """A ``str`` subclass whose ``upper`` never ends (a host object, allowed unguarded by
    ``allow_unsafe_entries``): the hot evaluation is stopped by the time limit, not run unwatched."""
    class Endless(str):
        def upper(self) -> str:
            while True:
                pass

    s = Session(Engine(bare_settings({"allowlist": "len", "allow_unsafe_entries": True, "limits": {"time": 0.2}})),
                locals={"name": "ab"})
    assert s.evaluate("name.upper()") == "AB"
    assert s.evaluate("name.upper()") == "AB"  # hot, unwatched
    s.set_local("name", Endless("ab"))
    with pytest.raises(Exception) as raised:
        s.evaluate("name.upper()")
    assert getattr(raised.value, "code", None) == "timedOut"


def test_secrets_host_objects_and_guarded_sessions_take_the_armed_path():
    s = Session(Engine(bare_settings({"allowlist": "len", "secrets": {"K": "sk-1"}})), locals={"name": "ab"})
    s.evaluate("name.upper()")
    s.set_local("t", s.evaluate("f'Bearer {sys.secret[\"K\"]}'"))
    assert type(s.locals["t"]) is not str
    assert armed_when_hot(s, "t.upper()")[0]
    assert not armed_when_hot(s, "name.upper()")[0]

    class Host:
        pass
    s.set_local("host", Host())  # a host object turns the session guarded: its code has no unwatched calls
    assert s.engine.guarded
    assert armed_when_hot(s, "name.upper()") == (True, "AB")


# -- the same outcome either way --------------------------------------------------------------------------

OUTCOME_CASES = [
    ("name.upper()", {"name": "abc"}), ("name.strip().lower().count(x)", {"name": " AbA ", "x": "a"}),
    ("text.split(',')", {"text": "a,b,,c"}), ("text.partition(x)", {"text": "k=v", "x": "="}),
    ("name.index('zz')", {"name": "abc"}), ("name.count(5)", {"name": "abc"}),
    ("name.split(None, n)", {"name": "a b c", "n": 1}), ("n.bit_length() + n.bit_count()", {"n": 255}),
    ("x.is_integer() or x.hex()", {"x": 2.5}), ("name.upper() + other", {"name": "a", "other": 1}),
    ("name.upper()[5]", {"name": "a"}), ("name.upper()", {"name": 7}), ("missing.upper()", {}),
    ("text.splitlines()", {"text": "a\nb\n" * 4}),
]


def outcome_of(s: Session, source: str) -> Any:
    try:
        return ("value", s.evaluate(source))
    except Exception as exc:
        return ("error", getattr(exc, "code", type(exc).__name__), str(exc), getattr(exc, "line", None),
                getattr(exc, "col", None))


@pytest.mark.parametrize("source, locals_", OUTCOME_CASES)
def test_unwatched_and_armed_evaluations_give_the_same_outcome(source, locals_):
    s = Session(Engine(default_settings()), locals=locals_)
    first = outcome_of(s, source)  # cold: eval of the compiled code, under the time limit
    hot = outcome_of(s, source)  # the expression's functions made; the tested one runs it
    only_armed(s.execution)  # only the plain function is left: it runs under the time limit
    spy = Spy()
    s.execution._armed = spy
    armed = outcome_of(s, source)
    assert first == hot == armed
    assert spy.armed == has_functions(s.execution, source)


def test_an_unwatched_value_needs_no_result_check():
    """The unwatched path returns its value unchecked: made by C code of exact builtin values (a list of
    str from ``split``), or read from variables checked when set. Each such value passes the check."""
    s = Session(Engine(default_settings()), locals={"text": "a,b,c", "row": {"k": [1, "x"]}, "n": 7})
    for source in ("text.split(',')", "text.partition(',')", "row['k']", "n.as_integer_ratio()", "[text, n]"):
        cold = s.evaluate(source)
        spy = Spy()
        s.execution._armed = spy
        hot = s.evaluate(source)
        assert (hot, spy.armed) == (cold, 0)
        check_value(hot, "the result of an expression")


def test_the_hot_path_takes_the_unwatched_branch():
    """So the comparisons above compare two paths: with the type test failing, evaluate arms the limit."""
    s = Session(Engine(bare_settings({"allowlist": "len", "allow_unsafe_entries": True})), locals={"name": "ab"})
    assert armed_when_hot(s, "name.upper()") == (False, "AB")
    assert Execution.evaluate is type(s.execution).evaluate
    s.set_local("name", Shouty("ab"))  # the tested function is unsure: the plain one runs, armed
    assert armed_when_hot(s, "name.upper()") == (True, "python code ran")
