"""What a fragment may be, whoever made it (a new user's trial, 2026-12-04; SPEC 7, 12).

* A ``var`` target, a loop's item, a function's name are ASCII: the parser folds look-alikes (NFKC:
  ``ｐｒｉｃｅ`` is ``price``), so a full-width or ligature spelling would write another variable.
* A fragment a library made in Python is checked as JSON before anything reads it: a key that is not
  text, a tuple, a set, a number that is not finite are ``fragment`` errors at their path, never an
  exception out of ``run_fragment``, and the contained session refuses them the same way (JSON on the
  pipe would turn a tuple into a list and a key ``1`` into ``"1"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, default_settings

LOOK_ALIKES = [
    ({"var": {"ｐｒｉｃｅ": 999}}, "var.ｐｒｉｃｅ"),
    ({"var": {"agent.ｖｉｓｉｔｓ": 500}}, "var.agent.ｖｉｓｉｔｓ"),
    ({"var": {"ﬁle": 7}}, "var.ﬁle"),
    ({"var": {"conv.ℌ": 1}}, "var.conv.ℌ"),
    ({"var": {"ｌｅｎ": 2}}, "var.ｌｅｎ"),
    ({"var": {"é": 1}}, "var.é"),
    ({"var": {"price['ｋ']": 1}}, "var.price['ｋ']"),
]
LOOP_NAMES = ["é", "ｎ", "None", "if"]
NOT_JSON: list[tuple[Any, str | None, str]] = [
    ({"var": {None: 1}}, "var", "a key of type NoneType"),
    ({"var": {1: 2}}, "var", "a key of type int"),
    ({"return": {1: 2}}, "return", "a key of type int"),
    ({"functions": {1: {"commands": {"return": 1}}}}, "functions", "a key of type int"),
    ({"return": (1, 2)}, "return", "a tuple"),
    ({"return": float("nan")}, "return", "nan"),
    ({"var": {"big": float("inf")}}, "var.big", "inf"),
    ([{"var": {"x": [1, {"y": {1, 2}}]}}], "[0].var.x[1].y", "a set"),
]


@pytest.fixture
def session() -> Session:
    return Session(Engine(default_settings()), locals={"price": 4}, agent={"visits": 1})


@pytest.mark.parametrize(("fragment", "path"), LOOK_ALIKES)
def test_a_look_alike_target_is_refused_and_writes_nothing(session: Session, fragment: Any, path: str) -> None:
    run = session.run_fragment(fragment)
    assert run.code == "errorInAgent" and run.error is not None
    assert (run.error.code, run.error.path) == ("non-ascii", path)
    assert session.locals == {"price": 4} and session.agent_vars == {"visits": 1} and session.conv_vars == {}
    with pytest.raises(S2OError) as caught:
        session.dataflow(fragment)  # %validate's check refuses it too, before anything runs
    assert caught.value.code == "non-ascii"


@pytest.mark.parametrize("name", LOOP_NAMES)
def test_a_loop_item_is_an_ascii_name_at_validation(session: Session, name: str) -> None:
    fragment = {"for": {"item": name, "in": "{ [1] }", "commands": []}}
    with pytest.raises(S2OError) as caught:
        session.dataflow(fragment)
    assert (caught.value.code, caught.value.path) == ("fragment", "for.item")


@pytest.mark.parametrize(("fragment", "path", "what"), NOT_JSON)
def test_a_value_that_is_not_json_is_a_fragment_error(session: Session, fragment: Any, path: str, what: str) -> None:
    run = session.run_fragment(fragment)
    assert run.code == "errorInAgent" and run.error is not None
    assert (run.error.code, run.error.path) == ("fragment", path)
    assert what in run.error.message


@pytest.fixture(scope="module")
def isolated() -> Iterator[IsolatedSession]:
    contained = IsolatedSession(default_settings())
    try:
        yield contained
    finally:
        contained.close()


@pytest.mark.parametrize(("fragment", "path", "what"), NOT_JSON)
def test_the_contained_session_refuses_the_same(isolated: IsolatedSession, fragment: Any, path: str,
                                               what: str) -> None:
    run = isolated.run_fragment(fragment)
    assert run.code == "errorInAgent" and run.error is not None
    assert (run.error.code, run.error.path) == ("fragment", path)


@pytest.mark.parametrize("text", [None, 5, b"{ 1 }", ["{ 1 }"]])
def test_a_dynamic_string_is_text(session: Session, text: Any) -> None:
    with pytest.raises(S2OError) as caught:
        session.evaluate_dynamic(text)
    assert caught.value.code == "syntax" and "a dynamic string is text" in caught.value.message


@pytest.mark.parametrize(("value", "key", "command"), [
    ({"var": {"x": 1}, "extra": 2}, "extra", "var"),
    ({"call": {"function": "f"}, "outputPath": "\u2020agent.x"}, "outputPath", "call"),
    ([{"var": {"x": 1}}, {"return": {"a": 1}, "note": "n"}], "note", "return"),
])
def test_a_key_beside_a_command_is_named(value: Any, key: str, command: str) -> None:
    """JSON holding a command and a key no command object takes is not a fragment and runs nothing: the
    kernel's note (and the engine's ``fragment`` error) name the key (a new user's trial, 2026-12-04)."""
    from s2o_kernel.engine import fragment_hint, fragment_kind

    assert fragment_kind(value) is None
    hint = fragment_hint(value)
    assert hint is not None and f"{key!r} is not a key of a command object beside {command!r}" in hint


@pytest.mark.parametrize("value", [{"city": "Oslo", "var": 1.5, "n": 2}, {"return": 0.05, "risk": 0.1}, {"a": 1},
                                   [{"x": 1}], {"var": {}, "onError": []}])
def test_data_and_fragments_get_no_such_note(value: Any) -> None:
    from s2o_kernel.engine import fragment_hint

    assert fragment_hint(value) is None or "beside" not in fragment_hint(value)


@pytest.mark.parametrize("patch", [{"limits": {"time": float("inf")}}, {"limits": {"time": float("nan")}},
                                   {"limits": {"llm_cost": float("inf")}}])
def test_a_limit_is_a_finite_number(patch: dict[str, Any]) -> None:
    """``%limits {"time": 1e999}`` was accepted and then shown as ``"time": Infinity``, which is not JSON."""
    from s2o_kernel.engine import make_settings

    with pytest.raises(S2OError) as caught:
        make_settings(patch)
    assert caught.value.code == "settings" and "finite" in caught.value.message


def test_a_logged_text_holding_a_secret_shows_as_output_shows_it() -> None:
    """It was logged as JSON of its repr, ``"'Bearer ***'"`` (a new user's trial, 2026-12-04)."""
    from s2o_kernel.engine import make_settings

    s = Session(Engine(make_settings({"secrets": {"K": "abc"}})))
    run = s.run_fragment([{"log": "{ f\"Bearer {sys.secret['K']}\" }"}, {"log": "{ f\"{sys.secret['K']}\" }"}])
    assert run.logs == ["Bearer ***", "***"]


def _shared(levels: int) -> list[Any]:
    """A list held twice at each of ``levels`` levels: 2**levels items written out, ``levels`` lists made."""
    value: list[Any] = [1]
    for _ in range(levels):
        value = [value, value]
    return value


def test_a_fragment_holding_one_list_many_times_is_too_long(session: Session, isolated: IsolatedSession) -> None:
    """No JSON text shares a list; a value made in Python may, and every walk over it was exponential:
    ``run_fragment`` and ``dataflow`` never returned (found while fixing the trial's findings)."""
    fragment = {"return": _shared(60)}
    for run in (session.run_fragment(fragment), isolated.run_fragment(fragment)):
        assert run.error is not None and run.error.code == "too-long"
        assert "limits.definition_length" in run.error.message
    with pytest.raises(S2OError) as caught:
        session.dataflow(fragment)
    assert caught.value.code == "too-long"


def test_an_agent_value_holding_one_list_many_times_is_not_json(session: Session) -> None:
    with pytest.raises(S2OError) as caught:
        session.set_vars(agent={"z": _shared(60)})
    assert caught.value.code == "not-json" and "too large to write out" in caught.value.message
    assert session.agent_vars == {"visits": 1}


# -- the second red team of 2026-12-04 (a helper session against the fixes above) ------------------------


def test_the_path_of_a_fault_is_written_for_it_alone(session: Session) -> None:
    """A path text per value made a 60,000-character key over a 20,000-item list cost 1.2 GB before the error
    (its path is kept as a trail now, and a key in it is cut to 60 characters)."""
    deep: Any = 0
    for _ in range(205):
        deep = [deep]
    run = session.run_fragment({"var": {"a": 1}, "k" * 60_000: [0] * 19_999 + [deep]})
    assert run.error is not None and run.error.code == "too-deep"
    assert run.error.path is not None and run.error.path.startswith("k" * 60 + "[19999][0]")
    assert len(run.error.path) < 1_000


@pytest.mark.parametrize("fragment", [{"return": 10**5000}, {"var": {"x": [-(2**20000)]}}])
def test_an_integer_json_cannot_write_is_not_json(session: Session, isolated: IsolatedSession, fragment: Any) -> None:
    """``json.dumps`` refuses integers of over 4,300 digits: they escaped as ``ValueError`` tracebacks."""
    for run in (session.run_fragment(fragment), isolated.run_fragment(fragment)):
        assert run.error is not None and run.error.code == "fragment" and "4,000 digits" in run.error.message
    with pytest.raises(S2OError) as caught:
        isolated.dataflow(fragment)
    assert caught.value.code == "fragment"


def test_an_agent_variable_is_never_an_integer_json_cannot_write(session: Session, isolated: IsolatedSession) -> None:
    """The worker kept ``agent.big`` when its reply could not be written, and the parent's state did not."""
    for s in (session, isolated):
        before = s.agent_vars
        run = s.run_fragment({"var": {"agent.big": "{ 2**20000 }"}})
        assert run.error is not None and run.error.code == "not-json"
        assert s.agent_vars == before
    with pytest.raises(S2OError) as caught:
        isolated.set_vars(locals={"q": 10**5000})
    assert caught.value.code == "not-json"


def test_a_reference_index_is_ascii_digits(session: Session) -> None:
    from s2o_kernel.engine.language.references import parse_reference

    with pytest.raises(S2OError):
        parse_reference("\u2020local.xs[\uff11]")
    parse_reference("\u2020local.xs[1]")


def test_much_json_is_data_never_looked_at_as_a_misspelled_fragment() -> None:
    """Each near miss costs difflib ~0.4 ms: a long list of would-be commands held the kernel for seconds."""
    from s2o_kernel.engine import fragment_hint

    assert fragment_hint([{"vars": {"i": 0}}]) is not None
    assert fragment_hint([{f"vars{i % 7}": {"i": 0}} for i in range(51)]) is None


@pytest.mark.parametrize(("value", "shown"), [(float("nan"), "is nan"), (float("inf"), "is inf"),
                                              (10**5000, "4,000 digits"), ({1: 2}, "key of type int")],
                         ids=["nan", "inf", "big-int", "int-key"])
def test_a_constant_is_json(value: Any, shown: str) -> None:
    """SPEC 10: ``const`` is a JSON object; a TOML ``nan`` showed as ``null`` in ``%sys`` (a new user's trial)."""
    from s2o_kernel.engine import make_settings

    with pytest.raises(S2OError) as caught:
        make_settings({"const": {"k": value}})
    assert (caught.value.code, caught.value.path) == ("settings", "const") and shown in caught.value.message
