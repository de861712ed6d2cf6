"""The store guard's five red teams as one table (engine/policy/stores.py, engine/policy/kept.py, engine/policy/values.py, engine/policy/reach.py;
SPEC 12), 2026-12-04 and 2026-12-05.

The invariant every red team held the guard to: whatever a run does — a value, or a coded error — no variable of the
session is left holding a value the set-time check (:func:`.reach.check_kept` = ``check_value`` + ``reach.check``)
refuses, here the granted iterator ``countdown(1)`` returns, since later hot reads of a variable are not checked again
(``stores_harness.assert_clean`` opens wrapped callables and ``lru_cache`` caches too). The other side of every fix is
in the table as well: ordinary expressions give Python's answer, and what held stays refused.

Each row of :data:`ROUTES` is one payload with its set-up and its expected outcome, written as steps
(:class:`Run`, :class:`Clean`, :class:`AsPython`…): the session is made on the row's allowlist (the embedded
default's when ``None``) with the row's variables set by a ``var``; ``setup`` runs once; ``each`` runs ``passes``
times — twice by default: cold (compiled by the run), then hot (the session's cached function); ``after`` runs once.
A :class:`Held` step whose ``var`` is refused (``not-allowed``) closes the route: refusing the value when it is set
is a fix too. One test, :func:`test_store_guard_row`, runs every row. What needs other handling is below it: the
generator state carried from one run to the next, the counted (not timed) cost of a check per call, and the kernel.

Classes of route the red teams found (each row's id starts with its group):

* first (``lazy-*``, ``consumed``, ``one-argument*``, ``hidden*``, ``held-lazy``, ``live-group``, ``variants``,
  ``subelement``, ``element``; what still runs: ``reasonable-stores``, ``higher-order-python-results``): a lazy
  iterator given to a keeping callee or callable (it makes the refused values only when consumed, after the check);
  a consuming method or in-place operator given an iterator not in ``kept._ITERATORS``; one argument holding both
  the target and the made value (``*[xs, g]``, ``starmap(list.append, [(xs, g)])``); a keeping callable hidden in a
  container argument (``map(map, [xs.append], [[g]])``); a session value holding a lazy iterator, consumed later by a
  call the static half does not route; a live ``itertools._grouper``; ``ET.SubElement`` keeping its ``attrib`` in
  its first argument;
* second (``unopened*``, ``json-hooks``, ``tree-builder``, ``wrapped*``, ``returns-what-it-was-given``,
  ``python-answer-2``): C iterators ``check_value`` did not open (``reversed(dict)``, ``OrderedDict`` iterators); a
  granted callee composing a maker and a keeper (``json.loads(s, parse_int=countdown, object_hook=xs.append)``, a
  ``TreeBuilder``'s ``element_factory``); the ``GuardedCallable`` wrapper handed back as data (``max(..., default=f)``);
  false positives of consuming calls the guard did not know (``Counter.update``), and O(n²) checks per call;
* third (``hidden-keeper*``, ``getter``, ``json-cls*``, ``var-refuses``, ``held-3``, ``agent-conv``,
  ``over-a-string*``, ``reads-its-target``): a keeper hidden in an expression in a call with nothing made
  (``object_hook=[xs.append][0]``, ``**hooks``); a getter handing a tree builder a session container;
  ``json.loads``/``dumps`` handing every extra keyword to ``cls``; ``functools.cache(countdown)`` caching granted
  iterators; false positives of iterators over a ``str``/``range`` and of consuming calls whose generator reads its
  own target;
* fourth (``scanner``, ``slots*``, ``singledispatch``, ``held-4``, ``ordinary-*``): holders the values check did not
  open — ``_json.Scanner`` (``JSONDecoder(...).scan_once`` keeps the hooks as members), ``dataclasses.field``/
  ``InitVar`` (``__slots__``), ``functools.singledispatch`` copying its argument's ``__dict__``; read back with no call
  and moved by a call the static half does not route; and about 200 ordinary expressions, a sample kept;
* fifth (``item-target*``, ``output-path``, ``result``, ``refused-item``, ``item-writes``, ``async-stores``,
  ``held-5``): writes of a fragment, not calls — ``var`` and ``outputPath`` item targets changed the live holder before
  the set-time check, and ``result`` was stored with the result check only.
"""

from __future__ import annotations

import bisect
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import MODES, execute, install_spec, result_data, running_kernel
from stores_harness import assert_clean, assert_read_clean, evaluate_any, hidden_parts, make_session

from s2o_kernel.engine import S2OError, Session
from s2o_kernel.engine.policy import kept

# -- steps: what a row does, and what it expects -----------------------------------------------------------------


class _Closed(Exception):
    """A route closed before its payload ran (a ``var`` refused the value it would have used)."""


@dataclass(frozen=True)
class Run:
    """Evaluate ``source``: a value or a coded error are both fine; an internal error is not."""

    source: str

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        evaluate_any(s, self.source)


@dataclass(frozen=True)
class Ok:
    """Evaluate ``source``: it must not fail."""

    source: str

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        s.evaluate(self.source)


@dataclass(frozen=True)
class Is:
    """Evaluate ``source``: it gives ``expected`` (the very ``None``, ``True`` or ``False``; an equal value else)."""

    source: str
    expected: Any

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        value = s.evaluate(self.source)
        if self.expected is None or isinstance(self.expected, bool):
            assert value is self.expected, (self.source, value)
        else:
            assert value == self.expected, (self.source, value)


@dataclass(frozen=True)
class Refused:
    """Evaluate ``source``: it fails with a coded error, ``code`` when given."""

    source: str
    code: str | None = None

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        with pytest.raises(S2OError) as err:
            s.evaluate(self.source)
        assert err.value.code if self.code is None else err.value.code == self.code, err.value


@dataclass(frozen=True)
class NoHidden:
    """Evaluate ``source``: refused (``not-allowed``), or a value with no wrapped callable or cache inside."""

    source: str

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        try:
            value = s.evaluate(self.source)
        except S2OError as err:
            assert err.code == "not-allowed", err
            return
        assert not hidden_parts(value), value


@dataclass(frozen=True)
class AsPython:
    """Evaluate ``source`` in the session and in Python (the row's ``python`` variables): the same value (as lists,
    ``listed``), and the same value of each variable of ``names`` afterwards."""

    source: str
    names: tuple[str, ...] = ()
    listed: bool = False

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        expected = eval(self.source, env)
        value = s.evaluate(self.source)
        if self.listed:
            assert list(value) == list(expected), self.source
        else:
            assert value == expected, self.source
        for name in self.names:
            assert s.evaluate(name) == env[name], name


@dataclass(frozen=True)
class Var:
    """Run the fragment ``fragment``; its outcome is ``ok`` (no error), ``coded`` (none, or a coded one),
    ``not-allowed``, or ``ok-or-not-allowed``."""

    fragment: Any
    outcome: str = "coded"

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        try:
            run = s.run_fragment(self.fragment)
        except S2OError as err:  # pragma: no cover - run_fragment reports errors in the run
            assert self.outcome == "coded" and err.code, err
            return
        error = run.error
        if self.outcome == "ok":
            assert error is None, error
        elif self.outcome == "coded":
            assert error is None or error.code, error
        elif self.outcome == "not-allowed":
            assert error is not None and error.code == "not-allowed", error
        else:
            assert self.outcome == "ok-or-not-allowed", self.outcome
            assert error is None or error.code == "not-allowed", error


@dataclass(frozen=True)
class Held:
    """Set variables with the ``var`` ``values``; a refusal (``not-allowed``) closes the route."""

    values: dict[str, Any]

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        run = s.run_fragment({"var": self.values})
        if run.error is not None:
            assert run.error.code == "not-allowed", run.error
            raise _Closed


@dataclass(frozen=True)
class SetOrClose:
    """The variable ``name`` is set; when it is not (``not-set``: refused as it was set), the route is closed."""

    name: str

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        try:
            s.evaluate(self.name)
        except S2OError as err:
            assert err.code == "not-set", err
            raise _Closed from None


@dataclass(frozen=True)
class Clean:
    """Every variable named holds a value a session may keep (``stores_harness.assert_clean``)."""

    names: tuple[str, ...]

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        assert_clean(s, self.names)


@dataclass(frozen=True)
class ReadClean:
    """The read ``read`` is refused, or gives a value the values check accepts."""

    read: str

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        assert_read_clean(s, self.read)


@dataclass(frozen=True)
class Json:
    """Every variable named reads back as JSON."""

    names: tuple[str, ...]

    def __call__(self, s: Session, env: dict[str, Any]) -> None:
        for name in self.names:
            json.dumps(s.evaluate(name))


@dataclass(frozen=True)
class Route:
    """One row: the session (``allowlist``, ``state``), the steps, and ``python``, the same variables as Python
    values for :class:`AsPython`."""

    id: str
    allowlist: str | None
    state: dict[str, Any]
    each: tuple[Any, ...]
    passes: int = 2
    setup: tuple[Any, ...] = ()
    after: tuple[Any, ...] = ()
    python: dict[str, Any] = field(default_factory=dict)


def _named(group: str, sources: Iterable[str | tuple[str, str]]) -> list[tuple[str, str]]:
    """``(id, source)`` of each entry: ``(name, source)`` pairs are named ``group/name``, a bare source
    ``group/source``."""
    return [(f"{group}/{entry[0]}", entry[1]) if isinstance(entry, tuple) else (f"{group}/{entry}", entry)
            for entry in sources]


def stored(group: str, sources: Iterable[str | tuple[str, str]], allowlist: str | None, state: dict[str, Any],
           clean: Iterable[str] | None = None) -> list[Route]:
    """Rows that run their payload cold then hot, the variables ``clean`` (all of ``state``) clean after each run."""
    names = tuple(state if clean is None else clean)
    return [Route(rid, allowlist, state, (Run(source), Clean(names))) for rid, source in _named(group, sources)]


def scanned(group: str, pairs: Iterable[tuple[str, str, str]], allowlist: str | None,
            state: dict[str, Any]) -> list[Route]:
    """Rows ``(name, payload, read)``: after each run of the payload, the read (no call) is clean, and the value it
    reads, moved into ``xs`` by a call the static half does not route, leaves every variable clean."""
    return [Route(f"{group}/{name}", allowlist, state,
                  (Run(source), ReadClean(read), Run(f"xs.append({read})"), Clean(tuple(state))))
            for name, source, read in pairs]


def as_python(group: str, sources: Iterable[str | tuple[str, str]], allowlist: str | None, state: dict[str, Any],
              python: dict[str, Any], names: tuple[str, ...] = ()) -> list[Route]:
    """Rows whose payload gives Python's value and leaves ``names`` as Python does, run once."""
    return [Route(rid, allowlist, state, (AsPython(source, names),), passes=1, python=python)
            for rid, source in _named(group, sources)]


#: What :class:`AsPython` evaluates with, beside a row's own variables (``eval`` adds the builtins).
PYTHON_NAMES = {"bisect": bisect, "collections": collections, "datetime": datetime, "functools": functools,
                "heapq": heapq, "itertools": itertools, "json": json, "operator": operator, "re": re,
                "statistics": statistics}

COUNTDOWN = "s2o_kernel.examples.countdown as countdown"
XS = {"xs": "{[]}"}
XS_D = {"xs": "{[]}", "d": "{ {} }"}

# -- first red team (2026-12-04): routes where the value checked was not yet the value kept -----------------------

A1 = "\n".join(["itertools", "functools", "operator", "collections", "list", "dict", "map", "sorted", "set", "len",
                COUNTDOWN])
S1 = {"xs": "{[]}", "d": "{ {} }", "st": "{set()}", "dq": "{collections.deque()}"}

FIRST = [
    # a lazy iterator (map, starmap, chain…) passes check_value and is given to a keeping callee or callable
    *stored("lazy-to-keeping", [
        ("map-of-append-over-a-lazy-map", "list(map(xs.append, map(countdown, [1])))"),
        ("sort-key-append-over-a-lazy-map", "sorted(map(countdown, [1]), key=xs.append)"),
        ("partial-append", "list(map(functools.partial(list.append, xs), map(countdown, [1])))"),
        ("map-of-setdefault", "list(map(d.setdefault, 'g', map(countdown, [1])))"),
    ], A1, S1),
    *stored("lazy-to-keeping-default", ["list(map(xs.append, map(countdown, [1])))"], None, XS),
    # a consuming method or in-place operator given an iterator not in kept._ITERATORS
    *stored("consumed", [
        ("extend-starmap", "xs.extend(itertools.starmap(countdown, [(1,)]))"),
        ("extend-chain", "xs.extend(itertools.chain(map(countdown, [1])))"),
        ("extend-chain-from-iterable", "xs.extend(itertools.chain.from_iterable([map(countdown, [1])]))"),
        ("extend-islice", "xs.extend(itertools.islice(map(countdown, [1]), 1))"),
        ("update-zip-longest", "d.update(itertools.zip_longest('a', map(countdown, [1])))"),
        ("set-update-starmap", "st.update(itertools.starmap(countdown, [(1,)]))"),
        ("deque-extendleft-starmap", "dq.extendleft(itertools.starmap(countdown, [(1,)]))"),
        ("operator-iadd-map", "operator.iadd(xs, map(countdown, [1]))"),
    ], A1, S1),
    # the other side of that fix: an itertools iterator of JSON items is consumed as before
    Route("consumed/json-items-are-still-kept", A1, S1, (
        Is("xs.extend(itertools.chain([1], map(len, ['ab'])))", None),
        Is("xs.extend(itertools.starmap(len, [('abc',)]))", None),
        Is("xs", [1, 2, 3]),
    ), passes=1),
    # a consuming callee is handed the items one by one, each checked, as Python hands them: the items before a
    # refused one are kept, and a generator that reads the target sees it change
    Route("consumed/checked-as-python-consumes-it", A1, S1, (
        Refused("xs.extend(itertools.chain([1, 2], map(countdown, [1])))"),
        Is("xs", [1, 2]),
        Ok("xs.extend(w for w in 'abab' if w not in xs)"),
        Is("xs", [1, 2, "a", "b"]),
    ), passes=1),
    # one argument carrying both the target and the made value is never taken as a target
    *stored("one-argument", [
        ("unbound-append-starred", "list.append(*[xs, countdown(1)])"),
        ("unbound-extend-starred", "list.extend(*[xs, [countdown(1)]])"),
        ("unbound-update-starred", "dict.update(*[d, {'g': countdown(1)}])"),
        ("unbound-setdefault-starred", "dict.setdefault(*[d, 'g', countdown(1)])"),
        ("map-starred", "list(map(*[xs.append, [countdown(1)]]))"),
        ("starmap-pairs", "list(itertools.starmap(list.append, [(xs, countdown(1))]))"),
        ("accumulate", "list(itertools.accumulate([xs, countdown(1)], list.append))"),
        ("reduce", "functools.reduce(list.append, [xs, countdown(1)])"),
    ], A1, S1),
    *stored("one-argument-default", [
        "list.append(*[xs, countdown(1)])",
        "dict.update(*[d, {'g': countdown(1)}])",
        "list(map(*[xs.append, [countdown(1)]]))",
    ], None, XS_D),
    # a keeping callable hidden in a container argument: only top-level callable arguments were asked
    *stored("hidden", [
        ("map-of-map", "list(map(list, map(map, [xs.append], [[countdown(1)]])))"),
        ("map-of-map-setdefault", "list(map(list, map(map, [d.setdefault], ['g'], [[countdown(1)]])))"),
    ], A1, S1),
    *stored("hidden-default", ["list(map(list, map(map, [xs.append], [[countdown(1)]])))"], None, XS),
    # ... or held in a variable (fs = [xs.append])
    Route("hidden/held-in-a-variable-list", None, XS, (
        Run("list(map(list, map(map, fs, [[countdown(1)]])))"), Clean(("xs",))),
        setup=(Var({"var": {"fs": "{[xs.append]}"}}, "ok"),)),
    # a lazy iterator held in a session value, consumed later by a keeping call the static half does not route
    *[Route(f"held-lazy/{name}", None, XS, (Run(source), Clean(("xs",))), setup=(Held({"m": held}),))
      for name, held, source in [
          ("extend-a-variable", "{map(countdown, [1])}", "xs.extend(m)"),
          ("append-a-starred-display", "{map(countdown, [1])}", "xs.append([*m])"),
          ("extend-an-item", "{[map(countdown, [1])]}", "xs.extend(m[0])"),
          ("consume-a-held-map-of-append", "{map(xs.append, map(countdown, [1]))}", "list(m)"),
      ]],
    # check_value did not open itertools._grouper: a live group of granted iterators passed the guard of xs.append,
    # and xs.extend(xs[0]) (an item: nothing the static half takes as made) moved them into xs
    Route("live-group", A1, S1, (
        Run("xs.append(list(itertools.islice(itertools.groupby(map(countdown, [1])), 1))[0][1])"), Clean(tuple(S1)),
        Run("xs.extend(xs[0])"), Clean(tuple(S1)),
    ), passes=1),
    # the same classes, other shapes (found while closing them)
    *stored("variants", [
        ("cmp-to-key", "sorted([countdown(1), countdown(1)], key=functools.cmp_to_key(d.setdefault))"),
        ("made-receiver-sort-key", "[countdown(1)].sort(key=xs.append)"),
        ("callable-from-a-generator", "list(map(map, (f for f in [xs.append]), [[countdown(1)]]))"),
        ("starmap-setitem", "list(itertools.starmap(operator.setitem, [(d, 'k', countdown(1))]))"),
        ("reduce-iadd", "functools.reduce(operator.iadd, [xs, map(countdown, [1])])"),
        ("filter-keeping-predicate", "list(filter(xs.append, [countdown(1)]))"),
        ("max-keeping-key", "max([countdown(1)], key=xs.append)"),
        ("map-unbound-setdefault", "list(map(dict.setdefault, [d], ['k'], [countdown(1)]))"),
        ("callable-iterator-partial", "list(iter(functools.partial(xs.append, countdown(1)), 1))"),
        ("map-heappush", "list(map(heapq.heappush, [xs], [countdown(1)]))"),
        ("deque-consumes-a-map", "collections.deque(map(xs.append, [countdown(1)]), maxlen=0)"),
        ("extend-a-deque", "xs.extend(collections.deque([countdown(1)]))"),
    ], A1 + "\nheapq\nmax", S1),
    # kept.keeps_nothing took _elementtree.SubElement as keeping nothing; it keeps its attrib (and the new element)
    # in its first argument, and check_value did not open an Element: root[0].attrib['k'] returned the iterator
    *[Route(f"subelement/{name}", "\n".join(["xml.etree.ElementTree as ET", COUNTDOWN]),
            {"root": "{ET.Element('r')}", "xs": "{[]}"}, (Run(source),), after=(
                ReadClean("root[0].attrib"), ReadClean("root[0].attrib['k']"),
                Run("xs.append(root[0].attrib)"), Clean(("xs",))))
      for name, source in [("keyword-attribute", "ET.SubElement(root, 'a', k=countdown(1))"),
                           ("attrib-dict", "ET.SubElement(root, 'a', {'k': countdown(1)})")]],
    # check_value opens an Element (its C state): one holding a granted iterator is refused as a result and as an
    # argument of root.append
    *[Route(f"element/{name}", "\n".join(["xml.etree.ElementTree as ET", "len", COUNTDOWN]),
            {"root": "{ET.Element('r')}"}, (Refused(source, "not-allowed"),), after=(Is("len(root)", 0),))
      for name, source in [("constructed", "ET.Element('a', k=countdown(1))"),
                           ("appended", "root.append(ET.Element('a', k=countdown(1)))")]],
    # no false positive: what the guard lets through runs, and stays JSON
    *[Route(f"reasonable-stores/{source}", None,
            {"xs": "{[]}", "ys": "{[1, 2, 3]}", "words": '{["hello", "world"]}', "n": 4, "d": "{ {} }"},
            (Ok(source),), after=(Json(("xs", "d")),))
      for source in [
          "xs.append(n * 2)",
          "d.setdefault('k', []).append(n)",
          "d.setdefault('k', []).append(len(xs))",
          "sorted(words, key=len)",
          "xs.append({'a': len(xs), 'b': [n, n + 1]})",
          "xs.extend({'i': i} for i in range(3))",
          "xs.extend(map(abs, [-1, -2]))",
          "d.update(zip('ab', range(2)))",
          "[d.setdefault(w, []).append(len(w)) for w in words]",
          "xs.extend(str(x) for x in ys)",
          "xs.append([dict(zip('ab', (x, x))) for x in ys])",
          "json.dumps([x for x in ys], indent=n)",
      ]],
    *[Route(f"higher-order-python-results/{source}", A1 + "\nstr", S1, (Is(source, expected),))
      for source, expected in [
          ("list(map(str, [1, 2]))", ["1", "2"]),
          ("sorted(['b', 'a'], key=str.lower)", ["a", "b"]),
          ("functools.reduce(operator.add, [[1], [2]])", [1, 2]),
          ("list(itertools.starmap(operator.mul, [(2, 3)]))", [6]),
          ("[k for k, g in itertools.groupby('aab')]", ["a", "b"]),
          ("list(map(xs.append, [1, 2]))", [None, None]),
      ]],
]

# -- second red team (2026-12-04): values made by one callable and kept by another inside a callee -----------------

A2 = "\n".join([
    "itertools", "functools", "operator", "collections", "heapq", "json", "statistics", "list", "dict", "map",
    "sorted", "set", "len", "min", "max", "reversed", "range", "iter", "xml.etree.ElementTree as ET", COUNTDOWN,
])
S2 = S1
FP2_STATE = {"xs": "{[]}", "ys": "{[3, 1, 2]}", "words": '{["bb", "a", "ccc", "a"]}', "d": "{ {'a': 3, 'b': 1} }",
             "cnt": "{collections.Counter()}", "od": "{collections.OrderedDict()}",
             "dd": "{collections.defaultdict(list)}", "st": "{ {1, 5} }"}
FP2_PYTHON = {"xs": [], "ys": [3, 1, 2], "words": ["bb", "a", "ccc", "a"], "d": {"a": 3, "b": 1},
              "cnt": collections.Counter(), "od": collections.OrderedDict(), "dd": collections.defaultdict(list),
              "st": {1, 5}}

SECOND = [
    # C iterators check_value did not open (dict_reverse*iterator, odict_*iterator), given to a consuming call
    *stored("unopened", [
        ("reversed-dict-keys", "xs.extend(reversed({countdown(1): 0}))"),
        ("reversed-dict-values", "xs.extend(reversed({'k': countdown(1)}.values()))"),
        ("reversed-dict-items", "xs.extend(reversed({'k': countdown(1)}.items()))"),
        ("dict-update-reversed-items", "d.update(reversed({'k': countdown(1)}.items()))"),
        ("set-update-reversed-keys", "st.update(reversed({countdown(1): 0}))"),
        ("deque-extend-reversed-keys", "dq.extend(reversed({countdown(1): 0}))"),
        ("iadd-reversed-keys", "operator.iadd(xs, reversed({countdown(1): 0}))"),
        ("odict-values", "xs.extend(iter(collections.OrderedDict(k=countdown(1)).values()))"),
        ("odict-items", "xs.extend(iter(collections.OrderedDict(k=countdown(1)).items()))"),
        ("odict-keys", "xs.extend(iter(collections.OrderedDict({countdown(1): 0})))"),
        ("odict-reversed", "xs.extend(reversed(collections.OrderedDict(k=countdown(1)).values()))"),
    ], A2, S2),
    *stored("unopened-default", ["xs.extend(reversed({countdown(1): 0}))"], None, XS),
    # set by var (the set-time check passed it whole), consumed later by a call with nothing made
    Route("unopened-default/held-in-a-variable", None, XS, (Run("xs.extend(r)"), Clean(("xs",))), passes=1,
          setup=(Held({"r": "{reversed({'k': countdown(1)}.values())}"}),)),
    # heapq.heappush keeps the iterator itself (checked, passed); xs.extend(xs[0]) has nothing made
    Route("unopened/kept-then-moved-by-an-item", A2, S2, (
        Run("heapq.heappush(xs, reversed({countdown(1): 0}))"), Run("xs.extend(xs[0])"), Clean(tuple(S2)),
    ), passes=1),
    # a granted callee that composes a maker and a keeper it is handed (the C scanner calls the maker, then hands
    # what it made to the keeper)
    *stored("json-hooks", [
        ("pairs-hook", """json.loads('{"a": 1}', parse_int=countdown, object_pairs_hook=d.update)"""),
        ("object-hook", """json.loads('{"a": 1}', parse_int=countdown, object_hook=xs.append)"""),
        ("parse-float", """json.loads('{"a": 1.5}', parse_float=countdown, object_hook=xs.append)"""),
        ("parse-constant", """json.loads('{"a": NaN}', parse_constant=countdown, object_hook=xs.append)"""),
        ("decoder", """json.JSONDecoder(parse_int=countdown, object_pairs_hook=d.update).decode('{"a": 1}')"""),
    ], None, XS_D),
    # the C TreeBuilder calls element_factory(tag, attrib) and, when the parent it made is no Element,
    # parent.append(child): a factory returning xs for the root and a granted iterator for the child
    *stored("tree-builder", [
        ("parser-feed", "ET.XMLParser(target=ET.TreeBuilder(element_factory={'r': xs, 'c': countdown(1)}.get))"
                        ".feed('<r><c/></r>')"),
        ("fromstring", "ET.fromstring('<r><c/></r>', parser=ET.XMLParser(target=ET.TreeBuilder("
                       "element_factory={'r': xs, 'c': countdown(1)}.get)))"),
    ], A2, S2),
    # a HIGHER_ORDER callee returns the GuardedCallable it was handed; check_value did not open it
    *stored("wrapped", [
        ("min-default", "d.update(k=min((y for y in []), default=[countdown(1)].append))"),
        ("reduce-initial", "d.update(k=functools.reduce(max, (y for y in []), [countdown(1)].append))"),
        ("append-max-default", "xs.append(max((y for y in []), default=[countdown(1)].append))"),
    ], A2, S2),
    Route("wrapped/never-a-result", A2, S2, (NoHidden("min((y for y in []), default=[countdown(1)].append)"),)),
    *[Route(f"returns-what-it-was-given/{source}", A2, {**S2, "ys": "{[3, 1, 2]}"}, (Is(source, True),))
      for source in [
          "max((y for y in []), default=statistics.mean) is statistics.mean",
          "min((y for y in ys), default=statistics.mean) == 1",
          "functools.reduce(max, (y for y in []), statistics.median) is statistics.median",
          "max((y for y in []), default=xs.append) == xs.append",
      ]],
    # false positives: consuming calls the guard did not know, Python functions with a callable argument
    *[Route(f"python-answer-2/{name}", A2, FP2_STATE, (AsPython(source, names),), passes=1, python=FP2_PYTHON)
      for name, source, names in [
          ("counter-update", "cnt.update(w.upper() for w in words)", ("cnt",)),
          ("ordereddict-update", "od.update((w, len(w)) for w in words)", ("od",)),
          ("defaultdict-update", "dd.update((w, [len(w)]) for w in words)", ("dd",)),
          ("set-symmetric-difference-update", "st.symmetric_difference_update(y for y in ys)", ("st",)),
          ("nlargest-key", "heapq.nlargest(2, (k for k in d), key=d.get)", ()),
          ("nsmallest-key", "heapq.nsmallest(2, (w.upper() for w in words), key=len)", ()),
          ("json-dumps-default", "json.dumps((y * 2 for y in ys), default=list)", ()),
      ]],
]

# -- third red team (2026-12-05): a keeper hidden in an expression, json's cls, caches of a generator function -----

A3 = "\n".join([
    "itertools", "functools", "operator", "collections", "json", "heapq", "re", "textwrap", "difflib", "list",
    "dict", "map", "sorted", "set", "len", "min", "max", "iter", "next", "str", "zip", "enumerate", "range",
    "reversed", "xml.etree.ElementTree as ET", COUNTDOWN,
])
S3 = S1
J = """'{"a": 1}'"""
TREE = "ET.TreeBuilder(element_factory={'r': xs}.get, comment_factory=countdown, insert_comments=True)"
FP3_STATE = {"xs": "{[3, 1, 2]}", "words": '{["bb", "a", "ccc", "a"]}', "s": '{"a1b2"}', "acc": "{[]}",
             "dd": "{ {} }", "cnt": "{collections.Counter()}", "dq": "{collections.deque()}"}
FP3_PYTHON = {"xs": [3, 1, 2], "words": ["bb", "a", "ccc", "a"], "s": "a1b2", "acc": [], "dd": {},
              "cnt": collections.Counter(), "dq": collections.deque()}

THIRD = [
    # stores._hands_a_keeper routed a call with nothing made only for a <variable>.<method> argument
    *stored("hidden-keeper", [
        ("subscript-of-a-display", f"json.loads({J}, parse_int=countdown, object_hook=[xs.append][0])"),
        ("conditional", f"json.loads({J}, parse_int=countdown, object_hook=(xs.append if 1 else 0))"),
        ("boolean-or", f"json.loads({J}, parse_int=countdown, object_hook=0 or xs.append)"),
        ("tuple-item", f"json.loads({J}, parse_int=countdown, object_pairs_hook=(d.update, 0)[0])"),
        ("double-star", f"json.loads({J}, **{{'parse_int': countdown, 'object_hook': xs.append}})"),
        ("decoder-keeps-the-hook",
         f"json.JSONDecoder(parse_int=countdown, object_hook=[xs.append][0]).decode({J})"),
        ("decoder-double-star",
         f"json.JSONDecoder(**{{'parse_int': countdown, 'object_pairs_hook': d.update}}).decode({J})"),
    ], A3, S3),
    *stored("hidden-keeper-default", [
        f"json.loads({J}, parse_int=countdown, object_hook=[xs.append][0])",
        f"json.loads({J}, parse_int=countdown, object_hook=0 or xs.append)",
        f"json.loads({J}, **{{'parse_int': countdown, 'object_pairs_hook': d.update}})",
    ], None, XS_D),
    *[Route(f"hidden-keeper-default/{name}", None, XS, (Run(source), Clean(("xs",))),
            setup=(Var({"var": {"fs": held}}, "ok"),))
      for name, held, source in [
          ("item-of-a-variable", "{[xs.append]}", f"json.loads({J}, parse_int=countdown, object_hook=fs[0])"),
          ("hidden-maker", "{xs.append}", f"json.loads({J}, parse_int=[countdown][0], object_hook=fs)"),
      ]],
    # the same call as a var's value: the fragment checks y (None), not xs
    Route("hidden-keeper-default/through-a-var-fragment", None, XS, (
        Var({"var": {"y": "{json.loads(" + J + ", parse_int=countdown, object_hook=[xs.append][0])}"}},
            "ok-or-not-allowed"),
        Clean(("xs",)),
    ), passes=1),
    # {'r': xs}.get returns xs as the root element; the C builder calls xs.append with what comment_factory made
    *stored("getter", [
        ("feed", f"ET.XMLParser(target={TREE}).feed('<r><!--c--></r>')"),
        ("fromstring", f"ET.fromstring('<r><!--c--></r>', parser=ET.XMLParser(target={TREE}))"),
    ], A3, S3),
    Route("getter/tree-builder-held-in-a-variable", A3, S3, (
        Run("ET.XMLParser(target=tb).feed('<r><!--c--></r>')"), Clean(tuple(S3))),
        passes=1, setup=(Held({"tb": "{" + TREE + "}"}),)),
    # kept._store checked none of a HIGHER_ORDER callee's arguments; json.loads/dumps call cls(**kw) (not listed)
    *stored("json-cls", [
        ("loads-extra-keyword", f"json.loads({J}, cls=d.update, g=countdown(1))"),
        ("loads-hook-value", f"json.loads({J}, cls=d.update, object_hook=countdown(1))"),
        ("dumps-extra-keyword", "json.dumps(1, cls=d.update, g=countdown(1))"),
        ("dumps-default-value", "json.dumps(1, cls=d.update, default=countdown(1))"),
        ("dumps-hidden-cls", "json.dumps(1, cls=[d.update][0], g=countdown(1))"),
        ("dumps-partial-cls", "json.dumps(1, cls=functools.partial(dict.update, d), g=countdown(1))"),
    ], A3, S3),
    *stored("json-cls-default", ["json.dumps(1, cls=d.update, g=countdown(1))"], None, {"d": "{ {} }"}),
    # a var refuses the cache of a generator function (reach); the store guard should agree
    # (test_a_cache_of_a_generator_function_is_never_held, below)
    Route("var-refuses/a-cache-of-a-generator-function", A3, S3, (
        Var({"var": {"fs": "{[functools.cache(countdown)]}"}}, "not-allowed"),), passes=1),
    # what held
    *stored("held-3", [
        f"json.loads({J}, cls=functools.partial(json.JSONDecoder, parse_int=countdown, object_hook=xs.append))",
        f"json.loads({J}, parse_int=countdown, object_hook=functools.partial(list.append, xs))",
        f"json.JSONDecoder(parse_int=countdown, object_hook=functools.singledispatch(xs.append)).decode({J})",
        f"json.JSONDecoder(parse_int=countdown, object_pairs_hook=collections.Counter(d).update).decode({J})",
        "difflib.SequenceMatcher([xs.append][0], 'a', [countdown(1)])",
        "heapq.merge((countdown(1) for c in 'a'), key=[xs.append][0])",
        "re.sub('a', xs.append, 'aa')",
        "textwrap.indent('a\\nb', '> ', xs.append)",
        "list(map([xs.append][0], [countdown(1)]))",
        "d.update({1: 2}, **{'a': countdown(1)})",
        "xs.insert(*[0, countdown(1)])",
        "collections.Counter.update(d, [countdown(1)])",
        "heapq.nsmallest(1, [countdown(1), countdown(2)], key=d.setdefault)",
    ], A3, S3),
    # agent and conversation variables are read as copies: a keeper of one keeps nothing in it
    Route("agent-conv/reads-are-copies", None, {"agent.ys": [], "conv.zs": []}, (
        Run(f"json.loads({J}, parse_int=countdown, object_hook=[agent.ys.append][0])"),
        Run(f"json.loads({J}, parse_int=countdown, object_hook=[conv.zs.append][0])"),
        Is("agent.ys", []), Is("conv.zs", []),
    ), passes=1),
    # false positives: a lazy iterator over a str or range (str_ascii_iterator, range_iterator) is a result ...
    *[Route(f"over-a-string/{name}", A3, FP3_STATE, (AsPython(source, listed=True),), python=FP3_PYTHON)
      for name, source in [
          ("enumerate-a-string", "enumerate(s)"),
          ("zip-a-string", "zip(s, xs)"),
          ("map-over-a-string", "map(str.upper, s)"),
          ("map-over-a-range", "map(str, range(3))"),
          ("range-iterator", "iter(range(3))"),
          ("reversed-range", "reversed(range(3))"),
          ("islice-a-string", "itertools.islice(s, 2)"),
      ]],
    # ... and kept
    *[Route(f"over-a-string-kept/{name}", A3, FP3_STATE, (AsPython(source), AsPython(read)), passes=1,
            python=FP3_PYTHON)
      for name, source, read in [
          ("append-a-zip", "acc.append(zip(s, xs))", "[list(z) for z in acc]"),
          ("append-an-enumerate", "acc.append(enumerate(range(3)))", "[list(z) for z in acc]"),
      ]],
    # a consuming call whose generator reads its own target sees the items kept before, as in Python
    *[Route(f"reads-its-target/{name}", A3, FP3_STATE, (AsPython(source, (target,)),), passes=1, python=FP3_PYTHON)
      for name, source, target in [
          ("extend-unless-already-there", "acc.extend(w for w in words if w not in acc)", "acc"),
          ("deque-extend-unless-already-there", "dq.extend(w for w in words if w not in dq)", "dq"),
          ("update-numbering-new-keys", "dd.update((w, len(dd)) for w in words)", "dd"),
          ("counter-update-reading-itself", "cnt.update(w for w in words if cnt[w] < 1)", "cnt"),
      ]],
]

# -- fourth red team (2026-12-05): holders the values check did not open ------------------------------------------

A4 = "\n".join([
    "itertools", "functools", "operator", "collections", "json", "heapq", "bisect", "re", "datetime", "statistics",
    "dataclasses", "graphlib", "textwrap", "difflib", "list", "dict", "map", "filter", "sorted", "set", "len", "min",
    "max", "iter", "next", "str", "sum", "zip", "enumerate", "range", "reversed", "abs", "int",
    "xml.etree.ElementTree as ET", COUNTDOWN,
])
S4 = XS_D
FP4_STATE = {"xs": "{[3, 1, 2]}", "words": '{["bb", "a", "ccc", "a"]}', "d": "{ {'a': 3, 'b': 1} }",
             "s": '{"a1b2 c3"}', "acc": "{[]}", "rows": "{[{'n': 'x', 'v': 2}, {'n': 'y', 'v': 1}]}",
             "st": "{set()}", "nums": "{[1.5, 2.5, 4.0]}"}
FP4_PYTHON = {"xs": [3, 1, 2], "words": ["bb", "a", "ccc", "a"], "d": {"a": 3, "b": 1}, "s": "a1b2 c3", "acc": [],
              "rows": [{"n": "x", "v": 2}, {"n": "y", "v": 1}], "st": set(), "nums": [1.5, 2.5, 4.0]}

FOURTH = [
    # _json.Scanner (the scan_once of every JSONDecoder) keeps the decoder's hooks as readable members; a var refused
    # it, the store guard (check_value only) kept it. Embedded default allowlist
    *scanned("scanner", [
        ("parse-int", "xs.append(json.JSONDecoder(parse_int=countdown(1)).scan_once)", "xs[0].parse_int"),
        ("object-hook", "xs.append(json.JSONDecoder(object_hook=countdown(1)).scan_once)", "xs[0].object_hook"),
        ("dict-update-parse-float", "d.update(k=json.JSONDecoder(parse_float=countdown(1)).scan_once)",
         "d['k'].parse_float"),
        ("setdefault-parse-constant", "d.setdefault('k', json.JSONDecoder(parse_constant=countdown(1)).scan_once)",
         "d['k'].parse_constant"),
        ("object-pairs-hook", "xs.append(json.JSONDecoder(object_pairs_hook=countdown(1)).scan_once)",
         "xs[0].object_pairs_hook"),
    ], None, S4),
    Route("var-refuses/the-json-scanner", None, S4, (
        Var({"var": {"sc": "{json.JSONDecoder(parse_int=countdown(1)).scan_once}"}}, "not-allowed"),), passes=1),
    # stdlib classes with __slots__ (no __dict__ for values._stdlib_instance_parts to read)
    *scanned("slots", [
        ("field-default", "xs.append(dataclasses.field(default=countdown(1)))", "xs[0].default"),
        ("field-metadata", "d.update(f=dataclasses.field(default_factory=list, metadata={'g': countdown(1)}))",
         "d['f'].metadata"),
        ("initvar-type", "xs.append(dataclasses.InitVar(countdown(1)))", "xs[0].type"),
    ], A4, S4),
    # ... which the set-time check itself accepted
    *[Route(f"slots-var/{name}", A4, S4, (ReadClean(read), Run(f"xs.append({read})"), Clean(tuple(S4))),
            passes=1, setup=(Held({"f": held}),))
      for name, held, read in [
          ("field-in-a-list", "{[dataclasses.field(default=countdown(1))]}", "f[0].default"),
          ("initvar", "{dataclasses.InitVar(countdown(1))}", "f.type"),
      ]],
    # singledispatch(obj) runs update_wrapper(wrapper, obj): the wrapper function's __dict__ gets obj.__dict__'s items
    *scanned("singledispatch", [
        ("carries-its-arguments-attributes",
         "xs.append(functools.singledispatch(json.JSONDecoder(object_hook=countdown(1))))", "xs[0].object_hook"),
    ], A4, S4),
    # what held
    *stored("held-4", [
        "xs.extend(list(map(functools.cmp_to_key(len), [countdown(1)])))",  # the key wrapper is wrapped: K(g) checked
        "xs.append(functools.singledispatch(countdown(1)).registry)",  # 'registry' refused by name
        "functools.singledispatch(xs.append).register(int, countdown(1))",
        "json.loads('[1]', parse_int=countdown, object_hook=functools.cache(xs.append))",
        "bisect.bisect_left([countdown(1)], 0, key=xs.append)",
        "xs.append(ET.Comment(countdown(1)))",
        "xs.append(json.JSONDecodeError(countdown(1), '', 0))",
        "list(map(xs.append, itertools.groupby([countdown(1)], functools.cmp_to_key(len))))",
    ], A4, S4),
    # no false positive: Python's answer, unchanged
    *as_python("ordinary-default", [
        "sorted(words, key=str.lower)", "min(d, key=d.get)", "sorted(d, key=d.get, reverse=True)",
        "list(map(str.upper, words))", "dict(zip(words, map(len, words)))", "sorted(words, key=words.count)",
        "list(filter(d.get, words))", "list(map(json.loads, ['1', '[2]']))",
        "acc.extend(map(json.loads, ['1', '[2]']))", "json.loads('{\"a\": 1.5}', parse_float=str)",
        "json.dumps({'t': datetime.date(2020, 1, 2)}, default=str)",
        "d.update(json.loads('{\"k\": [1]}', object_hook=dict))", "acc.append(json.loads('[1]', parse_int=str))",
        "acc.extend(map(datetime.date.fromisoformat, ['2020-01-02']))", "statistics.quantiles(nums, n=4)",
        "[acc.append(x) for x in sorted(xs, reverse=True)]", "acc.extend(filter(str.isalpha, s))",
        "d.setdefault('z', []).append(len(words))", "acc.extend(zip(words, xs))", "list(map(max, xs, [2, 2, 2]))",
    ], None, FP4_STATE, FP4_PYTHON, ("acc", "d", "st")),
    *as_python("ordinary-wide", [
        "heapq.nlargest(1, d, key=d.get)", "[heapq.heappush(acc, x) for x in xs]",
        "bisect.insort(acc, max(xs), key=abs)", "acc.extend(m.group() for m in re.finditer('[0-9]', s))",
        "[(k, len(list(g))) for k, g in itertools.groupby(sorted(words), key=len)]",
        "list(itertools.accumulate(xs, operator.mul))", "functools.reduce(operator.or_, [{1}, {2}], set())",
        "acc.extend(itertools.starmap(operator.mul, [(2, 3)]))", "d.update(collections.Counter(words))",
        "acc.append(json.loads('{\"b\": 1, \"a\": 2}', object_pairs_hook=collections.OrderedDict))",
        "json.dumps(datetime.date(2020, 1, 2), default=datetime.date.isoformat)",
        "sorted(xs, key=functools.cmp_to_key(operator.sub))",
        "acc.extend(map(functools.partial(operator.mul, 2), xs))", "acc.extend(sorted(map(str, xs), key=int))",
        "st.update(w for w in words)",
    ], A4, FP4_STATE, FP4_PYTHON, ("acc", "d", "st")),
]

# -- fifth red team (2026-12-05): writes of a fragment, not calls of an expression ---------------------------------

D = "\u2020"
A5 = "\n".join([
    "itertools", "functools", "operator", "collections", "json", "heapq", "bisect", "re", "datetime", "statistics",
    "list", "dict", "map", "filter", "sorted", "set", "len", "min", "max", "iter", "str", "sum", COUNTDOWN,
    "s2o_kernel.examples.slow_answer as slow_answer",
])
S5 = {"xs": "{[]}", "d": "{ {} }", "n": "{ {'a': [1]} }", "ys": "{[0]}"}
S5_VALUES = {"xs": [], "d": {}, "n": {"a": [1]}, "ys": [0]}
#: A value the result check (check_value) accepts and the set-time check (reach.check) refuses; it keeps a live
#: granted iterator readable as .parse_int.
SCANNER = "{json.JSONDecoder(parse_int=countdown(3)).scan_once}"
#: An agent function returning the scanner.
MAKER = Var({"functions": {"main": {"commands": []},
                           "mk": {"args": {}, "commands": {"return": SCANNER.replace("{", "{ ")}}}}, "ok")

FIFTH = [
    # var item targets (commands/var.py: assign) stored the item in the live holder, then checked the root
    *[Route(f"item-target/{name}", None, S5, (Var({"var": {target: SCANNER}}),),
            after=(Clean((holder,)), ReadClean(read)))
      for name, target, holder, read in [
          ("append-past-the-end", "xs[0]", "xs", "xs[0].parse_int"),
          ("replace-an-item", "ys[0]", "ys", "ys[0].parse_int"),
          ("dict-key", "d['k']", "d", "d['k'].parse_int"),
          ("nested", "n['a'][1]", "n", "n['a'][1].parse_int"),
      ]],
    # {xs[0].parse_int} is a read with no call (no result check): written as an item, the granted iterator itself
    # would land in ys
    Route("item-target/a-second-write-of-the-read", None, S5, (
        Var({"var": {"xs[0]": SCANNER}}), Var({"var": {"ys[0]": "{xs[0].parse_int}"}}), Clean(("ys",)),
    ), passes=1),
    *[Route(f"item-target-wide/{name}", A5, S5, (Var({"var": {"xs[0]": value}}),), after=(Clean(("xs",)),))
      for name, value in [
          ("sre-scanner", "{re.compile('a').scanner('a')}"),
          ("json-encoder-method", "{json.JSONEncoder().iterencode}"),
          ("json-scanner", SCANNER),
      ]],
    # wiring.write (outputPath) had the same order: holder.append(value), then set_variable
    *[Route(f"output-path/{name}", None, S5, (Var([{"call": {"function": "mk", "args": {}, "outputPath": target}}]),),
            setup=(MAKER,), after=(Clean((holder,)), ReadClean(read)))
      for name, target, holder, read in [
          ("append-past-the-end", f"{D}local.xs[0]", "xs", "xs[0].parse_int"),
          ("dict-key", f"{D}local.d.k", "d", "d['k'].parse_int"),
      ]],
    # Session.set_result stored a call's return value with the result check only
    Route("result/is-checked-as-a-local", None, S5, (Var([{"call": {"function": "mk", "args": {}}}]),),
          setup=(MAKER,), after=(SetOrClose("result"), Clean(("result",)), ReadClean("result.parse_int"))),
    # what held: an item target given a value the result check refuses never changes the holder
    *[Route(f"refused-item/{target}={value}", None, S5, (
        Var({"var": {target: value}}, "not-allowed"), Is(holder, S5_VALUES[holder]), Clean((holder,))), passes=1)
      for value in ["{countdown(1)}", "{[countdown(1)]}", "{(c for c in 'ab')}"]
      for target, holder in [("xs[0]", "xs"), ("ys[0]", "ys"), ("d['k']", "d"), ("n['a'][1]", "n")]],
    Route("item-writes/as-python-does", None, S5, (
        Var([{"var": {"xs[0]": "{[1, 2]}", "ys[0]": "{len(xs)}", "d['k']": "{sorted('ba')}",
                      "n['a'][1]": "{ {'b': d['k']} }"}},
             {"var": {"xs[1]": "{json.loads('[3]')}", "n['a'][0]": "{max(ys[0], 5)}"}}], "ok"),
        Is("[xs, ys, d, n]", [[[1, 2], [3]], [1], {"k": ["a", "b"]}, {"a": [5, {"b": ["a", "b"]}]}]),
    ), passes=1),
    *[Route(f"async-stores/{source}", None, S5, (Is(source, None), Clean(("xs", "d"))), passes=1)
      for source in [
          "xs.append(await slow_answer(0))",
          "d.update(k=await fetch_weather('Oslo'))",
          "xs.append(urllib.parse.urlparse('http://a/b').netloc)",
          "xs.extend(zip('ab', [1, 2]))",
      ]],
    *[Route(f"held-5/{source}", None, S5, (Refused(source, code),), after=(Clean(("xs", "d")),))
      for source, code in [
          ("xs.extend(map(fetch_weather, ['Oslo']))", "not-awaited"),
          ("list(map(xs.append, map(fetch_weather, ['Oslo'])))", "not-awaited"),
          ("d.update(k=getattr(json, 'nope', countdown(1)))", "not-allowed"),
          ("xs.append(min([], default=endless()))", "not-allowed"),
          ("json.loads('{\"a\": 1}', parse_int=countdown, object_pairs_hook=getattr(d, 'update'))", "not-allowed"),
      ]],
]

ROUTES = [*FIRST, *SECOND, *THIRD, *FOURTH, *FIFTH]


@pytest.mark.parametrize("route", ROUTES, ids=[route.id for route in ROUTES])
def test_store_guard_row(route: Route) -> None:
    s = make_session(route.allowlist, route.state)
    env = {**PYTHON_NAMES, **copy.deepcopy(route.python)}
    try:
        for step in route.setup:
            step(s, env)
        for _ in range(route.passes):
            for step in route.each:
                step(s, env)
        for step in route.after:
            step(s, env)
    except _Closed:
        pass  # refusing the value when it is set closes the route too


def test_the_rows_are_named_once() -> None:
    ids = [route.id for route in ROUTES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


# -- a generator's state carried from one run to the next ------------------------------------------------------------

@pytest.mark.parametrize("kept_by", [
    pytest.param("xs.append(functools.cache(countdown))", id="cache-appended"),
    pytest.param("xs.append(functools.lru_cache(countdown))", id="lru-cache-appended"),
    pytest.param("d.update(c=functools.lru_cache(countdown))", id="lru-cache-in-a-dict"),
])
def test_a_cache_of_a_generator_function_is_never_held(kept_by: str) -> None:
    """A ``var`` refuses ``[functools.cache(countdown)]`` (``reach``); a store kept it, and its cache then held each
    granted iterator a call made: ``next(next(map(xs[0], [3])))`` answered 3, then 2 in the next run."""
    s = make_session(A3, S3)
    evaluate_any(s, kept_by)
    read = "xs[0]" if kept_by.startswith("xs") else "d['c']"
    answers = []
    for _ in range(2):
        try:
            answers.append(s.evaluate(f"next(next(map({read}, [3])))"))
        except S2OError as err:
            assert err.code, err
        assert_clean(s, S3)
    assert answers in ([], [3], [3, 3]), f"a generator's state was carried between runs: {answers}"


def test_a_json_scanner_carries_no_generator_between_runs_default_allowlist() -> None:
    """The iterator a kept scanner holds would be live: each run would consume what the last one left (Python would
    not keep it at all)."""
    s = make_session(None, S4)
    evaluate_any(s, "xs.append(json.JSONDecoder(parse_int=countdown(3)).scan_once)")
    answers = []
    for _ in range(2):
        try:
            answers.append(s.evaluate("sum(xs[0].parse_int)"))
        except S2OError as err:
            assert err.code, err
    assert answers in ([], [6, 6]), f"a generator's state was carried between runs: {answers}"


def test_an_item_target_carries_no_generator_between_runs_default_allowlist() -> None:
    """The iterator kept through a scanner written as an item would be live: each run consumes what the last one
    left."""
    s = make_session(None, S5)
    s.run_fragment({"var": {"xs[0]": SCANNER}})
    answers = []
    for _ in range(2):
        try:
            answers.append(s.evaluate("sum(xs[0].parse_int)"))
        except S2OError as err:
            answers.append(err.code)
    assert answers[0] == answers[1], f"a generator's state is carried between runs: {answers}"


# -- cost: a check per call of everything a wrapped callable is given ------------------------------------------------

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
    """Python runs each in a few milliseconds; a check per call of the whole table (or accumulator, or shared item)
    made them O(n²) (second red team): seconds at 8,000 items, past the 30 s time limit at a few tens of thousands.
    Counted, not timed: the store guard checks a large value at most twice in one run, not once per call."""
    s = make_session(A2, PERF_STATE)
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


# -- through a real kernel ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_spec(tmp_path_factory.mktemp("prefix"))


@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_kernel_never_shows_an_iterator_kept_through_a_lazy_map(mode: str, kernels: Path, tmp_path: Path) -> None:
    with running_kernel(kernels, tmp_path, env={"S2O_KERNEL_ISOLATED": MODES[mode]}) as (_km, kc):
        reply, _ = execute(kc, '{"var": {"xs": "{[]}"}}', timeout=60)
        assert reply["status"] == "ok", reply
        execute(kc, "list(map(xs.append, map(countdown, [1])))", timeout=60)
        execute(kc, "list(map(*[xs.append, [countdown(1)]]))", timeout=60)
        reply, outputs = execute(kc, "xs", timeout=60)
        assert reply["status"] == "ok", reply
        assert "iterator" not in result_data(outputs)["text/plain"], result_data(outputs)
