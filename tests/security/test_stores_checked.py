"""A call that may keep a value the expression made in a variable checks it first (SPEC 12; engine/policy/stores.py).

A session's variables are checked when a ``var`` sets them, and reading one back (``xs``, the hot path's
``Compiled.simple``) is not checked again. Before this, a call changed a variable in place with a value the
set-time check refuses: ``xs.append(countdown(3))`` returned ``None``, and every later ``xs`` returned and
showed a list holding a live generator (SPEC 12: "no value returned, stored or shown … is or contains … a
generator"); so did ``d.update(g=…)``, ``heapq.heappush``, ``list.append(xs, g)``, ``map(xs.append, …)``,
a ``key=`` that stores, and a comprehension's variable. Each route here must now end ``not-allowed`` before
the call runs, and the variable must read back as it was; the same cells through a real kernel, in both
modes.
"""

from __future__ import annotations

import json

import pytest
from kernel_harness import MODES, execute, install_spec, result_data, running_kernel

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings, default_settings
from s2o_kernel.engine.language.rewrites import STORE_GUARD
from s2o_kernel.engine.policy.kept import keeps_nothing

ALLOWLIST = "\n".join([
    "heapq", "operator.setitem", "list", "dict", "map", "sorted", "zip", "sum", "len", "range", "str", "max", "set",
    "s2o_kernel.examples.countdown as countdown",
])


@pytest.fixture
def session() -> Session:
    s = Session(Engine(bare_settings({"allowlist": ALLOWLIST})))
    run = s.run_fragment({"var": {"xs": "{[1]}", "d": "{ {'a': 1} }", "heap": "{[]}"}})
    assert run.error is None, run.error
    return s


STATE = {"xs": [1], "d": {"a": 1}, "heap": []}

ROUTES = [
    pytest.param("xs.append((c for c in 'ab'))", id="append-genexp"),
    pytest.param("xs.append(countdown(2))", id="append-host-generator"),
    pytest.param("xs.insert(0, countdown(1))", id="insert"),
    pytest.param("xs.append([countdown(2)])", id="append-a-list-holding-one"),
    pytest.param("d.update(g=(c for c in 'ab'))", id="update-keyword"),
    pytest.param("d.update({'g': countdown(2)})", id="update-dict"),
    pytest.param("d.update(zip('gh', [countdown(1), countdown(1)]))", id="update-consumed-pairs"),
    pytest.param("d.setdefault('g', countdown(2))", id="setdefault"),
    pytest.param("list.append(xs, countdown(2))", id="unbound-method"),
    pytest.param("heapq.heappush(heap, countdown(2))", id="module-function"),
    pytest.param("operator.setitem(d, 'g', countdown(2))", id="operator-setitem"),
    pytest.param("list(map(xs.append, [countdown(1)]))", id="map-of-a-method"),
    pytest.param("sorted([countdown(1)], key=xs.append)", id="sort-key-stores"),
    pytest.param("[xs.append(g) for g in [countdown(1)]]", id="comprehension-variable"),
    pytest.param("xs.extend(g for g in [1, countdown(1)])", id="extend-items-checked"),
    pytest.param("xs.append(*[countdown(1)])", id="starred-argument"),
    pytest.param("d.update(**{'g': countdown(1)})", id="double-starred-argument"),
]


@pytest.mark.parametrize("source", ROUTES)
def test_a_generator_never_lands_in_a_variable(session: Session, source: str) -> None:
    for _ in range(2):  # cold (compiled by this run), then hot (the session's function)
        with pytest.raises(S2OError) as err:
            session.evaluate(source)
        assert err.value.code == "not-allowed", err.value
        assert "generator" in err.value.message or "iterator" in err.value.message, err.value
    for name, value in STATE.items():
        held = session.evaluate(name)
        json.dumps(held)  # JSON through and through: no generator, iterator or other value inside
        if "extend" in source and name == "xs":
            assert held == [1, 1, 1], held  # each try kept the 1 before the generator was refused, as Python would
        else:
            assert held == value, (name, held)


def test_items_of_a_consumed_iterator_are_kept_when_they_are_json(session: Session) -> None:
    assert session.evaluate("xs.extend(c for c in 'ab')") is None
    assert session.evaluate("xs.extend(countdown(2))") is None
    assert session.evaluate("d.update(zip('bc', [2, 3]))") is None
    assert session.evaluate("heapq.heappush(heap, len(xs))") is None
    assert session.evaluate("xs") == [1, "a", "b", 2, 1]
    assert session.evaluate("d") == {"a": 1, "b": 2, "c": 3}
    assert session.evaluate("heap") == [5]


@pytest.mark.parametrize("source", [
    "sum(x for x in xs)",
    "len(list(x for x in xs))",
    "dict(zip('ab', [1, 2]))",
    "sorted(xs)",
    "xs.count(1)",
    "xs.index(1)",
])
def test_calls_that_keep_nothing_made_are_not_guarded(session: Session, source: str) -> None:
    compiled = session.engine.compile(source)
    assert STORE_GUARD not in compiled.code.co_names, source
    session.evaluate(source)


@pytest.mark.parametrize("source", [
    "xs.append(countdown(2))",
    "d.update(g=(c for c in 'ab'))",
    "[xs.append(g) for g in [countdown(1)]]",
])
def test_guarded_calls_are_rewritten(session: Session, source: str) -> None:
    assert STORE_GUARD in _names(session.engine.compile(source).code), source


def _names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


FACTORY_ALLOWLIST = "\n".join(["collections.defaultdict", "functools.partial", "list",
                               "s2o_kernel.examples.countdown as countdown"])


@pytest.mark.parametrize("made", [
    "collections.defaultdict(functools.partial(countdown, 2))",
    "collections.defaultdict(countdown)",
    "[collections.defaultdict(functools.partial(list, [1]))]",
])
def test_a_defaultdict_that_would_keep_what_its_factory_makes_is_never_held(made: str) -> None:
    """A ``defaultdict``'s factory runs at a missing key's read (``dd['k']``, a subscript: no call the store
    guard sees) and the dict keeps what it makes. With a granted generator function behind it, ``dd['k']``
    put a granted iterator in the variable, and every later ``dd`` showed it. Now only a builtin type may be
    a held defaultdict's factory: set by ``var``, kept by a call and returned alike are refused."""
    s = Session(Engine(bare_settings({"allowlist": FACTORY_ALLOWLIST})))
    run = s.run_fragment({"var": {"dd": "{" + made + "}"}})
    assert run.error is not None and run.error.code == "not-allowed", run.error
    assert "default_factory" in run.error.message and "0x" not in run.error.message, run.error
    assert s.run_fragment({"var": {"xs": "{[]}"}}).error is None
    for source in (f"xs.append({made})", made):
        for _ in range(2):
            with pytest.raises(S2OError) as err:
                s.evaluate(source)
            assert err.value.code == "not-allowed", err.value
    assert s.evaluate("xs") == []


def test_a_defaultdict_of_a_builtin_type_is_held_and_fills_itself() -> None:
    s = Session(Engine(bare_settings({"allowlist": FACTORY_ALLOWLIST})))
    run = s.run_fragment([{"var": {"dd": "{collections.defaultdict(list)}"}},
                          {"var": {"n": "{dd['a'].append(1)}"}}])
    assert run.error is None, run.error
    assert s.evaluate("dd['a'] + dd['b']") == [1]
    assert dict(s.evaluate("dd")) == {"a": [1], "b": []}

def test_the_error_points_at_the_call() -> None:
    s = Session(Engine(default_settings()))
    assert s.run_fragment({"var": {"xs": "{[]}"}}).error is None
    with pytest.raises(S2OError) as err:
        s.evaluate("(len(xs) +\n  len([xs.append(countdown(1))]))")
    assert err.value.code == "not-allowed"
    assert (err.value.line, err.value.col) == (2, 7), err.value


def test_a_fragment_keeps_its_variables_as_they_were() -> None:
    s = Session(Engine(default_settings()))
    run = s.run_fragment([{"var": {"xs": "{[1]}", "agent.n": 1}},
                          {"var": {"y": "{xs.append(countdown(2))}"}}])
    assert run.error is not None and run.error.code == "not-allowed"
    assert run.error.path is not None and "var.y" in run.error.path, run.error
    assert s.evaluate("xs") == [1]
    assert s.evaluate("agent.n") == 1


@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_kernel_never_shows_a_stored_generator(mode, tmp_path):
    """The hole as a notebook user met it: ``xs.append(countdown(3))`` in one cell, and ``xs`` in the next
    showed ``[<generator object countdown at 0x…>]``."""
    kernels = install_spec(tmp_path / "prefix")
    with running_kernel(kernels, tmp_path, env={"S2O_KERNEL_ISOLATED": MODES[mode]}) as (_km, kc):
        reply, _ = execute(kc, '{"var": {"xs": "{[1]}"}}', timeout=60)
        assert reply["status"] == "ok", reply
        reply, _ = execute(kc, "xs.append(countdown(3))", timeout=60)
        assert reply["status"] == "error" and reply["ename"] == "not-allowed", reply
        reply, outputs = execute(kc, "xs", timeout=60)
        assert result_data(outputs)["text/plain"] == "[1]"


@pytest.mark.parametrize("source, expected", [
    ("sep.join(str(x) for x in xs)", "1"),
    ("sorted((k for k in d), key=d.get)", ["a"]),
    ("max((k for k in d), key=d.get)", "a"),
    ("sorted(set(xs).union(x + 1 for x in xs))", [1, 2]),
    ("list(map(d.get, (k for k in d)))", [1]),
    ("sep.join(sorted(str(x) for x in xs))", "1"),
])
def test_calls_that_keep_nothing_take_generators(session: Session, source: str, expected) -> None:
    """The callee decides (engine/policy/kept.py): a method of an immutable value, a container's method that keeps
    nothing, a standard-library C function, with no keeping callable among the arguments, runs unchecked; each
    of these was refused before the callee was asked (``sep.join(...)`` of a local ``sep``)."""
    session.run_fragment({"var": {"sep": ", "}})
    for _ in range(2):
        assert session.evaluate(source) == expected


class _Listish(list):
    pass


def _python_function(xs, g):
    xs.append(g)


@pytest.mark.parametrize("fn, expected", [
    pytest.param(", ".join, True, id="str-method"),
    pytest.param(str.join, True, id="str-method-unbound"),
    pytest.param({}.get, True, id="dict-get"),
    pytest.param(dict.fromkeys, True, id="class-method"),
    pytest.param(sorted, True, id="builtin"),
    pytest.param(map, True, id="c-type"),
    pytest.param([].append, False, id="list-append"),
    pytest.param(list.append, False, id="list-append-unbound"),
    pytest.param({}.setdefault, False, id="dict-setdefault"),
    pytest.param(set().add, False, id="set-add"),
    pytest.param(_Listish().append, False, id="append-of-a-list-subclass"),
    pytest.param(_Listish, False, id="python-class"),
    pytest.param(_python_function, False, id="python-function"),
    pytest.param(__import__("heapq").heappush, False, id="heappush"),
    pytest.param(__import__("bisect").insort, False, id="insort"),
    pytest.param(__import__("operator").iadd, False, id="operator-iadd"),
    pytest.param(__import__("operator").setitem, False, id="operator-setitem"),
    pytest.param(__import__("collections").Counter, False, id="stdlib-python-class"),
])
def test_which_callees_keep_nothing(fn, expected) -> None:
    assert keeps_nothing(fn) is expected


def test_the_guarded_gather_keeps_nothing() -> None:
    from s2o_kernel.engine.policy.guards import guarded_gather
    assert keeps_nothing(guarded_gather) is True


HOST_APPLY = "def apply(f, g, n):\n    return f(g(n))\n"


@pytest.mark.parametrize("source", [
    pytest.param("apply(xs.append, countdown, 1)", id="method-positional"),
    pytest.param("apply(f=xs.append, g=countdown, n=1)", id="method-by-keyword"),
    pytest.param("apply(f, countdown, 1)", id="variable-positional"),
    pytest.param("apply(g=countdown, f=f, n=1)", id="variable-by-keyword"),
])
def test_a_host_function_composing_a_keeper_and_a_maker_is_checked(source, tmp_path, monkeypatch) -> None:
    """A granted Python function that calls one callback with what another makes (``f(g(n))``): the keeper
    it is given is handed over wrapped, so what the maker made is checked before it is kept."""
    (tmp_path / "hostapply.py").write_text(HOST_APPLY)
    monkeypatch.syspath_prepend(str(tmp_path))
    s = Session(Engine(bare_settings({"allowlist": "hostapply.apply as apply\nlen\n"
                                      "s2o_kernel.examples.countdown as countdown"})))
    assert s.run_fragment({"var": {"xs": "{[]}", "f": "{xs.append}"}}).error is None
    for _ in range(2):
        with pytest.raises(S2OError) as err:
            s.evaluate(source)
        assert err.value.code == "not-allowed", err.value
    assert s.evaluate("xs") == []
    assert s.evaluate("apply(f, len, 'abc')") is None  # a maker of plain values: kept as Python would
    assert s.evaluate("xs") == [3]
