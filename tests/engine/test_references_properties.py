"""Property tests of reference expressions (SPEC 8): ``||`` by existence against Python's ``or``, and
``&&`` fan-out writing one value to every path."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from s2o_kernel.engine import S2OError, Session
from s2o_kernel.engine.language.references import parse_reference, show

D = "\u2020"
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=8),
                    st.floats(allow_nan=False, allow_infinity=False))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(NAMES, inner, max_size=3)), max_leaves=8)
FALSY = st.sampled_from([None, False, 0, 0.0, "", [], {}])
ECHO = {"args": {"v": "any"}, "commands": {"return": "{ v }"}}


@settings(max_examples=150, deadline=None)
@given(first=st.one_of(JSON, FALSY), scope=st.sampled_from(["agent", "conv"]))
def test_or_by_existence_differs_from_python_or_exactly_on_falsy_values(first: Any, scope: str) -> None:
    fallback = ["the fallback"]  # truthy, and equal to no generated value
    session = Session(agent={"fallback": fallback})
    session.set_vars(**{scope: {"first": first}})
    run = session.run_fragment({"var": {"got": f"{D}{scope}.first || {D}agent.fallback"}})
    assert run.code == "success", run.error
    got = session.locals["got"]
    assert got == first and type(got) is type(first)  # the first reference exists, whatever its truth
    python_or = first or fallback
    assert (python_or != got) == (not first)


@settings(max_examples=60, deadline=None)
@given(first=st.one_of(JSON, FALSY))
def test_or_takes_the_second_only_when_the_first_does_not_exist(first: Any) -> None:
    session = Session(agent={"second": first})
    run = session.run_fragment({"var": {"got": f"{D}conv.absent || {D}agent.second"}})
    assert run.code == "success", run.error
    assert session.locals["got"] == first


def _paths(draw: st.DrawFn) -> list[tuple[str, str, tuple[str, ...]]]:
    count = draw(st.integers(1, 4))
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for i in range(count):
        scope = draw(st.sampled_from(["local", "agent", "conv"]))
        keys = tuple(draw(st.lists(NAMES, max_size=2)))
        out.append((scope, f"v{i}", keys))
    return out


PATHS = st.composite(_paths)()


def _at(session: Session, scope: str, name: str, keys: tuple[str, ...]) -> Any:
    value = {"local": session.locals, "agent": session.agent_vars, "conv": session.conv_vars}[scope][name]
    for key in keys:
        value = value[key]
    return value


@settings(max_examples=100, deadline=None)
@given(value=JSON, paths=PATHS)
def test_and_fan_out_writes_the_same_value_to_every_path(value: Any,
                                                         paths: list[tuple[str, str, tuple[str, ...]]]) -> None:
    targets = " && ".join(D + scope + "." + ".".join((name, *keys)) for scope, name, keys in paths)
    session = Session()
    assert session.run_fragment({"functions": {"main": {"commands": []}, "echo": ECHO}}).code == "success"
    fragment = [{"call": {"function": "echo", "args": {"v": f"{D}sys.inputs.v"}, "outputPath": targets}},
                {"return": "{ result }"}]  # a command list: the notebook's locals keep the local targets
    run = session.run_fragment(fragment, inputs={"v": value})
    assert run.code == "success", run.error
    assert run.value == value
    for scope, name, keys in paths:
        assert _at(session, scope, name, keys) == value


REF_CODES = {"ref-text", "ref-scope", "ref-path", "ref-operator", "ref-mixed", "ref-empty", "ref-paren", "too-deep",
             "underscore"}


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=f"{D}().[]'\"|& \tagentconvlsyiupr_019x", max_size=48))
def test_any_text_parses_or_is_one_coded_error_with_a_column_inside_it(text: str) -> None:
    try:
        tree = parse_reference(text)
    except S2OError as exc:
        assert exc.code in REF_CODES
        assert exc.stage == "validate" and exc.line == 1
        assert exc.col is not None and 0 <= exc.col <= len(text)
        assert exc.source == text
    else:
        assert D in text
        assert show(parse_reference(show(tree))) == show(tree)  # what it writes back parses to the same tree
