"""Red team of the store guard, second pass (engine/stores.py, engine/kept.py, engine/values.py; SPEC 12).

Same invariant as ``test_stores_redteam.py``: whatever an expression does — succeed, or end with a coded
error — no variable of the session is left holding what ``check_value`` refuses (here, the granted iterator
``countdown(1)`` returns). Each source runs twice: cold, then hot. Then the other side: ordinary expressions
that the guard now refuses, answers differently from Python, or makes quadratic.

Classes of route found:

* *C iterators that ``check_value`` does not open*: ``reversed(dict)`` / ``reversed(d.values())`` /
  ``reversed(d.items())`` (``dict_reverse*iterator``) and the iterators of an ``OrderedDict``
  (``odict_*iterator``) are not in ``values.LAZY_ITERATOR_TYPES`` (nor ``kept.ITERATORS``), and their type's
  module is ``builtins``/``collections`` with no ``__dict__``: they pass the check whole, holding a dict that
  holds a granted iterator; a consuming method (``xs.extend``) then iterates them after the check. Works with
  the embedded default allowlist (``reversed``, ``dict``, ``countdown``);
* *a granted callee that composes a maker and a keeper it is handed*: ``json.loads(s, parse_int=countdown,
  object_hook=xs.append)`` — a Python function, not ``HIGHER_ORDER``, with no argument the static half takes as
  made, so the call is not rewritten at all (and checking ``countdown``/``xs.append`` would pass anyway): the C
  scanner calls the maker, then hands the made value to the keeper. Default allowlist. The same shape in
  ``xml.etree.ElementTree``: a ``TreeBuilder(element_factory=...)`` calls the factory and then
  ``parent.append(child)`` on whatever the factory returned, a session list included;
* *the ``GuardedCallable`` wrapper leaks*: a ``HIGHER_ORDER`` callee wraps every callable argument that may
  keep or call, including ones it returns as data (``max(..., default=f)``, ``functools.reduce(g, [], f)``),
  unchecked (``_call_wrapped`` checks nothing). ``check_value`` does not open a ``GuardedCallable``, so
  ``d.update(k=min((y for y in []), default=[countdown(1)].append))`` stores a value that holds a granted
  iterator (through the bound method's list), and ``max(<empty>, default=statistics.mean) is
  statistics.mean`` is ``False``.

False positives: a consuming call the guard does not know as consuming (``Counter.update``,
``OrderedDict.update``, ``defaultdict.update``, ``set.symmetric_difference_update``) or a Python function with
a callable argument (``heapq.nlargest(..., key=...)``, ``json.dumps(..., default=...)``) refuses a generator
argument Python consumes; and each call through a ``GuardedCallable`` re-checks all its arguments (a ``partial``
re-checks what it carries), so ``sorted(keys, key=functools.partial(operator.getitem, table))`` and the
``functools.reduce(operator.iconcat, ..., [])`` flatten idiom become O(n²).
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import json
import operator
import statistics

import pytest
from stores_harness import assert_clean, evaluate_any, hidden_parts, make_session

from s2o_kernel.engine import S2OError, Session, kept

ALLOWLIST = "\n".join([
    "itertools", "functools", "operator", "collections", "heapq", "json", "statistics", "list", "dict", "map",
    "sorted", "set", "len", "min", "max", "reversed", "range", "iter",
    "xml.etree.ElementTree as ET", "s2o_kernel.examples.countdown as countdown",
])

STATE = {"xs": "{[]}", "d": "{ {} }", "st": "{set()}", "dq": "{collections.deque()}"}


def _session(allowlist: str | None = ALLOWLIST, state: dict | None = None) -> Session:
    return make_session(allowlist, STATE if state is None else state)


_run = evaluate_any
_assert_clean = assert_clean



# -- C iterators check_value does not open ------------------------------------------------------------------

UNOPENED = [
    pytest.param("xs.extend(reversed({countdown(1): 0}))", id="reversed-dict-keys"),
    pytest.param("xs.extend(reversed({'k': countdown(1)}.values()))", id="reversed-dict-values"),
    pytest.param("xs.extend(reversed({'k': countdown(1)}.items()))", id="reversed-dict-items"),
    pytest.param("d.update(reversed({'k': countdown(1)}.items()))", id="dict-update-reversed-items"),
    pytest.param("st.update(reversed({countdown(1): 0}))", id="set-update-reversed-keys"),
    pytest.param("dq.extend(reversed({countdown(1): 0}))", id="deque-extend-reversed-keys"),
    pytest.param("operator.iadd(xs, reversed({countdown(1): 0}))", id="iadd-reversed-keys"),
    pytest.param("xs.extend(iter(collections.OrderedDict(k=countdown(1)).values()))", id="odict-values"),
    pytest.param("xs.extend(iter(collections.OrderedDict(k=countdown(1)).items()))", id="odict-items"),
    pytest.param("xs.extend(iter(collections.OrderedDict({countdown(1): 0})))", id="odict-keys"),
    pytest.param("xs.extend(reversed(collections.OrderedDict(k=countdown(1)).values()))", id="odict-reversed"),
]


@pytest.mark.parametrize("source", UNOPENED)
def test_an_unopened_dict_iterator_given_to_a_consuming_call(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_an_unopened_dict_iterator_default_allowlist() -> None:
    s = _session(None, {"xs": "{[]}"})
    for _ in range(2):
        _run(s, "xs.extend(reversed({countdown(1): 0}))")
        _assert_clean(s, ["xs"])


def test_an_unopened_dict_iterator_held_in_a_variable_default_allowlist() -> None:
    """Set by ``var`` (the set-time check passes it whole), consumed later by a call with nothing made."""
    s = _session(None, {"xs": "{[]}"})
    run = s.run_fragment({"var": {"r": "{reversed({'k': countdown(1)}.values())}"}})
    if run.error is not None:  # refusing it when it is set closes the route too
        assert run.error.code == "not-allowed", run.error
        return
    _run(s, "xs.extend(r)")
    _assert_clean(s, ["xs"])


def test_an_unopened_dict_iterator_kept_then_moved_by_an_item() -> None:
    """``heapq.heappush`` keeps the iterator itself (checked, passes); ``xs.extend(xs[0])`` has nothing made."""
    s = _session()
    _run(s, "heapq.heappush(xs, reversed({countdown(1): 0}))")
    _run(s, "xs.extend(xs[0])")
    _assert_clean(s, STATE)


# -- a granted callee that composes a maker and a keeper ------------------------------------------------------

JSON_HOOKS = [
    pytest.param("""json.loads('{"a": 1}', parse_int=countdown, object_pairs_hook=d.update)""", id="pairs-hook"),
    pytest.param("""json.loads('{"a": 1}', parse_int=countdown, object_hook=xs.append)""", id="object-hook"),
    pytest.param("""json.loads('{"a": 1.5}', parse_float=countdown, object_hook=xs.append)""", id="parse-float"),
    pytest.param("""json.loads('{"a": NaN}', parse_constant=countdown, object_hook=xs.append)""",
                 id="parse-constant"),
    pytest.param("""json.JSONDecoder(parse_int=countdown, object_pairs_hook=d.update).decode('{"a": 1}')""",
                 id="decoder"),
]


@pytest.mark.parametrize("source", JSON_HOOKS)
def test_json_hooks_compose_a_maker_and_a_keeper_default_allowlist(source: str) -> None:
    s = _session(None, {"xs": "{[]}", "d": "{ {} }"})
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, ["xs", "d"])


@pytest.mark.parametrize("source", [
    pytest.param("ET.XMLParser(target=ET.TreeBuilder(element_factory={'r': xs, 'c': countdown(1)}.get))"
                 ".feed('<r><c/></r>')", id="parser-feed"),
    pytest.param("ET.fromstring('<r><c/></r>', parser=ET.XMLParser(target=ET.TreeBuilder("
                 "element_factory={'r': xs, 'c': countdown(1)}.get)))", id="fromstring"),
])
def test_a_tree_builder_appends_what_its_factory_makes_to_a_variable(source: str) -> None:
    """The C ``TreeBuilder`` calls ``element_factory(tag, attrib)`` and, when the parent it made is no
    ``Element``, ``parent.append(child)``: with a factory that returns ``xs`` for the root and a granted
    iterator for the child, the parser appends the iterator to ``xs`` with no guard."""
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


# -- the GuardedCallable wrapper -----------------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    pytest.param("d.update(k=min((y for y in []), default=[countdown(1)].append))", id="min-default"),
    pytest.param("d.update(k=functools.reduce(max, (y for y in []), [countdown(1)].append))", id="reduce-initial"),
    pytest.param("xs.append(max((y for y in []), default=[countdown(1)].append))", id="append-max-default"),
])
def test_a_wrapped_callable_holding_a_granted_iterator_is_not_kept(source: str) -> None:
    """A ``HIGHER_ORDER`` callee returns the wrapper it was handed; ``check_value`` does not open it."""
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_a_wrapped_callable_is_never_a_result() -> None:
    s = _session()
    for _ in range(2):
        try:
            value = s.evaluate("min((y for y in []), default=[countdown(1)].append)")
        except S2OError as err:
            assert err.code == "not-allowed", err
            continue
        assert not hidden_parts(value), value


@pytest.mark.parametrize("source", [
    "max((y for y in []), default=statistics.mean) is statistics.mean",
    "min((y for y in ys), default=statistics.mean) == 1",
    "functools.reduce(max, (y for y in []), statistics.median) is statistics.median",
    "max((y for y in []), default=xs.append) == xs.append",
])
def test_a_higher_order_callee_returns_what_it_was_given(source: str) -> None:
    s = _session(state={**STATE, "ys": "{[3, 1, 2]}"})
    for _ in range(2):
        assert s.evaluate(source) is True, source


# -- false positives: Python's answer, unchanged ---------------------------------------------------------------

FP_STATE = {"xs": "{[]}", "ys": "{[3, 1, 2]}", "words": '{["bb", "a", "ccc", "a"]}', "d": "{ {'a': 3, 'b': 1} }",
            "cnt": "{collections.Counter()}", "od": "{collections.OrderedDict()}",
            "dd": "{collections.defaultdict(list)}", "st": "{ {1, 5} }"}
FP_PYTHON = {"xs": [], "ys": [3, 1, 2], "words": ["bb", "a", "ccc", "a"], "d": {"a": 3, "b": 1},
             "cnt": collections.Counter(), "od": collections.OrderedDict(), "dd": collections.defaultdict(list),
             "st": {1, 5}}
FP_MODULES = {"collections": collections, "heapq": heapq, "json": json, "functools": functools,
              "operator": operator, "statistics": statistics, "itertools": itertools, "len": len, "list": list,
              "sorted": sorted, "max": max, "min": min, "dict": dict}


@pytest.mark.parametrize("source, state", [
    pytest.param("cnt.update(w.upper() for w in words)", "cnt", id="counter-update"),
    pytest.param("od.update((w, len(w)) for w in words)", "od", id="ordereddict-update"),
    pytest.param("dd.update((w, [len(w)]) for w in words)", "dd", id="defaultdict-update"),
    pytest.param("st.symmetric_difference_update(y for y in ys)", "st", id="set-symmetric-difference-update"),
    pytest.param("heapq.nlargest(2, (k for k in d), key=d.get)", None, id="nlargest-key"),
    pytest.param("heapq.nsmallest(2, (w.upper() for w in words), key=len)", None, id="nsmallest-key"),
    pytest.param("json.dumps((y * 2 for y in ys), default=list)", None, id="json-dumps-default"),
])
def test_reasonable_expressions_run_as_in_python(source: str, state: str | None) -> None:
    s = _session(ALLOWLIST, FP_STATE)
    python = {name: (value.copy() if hasattr(value, "copy") else value) for name, value in FP_PYTHON.items()}
    expected = eval(source, {**FP_MODULES, **python})
    assert s.evaluate(source) == expected
    if state is not None:
        assert s.evaluate(state) == python[state]


# -- performance: a check per call of everything a wrapped callable is given ----------------------------------

PERF_STATE = {"table": "{dict.fromkeys(range(8000), 1)}", "keys": "{list(range(8000))}",
              "big": "{list(range(20000))}", "xs": "{[]}"}


def _large(value: object) -> bool:
    """A value whose check costs thousands of items: a list or dict of 1,000 or more, or a partial with one."""
    if type(value) is functools.partial:
        return any(_large(a) for a in value.args)
    return type(value) in (list, dict) and len(value) >= 1000  # type: ignore[arg-type]


@pytest.mark.parametrize("source", [
    pytest.param("len(sorted(keys, key=functools.partial(operator.getitem, table)))", id="sort-by-partial-lookup"),
    pytest.param("len(list(map(functools.partial(operator.getitem, table), keys)))", id="map-partial-lookup"),
    pytest.param("len(functools.reduce(operator.iconcat, ([k] for k in keys), []))", id="reduce-iconcat-flatten"),
    pytest.param("xs.extend(itertools.repeat(big, 2000))", id="extend-repeat-shared"),
])
def test_ordinary_calls_stay_linear(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python runs each in a few milliseconds; a check per call of the whole table (or accumulator, or shared
    item) makes them O(n²): seconds at 8,000 items, past the 30 s time limit at a few tens of thousands. Counted,
    not timed: the store guard checks a large value at most twice in one run, not once per call."""
    s = _session(ALLOWLIST, PERF_STATE)
    s.evaluate(source)  # cold: compile
    s.evaluate("xs.clear()")
    large: list[int] = []
    checked = kept.check_kept

    def counting(value: object, what_holds: str) -> None:
        if _large(value):
            large.append(1)
        checked(value, what_holds)

    monkeypatch.setattr(kept, "check_kept", counting)
    s.evaluate(source)
    assert len(large) <= 2, f"{source}: {len(large)} checks of a large value"
