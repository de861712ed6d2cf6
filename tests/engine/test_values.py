"""What a result or a local may hold, checked deeply, and error text built safely from any value (SPEC 6, 12).

Issue 8 ("Uncoded crashes"): ``{}[10**5000]`` crashed the error mapper while it built the message, and
the result and locals checks were shallow (a generator inside ``dict.values()`` or an exception's
``args`` got through). Each finding is a test here; the classes are closed in ``engine/policy/values.py``.
"""

from __future__ import annotations

import collections
import functools
import itertools
import types

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings
from s2o_kernel.engine.policy import values as V


def _gen():
    yield 1


async def _coro():
    return 1


async def _agen():
    yield 1


def session(allowlist: str = "", **state) -> Session:
    return Session(Engine(bare_settings({"allowlist": allowlist})), **state)


# -- error text from any value ---------------------------------------------------------------------

def test_key_error_of_an_int_too_large_to_print_is_a_coded_error():
    with pytest.raises(S2OError) as info:
        session().evaluate("{}[10**5000]")
    assert info.value.code == "runtime" and info.value.python_type == "KeyError"
    assert info.value.message == "KeyError: <int with about 5,001 digits>"


def test_key_error_of_a_long_string_is_cut():
    with pytest.raises(S2OError) as info:
        session().evaluate("{}['x' * 100000]")
    assert info.value.code == "runtime"
    assert len(info.value.message) < V.MAX_TEXT + 100
    assert info.value.message.startswith("KeyError: 'xxxx")


class BadRepr:
    """A host object whose repr and str fail."""

    def __repr__(self) -> str:
        raise ValueError("no repr")

    __str__ = __repr__
    __hash__ = object.__hash__


class BadMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def raise_bad_message():
    raise BadMessage("x")


def raise_with_big_int():
    raise ValueError(10 ** 5000)


def test_key_error_of_an_object_whose_repr_raises_names_its_type():
    with pytest.raises(S2OError) as info:
        session(locals={"o": BadRepr()}).evaluate("{}[o]")
    assert info.value.code == "runtime"
    assert info.value.message == "KeyError: <BadRepr object>"


def test_key_error_of_a_deeply_nested_key_is_coded():
    key: tuple = ()
    for _ in range(5000):
        key = (key,)
    with pytest.raises(S2OError) as info:
        session(locals={"k": key}).evaluate("{}[k]")
    assert info.value.code == "runtime" and info.value.message.startswith("KeyError: ((((")


def test_an_exception_whose_str_raises_is_coded():
    s = session(locals={"boom": raise_bad_message, "big": raise_with_big_int})
    with pytest.raises(S2OError) as info:
        s.evaluate("boom()")
    assert info.value.code == "runtime" and info.value.message == "BadMessage: <the BadMessage message could not be shown>"
    with pytest.raises(S2OError) as info:
        s.evaluate("big()")
    assert info.value.message == "ValueError: <int with about 5,001 digits>"


def test_safe_texts_never_raise():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    for value in (10 ** 5000, BadRepr(), deep, "y" * 10 ** 6, {i: i for i in range(10 ** 5)}):
        assert isinstance(V.safe_repr(value), str) and len(V.safe_repr(value)) <= V.MAX_TEXT + 10
        assert isinstance(V.safe_str(value), str) and len(V.safe_str(value)) <= V.MAX_TEXT + 10
    assert V.safe_str(10 ** 5000) == "<int with about 5,001 digits>"
    assert V.safe_repr([1, "a"]) == "[1, 'a']"
    assert V.exception_text(KeyError("k")) == "'k'"
    assert V.exception_text(ValueError("a", 2)) == "('a', 2)"
    assert V.error_message(ValueError()) == "ValueError"


# -- deep result and locals checks -------------------------------------------------------------------

def _holders():
    """Values that hold a generator somewhere below the surface, by the container that hides it."""
    ns = types.SimpleNamespace(g=_gen())
    exc = ValueError("x", _gen())
    chained = ValueError("outer")
    chained.__cause__ = ValueError(_gen())
    attr_exc = KeyError("k")
    attr_exc.extra = [_gen()]
    dd = collections.defaultdict(list, {"a": [_gen()]})
    return {
        "dict.values()": {"k": _gen()}.values(),
        "dict.keys()": {_gen(): 1}.keys(),
        "dict.items()": {"k": _gen()}.items(),
        "list of dict.values()": [{"k": _gen()}.values()],
        "exception args": exc,
        "exception cause": chained,
        "exception attribute": attr_exc,
        "deque": collections.deque([1, _gen()]),
        "OrderedDict": collections.OrderedDict(a=_gen()),
        "OrderedDict.values()": collections.OrderedDict(a=_gen()).values(),
        "defaultdict": dd,
        "Counter key": collections.Counter({_gen(): 1}),
        "ChainMap": collections.ChainMap({}, {"a": _gen()}),
        "SimpleNamespace": ns,
        "slice": slice(0, _gen()),
        "partial": functools.partial(print, _gen()),
        "bound method of a generator": _gen().send,
        "map over a generator": map(str, _gen()),
        "zip": zip([1], _gen(), strict=False),
        "iterator of a list": iter([_gen()]),
        "itertools.chain": itertools.chain([1], _gen()),
        "itertools.tee": itertools.tee(_gen())[0],
        "itertools.repeat": itertools.repeat(_gen(), 2),
        "frozenset": frozenset({_gen()}),
        "deep list": functools.reduce(lambda acc, _: [acc], range(10_000), [_gen()]),
    }


@pytest.mark.parametrize("name", list(_holders()))
def test_a_generator_hidden_in_a_container_is_refused(name):
    value = _holders()[name]
    with pytest.raises(S2OError) as info:
        V.check_value(value, "the result of an expression")
    assert info.value.code == "not-allowed", name
    with pytest.raises(S2OError) as info:
        session().set_local("x", value)
    assert info.value.code == "not-allowed"


def test_coroutines_and_async_generator_awaitables_deep_inside_are_refused():
    coro = _coro()
    with pytest.raises(S2OError) as info:
        V.check_value({"k": [coro]}.values(), "the result of an expression")
    assert info.value.code == "not-awaited"
    assert coro.cr_frame is None  # closed
    agen = _agen()
    send = agen.asend(None)
    with pytest.raises(S2OError) as info:
        V.check_value([send], "the result of an expression")
    assert info.value.code == "not-allowed" and "async generator" in info.value.message
    send.close()


def test_a_raised_exception_carrying_a_traceback_is_refused():
    try:
        raise ValueError("x")
    except ValueError as exc:
        caught = exc
    with pytest.raises(S2OError) as info:
        V.check_value([caught], "the result of an expression")
    assert info.value.code == "not-allowed" and "traceback" in info.value.message


def test_a_lazy_iterator_that_cannot_be_opened_is_refused():
    with pytest.raises(S2OError) as info:
        V.check_value(itertools.pairwise([1, 2]), "the result of an expression")
    assert info.value.code == "not-allowed"


def test_a_subclass_that_lies_about_its_parts_is_read_by_the_base_type():
    class Lying(ValueError):
        @property
        def args(self):  # type: ignore[override]
            return ()

    hidden = Lying("x", _gen())
    with pytest.raises(S2OError):
        V.check_value(hidden, "the result of an expression")


def test_plain_and_harmless_values_pass():
    shared = [[1] * 1000] * 1000
    tree = [[shared] * 1000] * 10  # shared parts are visited once
    cyclic: list = [1]
    cyclic.append(cyclic)
    for value in (tree, cyclic, {"a": (1, 2.5, None, b"x")}.items(), map(str, [1, 2]), iter([1, 2]),
                  itertools.count(), ValueError("plain"), len, functools.partial(max, 1), range(10)):
        V.check_value(value, "the result of an expression")


def test_a_value_too_large_to_check_is_refused(monkeypatch):
    monkeypatch.setattr(V, "SCAN_LIMIT", 1_000)
    V.check_value([[i] for i in range(400)], "the result of an expression")
    with pytest.raises(S2OError) as info:
        V.check_value([[i] for i in range(2_000)], "the result of an expression")
    assert info.value.code == "not-allowed" and "too many to check" in info.value.message


def test_expression_results_are_checked_deeply():
    s = session("map\niter\nstr")
    for expr in ("[{1: (x for x in [1])}.values()]", "map(str, (x for x in [1]))", "iter([(x for x in [1])])",
                 "[{'k': (x for x in [1])}.items()]"):
        with pytest.raises(S2OError) as info:
            s.evaluate(expr)
        assert info.value.code == "not-allowed", expr
    assert s.evaluate("[{(1, 2): 3}.items()]")[0] == {(1, 2): 3}.items()


class RefusingHolder(dict):  # type: ignore[type-arg]
    """A host dict whose item assignment fails with an exception whose message cannot be built: refused before
    its ``__setitem__`` runs (a subclass may store something else than the value, which the journal could not
    put back: red team of 2026-12-04, sixth round)."""

    def __setitem__(self, key: object, value: object) -> None:
        raise BadMessage(key)


class NotAHolder:
    """A host object with ``__setitem__``, which ``var`` never calls (the journal could not put its item back)."""

    def __setitem__(self, key: object, value: object) -> None:
        raise AssertionError("var called the host's __setitem__")


def test_a_var_item_target_whose_holder_fails_oddly_is_a_coded_error():
    s = session(locals={"h": RefusingHolder()})
    run = s.run_fragment({"var": {"h['k']": 1}})
    assert (run.code, run.error.code, run.error.path) == ("errorInAgent", "runtime", "var.h['k']")
    assert run.error.message.startswith("TypeError: cannot set h['k']: var sets items of lists and dicts")
    s.set_local("h", NotAHolder())
    run = s.run_fragment({"var": {"h['k']": 1}})
    assert (run.code, run.error.code, run.error.path) == ("errorInAgent", "runtime", "var.h['k']")
    assert run.error.message.startswith("TypeError: cannot set h['k']: var sets items of lists and dicts")
