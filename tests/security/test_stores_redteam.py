"""Red team of the store guard (engine/stores.py, engine/kept.py; SPEC 12): routes that still leave, in a
session value, a value the set-time check (:func:`.values.check_value`) refuses.

The invariant every test asserts: whatever an expression does — succeed, or end with a coded error — no
variable of the session is left holding what ``check_value`` refuses (here, the granted iterator that
``countdown(1)`` returns). Later hot reads of the variable (``xs``) are not checked again, so such a value
is returned and shown. Each source is run twice: cold (compiled by the run) and hot (the session's cached
function). The tests do not prescribe where the fix refuses (at the call, at the set, at consumption): only
that the run ends with a coded error or a value, and that the variables stay clean.

Classes of route found:

* a *lazy iterator* (``map``, ``itertools.starmap``, ``itertools.chain``…) passes ``check_value`` (its
  parts are a function and a checked iterable), so a keeping callee or callable that is given one is let
  through, and the iterator makes the refused values only when it is consumed, after the check;
* a consuming method (``xs.extend``, ``st.update``, ``dq.extendleft``, ``d.update``) or an in-place
  operator function given a lazy iterator not in ``kept._ITERATORS`` checks it whole, not item by item;
* one argument that holds both the target and the made value (``*[xs, g]``, ``starmap(list.append,
  [(xs, g)])``) is never taken as a target (``risky != [j]`` in ``stores.risky_arguments``);
* a keeping callable hidden in a container argument (``map(map, [xs.append], [[g]])``): only top-level
  callable arguments are asked whether they keep;
* a session value that holds a lazy iterator, consumed later by a keeping call whose argument the static
  half does not take as made (a plain name, ``[*m]``, ``xs[0]``);
* ``itertools._grouper`` is not opened by ``check_value`` (it is not in ``LAZY_ITERATOR_TYPES``), so a live
  group of granted iterators passes as an argument of ``xs.append`` and its items land in ``xs`` later.
"""

from __future__ import annotations

import json

import pytest
from kernel_harness import MODES, execute, install_spec, result_data, running_kernel
from stores_harness import assert_clean, evaluate_any, make_session

from s2o_kernel.engine import S2OError, Session
from s2o_kernel.engine.values import check_value

ALLOWLIST = "\n".join([
    "itertools", "functools", "operator", "collections", "list", "dict", "map", "sorted", "set", "len",
    "s2o_kernel.examples.countdown as countdown",
])

STATE = {
    "xs": "{[]}", "d": "{ {} }", "st": "{set()}", "dq": "{collections.deque()}",
}


def _session(allowlist: str | None = ALLOWLIST, state: dict | None = None) -> Session:
    return make_session(allowlist, STATE if state is None else state)


_run = evaluate_any
_assert_clean = assert_clean



# -- a lazy iterator given to a keeping callee or callable ------------------------------------------------

LAZY_TO_KEEPING = [
    pytest.param("list(map(xs.append, map(countdown, [1])))", id="map-of-append-over-a-lazy-map"),
    pytest.param("sorted(map(countdown, [1]), key=xs.append)", id="sort-key-append-over-a-lazy-map"),
    pytest.param("list(map(functools.partial(list.append, xs), map(countdown, [1])))", id="partial-append"),
    pytest.param("list(map(d.setdefault, 'g', map(countdown, [1])))", id="map-of-setdefault"),
]


@pytest.mark.parametrize("source", LAZY_TO_KEEPING)
def test_a_lazy_iterator_given_to_a_keeping_callable(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_a_lazy_iterator_given_to_a_keeping_callable_default_allowlist() -> None:
    """The same with the embedded default allowlist (the teaching notebook's)."""
    s = _session(None, {"xs": "{[]}"})
    for _ in range(2):
        _run(s, "list(map(xs.append, map(countdown, [1])))")
        _assert_clean(s, ["xs"])


# -- a consuming method or in-place operator given an iterator not in kept._ITERATORS ----------------------

CONSUMED = [
    pytest.param("xs.extend(itertools.starmap(countdown, [(1,)]))", id="extend-starmap"),
    pytest.param("xs.extend(itertools.chain(map(countdown, [1])))", id="extend-chain"),
    pytest.param("xs.extend(itertools.chain.from_iterable([map(countdown, [1])]))", id="extend-chain-from-iterable"),
    pytest.param("xs.extend(itertools.islice(map(countdown, [1]), 1))", id="extend-islice"),
    pytest.param("d.update(itertools.zip_longest('a', map(countdown, [1])))", id="update-zip-longest"),
    pytest.param("st.update(itertools.starmap(countdown, [(1,)]))", id="set-update-starmap"),
    pytest.param("dq.extendleft(itertools.starmap(countdown, [(1,)]))", id="deque-extendleft-starmap"),
    pytest.param("operator.iadd(xs, map(countdown, [1]))", id="operator-iadd-map"),
]


@pytest.mark.parametrize("source", CONSUMED)
def test_a_consumed_lazy_iterator_is_checked_item_by_item(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_json_items_of_a_consumed_itertools_iterator_are_still_kept() -> None:
    """The other side of the fix: an itertools iterator of JSON items is consumed as before."""
    s = _session()
    assert s.evaluate("xs.extend(itertools.chain([1], map(len, ['ab'])))") is None
    assert s.evaluate("xs.extend(itertools.starmap(len, [('abc',)]))") is None
    assert s.evaluate("xs") == [1, 2, 3]


# -- one argument carrying both the target and the made value ---------------------------------------------

ONE_ARGUMENT = [
    pytest.param("list.append(*[xs, countdown(1)])", id="unbound-append-starred"),
    pytest.param("list.extend(*[xs, [countdown(1)]])", id="unbound-extend-starred"),
    pytest.param("dict.update(*[d, {'g': countdown(1)}])", id="unbound-update-starred"),
    pytest.param("dict.setdefault(*[d, 'g', countdown(1)])", id="unbound-setdefault-starred"),
    pytest.param("list(map(*[xs.append, [countdown(1)]]))", id="map-starred"),
    pytest.param("list(itertools.starmap(list.append, [(xs, countdown(1))]))", id="starmap-pairs"),
    pytest.param("list(itertools.accumulate([xs, countdown(1)], list.append))", id="accumulate"),
    pytest.param("functools.reduce(list.append, [xs, countdown(1)])", id="reduce"),
]


@pytest.mark.parametrize("source", ONE_ARGUMENT)
def test_one_argument_holding_the_target_and_the_value(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


@pytest.mark.parametrize("source", [
    "list.append(*[xs, countdown(1)])",
    "dict.update(*[d, {'g': countdown(1)}])",
    "list(map(*[xs.append, [countdown(1)]]))",
])
def test_one_starred_argument_default_allowlist(source: str) -> None:
    s = _session(None, {"xs": "{[]}", "d": "{ {} }"})
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, ["xs", "d"])


# -- a keeping callable hidden in a container argument ----------------------------------------------------

HIDDEN = [
    pytest.param("list(map(list, map(map, [xs.append], [[countdown(1)]])))", id="map-of-map"),
    pytest.param("list(map(list, map(map, [d.setdefault], ['g'], [[countdown(1)]])))", id="map-of-map-setdefault"),
]


@pytest.mark.parametrize("source", HIDDEN)
def test_a_keeping_callable_inside_a_container_argument(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_a_keeping_callable_inside_a_container_default_allowlist() -> None:
    s = _session(None, {"xs": "{[]}"})
    for _ in range(2):
        _run(s, "list(map(list, map(map, [xs.append], [[countdown(1)]])))")
        _assert_clean(s, ["xs"])


# -- a lazy iterator held in a session value, consumed later -------------------------------------------------

@pytest.mark.parametrize("held, source", [
    pytest.param("{map(countdown, [1])}", "xs.extend(m)", id="extend-a-variable"),
    pytest.param("{map(countdown, [1])}", "xs.append([*m])", id="append-a-starred-display"),
    pytest.param("{[map(countdown, [1])]}", "xs.extend(m[0])", id="extend-an-item"),
    pytest.param("{map(xs.append, map(countdown, [1]))}", "list(m)", id="consume-a-held-map-of-append"),
])
def test_a_held_lazy_iterator_consumed_by_a_keeping_call(held: str, source: str) -> None:
    s = _session(None, {"xs": "{[]}"})
    run = s.run_fragment({"var": {"m": held}})
    if run.error is not None:  # refusing the lazy iterator when it is set closes the route too
        assert run.error.code == "not-allowed", run.error
        return
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, ["xs"])


def test_a_live_group_of_granted_iterators_is_not_kept() -> None:
    """``check_value`` does not open ``itertools._grouper``: a live group whose items are granted iterators
    passes the guard of ``xs.append``, and ``xs.extend(xs[0])`` (an item: no value the static half takes as
    made) moves them into ``xs``."""
    s = _session()
    _run(s, "xs.append(list(itertools.islice(itertools.groupby(map(countdown, [1])), 1))[0][1])")
    _assert_clean(s, STATE)
    _run(s, "xs.extend(xs[0])")
    _assert_clean(s, STATE)


# -- through a real kernel ---------------------------------------------------------------------------------

@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_kernel_never_shows_an_iterator_kept_through_a_lazy_map(mode, tmp_path):
    kernels = install_spec(tmp_path / "prefix")
    with running_kernel(kernels, tmp_path, env={"S2O_KERNEL_ISOLATED": MODES[mode]}) as (_km, kc):
        reply, _ = execute(kc, '{"var": {"xs": "{[]}"}}', timeout=60)
        assert reply["status"] == "ok", reply
        execute(kc, "list(map(xs.append, map(countdown, [1])))", timeout=60)
        execute(kc, "list(map(*[xs.append, [countdown(1)]]))", timeout=60)
        reply, outputs = execute(kc, "xs", timeout=60)
        assert reply["status"] == "ok", reply
        assert "iterator" not in result_data(outputs)["text/plain"], result_data(outputs)


# -- no false positive: what the guard lets through must stay allowed ---------------------------------------

@pytest.mark.parametrize("source", [
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
])
def test_reasonable_stores_still_run(source: str) -> None:
    s = _session(None, {"xs": "{[]}", "ys": "{[1, 2, 3]}", "words": '{["hello", "world"]}', "n": 4, "d": "{ {} }"})
    for _ in range(2):
        s.evaluate(source)
    json.dumps(s.evaluate("xs"))
    json.dumps(s.evaluate("d"))


def test_a_keeping_callable_held_in_a_variable_list() -> None:
    """The callable hidden in a container can come from a variable too (``fs = [xs.append]``)."""
    s = _session(None, {"xs": "{[]}"})
    assert s.run_fragment({"var": {"fs": "{[xs.append]}"}}).error is None
    for _ in range(2):
        _run(s, "list(map(list, map(map, fs, [[countdown(1)]])))")
        _assert_clean(s, ["xs"])


# -- a standard-library C function that keeps an argument: xml.etree.ElementTree.SubElement ------------------

@pytest.mark.parametrize("source", [
    pytest.param("ET.SubElement(root, 'a', k=countdown(1))", id="keyword-attribute"),
    pytest.param("ET.SubElement(root, 'a', {'k': countdown(1)})", id="attrib-dict"),
])
def test_subelement_keeps_nothing_refused_in_an_element(source: str) -> None:
    """``kept.keeps_nothing`` takes every C function of the standard library but those of
    ``KEEPING_FUNCTIONS`` as keeping nothing; ``_elementtree.SubElement`` keeps its ``attrib`` (and the new
    element) in its first argument, a variable. ``check_value`` does not open an ``Element``, and a read of a
    variable's items is not checked again: ``root[0].attrib['k']`` returned the granted iterator itself."""
    s = _session("\n".join(["xml.etree.ElementTree as ET", "s2o_kernel.examples.countdown as countdown"]),
                 {"root": "{ET.Element('r')}", "xs": "{[]}"})
    for _ in range(2):
        _run(s, source)
    for read in ("root[0].attrib", "root[0].attrib['k']"):
        try:
            held = s.evaluate(read)
        except S2OError:
            continue  # refused as it is read: nothing shown
        check_value(held, read)
    _run(s, "xs.append(root[0].attrib)")
    _assert_clean(s, ["xs"])


# -- the same classes, other shapes (found while closing them) ------------------------------------------------

VARIANTS = [
    pytest.param("sorted([countdown(1), countdown(1)], key=functools.cmp_to_key(d.setdefault))", id="cmp-to-key"),
    pytest.param("[countdown(1)].sort(key=xs.append)", id="made-receiver-sort-key"),
    pytest.param("list(map(map, (f for f in [xs.append]), [[countdown(1)]]))", id="callable-from-a-generator"),
    pytest.param("list(itertools.starmap(operator.setitem, [(d, 'k', countdown(1))]))", id="starmap-setitem"),
    pytest.param("functools.reduce(operator.iadd, [xs, map(countdown, [1])])", id="reduce-iadd"),
    pytest.param("list(filter(xs.append, [countdown(1)]))", id="filter-keeping-predicate"),
    pytest.param("max([countdown(1)], key=xs.append)", id="max-keeping-key"),
    pytest.param("list(map(dict.setdefault, [d], ['k'], [countdown(1)]))", id="map-unbound-setdefault"),
    pytest.param("list(iter(functools.partial(xs.append, countdown(1)), 1))", id="callable-iterator-partial"),
    pytest.param("list(map(heapq.heappush, [xs], [countdown(1)]))", id="map-heappush"),
    pytest.param("collections.deque(map(xs.append, [countdown(1)]), maxlen=0)", id="deque-consumes-a-map"),
    pytest.param("xs.extend(collections.deque([countdown(1)]))", id="extend-a-deque"),
]


@pytest.mark.parametrize("source", VARIANTS)
def test_other_shapes_of_the_same_classes(source: str) -> None:
    s = _session(ALLOWLIST + "\nheapq\nmax")
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


@pytest.mark.parametrize("source", [
    pytest.param("ET.Element('a', k=countdown(1))", id="constructed"),
    pytest.param("root.append(ET.Element('a', k=countdown(1)))", id="appended"),
])
def test_an_element_holding_a_refused_value_is_never_kept(source: str) -> None:
    """``check_value`` opens an ``Element`` (its C state): one built holding a granted iterator is refused
    as a result and as an argument of ``root.append``."""
    s = _session("\n".join(["xml.etree.ElementTree as ET", "len", "s2o_kernel.examples.countdown as countdown"]),
                 {"root": "{ET.Element('r')}"})
    for _ in range(2):
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "not-allowed", err.value
    assert s.evaluate("len(root)") == 0


def test_a_consumed_iterator_is_checked_as_python_consumes_it() -> None:
    """A consuming callee is handed the items one by one, each checked, as Python hands them: the items before
    a refused one are kept (as a failing ``append`` in a Python loop would keep them), and a generator that
    reads the target sees it change (``acc.extend(w for w in ws if w not in acc)``)."""
    s = _session()
    with pytest.raises(S2OError):
        s.evaluate("xs.extend(itertools.chain([1, 2], map(countdown, [1])))")
    assert s.evaluate("xs") == [1, 2]
    s.evaluate("xs.extend(w for w in 'abab' if w not in xs)")
    assert s.evaluate("xs") == [1, 2, "a", "b"]


@pytest.mark.parametrize("source, expected", [
    ("list(map(str, [1, 2]))", ["1", "2"]),
    ("sorted(['b', 'a'], key=str.lower)", ["a", "b"]),
    ("functools.reduce(operator.add, [[1], [2]])", [1, 2]),
    ("list(itertools.starmap(operator.mul, [(2, 3)]))", [6]),
    ("[k for k, g in itertools.groupby('aab')]", ["a", "b"]),
    ("list(map(xs.append, [1, 2]))", [None, None]),
])
def test_higher_order_calls_still_give_python_results(source: str, expected) -> None:
    s = _session(ALLOWLIST + "\nstr")
    for _ in range(2):
        assert s.evaluate(source) == expected
