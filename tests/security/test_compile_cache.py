"""The process-wide compile cache never serves code compiled under other rules, allowlist or guard
(issue 12; ``engine.Engine.compile_fingerprint``): each pair of engines below differs in one
compile-relevant setting and compiles the same source, in both orders."""

from __future__ import annotations

import itertools

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, default_settings, make_settings
from s2o_kernel.engine.settings import default_data, merge

_UNIQUE = itertools.count()


def fresh(src: str) -> str:
    """``src`` made unique in this process, so no earlier test has cached it."""
    return f"({src}) if {next(_UNIQUE) + 1} else None"


def settings_with(patch: dict) -> object:
    return make_settings(merge(default_data(), patch))


def code_of(err: BaseException) -> str:
    assert isinstance(err, S2OError)
    return err.code


@pytest.mark.parametrize("first", ["granting", "refusing"])
def test_a_name_granted_to_one_engine_is_not_granted_to_another_by_the_cache(first):
    granting = Engine(make_settings({"allowlist": "len\nmin"}))
    refusing = Engine(make_settings({"allowlist": "min"}))
    src = fresh("len(xs) + min(xs)")
    sessions = {"granting": Session(granting, locals={"xs": [1]}), "refusing": Session(refusing, locals={"xs": [1]})}
    outcomes = {}
    for name in ([first] + [n for n in sessions if n != first]):
        try:
            outcomes[name] = sessions[name].evaluate(src)
        except S2OError as err:
            outcomes[name] = err
    assert outcomes["granting"] == 2
    assert code_of(outcomes["refusing"]) == "unknown-name"
    assert "len" in refusing.compile(src).local_names and "len" not in granting.compile(src).local_names


@pytest.mark.parametrize("first", ["bounded", "plain"])
def test_operator_rewrites_are_part_of_the_key(first):
    bounded = Engine(default_settings())
    plain = Engine(settings_with({"rules": {"operators": {"*": "on"}}}))
    src = fresh("text * count")
    for engine in ([bounded, plain] if first == "bounded" else [plain, bounded]):
        engine.compile(src)
    assert "__s2o_op_mul" in bounded.compile(src).code.co_names
    assert "__s2o_op_mul" not in plain.compile(src).code.co_names
    with pytest.raises(S2OError) as err:  # the bounded engine's run still refuses the huge repetition
        Session(bounded, locals={"text": "ab", "count": 10**8}).evaluate(src)
    assert err.value.code == "runtime" and "OverflowError" in err.value.message


@pytest.mark.parametrize("first", ["guarded", "unguarded"])
def test_guarded_code_and_unguarded_code_are_never_swapped(first):
    settings = default_settings()
    unguarded = Engine(settings)
    guarded = Engine(settings, guard=True)
    src = fresh("name.upper()")
    for engine in ([guarded, unguarded] if first == "guarded" else [unguarded, guarded]):
        engine.compile(src)
    assert guarded.guarded and not unguarded.guarded
    assert "__s2o_attr" in guarded.compile(src).code.co_names
    assert "__s2o_attr" not in unguarded.compile(src).code.co_names


@pytest.mark.parametrize("first", ["with", "without"])
def test_a_secret_of_one_configuration_is_missing_in_another(first):
    with_secret = Engine(settings_with({"secrets": {"TOKEN": "hunter2-value"}}))
    without = Engine(default_settings())
    src = fresh("f\"Bearer {sys.secret['TOKEN']}\"")
    results = {}
    for name, engine in ([("with", with_secret), ("without", without)] if first == "with"
                         else [("without", without), ("with", with_secret)]):
        try:
            results[name] = engine.compile(src)
        except S2OError as err:
            results[name] = err
    assert not isinstance(results["with"], S2OError)
    assert code_of(results["without"]) == "missing-secret"


def test_a_shorter_definition_length_refuses_what_a_longer_one_compiled():
    src = fresh("1 + 2 + 3 + 4 + 5")
    Engine(default_settings()).compile(src)
    with pytest.raises(S2OError) as err:
        Engine(settings_with({"limits": {"definition_length": 10}})).compile(src)
    assert err.value.code == "too-long"


def test_equal_settings_share_compiled_code_so_a_new_session_starts_hot():
    src = fresh("price * quantity")
    first = Engine(default_settings()).compile(src)
    again = Engine(default_settings()).compile(src)
    assert again is first
    other = Engine(settings_with({"rules": {"max_comprehension_depth": 2}})).compile(src)
    assert other is not first
