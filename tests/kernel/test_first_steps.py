"""A new user's first mistakes, through a real kernel (a new-user trial of the kernel, 2026-12-02).

Each finding of that trial is a test here: a misspelled fragment that shows back as a dict and runs
nothing gets a note naming the near miss (SPEC 9 still reads it as an expression); ``%name?`` is the
magic's help, as in IPython; the shared demo database cannot be changed by a cell (its profile is
read-only); text made with a secret shows as text with the secret as ``***``, not as a repr.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import execute, result_data, running_kernel

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def kc(kernels_dir: Path, kernel_cwd: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A client of a kernel (contained, the default) with its own data folder and one secret."""
    config = tmp_path_factory.mktemp("config") / "s2o.toml"
    config.write_text('[secrets]\nK = "hunter2-first-steps"\n', encoding="utf-8")
    env = {"S2O_DATA_DIR": str(tmp_path_factory.mktemp("data")), "S2O_CONFIG": str(config)}
    with running_kernel(kernels_dir, kernel_cwd, env=env) as (_km, client):
        yield client


def stderr(outputs: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in outputs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


@pytest.mark.parametrize(("cell", "miss"), [
    ('{"vars": {"first_i": 0}}', "'vars' is not a command (did you mean 'var'?)"),
    ('[{"var": {"first_i": 0}}, {"retrun": "{ first_i }"}]', "'retrun' is not a command (did you mean 'return'?)"),
    ('{"var": {"first_i": 0}, "onEror": {"log": "x"}}', "'onEror' is not a field (did you mean 'onError'?)"),
    ('{"Var": {"first_i": 0}}', "'Var' is not a command (did you mean 'var'?)"),
])
def test_a_misspelled_fragment_is_shown_back_with_a_note_and_runs_nothing(kc: Any, cell: str, miss: str) -> None:
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "ok", reply
    assert result_data(outputs)["text/plain"].startswith(("{", "["))  # SPEC 9: an expression, shown back
    note = stderr(outputs)
    assert miss in note and "did not run" in note and "%%fragment" in note, note
    reply, _ = execute(kc, "first_i")
    assert (reply["status"], reply["ename"]) == ("error", "unknown-name")  # nothing ran


@pytest.mark.parametrize(("cell", "why"), [
    ("{'var': {'first_q': 1}}", "Expecting property name enclosed in double quotes"),
    ("[{'var': {'first_q': 1}}, {'return': 'first_q'}]", "double quotes"),
    ('{"var": {"first_q": True}}', "Expecting value"),
    ("{'db': {'profile': 'demo', 'sql': 'select 1'}}", "double quotes"),
])
def test_a_fragment_in_python_notation_is_shown_back_with_a_note_and_runs_nothing(kc: Any, cell: str,
                                                                                   why: str) -> None:
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "ok", reply
    assert result_data(outputs)["text/plain"].startswith(("{", "["))  # an expression, shown back
    note = stderr(outputs)
    assert "reads as a fragment but is not valid JSON" in note and why in note and "did not run" in note, note
    reply, _ = execute(kc, "first_q")
    assert (reply["status"], reply["ename"]) == ("error", "unknown-name")  # nothing ran


@pytest.mark.parametrize("cell", ['{"name": "x", "logs": [1]}', '{"price": 3}', "[1, 2]", '{"var": 1, "total": 2}'])
def test_data_that_is_no_near_miss_gets_no_note(kc: Any, cell: str) -> None:
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "ok", reply
    assert stderr(outputs) == ""


def test_validate_and_fragment_magics_name_the_near_miss(kc: Any) -> None:
    reply, outputs = execute(kc, '%validate {"vars": {"i": 0}}')
    assert reply["status"] == "ok", reply
    assert "'vars' is not a command (did you mean 'var'?)" in stderr(outputs)
    reply, _ = execute(kc, '%%fragment\n{"vars": {"i": 0}}')
    assert (reply["status"], reply["ename"]) == ("error", "fragment")
    assert "did you mean 'var'?" in reply["evalue"], reply
    reply, _ = execute(kc, '%%fragment\n{"shout": 1, "var": {"i": 0}}')
    assert "'shout' is not a key of a command object beside 'var'" in reply["evalue"], reply


@pytest.mark.parametrize("cell", ["%limits?", "%limits??", "%%allowlist?"])
def test_a_magic_name_with_a_question_mark_is_its_help(kc: Any, cell: str) -> None:
    name = cell.strip("%?")
    _, wanted = execute(kc, f"%help {name}")
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "ok", reply
    assert result_data(outputs) == result_data(wanted)
    assert f"%{name}" in result_data(outputs)["text/plain"]


def test_the_demo_database_is_read_only_so_no_cell_changes_it_for_later_kernels(kc: Any) -> None:
    count = '[{"db": {"profile": "demo", "sql": "SELECT count(*) AS n FROM orders"}}, {"return": "{ result[0][\'n\'] }"}]'
    reply, outputs = execute(kc, count)
    assert reply["status"] == "ok", reply
    before = result_data(outputs)["text/plain"]
    assert int(before) > 0
    for sql in ("DELETE FROM orders", "DROP TABLE orders", "PRAGMA query_only = OFF"):
        reply, _ = execute(kc, f'{{"db": {{"profile": "demo", "sql": "{sql}"}}}}')
        assert (reply["status"], reply["ename"]) in (("error", "db-read-only"), ("error", "db-failed")), (sql, reply)
        assert "(the run's result code: callFailed)" in reply["traceback"][-1], (sql, reply)  # SPEC 7.1
    reply, outputs = execute(kc, count)
    assert result_data(outputs)["text/plain"] == before


def test_text_made_with_a_secret_shows_as_text_with_the_secret_masked(kc: Any) -> None:
    reply, outputs = execute(kc, '{"output": "{ f\'k={sys.secret[\\"K\\"]}\' }"}')
    assert reply["status"] == "ok", reply
    shown = [m["content"]["data"]["text/plain"] for m in outputs if m["msg_type"] == "display_data"]
    assert shown == ["k=***"]
    reply, outputs = execute(kc, '{"output": {"html": "{ f\'<b>{sys.secret[\\"K\\"]}</b>\' }"}}')
    html = [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]
    assert html == [{"text/html": "<b>***</b>", "text/plain": "***"}]


def test_a_trailing_semicolon_runs_the_expression_and_hides_its_result(kc: Any) -> None:
    reply, outputs = execute(kc, "1 + 1;")
    assert reply["status"] == "ok", reply
    assert [m for m in outputs if m["msg_type"] == "execute_result"] == []
    reply, outputs = execute(kc, 'print("quiet");')
    assert reply["status"] == "ok", reply
    assert [m["content"]["text"] for m in outputs if m["msg_type"] == "stream"] == ["quiet\n"]
    reply, _ = execute(kc, "no_such_name;")  # it still runs: its error shows
    assert (reply["status"], reply["ename"]) == ("error", "unknown-name")
    reply, outputs = execute(kc, '{"var": {"quiet_x": 41}, "return": "{ quiet_x + 1 }"};')  # a fragment runs
    assert reply["status"] == "ok" and [m for m in outputs if m["msg_type"] == "execute_result"] == []
    assert result_data(execute(kc, "quiet_x")[1])["text/plain"] == "41"
    reply, outputs = execute(kc, '{"vars": {"quiet_y": 1}};')  # a near miss is still noted
    assert "did you mean 'var'?" in stderr(outputs)
    reply, _ = execute(kc, "1 + 1;;")  # one ; is IPython's; the rest is the expression's
    assert (reply["status"], reply["ename"]) == ("error", "syntax")
    for cell in ("1 + 1;", '{"var": {"a": 1}};'):
        msg_id = kc.is_complete(cell)
        assert kc.get_shell_msg(timeout=30)["content"]["status"] == "complete", (cell, msg_id)


def test_file_magics_complete_file_names_from_the_kernels_folder(kc: Any, kernel_cwd: Path) -> None:
    (kernel_cwd / "examples").mkdir(exist_ok=True)
    (kernel_cwd / "examples" / "agent.json").write_text("{}", encoding="utf-8")
    (kernel_cwd / "example.toml").write_text("", encoding="utf-8")
    (kernel_cwd / ".example-hidden").write_text("", encoding="utf-8")

    def matches(code: str) -> tuple[list[str], int]:
        kc.complete(code, len(code))
        reply = kc.get_shell_msg(timeout=30)["content"]
        return reply["matches"], reply["cursor_start"]

    assert matches("%run exa") == (["example.toml", "examples/"], 5)
    assert matches("%run examples/a") == (["examples/agent.json"], 5)
    assert matches('%run --inputs {"a": 1} examples/') == (["examples/agent.json"], 23)
    assert matches("%state load example.t") == (["example.toml"], 12)
    assert matches("%config .example-") == ([".example-hidden"], 8)
    assert matches("%limits exa")[0] == []  # not a file magic


@pytest.mark.parametrize(("cell", "meant"), [
    ('{"if": {"condition": "{ 1 }", "then": {"log": "a"}, "els": {"log": "b"}}}', "unknown field 'els' (did you mean 'else'?)"),
    ('{"db": {"profile": "demo", "sqll": "select 1"}}', "unknown field 'sqll' (did you mean 'sql'?)"),
    ('{"ask": {"message": "?", "inputs": [{"nmae": "a"}]}}', "unknown field 'nmae' (did you mean 'name'?)"),
    ('{"for": {"in": [1], "item": "x", "comands": []}}', "unknown field 'comands' (did you mean 'commands'?)"),
    ('%limits {"tiem": 3}', "unknown setting 'limits.tiem' (did you mean 'time'?)"),
])
def test_a_misspelled_key_inside_a_command_or_a_setting_names_what_was_meant(kc: Any, cell: str, meant: str) -> None:
    """Issue 31 item 11: a near miss inside a command or a setting says what was meant, as a command does."""
    reply, _ = execute(kc, cell)
    assert reply["status"] == "error", reply
    assert meant in reply["evalue"], reply["evalue"]


def test_a_misspelled_key_in_a_settings_file_names_what_was_meant(kc: Any, tmp_path: Path) -> None:
    settings = tmp_path / "mine.toml"
    settings.write_text('[profiles.llm.mine]\nadapter = "scripted"\nscirpt = []\n', encoding="utf-8")
    reply, _ = execute(kc, f"%config {settings}")
    assert reply["status"] == "error", reply
    assert "unknown setting 'profiles.llm.mine.scirpt' (did you mean 'script'?)" in reply["evalue"], reply["evalue"]


def test_an_agent_definition_cell_gives_result_its_value_and_says_how_to_pass_a_notebook_variable(kc: Any) -> None:
    """Issue 31 item 2: main starts with fresh locals (an agent run), so a notebook variable is not in it; the
    error says how to pass one, and the definition's return value lands in ``result`` as a call's does."""
    assert execute(kc, '{"var": {"first_n": 7}}')[0]["status"] == "ok"
    reply, _ = execute(kc, '{"functions": {"main": {"commands": [{"return": "{ first_n }"}]}}}')
    assert (reply["status"], reply["ename"]) == ("error", "unknown-name"), reply
    assert "'first_n' is a notebook variable" in reply["evalue"] and "sys.inputs['first_n']" in reply["evalue"]
    assert execute(kc, '%sys {"inputs": {"first_n": 7}}')[0]["status"] == "ok"
    reply, outputs = execute(kc, '{"functions": {"main": {"commands": [{"return": "{ sys.inputs[\'first_n\'] * 6 }"}]}}}')
    assert result_data(outputs)["text/plain"] == "42", outputs
    reply, outputs = execute(kc, "result + 1")
    assert result_data(outputs)["text/plain"] == "43", outputs


USER_CODE = '''TABLE = {"Oslo": 7}


def lookup(city):
    return TABLE[city]


def fetch_weather(city):
    return {"city": city, "celsius": lookup(city)}
'''


def test_an_error_shows_the_calls_that_led_to_it_and_the_users_own_frames(kc: Any, kernel_cwd: Path) -> None:
    """Issue 31 item 4: a failure three calls deep names the calls, outermost first, and an exception raised in
    the user's allowlisted code shows that code's frames (file, line, function, source line), none of ours."""
    (kernel_cwd / "first_steps_weather.py").write_text(USER_CODE, encoding="utf-8")
    reply, _ = execute(kc, "%%allowlist\nfirst_steps_weather.fetch_weather as fetch_weather\nlen")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, json.dumps({"functions": {
        "main": {"commands": [{"call": {"function": "a"}}]},
        "a": {"commands": [{"log": "in a"}, {"call": {"function": "b", "args": {"city": "Paris"}}}]},
        "b": {"args": {"city": "str"}, "commands": {"var": {"z": "{ fetch_weather(city) }"}}}}}))
    assert (reply["status"], reply["ename"], reply["evalue"]) == ("error", "runtime", "KeyError: 'Paris'"), reply
    tb = reply["traceback"]
    start = tb.index("  called from (outermost first):")
    assert tb[start:start + 3] == ["  called from (outermost first):", "    functions.main.commands[0].call (a)",
                                   "    functions.a.commands[1].call (b)"], tb
    mine = tb.index("  in your code (most recent call last):")
    frames = tb[mine + 1:]
    assert len(frames) == 4, tb
    assert frames[0].endswith("first_steps_weather.py\", line 9, in fetch_weather")
    assert frames[1] == '      return {"city": city, "celsius": lookup(city)}'
    assert frames[2].endswith("first_steps_weather.py\", line 5, in lookup")
    assert frames[3] == "      return TABLE[city]"
    assert "s2o_kernel" not in "\n".join(tb)  # none of the engine's or the kernel's frames


def test_parameters_set_locals_and_reach_sys_inputs_and_nothing_on_failure(kc: Any) -> None:
    """The cell papermill injects (``%%parameters``): locals, merged into ``sys.inputs``; a bad one changes nothing."""
    assert execute(kc, '%sys {"inputs": {"kept": 1}}')[0]["status"] == "ok"
    reply, _ = execute(kc, '# Parameters\n%%parameters\n{"var": {"first_city": "Oslo", "first_days": 3}}')
    assert reply["status"] == "ok", reply
    _, outputs = execute(kc, "[first_city, first_days, sys.inputs]")
    assert result_data(outputs)["text/plain"] == "['Oslo', 3, {'kept': 1, 'first_city': 'Oslo', 'first_days': 3}]"
    for bad, code in (('{"var": {"agent.x": 1}}', "magic"), ('{"var": {"a": 1}, "log": "x"}', "magic"),
                      ('{"var": {"first_q": "{ 1 / 0 }"}}', "runtime")):
        reply, _ = execute(kc, f"%%parameters\n{bad}")
        assert (reply["status"], reply["ename"]) == ("error", code), reply
    _, outputs = execute(kc, "sys.inputs")
    assert result_data(outputs)["text/plain"] == "{'kept': 1, 'first_city': 'Oslo', 'first_days': 3}"
