"""Fourth red team of the store guard (engine/stores.py, engine/kept.py, engine/values.py; SPEC 12), 2026-12-05.

The invariant of the first three red teams: whatever an expression does — a value, or a coded error — no variable
of the session is left holding a value the set-time check (:func:`.values.check_value`) refuses (here the granted
iterator ``countdown(1)`` returns), since later hot reads of a variable are not checked again. Each source runs
twice: cold (compiled by the run), then hot (the session's cached function).

Class of route found: *a holder the values check does not open*. The store guard checks a kept argument with
``check_value`` alone, and ``check_value`` does not open:

* C objects of the standard library outside its list: ``_json.Scanner``, the ``scan_once`` of every
  ``json.JSONDecoder``, keeps the decoder's hooks as readable members (``parse_int``, ``object_hook``…). A ``var``
  refuses it (``reach.check``: "comes from ``_json``, which is not audited"); ``xs.append(...)`` keeps it, since the
  store guard runs ``check_value`` only. **Embedded default allowlist** (``json`` and ``countdown``);
* classes of the standard library with ``__slots__`` (no ``__dict__`` for ``_stdlib_instance_parts`` to read):
  ``dataclasses.field(default=...)``, ``field(metadata=...)``, ``dataclasses.InitVar(...)`` hold any value as a
  readable attribute. Accepted by the store guard *and* by a ``var``;
* Python functions: ``functools.singledispatch(obj)`` copies ``obj.__dict__`` into the wrapper function's own
  ``__dict__`` (``update_wrapper``), so ``singledispatch(json.JSONDecoder(object_hook=countdown(1))).object_hook``
  is the granted iterator. A ``var`` refuses the wrapper; a store keeps it.

Once kept, the refused value comes out with no call at all: ``xs[0].parse_int`` (no call: the result is not
checked, ``Compiled.may_hold_objects`` is false) returns the live granted iterator, ``sum(xs[0].parse_int)`` answers
6 and then 0 in the next run (a generator's state carried between runs in a variable), and ``xs.append(xs[0].parse_int)``
(an argument the static half does not take as made: an attribute of an item of a variable) is not routed at all,
leaving the iterator itself in ``xs``.

No false positive, crash or quadratic cost was found among about 200 ordinary expressions (string, list and dict
work, comprehensions, ``sorted``/``min``/``max`` with a key, ``map``/``filter`` consumed or returned, ``json`` with
hooks, ``datetime``, ``statistics``, ``re``, ``heapq``, ``bisect``, ``itertools``, ``collections``); a sample of
them is kept below as the other side of any fix.
"""

from __future__ import annotations

import bisect
import builtins
import collections
import copy
import datetime
import functools
import heapq
import itertools
import json
import operator
import re
import statistics

import pytest
from stores_harness import assert_clean, assert_read_clean, evaluate_any, make_session

from s2o_kernel.engine import S2OError, Session

ALLOWLIST = "\n".join([
    "itertools", "functools", "operator", "collections", "json", "heapq", "bisect", "re", "datetime", "statistics",
    "dataclasses", "graphlib", "textwrap", "difflib", "list", "dict", "map", "filter", "sorted", "set", "len", "min",
    "max", "iter", "next", "str", "sum", "zip", "enumerate", "range", "reversed", "abs", "int",
    "xml.etree.ElementTree as ET", "s2o_kernel.examples.countdown as countdown",
])

STATE = {"xs": "{[]}", "d": "{ {} }"}


def _session(allowlist: str | None = ALLOWLIST, state: dict | None = None) -> Session:
    return make_session(allowlist, STATE if state is None else state)


_run = evaluate_any
_assert_clean = assert_clean
_assert_read_clean = assert_read_clean



# -- an unopened C object of the standard library: json's scanner ----------------------------------------------

SCANNER = [
    pytest.param("xs.append(json.JSONDecoder(parse_int=countdown(1)).scan_once)", "xs[0].parse_int",
                 id="parse-int"),
    pytest.param("xs.append(json.JSONDecoder(object_hook=countdown(1)).scan_once)", "xs[0].object_hook",
                 id="object-hook"),
    pytest.param("d.update(k=json.JSONDecoder(parse_float=countdown(1)).scan_once)", "d['k'].parse_float",
                 id="dict-update-parse-float"),
    pytest.param("d.setdefault('k', json.JSONDecoder(parse_constant=countdown(1)).scan_once)",
                 "d['k'].parse_constant", id="setdefault-parse-constant"),
    pytest.param("xs.append(json.JSONDecoder(object_pairs_hook=countdown(1)).scan_once)",
                 "xs[0].object_pairs_hook", id="object-pairs-hook"),
]


@pytest.mark.parametrize("source, read", SCANNER)
def test_a_json_scanner_holding_a_granted_iterator_default_allowlist(source: str, read: str) -> None:
    """``_json.Scanner`` is not opened by ``check_value``: the store guard keeps it; its hook members are read back
    with no call (not checked) and moved into a variable by a call the static half does not route."""
    s = _session(None)
    for _ in range(2):
        _run(s, source)
        _assert_read_clean(s, read)
        _run(s, f"xs.append({read})")
        _assert_clean(s, STATE)


def test_a_json_scanner_carries_a_generator_between_runs_default_allowlist() -> None:
    """The kept iterator is live: each run consumes what the last one left (Python would not keep it at all)."""
    s = _session(None)
    _run(s, "xs.append(json.JSONDecoder(parse_int=countdown(3)).scan_once)")
    answers = []
    for _ in range(2):
        try:
            answers.append(s.evaluate("sum(xs[0].parse_int)"))
        except S2OError as err:
            assert err.code, err
    assert answers in ([], [6, 6]), f"a generator's state was carried between runs: {answers}"


def test_a_var_refuses_the_json_scanner_default_allowlist() -> None:
    """What held: the set-time check of a ``var`` (``reach.check``) refuses the scanner; the store guard should
    refuse what a ``var`` refuses."""
    s = _session(None)
    run = s.run_fragment({"var": {"sc": "{json.JSONDecoder(parse_int=countdown(1)).scan_once}"}})
    assert run.error is not None and run.error.code == "not-allowed", run.error


# -- standard-library classes with __slots__: dataclasses.Field, dataclasses.InitVar -----------------------------

SLOTS = [
    pytest.param("xs.append(dataclasses.field(default=countdown(1)))", "xs[0].default", id="field-default"),
    pytest.param("d.update(f=dataclasses.field(default_factory=list, metadata={'g': countdown(1)}))",
                 "d['f'].metadata", id="field-metadata"),
    pytest.param("xs.append(dataclasses.InitVar(countdown(1)))", "xs[0].type", id="initvar-type"),
]


@pytest.mark.parametrize("source, read", SLOTS)
def test_a_slotted_stdlib_instance_holding_a_granted_iterator(source: str, read: str) -> None:
    """``values._stdlib_instance_parts`` reads an instance's ``__dict__``; a class with ``__slots__`` has none, so
    the instance is taken as holding nothing."""
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_read_clean(s, read)
        _run(s, f"xs.append({read})")
        _assert_clean(s, STATE)


@pytest.mark.parametrize("held, read", [
    pytest.param("{[dataclasses.field(default=countdown(1))]}", "f[0].default", id="field-in-a-list"),
    pytest.param("{dataclasses.InitVar(countdown(1))}", "f.type", id="initvar"),
])
def test_a_var_holding_a_slotted_stdlib_instance(held: str, read: str) -> None:
    """The set-time check itself (``check_value`` and ``reach.check``) accepts the holder."""
    s = _session()
    run = s.run_fragment({"var": {"f": held}})
    if run.error is not None:  # refusing it when it is set closes the route
        assert run.error.code == "not-allowed", run.error
        return
    _assert_read_clean(s, read)
    _run(s, f"xs.append({read})")
    _assert_clean(s, STATE)


# -- a Python function's own attributes: functools.singledispatch copies its argument's __dict__ -----------------

def test_a_singledispatch_wrapper_carries_its_arguments_attributes() -> None:
    """``singledispatch(obj)`` runs ``update_wrapper(wrapper, obj)``: the wrapper function's ``__dict__`` gets
    ``obj.__dict__``'s items; ``check_value`` does not open functions. A ``var`` refuses the wrapper."""
    s = _session()
    for _ in range(2):
        _run(s, "xs.append(functools.singledispatch(json.JSONDecoder(object_hook=countdown(1))))")
        _assert_read_clean(s, "xs[0].object_hook")
        _run(s, "xs.append(xs[0].object_hook)")
        _assert_clean(s, STATE)


# -- what held ---------------------------------------------------------------------------------------------------

HELD = [
    "xs.extend(list(map(functools.cmp_to_key(len), [countdown(1)])))",  # the key wrapper is wrapped: K(g) checked
    "xs.append(functools.singledispatch(countdown(1)).registry)",  # 'registry' refused by name
    "functools.singledispatch(xs.append).register(int, countdown(1))",
    "json.loads('[1]', parse_int=countdown, object_hook=functools.cache(xs.append))",
    "bisect.bisect_left([countdown(1)], 0, key=xs.append)",
    "xs.append(ET.Comment(countdown(1)))",
    "xs.append(json.JSONDecodeError(countdown(1), '', 0))",
    "list(map(xs.append, itertools.groupby([countdown(1)], functools.cmp_to_key(len))))",
]


@pytest.mark.parametrize("source", HELD)
def test_routes_that_held(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


# -- no false positive: Python's answer, unchanged ---------------------------------------------------------------

FP_STATE = {"xs": "{[3, 1, 2]}", "words": '{["bb", "a", "ccc", "a"]}', "d": "{ {'a': 3, 'b': 1} }",
            "s": '{"a1b2 c3"}', "acc": "{[]}", "rows": "{[{'n': 'x', 'v': 2}, {'n': 'y', 'v': 1}]}",
            "st": "{set()}", "nums": "{[1.5, 2.5, 4.0]}"}
FP_PYTHON = {"xs": [3, 1, 2], "words": ["bb", "a", "ccc", "a"], "d": {"a": 3, "b": 1}, "s": "a1b2 c3", "acc": [],
             "rows": [{"n": "x", "v": 2}, {"n": "y", "v": 1}], "st": set(), "nums": [1.5, 2.5, 4.0]}
FP_MODULES = {"json": json, "datetime": datetime, "statistics": statistics, "re": re, "collections": collections,
              "itertools": itertools, "functools": functools, "operator": operator, "heapq": heapq, "bisect": bisect,
              **{n: getattr(builtins, n) for n in ("list", "dict", "map", "filter", "sorted", "set", "len", "min", "max", "str", "sum", "zip",
                           "enumerate", "reversed", "abs", "int")}}

DEFAULT_ORDINARY = [
    "sorted(words, key=str.lower)", "min(d, key=d.get)", "sorted(d, key=d.get, reverse=True)",
    "list(map(str.upper, words))", "dict(zip(words, map(len, words)))", "sorted(words, key=words.count)",
    "list(filter(d.get, words))", "list(map(json.loads, ['1', '[2]']))", "acc.extend(map(json.loads, ['1', '[2]']))",
    "json.loads('{\"a\": 1.5}', parse_float=str)", "json.dumps({'t': datetime.date(2020, 1, 2)}, default=str)",
    "d.update(json.loads('{\"k\": [1]}', object_hook=dict))", "acc.append(json.loads('[1]', parse_int=str))",
    "acc.extend(map(datetime.date.fromisoformat, ['2020-01-02']))", "statistics.quantiles(nums, n=4)",
    "[acc.append(x) for x in sorted(xs, reverse=True)]", "acc.extend(filter(str.isalpha, s))",
    "d.setdefault('z', []).append(len(words))", "acc.extend(zip(words, xs))", "list(map(max, xs, [2, 2, 2]))",
]

WIDE_ORDINARY = [
    "heapq.nlargest(1, d, key=d.get)", "[heapq.heappush(acc, x) for x in xs]", "bisect.insort(acc, max(xs), key=abs)",
    "acc.extend(m.group() for m in re.finditer('[0-9]', s))",
    "[(k, len(list(g))) for k, g in itertools.groupby(sorted(words), key=len)]",
    "list(itertools.accumulate(xs, operator.mul))", "functools.reduce(operator.or_, [{1}, {2}], set())",
    "acc.extend(itertools.starmap(operator.mul, [(2, 3)]))", "d.update(collections.Counter(words))",
    "acc.append(json.loads('{\"b\": 1, \"a\": 2}', object_pairs_hook=collections.OrderedDict))",
    "json.dumps(datetime.date(2020, 1, 2), default=datetime.date.isoformat)",
    "sorted(xs, key=functools.cmp_to_key(operator.sub))", "acc.extend(map(functools.partial(operator.mul, 2), xs))",
    "acc.extend(sorted(map(str, xs), key=int))", "st.update(w for w in words)",
]


def _expected(source: str) -> tuple:
    python = copy.deepcopy(FP_PYTHON)
    value = eval(source, {**FP_MODULES, **python})
    return value, python


@pytest.mark.parametrize("source", DEFAULT_ORDINARY)
def test_ordinary_expressions_default_allowlist(source: str) -> None:
    s = _session(None, FP_STATE)
    value, python = _expected(source)
    assert s.evaluate(source) == value
    for name in ("acc", "d", "st"):
        assert s.evaluate(name) == python[name], name


@pytest.mark.parametrize("source", WIDE_ORDINARY)
def test_ordinary_expressions_wide_allowlist(source: str) -> None:
    s = _session(ALLOWLIST, FP_STATE)
    value, python = _expected(source)
    assert s.evaluate(source) == value
    for name in ("acc", "d", "st"):
        assert s.evaluate(name) == python[name], name
