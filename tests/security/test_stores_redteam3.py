"""Third red team of the store guard (engine/stores.py, engine/kept.py; SPEC 12), 2026-12-05.

The invariant of the first two red teams: whatever an expression does — a value, or a coded error — no variable
of the session is left holding a value the set-time check (:func:`.values.check_value`) refuses (here the granted
iterator ``countdown(1)`` returns), since later hot reads of a variable are not checked again. Each source runs
twice: cold (compiled by the run), then hot (the session's cached function). Then the other side: ordinary
expressions the new rules refuse, or run with another result than Python's.

Classes of route found:

* *a keeping callable hidden in an expression, in a call with nothing made*: :func:`.stores._hands_a_keeper`
  routes a call with no made argument only when one argument is written ``<variable>.<method>`` (or a variable
  beside a bare function name). ``json.loads(s, parse_int=countdown, object_hook=[xs.append][0])`` (or
  ``xs.append if c else 0``, ``0 or xs.append``, ``**{'object_hook': xs.append, ...}``, ``fs[0]``, or a hidden
  maker ``[countdown][0]`` beside a variable) is not rewritten at all: the decoder calls the maker, then hands
  what it made to the raw keeper. Embedded default allowlist; also through a ``var`` fragment;
* *a getter that hands the callee a session container*: ``ET.TreeBuilder(element_factory={'r': xs}.get,
  comment_factory=countdown, insert_comments=True)`` — ``dict.get`` keeps nothing, so nothing is wrapped, but the
  builder calls ``.append`` on what the factory returned (``xs``) with what ``comment_factory`` made. Routed, not
  refused; held in a variable (``var``) and fed later, not routed at all;
* *a HIGHER_ORDER callee hands a made argument to a callable it is not listed as calling*: ``kept._store`` runs a
  :data:`.kept.HIGHER_ORDER` callee with no argument checked, wrapping only the listed places; ``json.loads`` and
  ``json.dumps`` call ``cls(**kw)`` with every extra keyword: ``json.dumps(1, cls=d.update, g=countdown(1))``
  keeps the granted iterator in ``d`` before the ``AttributeError``. Default allowlist;
* *a granted object keeps what it calls, in C state the check does not open*: ``functools.cache(countdown)`` /
  ``functools.lru_cache(countdown)`` kept in a variable (``xs.append(...)``, ``d.update(c=...)``; a ``var`` refuses
  it through ``reach``, the store guard does not) caches the granted iterator each call makes:
  ``next(next(map(xs[0], [3])))`` answers 3, then 2 — a generator's state carried from one run to the next in a
  variable, as the refused ``defaultdict(countdown)`` would.

False positives: the C iterators of a ``str``, ``range`` or ``bytes`` (``str_ascii_iterator``, ``range_iterator``)
are not in ``LAZY_ITERATOR_TYPES``, so since the second red team any lazy iterator over a string or a range is
refused as a result or a kept argument (``enumerate(s)``, ``zip(s, xs)``, ``map(str, range(3))``,
``iter(range(3))``); and a consuming call given a generator that reads its own target
(``acc.extend(w for w in words if w not in acc)``, ``d.update((w, len(d)) for w in words)``) now sees the target
as it was before the call, not as Python fills it item by item: another result.
"""

from __future__ import annotations

import collections
import copy
import itertools
import json

import pytest
from stores_harness import assert_clean, evaluate_any, make_session

from s2o_kernel.engine import S2OError, Session

ALLOWLIST = "\n".join([
    "itertools", "functools", "operator", "collections", "json", "heapq", "re", "textwrap", "difflib", "list",
    "dict", "map", "sorted", "set", "len", "min", "max", "iter", "next", "str", "zip", "enumerate", "range",
    "reversed", "xml.etree.ElementTree as ET", "s2o_kernel.examples.countdown as countdown",
])

STATE = {"xs": "{[]}", "d": "{ {} }", "st": "{set()}", "dq": "{collections.deque()}"}


def _session(allowlist: str | None = ALLOWLIST, state: dict | None = None) -> Session:
    return make_session(allowlist, STATE if state is None else state)


_run = evaluate_any
_assert_clean = assert_clean


J = """'{"a": 1}'"""


# -- a keeping callable hidden in an expression, in a call with nothing made -----------------------------------

HIDDEN_KEEPER = [
    pytest.param(f"json.loads({J}, parse_int=countdown, object_hook=[xs.append][0])", id="subscript-of-a-display"),
    pytest.param(f"json.loads({J}, parse_int=countdown, object_hook=(xs.append if 1 else 0))", id="conditional"),
    pytest.param(f"json.loads({J}, parse_int=countdown, object_hook=0 or xs.append)", id="boolean-or"),
    pytest.param(f"json.loads({J}, parse_int=countdown, object_pairs_hook=(d.update, 0)[0])", id="tuple-item"),
    pytest.param(f"json.loads({J}, **{{'parse_int': countdown, 'object_hook': xs.append}})", id="double-star"),
    pytest.param(f"json.JSONDecoder(parse_int=countdown, object_hook=[xs.append][0]).decode({J})",
                 id="decoder-keeps-the-hook"),
    pytest.param(f"json.JSONDecoder(**{{'parse_int': countdown, 'object_pairs_hook': d.update}}).decode({J})",
                 id="decoder-double-star"),
]


@pytest.mark.parametrize("source", HIDDEN_KEEPER)
def test_a_keeping_callable_hidden_in_an_expression(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


@pytest.mark.parametrize("source", [
    f"json.loads({J}, parse_int=countdown, object_hook=[xs.append][0])",
    f"json.loads({J}, parse_int=countdown, object_hook=0 or xs.append)",
    f"json.loads({J}, **{{'parse_int': countdown, 'object_pairs_hook': d.update}})",
])
def test_a_keeping_callable_hidden_in_an_expression_default_allowlist(source: str) -> None:
    s = _session(None, {"xs": "{[]}", "d": "{ {} }"})
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, ["xs", "d"])


@pytest.mark.parametrize("held, source", [
    pytest.param("{[xs.append]}", f"json.loads({J}, parse_int=countdown, object_hook=fs[0])", id="item-of-a-variable"),
    pytest.param("{xs.append}", f"json.loads({J}, parse_int=[countdown][0], object_hook=fs)", id="hidden-maker"),
])
def test_a_keeping_callable_read_from_a_variable_default_allowlist(held: str, source: str) -> None:
    s = _session(None, {"xs": "{[]}"})
    assert s.run_fragment({"var": {"fs": held}}).error is None
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, ["xs"])


def test_a_hidden_keeper_through_a_var_fragment_default_allowlist() -> None:
    """The same call as a ``var``'s value: the fragment checks ``y`` (``None``), not ``xs``."""
    s = _session(None, {"xs": "{[]}"})
    run = s.run_fragment({"var": {"y": "{json.loads(" + J + ", parse_int=countdown, object_hook=[xs.append][0])}"}})
    if run.error is not None:
        assert run.error.code == "not-allowed", run.error
    _assert_clean(s, ["xs"])


# -- a getter that hands the callee a session container --------------------------------------------------------

TREE = "ET.TreeBuilder(element_factory={'r': xs}.get, comment_factory=countdown, insert_comments=True)"


@pytest.mark.parametrize("source", [
    pytest.param(f"ET.XMLParser(target={TREE}).feed('<r><!--c--></r>')", id="feed"),
    pytest.param(f"ET.fromstring('<r><!--c--></r>', parser=ET.XMLParser(target={TREE}))", id="fromstring"),
])
def test_a_getter_hands_a_tree_builder_a_variable(source: str) -> None:
    """``{'r': xs}.get`` returns ``xs`` as the root element; the C builder then calls ``xs.append`` with what
    ``comment_factory`` (``countdown``) made of the comment's text. ``dict.get`` keeps nothing: nothing is
    wrapped."""
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_a_tree_builder_held_in_a_variable_and_fed_later() -> None:
    s = _session()
    run = s.run_fragment({"var": {"tb": "{" + TREE + "}"}})
    if run.error is not None:  # refusing the builder when it is set closes the route too
        assert run.error.code == "not-allowed", run.error
        return
    _run(s, "ET.XMLParser(target=tb).feed('<r><!--c--></r>')")
    _assert_clean(s, STATE)


# -- a HIGHER_ORDER callee hands a made argument to a callable it is not listed as calling ----------------------

JSON_CLS = [
    pytest.param(f"json.loads({J}, cls=d.update, g=countdown(1))", id="loads-extra-keyword"),
    pytest.param(f"json.loads({J}, cls=d.update, object_hook=countdown(1))", id="loads-hook-value"),
    pytest.param("json.dumps(1, cls=d.update, g=countdown(1))", id="dumps-extra-keyword"),
    pytest.param("json.dumps(1, cls=d.update, default=countdown(1))", id="dumps-default-value"),
    pytest.param("json.dumps(1, cls=[d.update][0], g=countdown(1))", id="dumps-hidden-cls"),
    pytest.param("json.dumps(1, cls=functools.partial(dict.update, d), g=countdown(1))", id="dumps-partial-cls"),
]


@pytest.mark.parametrize("source", JSON_CLS)
def test_json_hands_its_keywords_to_cls(source: str) -> None:
    """``kept._store`` checks none of a ``HIGHER_ORDER`` callee's arguments and wraps only the listed ones;
    ``json.loads``/``json.dumps`` call ``cls(**kw)`` (not listed) with the made values."""
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_json_hands_its_keywords_to_cls_default_allowlist() -> None:
    s = _session(None, {"d": "{ {} }"})
    for _ in range(2):
        _run(s, "json.dumps(1, cls=d.update, g=countdown(1))")
        _assert_clean(s, ["d"])


# -- a granted object keeps what it calls, in C state the check does not open -----------------------------------

@pytest.mark.parametrize("kept_by", [
    pytest.param("xs.append(functools.cache(countdown))", id="cache-appended"),
    pytest.param("xs.append(functools.lru_cache(countdown))", id="lru-cache-appended"),
    pytest.param("d.update(c=functools.lru_cache(countdown))", id="lru-cache-in-a-dict"),
])
def test_a_cache_of_a_generator_function_is_never_held(kept_by: str) -> None:
    """A ``var`` refuses ``[functools.cache(countdown)]`` (``reach``); a store keeps it, and its cache then holds
    each granted iterator a call made: ``next(next(map(xs[0], [3])))`` answered 3, then 2 in the next run."""
    s = _session()
    _run(s, kept_by)
    read = "xs[0]" if kept_by.startswith("xs") else "d['c']"
    answers = []
    for _ in range(2):
        try:
            answers.append(s.evaluate(f"next(next(map({read}, [3])))"))
        except S2OError as err:
            assert err.code, err
        _assert_clean(s, STATE)
    assert answers in ([], [3], [3, 3]), f"a generator's state was carried between runs: {answers}"


def test_a_var_refuses_a_cache_of_a_generator_function() -> None:
    """The other half of the check, which holds: a ``var`` refuses the cache (the store guard should agree)."""
    s = _session()
    run = s.run_fragment({"var": {"fs": "{[functools.cache(countdown)]}"}})
    assert run.error is not None and run.error.code == "not-allowed", run.error


# -- what held ---------------------------------------------------------------------------------------------------

HELD = [
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
]


@pytest.mark.parametrize("source", HELD)
def test_routes_that_held(source: str) -> None:
    s = _session()
    for _ in range(2):
        _run(s, source)
        _assert_clean(s, STATE)


def test_agent_and_conv_reads_are_copies_default_allowlist() -> None:
    s = _session(None, {"agent.ys": [], "conv.zs": []})
    for source in (f"json.loads({J}, parse_int=countdown, object_hook=[agent.ys.append][0])",
                   f"json.loads({J}, parse_int=countdown, object_hook=[conv.zs.append][0])"):
        _run(s, source)
    assert s.evaluate("agent.ys") == [] and s.evaluate("conv.zs") == []


# -- false positives: Python's answer, unchanged ---------------------------------------------------------------

FP_STATE = {"xs": "{[3, 1, 2]}", "words": '{["bb", "a", "ccc", "a"]}', "s": '{"a1b2"}', "acc": "{[]}", "dd": "{ {} }",
            "cnt": "{collections.Counter()}", "dq": "{collections.deque()}"}
FP_PYTHON = {"xs": [3, 1, 2], "words": ["bb", "a", "ccc", "a"], "s": "a1b2", "acc": [], "dd": {},
             "cnt": collections.Counter(), "dq": collections.deque()}
FP_MODULES = {"collections": collections, "itertools": itertools, "json": json, "map": map, "zip": zip, "str": str,
              "enumerate": enumerate, "range": range, "iter": iter, "reversed": reversed, "list": list, "len": len}


@pytest.mark.parametrize("source", [
    pytest.param("enumerate(s)", id="enumerate-a-string"),
    pytest.param("zip(s, xs)", id="zip-a-string"),
    pytest.param("map(str.upper, s)", id="map-over-a-string"),
    pytest.param("map(str, range(3))", id="map-over-a-range"),
    pytest.param("iter(range(3))", id="range-iterator"),
    pytest.param("reversed(range(3))", id="reversed-range"),
    pytest.param("itertools.islice(s, 2)", id="islice-a-string"),
])
def test_a_lazy_iterator_over_a_string_or_range_is_a_result(source: str) -> None:
    """The same iterators over a list are results (``enumerate(words)``, ``map(str, [1])``); over a ``str`` or a
    ``range`` they hold a ``str_ascii_iterator``/``range_iterator``, which the check now refuses as unknown."""
    s = _session(ALLOWLIST, FP_STATE)
    expected = list(eval(source, {**FP_MODULES, **copy.deepcopy(FP_PYTHON)}))
    for _ in range(2):
        assert list(s.evaluate(source)) == expected


@pytest.mark.parametrize("source, read", [
    pytest.param("acc.append(zip(s, xs))", "[list(z) for z in acc]", id="append-a-zip"),
    pytest.param("acc.append(enumerate(range(3)))", "[list(z) for z in acc]", id="append-an-enumerate"),
])
def test_a_lazy_iterator_over_a_string_or_range_is_kept(source: str, read: str) -> None:
    s = _session(ALLOWLIST, FP_STATE)
    python = copy.deepcopy(FP_PYTHON)
    env = {**FP_MODULES, **python}
    eval(source, env)
    s.evaluate(source)
    assert s.evaluate(read) == eval(read, env)


@pytest.mark.parametrize("source, state", [
    pytest.param("acc.extend(w for w in words if w not in acc)", "acc", id="extend-unless-already-there"),
    pytest.param("dq.extend(w for w in words if w not in dq)", "dq", id="deque-extend-unless-already-there"),
    pytest.param("dd.update((w, len(dd)) for w in words)", "dd", id="update-numbering-new-keys"),
    pytest.param("cnt.update(w for w in words if cnt[w] < 1)", "cnt", id="counter-update-reading-itself"),
])
def test_a_consuming_call_whose_generator_reads_its_target(source: str, state: str) -> None:
    """Python's ``extend``/``update`` keep each item as the generator yields it, so the generator sees the items
    kept before; the guard consumes the generator first (``kept._kept``), so it sees the target as it was."""
    s = _session(ALLOWLIST, FP_STATE)
    python = copy.deepcopy(FP_PYTHON)
    eval(source, {**FP_MODULES, **python})
    s.evaluate(source)
    assert s.evaluate(state) == python[state]
