"""The allowlist (SPEC 4, 12): forms, containment of modules, all-or-nothing loading, refused entries."""

from __future__ import annotations

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings
from s2o_kernel.engine.policy.allowlist import load_allowlist


def run(expr, allowlist, **kw):
    return Session(Engine(bare_settings({"allowlist": allowlist, **kw}))).evaluate(expr)


def test_six_forms_and_rename():
    assert run("len('ab')", "len") == 2
    assert run("str(5) + str.upper('a')", "str") == "5A"
    assert run("str.join('-', ['a', 'b'])", "str.join") == "a-b"
    assert run("math.sqrt(16)", "math.sqrt") == 4.0
    assert run("math.floor(2.5)", "math") == 2
    assert run("sqrt(16)", "math.*") == 4.0
    assert run("root(16)", "math.sqrt as root") == 4.0


def test_partly_granted_type_refuses_other_members():
    with pytest.raises(S2OError) as err:
        run("str(5)", "str.join")
    assert err.value.code == "not-allowed" and "str.join" in err.value.message  # only str.join is granted
    with pytest.raises(S2OError) as err:
        run("str.upper('a')", "str.join")
    assert err.value.code == "not-allowed" and "'str.upper' is not in the allowlist" in err.value.message


def test_granted_module_never_hands_out_a_module():
    with pytest.raises(S2OError) as err:
        run("json.codecs", "json")
    assert err.value.code == "not-allowed" and "'json.codecs' is not in the allowlist" in err.value.message
    with pytest.raises(S2OError):
        run("urllib.parse", "urllib")
    assert run("urllib.parse.quote('a b')", "urllib.parse") == "a%20b"


def test_granted_module_is_read_only():
    ns = load_allowlist("json").names["json"]
    with pytest.raises(S2OError) as err:
        ns.dumps = print
    assert err.value.code == "not-allowed"
    assert repr(ns) == "<granted module json>"


def test_star_replaces_earlier_and_later_lines_win():
    assert run("pow(2, 3)", "pow\nmath.*") == 8.0
    assert run("pow(2, 3)", "math.*\npow") == 8


def test_loading_is_all_or_nothing_with_one_message_per_line():
    text = "len\nnosuchmodule\nmath.nope\nmath.* as m   # renamed star"
    with pytest.raises(S2OError) as err:
        load_allowlist(text)
    assert err.value.code == "allowlist" and err.value.stage == "load"
    assert err.value.details["lines"] == {
        "nosuchmodule": "Could not be imported.",
        "math.nope": "Could not be imported.",
        "math.* as m   # renamed star": "A star import cannot be renamed with 'as'.",
    }


def test_comments_and_blank_lines_are_ignored():
    assert run("json.loads('[1]')", "# text\n\njson.loads   # parse\n") == [1]


@pytest.mark.parametrize("entry", ["eval", "exec", "open", "type", "vars", "dir", "typing", "inspect", "types", "gc",
                                   "importlib", "asyncio", "operator.attrgetter", "operator.methodcaller",
                                   "string.Formatter", "functools.update_wrapper", "asyncio.current_task",
                                   "os", "sys", "builtins", "breakpoint", "input", "globals", "compile"])
def test_dangerous_entries_are_refused_with_a_reason(entry):
    with pytest.raises(S2OError) as err:
        load_allowlist(f"len\n{entry}")
    assert err.value.code == "refused-entry"
    assert entry in err.value.details["lines"][entry]


def test_unsafe_entries_load_with_the_setting_and_warn():
    al = load_allowlist("vars", allow_unsafe_entries=True)
    assert "vars" in al.names and any("vars" in w for w in al.warnings)


def test_whole_module_leaves_out_dangerous_members_and_warns():
    al = load_allowlist("operator")
    members = vars(al.names["operator"])
    assert "add" in members and "attrgetter" not in members and "methodcaller" not in members
    assert any("attrgetter" in w for w in al.warnings)


def test_blocking_entry_warns():
    al = load_allowlist("time.sleep")
    assert any("time.sleep" in w and "event loop" in w for w in al.warnings)


def test_exists_allowlist_and_dotted_lookup():
    s = Session(Engine(bare_settings({"allowlist": "json\nmath.sqrt"})))
    assert s.evaluate("sys.exists('allowlist', 'json')") is True
    assert s.evaluate("sys.exists('allowlist', 'math.sqrt')") is True
    assert s.evaluate("sys.exists('allowlist', 'math.floor')") is False
    assert s.evaluate("sys.exists('allowlist', 'csv')") is False


def test_guarded_getattr_and_hasattr_apply_the_name_rules_at_run_time():
    s = Session(Engine(bare_settings({"allowlist": "getattr\nhasattr\njson"})), locals={"x": 1})
    for expr, code in [("getattr(x, '_' + '_class__')", "underscore"), ("getattr('s', 'for' + 'mat')", "format"),
                       ("getattr(x, 'gi_' + 'frame')", "attribute"), ("hasattr(x, '__class__')", "underscore"),
                       ("getattr(json, 'codecs')", "not-allowed")]:
        with pytest.raises(S2OError) as err:
            s.evaluate(expr)
        assert err.value.code == code and err.value.stage == "run", expr
    assert s.evaluate("getattr(x, 'real')") == 1
    assert s.evaluate("hasattr(json, 'codecs')") is False
    assert s.evaluate("hasattr(json, 'dumps')") is True


def test_operator_rewrite_target_must_be_a_two_argument_allowlist_function():
    for target in ("nothing", "len"):
        with pytest.raises(S2OError) as err:
            Engine(bare_settings({"allowlist": "len", "rules": {"operators": {"+": target}}}))
        assert err.value.code == "settings" and err.value.stage == "load"
    e = Engine(bare_settings({"rules": {"operators": {"**": "bounded_pow"}}}))
    with pytest.raises(S2OError) as err:
        Session(e).evaluate("9 ** 9 ** 9")
    assert err.value.code == "runtime" and "OverflowError" in err.value.message
