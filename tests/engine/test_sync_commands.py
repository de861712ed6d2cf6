"""Sync commands (``Command.sync``, issue 12): a command none of whose expressions awaits runs as a
plain call, with no coroutine per level. The parser decides which commands are sync; these tests
check that decision, and that every fragment behaves exactly as it does when every command runs
as a coroutine (the registry's ``run_sync`` taken away), including failures, ``onError``,
``outputPath``, loop control, limits and state restored after a failure.

A loop's sync body runs as steps compiled once per run (:mod:`s2o_kernel.engine.fragments.fastpath`),
and a ``while`` condition that cannot await is read by a plain call (``fastpath.condition``); every
comparison is also made against the general sync path (``fastpath.BUILDERS`` emptied: each command of
the body through ``Interpreter.command_sync``, and the condition awaited through ``Interpreter.truth``,
as before the steps).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from fractions import Fraction
from typing import Any

import pytest

from s2o_kernel.engine import Engine, Session, bare_settings
from s2o_kernel.engine.commands import registry
from s2o_kernel.engine.fragments import fastpath
from s2o_kernel.engine.fragments.interpreter import Interpreter
from s2o_kernel.engine.fragments.parser import parse_fragment
from s2o_kernel.engine.fragments.tree import Command
from s2o_kernel.engine.policy import reach

ALLOWLIST = "asyncio.sleep\nlen\nstr\nint\nlist\nrange"
#: The time limit of the tests where a run's time passes inside one command (``time.sleep(0.09)``, just past it)
#: and the run must stop before the next command, not by the watchdog 0.1 s past the limit (0.18 s). The sleep
#: ends past the limit on any machine, and before the watchdog unless the run is held up for 0.09 s: with 0.03 s
#: and a 0.06 s sleep, parsing the fragment and waiting for a core had 0.04 s, too little with two test workers
#: on a busy 2-core machine.
SHORT_LIMIT = 0.08


def IF(condition: str, then: Any, otherwise: Any = None) -> dict[str, Any]:
    return {"condition": condition, "then": then} | ({} if otherwise is None else {"else": otherwise})


def WHILE(condition: str, commands: Any) -> dict[str, Any]:
    return {"condition": condition, "commands": commands}


def session(locals: dict[str, Any] | None = None, **settings: Any) -> Session:
    return Session(Engine(bare_settings({"allowlist": ALLOWLIST, **settings})), locals=dict(locals or {}))


def untraced(s: Session) -> Session:
    """``s`` keeping no trace: its loops take the fast path from their first pass (with a trace, the first
    passes run through the general path, each in its span; SPEC 14), which the tests that count it need."""
    s.keep_trace = False
    return s


def parsed(fragment: Any, known: set[str] | None = None) -> list[Command]:
    return parse_fragment(Engine(bare_settings({"allowlist": ALLOWLIST})), fragment, known=known).body.commands


def without_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command that has a coroutine runner loses its plain one: the parser then makes none sync; a
    ``while`` condition is awaited (``Interpreter.truth``)."""
    for name, spec in list(registry.REGISTRY.items()):
        if spec.run is not None and spec.run_sync is not None:
            monkeypatch.setitem(registry.REGISTRY, name, dataclasses.replace(spec, run_sync=None))
    without_sync_condition(monkeypatch)


def without_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """No command has a step of its own: a loop's sync body runs ``Interpreter.command_sync`` per command,
    and a ``while`` condition is awaited (``Interpreter.truth``) as before the steps."""
    monkeypatch.setattr(fastpath, "BUILDERS", {})
    without_sync_condition(monkeypatch)


def without_sync_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``while`` condition is read by a plain call: each is awaited through ``Interpreter.truth``."""
    monkeypatch.setattr(fastpath, "condition", lambda it, raw, path: None)


def without_atomic(monkeypatch: pytest.MonkeyPatch) -> None:
    """No command is atomic (``Command.atomic``): the interpreter takes a snapshot before every one."""
    spec = registry.REGISTRY["var"]

    def parse(p: Any, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
        parsed = spec.parse(p, cmd, fields, known, in_loop)
        if parsed is not None:
            parsed.atomic = False
        return parsed
    monkeypatch.setitem(registry.REGISTRY, "var", dataclasses.replace(spec, parse=parse))


# -- what the parser makes sync ---------------------------------------------------------------

def test_commands_without_await_are_sync_and_a_loop_runs_its_body_sync():
    var, loop, cond = parsed([
        {"var": {"total": "{ 0 }", "names": ["a", "b"]}},
        {"for": {"in": "{ [1, 2] }", "item": "n", "commands": [
            {"var": {"total": "{ total + n }"}}, {"log": "{ n }"}, {"if": IF("{ n > 1 }", {"break": {}})}]}},
        {"if": IF("{ total > 2 }", {"output": {"text": "big"}}, {"end": {}})},
    ])
    assert var.sync and cond.sync
    assert not loop.sync  # a loop is a coroutine (it lets parallel branches in); its body is sync
    assert all(c.sync for c in loop.children["commands"])


@pytest.mark.parametrize("fragment", [
    {"var": {"x": "{ await asyncio.sleep(0, 1) }"}},
    {"var": {"x": "{ asyncio.sleep(0, 1) }"}},  # one call whose coroutine the run awaits (SPEC 6)
    {"log": "{ str(await asyncio.sleep(0, 1)) }"},
    {"if": IF("{ True }", {"var": {"x": "{ await asyncio.sleep(0, 1) }"}})},
    {"if": IF("{ await asyncio.sleep(0, True) }", {"var": {"x": 1}})},
    {"var": {"x": "{ len('ab') }"}, "onError": [{"var": {"x": "{ await asyncio.sleep(0, 1) }"}}]},
    {"return": "{ await asyncio.sleep(0, 1) }"},
], ids=["await", "top-call", "await-inside", "in-a-branch", "condition", "on-error", "return"])
def test_a_command_that_may_await_is_not_sync(fragment):
    (cmd,) = parsed(fragment)
    assert not cmd.sync


def test_an_await_in_one_command_leaves_its_neighbours_sync():
    first, second, third = parsed([{"var": {"a": 1}}, {"var": {"b": "{ await asyncio.sleep(0, 2) }"}},
                                   {"var": {"c": "{ a + 1 }"}}])
    assert first.sync and not second.sync and third.sync


# -- the same behaviour either way ----------------------------------------------------------------

CASES: dict[str, tuple[Any, dict[str, Any]]] = {
    "loop-sum": ({"for": {"in": "{ list(range(5)) }", "item": "n", "index": "i",
                          "commands": [{"var": {"total": "{ total + n * i }"}}]}}, {"total": 0}),
    "break-continue": ([{"var": {"seen": []}}, {"for": {"in": "{ [1, 2, 3, 4, 5] }", "item": "n", "commands": [
        {"if": IF("{ n == 2 }", {"continue": {}})},
        {"if": IF("{ n == 4 }", {"break": {}})},
        {"var": {"seen": "{ seen + [n] }"}}]}}, {"return": "{ seen }"}], {}),
    "while": ([{"var": {"n": 0}}, {"while": WHILE("{ n < 40 }", {"var": {"n": "{ n + 1 }"}})},
               {"return": "{ n }"}], {}),
    "on-error": ([{"var": {"x": "{ 1 // 0 }"}, "onError": [{"var": {"caught": "{ exc.code }"}},
                                                           {"log": "{ exc.message }"}]},
                  {"return": "{ caught }"}], {}),
    "failure-restores": ([{"var": {"a": 1}}, {"var": {"a": 2, "b": "{ 1 // 0 }"}}], {}),
    "output-path-failure": ({"functions": {
        "main": {"commands": [{"call": {"function": "half", "args": {"a": 1}, "outputPath": "†agent.ok || †agent.failed"}},
                              {"return": "{ agent.failed }"}]},
        "half": {"args": {"a": "int"}, "commands": [{"var": {"b": "{ a * 2 }"}}, {"return": "{ b // 0 }"}]}}}, {}),
    "outputs-and-logs": ([{"output": {"text": "{ 'n=' + str(3) }"}}, {"output": {"html": "<b>x</b>"}},
                          {"log": "{ {'a': [1, 2]} }"}, {"log": "plain"}], {}),
    "fail": ([{"var": {"why": "nope"}}, {"fail": "{ why + '!' }"}], {}),
    "end": ([{"var": {"a": 1}}, {"end": {}}, {"var": {"a": 2}}], {}),
    "not-set": ([{"if": IF("{ False }", {"var": {"m": 1}})}, {"return": "{ m + 1 }"}], {}),
    "loop-limit": ({"while": WHILE("{ True }", {"var": {"k": "{ k + 1 }"}})}, {"k": 0}),
    "command-fields": ({"var": {"a": 2, "b": "{ command.a * 10 }"}}, {}),
    "agent-scope": ([{"var": {"agent.count": "{ 5 }"}}, {"return": "{ agent.count + 1 }"}], {}),
    "one-field-fails-in-a-handler": ([{"var": {"a": 1}}, {"var": {"b": "{ 1 // 0 }"}, "onError": [
        {"var": {"c": "{ exc.code }"}}, {"var": {"d": "{ [][1] }"}}]}], {}),
    "item-out-of-range": ([{"var": {"lst": [1], "agent.cart": {"n": 1}}}, {"var": {"agent.cart['n']": 2}},
                           {"var": {"lst[5]": 2}}], {}),
    "nested-if-fails-late": ([{"var": {"a": 1}}, {"if": IF("{ True }", [
        {"var": {"a": 2}}, {"var": {"agent.seen": True}}, {"log": "{ [][3] }"}])}], {}),
    # loops whose body runs as steps (fastpath)
    "for-handler-each-pass": ([{"var": {"seen": []}}, {"for": {"in": "{ [1, 2, 0, 4] }", "item": "n", "commands": [
        {"var": {"seen": "{ seen + [n] }", "q": "{ 8 // n }"}, "onError": [{"var": {"seen": "{ seen + [exc.code] }"}}]},
        {"var": {"late": "{ exc.code }"}, "onError": [{"log": "{ exc.message }"}]}]}}, {"return": "{ seen }"}], {}),
    "for-fields-and-targets": ([{"var": {"lst": [0, 0, 0], "agent.tally": {"n": 0}}}, {"for": {
        "in": "{ [0, 1, 2] }", "item": "n", "index": "i", "commands": [
            {"var": {"v": "{ n * 10 }", "lst[1]": "{ command.v + i }",
                     "agent.tally['n']": "{ agent.tally['n'] + command.v }", "conv.last": "{ n }"}},
            {"var": {"label": "plain text", "pair": ["{ n }", "fixed"], "ref": "†conv.last || †agent.none",
                     "d": {"k": "{ i }"}}}]}},
        {"return": "{ [lst, agent.tally, label, pair, ref, d] }"}], {}),
    "for-fails-midway-restores": ([{"var": {"a": 0}}, {"for": {"in": "{ [1, 2, 3] }", "item": "n", "commands": [
        {"var": {"a": "{ a + n }", "agent.last": "{ n }", "b": "{ 1 // (n - 2) }"}}]}}], {}),
    "for-loop-limit": ({"for": {"in": "{ list(range(100)) }", "item": "n", "commands": [{"var": {"k": "{ k + n }"}}]}},
                       {"k": 0}),
    "for-objects-as-items": ([{"var": {"out": []}}, {"for": {"in": "{ [[1], {'a': 2}, 'z'] }", "item": "x", "index": "i",
                                                              "commands": [{"var": {"out": "{ out + [x, i] }"}}]}},
                              {"return": "{ out }"}], {}),
    "loop-in-a-handler": ([{"var": {"x": "{ 1 // 0 }"}, "onError": [
        {"for": {"in": "{ [1, 2] }", "item": "n", "commands": [{"var": {"codes": "{ codes + [exc.code, n] }"}}]}}]},
        {"return": "{ codes }"}], {"codes": []}),
    "loop-in-a-function-called-twice": ({"functions": {
        "main": {"commands": [{"call": {"function": "odd", "args": {"top": 3}}}, {"var": {"first": "{ result }"}},
                              {"call": {"function": "odd", "args": {"top": 5}}}, {"return": "{ [first, result] }"}]},
        "odd": {"args": {"top": "int"}, "commands": [{"var": {"t": 0}}, {"for": {
            "in": "{ list(range(top)) }", "item": "n",
            "commands": [{"if": IF("{ n % 2 }", {"var": {"t": "{ t + n }"}}, {"continue": {}})}]}},
            {"return": "{ t }"}]}}}, {}),
    "fail-in-a-loop": ([{"var": {"a": 0}}, {"for": {"in": "{ [1, 2, 3] }", "item": "n", "commands": [
        {"output": {"text": "{ str(n) }"}}, {"if": IF("{ n == 2 }", {"fail": "{ 'stop at ' + str(n) }"})},
        {"var": {"a": "{ n }"}}]}}], {}),
    "return-in-a-while": ([{"var": {"w": 0}}, {"while": WHILE("{ True }", [
        {"var": {"w": "{ w + 1 }"}}, {"if": IF("{ w == 3 }", {"return": "{ w * 100 }"})}])}], {}),
    "for-refused-values-and-names": ([{"var": {"codes": []}}, {"for": {"in": "{ [1, 2, 3] }", "item": "n", "commands": [
        {"if": IF("{ n == 2 }", {"var": {"late": "{ n }"}})},
        {"var": {"g": "{ (i for i in range(n)) }"}, "onError": [{"var": {"codes": "{ codes + [exc.message] }"}}]},
        {"var": {"seen": "{ late }"}, "onError": [{"var": {"codes": "{ codes + [exc.code, exc.message] }"}}]}]}},
        {"return": "{ [codes, seen] }"}], {}),
    # two branches share the namespace and take turns every 32 passes: each expression sets `exc` as its
    # own task sees it (the handler's error in one branch, none in the other), never as the other left it
    # while loops: the condition read by a plain call (fastpath.condition) where it cannot await
    "while-condition-fails-handled": ([{"var": {"k": 0, "lst": [1, 2, 3]}}, {
        "while": WHILE("{ lst[k] < 9 }", {"var": {"k": "{ k + 1 }"}}),
        "onError": [{"var": {"caught": "{ [exc.code, exc.path, exc.message, k] }"}}]}, {"return": "{ caught }"}], {}),
    "while-condition-fails-unhandled": ([{"var": {"k": 0}}, {"while": WHILE("{ 10 // (3 - k) }", [
        {"var": {"k": "{ k + 1 }", "agent.k": "{ k }"}}])}], {}),
    "while-condition-not-set": ([{"var": {"k": 0}}, {"if": IF("{ False }", {"var": {"m": 1}})},
                                 {"while": WHILE("{ k < m }", {"var": {"k": "{ k + 1 }"}})}], {}),
    "while-condition-refused-value": ({"while": WHILE("{ (i for i in range(k)) }", {"break": {}}),
                                       "onError": [{"var": {"why": "{ [exc.code, exc.path, exc.message] }"}}]},
                                      {"k": 2}),
    "while-condition-values": ([{"var": {"seen": [], "k": 0}}, {"while": WHILE("{ [0] * (3 - k) }", [
        {"var": {"k": "{ k + 1 }"}}, {"while": WHILE("{ 'go' if k % 2 else '' }", [
            {"var": {"seen": "{ seen + [k] }"}}, {"break": {}}])}])},
        {"while": WHILE("plain text is true", {"break": {}})},
        {"while": WHILE("", {"var": {"never": 1}})}, {"return": "{ [seen, k] }"}], {}),
    "while-condition-reference": ([{"var": {"agent.go": True, "k": 0}}, {"while": WHILE("†agent.go", [
        {"var": {"k": "{ k + 1 }", "agent.go": "{ k < 4 }"}}])}, {"return": "{ k }"}], {}),
    "while-condition-awaits": ([{"var": {"k": 0, "j": 0}},
                                {"while": WHILE("{ await asyncio.sleep(0, k < 3) }", {"var": {"k": "{ k + 1 }"}})},
                                {"while": WHILE("{ asyncio.sleep(0, j < 4) }", {"var": {"j": "{ j + 1 }"}})},
                                {"return": "{ [k, j] }"}], {}),
    "while-body-awaits": ([{"var": {"k": 0}}, {"while": WHILE("{ k < 5 }", [
        {"var": {"k": "{ await asyncio.sleep(0, k + 1) }"}}, {"if": IF("{ k == 3 }", {"continue": {}})},
        {"var": {"last": "{ k }"}}])}, {"return": "{ [k, last] }"}], {}),
    "while-loop-limit-in-condition-order": ([{"var": {"k": 0}}, {"while": WHILE("{ k < 60 }", [
        {"var": {"k": "{ k + 1 }"}}])}], {}),
    "while-in-a-function-called-twice": ({"functions": {
        "main": {"commands": [{"call": {"function": "count", "args": {"top": 3}}}, {"var": {"first": "{ result }"}},
                              {"call": {"function": "count", "args": {"top": 5}}}, {"return": "{ [first, result] }"}]},
        "count": {"args": {"top": "int"}, "commands": [{"var": {"t": 0}}, {"while": WHILE("{ t < top }", [
            {"var": {"t": "{ t + 1 }"}}])}, {"return": "{ t * 10 }"}]}}}, {}),
    "while-body-calls-and-handles": ({"functions": {
        "main": {"commands": [{"var": {"t": 0, "log": []}}, {"while": WHILE("{ t < 4 }", [
            {"call": {"function": "inc", "args": {"x": "{ t }"}}}, {"var": {"t": "{ result }"}},
            {"var": {"q": "{ 1 // (t - 2) }"}, "onError": [{"var": {"log": "{ log + [exc.code, t] }"}}]},
            {"parallel": [[{"var": {"log": "{ log + [t] }"}}], [{"var": {"p": "{ t }"}}]]}])},
            {"return": "{ [t, log, p] }"}]},
        "inc": {"args": {"x": "int"}, "commands": [{"var": {"t": "{ x + 100 }"}}, {"return": "{ x + 1 }"}]}}}, {}),
    "for-body-fails-at-a-position": ([{"var": {"acc": []}}, {"for": {"in": "{ [3, 2, 1, 0] }", "item": "k", "commands": [
        {"var": {"acc": "{ acc + [6 // k] }"}}, {"var": {"w": "{ (k +\n  1) // (k - 1) }"}}]}}], {}),
    "while-condition-unset-name": ([{"var": {"k": 0}}, {"if": IF("{ k > 0 }", {"var": {"missing": 1}})},
        {"while": WHILE("{ k < 3 and (k < 2 or missing) }", [{"var": {"k": "{ k + 1 }"}}])}], {}),
    "while-in-a-handler-reads-exc": ([{"var": {"x": "{ 1 // 0 }"}, "onError": [
        {"var": {"w": 0}}, {"while": WHILE("{ exc.code == 'runtime' and w < 3 }", [{"var": {"w": "{ w + 1 }"}}])}]},
        {"return": "{ w }"}], {}),
    "parallel-while-conditions": ([{"parallel": [
        [{"var": {"j": 0}}, {"while": WHILE("{ j < 45 }", [{"var": {"j": "{ j + 1 }"}}, {
            "var": {"leak": "{ exc.code }"}, "onError": [{"var": {"clean": "{ clean + 1 }"}}]}])}],
        [{"var": {"x": "{ 1 // 0 }"}, "onError": [{"var": {"i": 0}}, {"while": WHILE(
            "{ exc.code == 'runtime' and i < 45 }", [{"var": {"i": "{ i + 1 }", "codes": "{ codes + [exc.code] if i % 20 == 0 else codes }"}}])}]}]]},
        {"return": "{ [codes, j, i, clean] }"}], {"codes": [], "clean": 0}),
    "parallel-handler-and-loop": ([{"parallel": [
        [{"for": {"in": "{ list(range(45)) }", "item": "k", "commands": [{"var": {"m": "{ k }"}}, {
            "var": {"leak": "{ exc.code }"}, "onError": [{"var": {"clean": "{ clean + 1 }"}}]}]}}],
        [{"var": {"x": "{ 1 // 0 }"}, "onError": [{"for": {"in": "{ list(range(45)) }", "item": "n", "commands": [
            {"var": {"codes": "{ codes + [exc.code] if n % 20 == 0 else codes }"}}]}}]}]]},
        {"return": "{ [codes, m, clean] }"}], {"codes": [], "clean": 0}),
}


def outcome(s: Session, fragment: Any) -> tuple[Any, ...]:
    r = s.run_fragment(fragment)
    err = r.error
    names = s.execution.globals
    return (r.code, r.value, r.outputs, r.logs, err and (err.code, err.path, err.message, err.line, err.col),
            {k: v for k, v in s.locals.items()}, dict(s.agent_vars), dict(s.conv_vars),
            ("exc" in names, names.get("result"), repr(names.get("command"))))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("other", ["coroutine", "snapshot-always", "general-sync"])
def test_sync_commands_behave_as_coroutine_commands(name, other, monkeypatch):
    """The same run with every command a coroutine, with a snapshot before every command, with a
    loop's sync body run command by command (no steps)."""
    fragment, locals_ = CASES[name]
    fast = outcome(session(locals=locals_, limits={"loop_iterations": 50}), fragment)
    if other == "coroutine":
        without_sync(monkeypatch)
        assert not any(c.sync for c in parsed(fragment, set(locals_)) if c.name != "end")
    elif other == "general-sync":
        without_steps(monkeypatch)
    else:
        without_atomic(monkeypatch)
        assert not any(c.atomic for c in parsed(fragment, set(locals_)))
    assert fast == outcome(session(locals=locals_, limits={"loop_iterations": 50}), fragment)


def test_the_sync_path_gives_the_expected_values():
    """Values written by hand, so the comparison above is not two runs of one bug."""
    def run(name: str) -> Any:
        fragment, locals_ = CASES[name]
        s = session(locals=locals_, limits={"loop_iterations": 50})
        return s, s.run_fragment(fragment)

    s, r = run("loop-sum")
    assert r.code == "success" and s.locals["total"] == 0 + 1 + 4 + 9 + 16
    assert run("break-continue")[1].value == [1, 3]
    assert run("while")[1].value == 40
    s, r = run("on-error")
    assert r.value == "runtime" and "division" in r.logs[0]
    s, r = run("failure-restores")
    assert r.code == "errorInAgent" and r.error is not None and r.error.path == "[1].var.b"
    assert s.locals["a"] == 1 and "b" not in s.locals
    assert run("output-path-failure")[1].value["code"] == "runtime"
    r = run("outputs-and-logs")[1]
    assert [p.get("text", p.get("html")) for p in r.outputs] == ["n=3", "<b>x</b>"]
    assert r.logs == ['{"a": [1, 2]}', "plain"]
    r = run("fail")[1]
    assert r.code == "failCommand" and r.error is not None and r.error.message == "nope!"
    s, r = run("end")
    assert r.code == "success" and s.locals["a"] == 1
    assert run("not-set")[1].error.code == "not-set"
    s, r = run("loop-limit")
    assert r.error.code == "loop-limit" and s.locals["k"] == 0
    assert run("command-fields")[0].locals["b"] == 20
    s, r = run("one-field-fails-in-a-handler")
    assert r.error.code == "runtime" and s.locals.get("a") == 1 and "b" not in s.locals and "d" not in s.locals
    s, r = run("item-out-of-range")
    assert r.error.path == "[2].var.lst[5]" and s.locals["lst"] == [1] and s.agent_vars == {"cart": {"n": 2}}
    s, r = run("nested-if-fails-late")
    assert r.error.code == "runtime" and s.locals["a"] == 1 and s.agent_vars == {}
    s, r = run("for-handler-each-pass")
    assert r.value == [1, 2, "runtime", 4] and s.locals["q"] == 2 and len(r.logs) == 4 and "onError" in r.logs[0]
    s, r = run("for-fields-and-targets")
    assert r.value == [[0, 22, 0], {"n": 30}, "plain text", [2, "fixed"], 2, {"k": 2}], r.error
    assert s.conv_vars == {"last": 2}
    s, r = run("for-fails-midway-restores")
    assert r.error.code == "runtime" and r.error.path == "[1].for.commands[0].var.b"
    assert s.locals["a"] == 0 and "b" not in s.locals and s.agent_vars == {}
    s, r = run("for-loop-limit")
    assert r.error.code == "loop-limit" and r.error.path == "for" and s.locals["k"] == 0
    assert run("for-objects-as-items")[1].value == [[1], 0, {"a": 2}, 1, "z", 2]
    assert run("loop-in-a-handler")[1].value == ["runtime", 1, "runtime", 2]
    assert run("loop-in-a-function-called-twice")[1].value == [1, 4]
    s, r = run("fail-in-a-loop")
    assert r.code == "failCommand" and r.error.message == "stop at 2" and s.locals["a"] == 1
    assert [p["text"] for p in r.outputs] == ["1", "2"]
    assert run("return-in-a-while")[1].value == 300
    codes, seen = run("for-refused-values-and-names")[1].value
    refused = "a generator cannot be the result of an expression; consume it inside the expression (for example with list(...))"
    assert codes == [refused, "not-set", "'late' has not been set at this point of the run", refused, refused]
    assert seen == 2
    s, r = run("while-condition-fails-handled")
    assert r.value == ["runtime", "[1].while.condition", "IndexError: list index out of range", 0], r.error
    s, r = run("while-condition-fails-unhandled")
    assert r.error.code == "runtime" and r.error.path == "[1].while.condition" and "division" in r.error.message
    assert s.locals["k"] == 0 and s.agent_vars == {}
    s, r = run("while-condition-not-set")
    assert r.error.code == "not-set" and r.error.path == "[2].while.condition"
    s, r = run("while-condition-refused-value")
    assert r.code == "success" and s.locals["why"][:2] == ["not-allowed", "while.condition"]
    assert "generator" in s.locals["why"][2]
    s, r = run("while-condition-values")
    assert r.value == [[1, 3], 3] and "never" not in s.locals
    assert run("while-condition-reference")[1].value == 4
    assert run("while-condition-awaits")[1].value == [3, 4]
    assert run("while-body-awaits")[1].value == [5, 5]
    s, r = run("while-loop-limit-in-condition-order")
    assert r.error.code == "loop-limit" and r.error.path == "[1].while" and s.locals["k"] == 0
    assert run("while-in-a-function-called-twice")[1].value == [30, 50]
    assert run("while-body-calls-and-handles")[1].value == [4, [1, "runtime", 2, 2, 3, 4], 4]
    assert run("while-in-a-handler-reads-exc")[1].value == 3
    s, r = run("parallel-while-conditions")
    assert r.value == [["runtime"] * 2, 45, 45, 45] and "leak" not in s.locals
    s, r = run("parallel-handler-and-loop")
    assert r.value == [["runtime"] * 3, 44, 45] and "leak" not in s.locals


def test_a_time_limit_stops_a_sync_loop_and_keeps_the_session():
    s = session(locals={"k": 0}, limits={"time": 0.3, "loop_iterations": 10**9})
    r = s.run_fragment({"while": WHILE("{ True }", {"var": {"k": "{ k + 1 }"}})})
    assert r.code == "timedOut"
    assert s.locals["k"] == 0


def test_parallel_branches_still_take_turns_with_a_sync_loop():
    """A loop whose body is sync still hands the event loop over (at most every 32 passes and
    ``YIELD_INTERVAL``): a loop that can only end once the other branch, which awaits, has gone on ends."""
    s = session(locals={"order": [], "spins": 0}, limits={"time": 10, "loop_iterations": 10**8})
    r = s.run_fragment([
        {"parallel": [
            [{"var": {"w": "{ await asyncio.sleep(0, 1) }"}}, {"var": {"order": "{ order + ['awaited'] }"}}],
            [{"while": WHILE("{ 'awaited' not in order }", [{"var": {"spins": "{ spins + 1 }"}}])},
             {"var": {"order": "{ order + ['looped'] }"}}],
        ]},
        {"return": "{ order }"}])
    assert r.code == "success", r.error
    assert r.value == ["awaited", "looped"]
    assert s.locals["spins"] > 0  # the loop ran before the other branch went on


def test_too_deep_is_reported_by_sync_blocks(monkeypatch):
    nested: Any = {"var": {"x": 1}}
    for _ in range(40):
        nested = {"if": IF("{ True }", nested)}
    sync = session().run_fragment(nested)
    without_sync(monkeypatch)
    coroutine = session().run_fragment(nested)
    assert sync.code == coroutine.code
    assert (sync.error and sync.error.code) == (coroutine.error and coroutine.error.code)


# -- limits and interrupts on the sync path ----------------------------------------------------------

def either_way(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sync``: as parsed; ``general``: a loop's sync body with no steps; ``coroutine``: every command a coroutine."""
    if way == "coroutine":
        without_sync(monkeypatch)
    elif way == "general":
        without_steps(monkeypatch)


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("fragment, path, kept", [
    ([{"var": {"a": "{ time.sleep(0.09) }"}}, {"output": "late"}], "[1].output", True),
    ({"if": IF("{ True }", [{"var": {"a": "{ time.sleep(0.09) }"}}, {"log": "late"}])}, "if.then[1].log", False),
], ids=["list", "in-a-branch"])
def test_the_time_limit_is_checked_before_each_sync_command(fragment, path, kept, way, monkeypatch):
    """A run whose time passes in a sync command stops before the next one, as a coroutine command
    does (it went on, and could succeed, until the watchdog fired 0.1 s past the limit)."""
    either_way(way, monkeypatch)
    s = Session(Engine(bare_settings({"allowlist": "time.sleep", "limits": {"time": SHORT_LIMIT}})))
    r = s.run_fragment(fragment)
    assert r.code == "timedOut" and r.error is not None and r.error.path == path
    assert r.outputs == [] and r.logs == []
    assert ("a" in s.locals) is kept  # a command the limit stopped inside an `if` left nothing


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_the_watchdog_landing_outside_an_expression_ends_the_run_timed_out(way, monkeypatch):
    """The watchdog's exception may land in the engine's own code (here the walk that checks a
    stored value): the run still ends ``timedOut`` as data, never raising out of ``run_fragment``,
    and the command it stopped left nothing."""
    either_way(way, monkeypatch)
    s = session(limits={"time": 0.02})
    r = s.run_fragment([{"var": {"big": "{ [[1, 2, 3, 4, 5, 6, 7, 8]] * 4000000 }"}}, {"output": "late"}])
    assert r.code == "timedOut" and r.error is not None and r.error.code == "timedOut"
    assert r.outputs == [] and "big" not in s.locals
    assert s.run_fragment({"var": {"after": 1}}).code == "success" and s.locals["after"] == 1


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_an_interrupt_from_another_thread_stops_a_loop(way, monkeypatch):
    """``Session.interrupt`` stops a fragment's loop (its exception alone was taken by the event loop
    while the loop yielded, and the run went on to its time limit); the loop's variables are as before."""
    either_way(way, monkeypatch)
    s = session(locals={"k": 0}, limits={"time": 5, "loop_iterations": 10**9})
    threading.Timer(0.2, s.interrupt).start()
    r = s.run_fragment({"while": WHILE("{ True }", [{"var": {"k": "{ k + 1 }", "j": 2}},
                                                    {"if": IF("{ k < 0 }", {"log": "never"})}])})
    assert r.code == "stopped" and r.error is not None and r.error.code == "stopped"
    assert s.run_fragment({"return": "{ k }"}).value == 0  # runs after the stopped one has unwound


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_interrupts_from_a_timer_thread_are_never_lost(way, monkeypatch):
    """Twenty loops, each interrupted by a timer thread 50 ms in: every one ends ``stopped``, long before its
    1 s time limit. While a loop turned the event loop every 32 passes, each turn released and retook the
    interpreter lock within microseconds, the timer thread rarely got it, and 10–30 % of these runs went
    on to their time limit."""
    either_way(way, monkeypatch)
    for _ in range(20):
        s = session(locals={"k": 0}, limits={"time": 1, "loop_iterations": 10**9})
        threading.Thread(target=interrupt_once_looping, args=(s, 0.05), daemon=True).start()
        r = s.run_fragment({"while": WHILE("{ True }", [{"var": {"k": "{ k + 1 }"}}])})
        assert r.code == "stopped", r.error


def interrupt_once_looping(s: Session, delay: float) -> None:
    """Interrupt ``s`` ``delay`` seconds after its fragment's loop made its first pass (``Session.progress``).

    A timer started before ``run_fragment`` may fire while the fragment is still being parsed on a busy
    machine; that interrupt has no run to stop (``Execution.interrupt`` ends the run in progress), and the run
    would then go on to its time limit for a reason other than the one under test."""
    deadline = time.monotonic() + 5
    while s.progress.passes == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(delay)
    s.interrupt()


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_a_running_loop_leaves_other_threads_their_turn(way, monkeypatch):
    """A thread that sleeps 10 ms at a time keeps running while a fragment's loop runs for 1.5 s (the
    kernel's own threads, the worker's reporter and a SIGINT handler's thread are such threads). Before
    loops turned the event loop at most every ``YIELD_INTERVAL``, it ran once in the whole run."""
    either_way(way, monkeypatch)
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.wait(0.01):
            ticks.append(time.monotonic())

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        s = session(locals={"k": 0}, limits={"time": 1.5, "loop_iterations": 10**9})
        r = s.run_fragment({"while": WHILE("{ True }", [{"var": {"k": "{ k + 1 }"}}])})
    finally:
        done.set()
        ticker.join()
    assert r.code == "timedOut", r.error
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 10 and max(gaps) < 0.5, (len(ticks), max(gaps, default=None))


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_a_host_object_stored_mid_run_leaves_the_runs_scopes(way, monkeypatch):
    """Storing a host object in a local (which may turn the session's code guarded) changes no scope:
    ``sys.inputs`` still reads the run's inputs after it (it read the settings' inputs)."""
    either_way(way, monkeypatch)
    s = Session(Engine(bare_settings({"allowlist": "s2o_reach_hosts.registry as registry",
                                      "allow_unsafe_entries": True})))
    r = s.run_fragment([{"var": {"before": "{ sys.inputs.get('q') }"}}, {"var": {"host": "{ registry }"}},
                        {"var": {"after": "{ sys.inputs.get('q') }"}}, {"return": "{ [before, after] }"}],
                       inputs={"q": 7})
    assert r.code == "success", r.error
    assert r.value == [7, 7]


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_a_stopped_run_has_unwound_when_run_fragment_returns(way, monkeypatch):
    """``run_fragment`` returns ``stopped`` only once the run's task has ended: the command the
    interrupt stopped has restored its state by then (it returned while the loop thread was still
    unwinding, so the locals read at once could hold a value of the stopped pass)."""
    either_way(way, monkeypatch)
    for _ in range(5):
        s = session(locals={"k": 0}, limits={"time": 5, "loop_iterations": 10**9})
        done = threading.Event()

        def keep_interrupting(s: Any = s, done: threading.Event = done) -> None:
            while not done.wait(0.15):  # until the run has returned: one sent before it started does nothing
                s.interrupt()
        interrupter = threading.Thread(target=keep_interrupting, daemon=True)
        interrupter.start()
        try:
            r = s.run_fragment({"while": WHILE("{ True }", [{"var": {"k": "{ k + len(str(list(range(3000)))) }"}}])})
        finally:
            done.set()
            interrupter.join()
        assert r.code == "stopped"
        assert s.locals["k"] == 0


# -- the steps of a loop's sync body (fastpath) -------------------------------------------------------

def test_a_loops_sync_body_runs_as_steps(monkeypatch):
    """The steps are taken (so the comparisons above compare them): a loop of ``var``, ``if``, ``break`` and
    ``continue`` runs none of its commands through ``Interpreter.command_sync``; with no steps, each one."""
    names: list[str] = []
    general = Interpreter.command_sync

    def counted(self: Interpreter, cmd: Command) -> None:
        if ".for.commands" in cmd.path:
            names.append(cmd.name)
        general(self, cmd)
    monkeypatch.setattr(Interpreter, "command_sync", counted)
    fragment, _ = CASES["break-continue"]
    assert untraced(session()).run_fragment(fragment).value == [1, 3]
    assert names == []
    without_steps(monkeypatch)
    assert untraced(session()).run_fragment(fragment).value == [1, 3]
    assert names.count("if") == 7 and {"continue", "break", "var"} <= set(names)


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("where", ["in-the-body", "one-field", "as-the-item"])
def test_a_host_object_stored_in_a_loop_turns_the_session_guarded_mid_loop(where, way, monkeypatch):
    """Storing a host object mid-loop turns the session's engine guarded (here a ``Fraction`` counts as
    one): the steps built for the old engine give way to the general path, and the run's scopes stay."""
    either_way(way, monkeypatch)
    host = reach.is_host_itself
    monkeypatch.setattr(reach, "is_host_itself", lambda value: type(value) is Fraction or host(value))
    general: list[str] = []
    command_sync = Interpreter.command_sync

    def counted(self: Interpreter, cmd: Command) -> None:
        general.append(cmd.path)
        command_sync(self, cmd)
    monkeypatch.setattr(Interpreter, "command_sync", counted)
    value_sync = Interpreter.value_sync

    def read(self: Interpreter, raw: Any, path: str, fields: Any = None) -> Any:
        general.append(path)
        return value_sync(self, raw, path, fields)
    monkeypatch.setattr(Interpreter, "value_sync", read)
    s = untraced(Session(Engine(bare_settings({"allowlist": "fractions.Fraction as Fraction\nlen"}))))
    assert not s.engine.guarded
    store = {"in-the-body": {"if": IF("{ n == 2 }", {"var": {"host": "{ Fraction(1, 3) * 1 }",
                                                             "q2": "{ [sys.inputs.get('q')][0] }"}})},
             "one-field": {"if": IF("{ n == 2 }", {"var": {"host": "{ Fraction(1, 3) * 1 }"}})},
             "as-the-item": {"var": {"host": "{ 0 }"}}}[where]
    items = "{ [1, Fraction(1, 3), 3] }" if where == "as-the-item" else "{ [1, 2, 3] }"
    r = s.run_fragment([{"var": {"ks": []}}, {"for": {"in": items, "item": "n", "commands": [
        store, {"var": {"ks": "{ ks + [sys.inputs.get('q'), len(ks)] }", "last": "{ command.ks[-1] }"}}]}},
        {"return": "{ ks }"}], inputs={"q": 7})
    assert r.code == "success", r.error
    assert r.value == [7, 0, 7, 2, 7, 4]
    assert s.engine.guarded
    if way == "sync":  # the first pass ran as steps, the last on the general path; in the `var` that
        assert 0 < general.count("[1].for.commands[1].var") < 3  # stored the host, the next field too
        assert ("[1].for.commands[0].if.then.var.q2" in general) is (where == "in-the-body")


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("body, path", [
    ([{"var": {"a": "{ [time.sleep(0.09)][0] }"}}, {"var": {"b": 1}}], "for.commands[1].var"),
    ([{"if": IF("{ True }", [{"var": {"a": "{ [time.sleep(0.09)][0] }"}}, {"break": {}}])}], "for.commands[0].if.then[1].break"),
], ids=["next-command", "in-a-branch"])
def test_the_time_limit_is_checked_before_each_command_of_a_loops_body(body, path, way, monkeypatch):
    """Inside a loop's sync body too, a run whose time passed in one command stops before the next."""
    either_way(way, monkeypatch)
    s = Session(Engine(bare_settings({"allowlist": "time.sleep", "limits": {"time": SHORT_LIMIT}})))
    r = s.run_fragment({"for": {"in": "{ [1, 2] }", "item": "n", "commands": body}})
    assert r.code == "timedOut" and r.error is not None and r.error.path == path
    assert "a" not in s.locals and "b" not in s.locals


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("body", [{"var": {"k": "{ k + 1 }"}},
                                  {"var": {"k": "{ len([0 for i in range(10 ** 7) for j in range(10 ** 7) if i < 0]) }"}}],
                         ids=["many-passes", "one-long-expression"])
def test_a_time_limit_stops_a_for_loop(body, way, monkeypatch):
    """A ``for`` past its time ends ``timedOut``, whether the time passes between passes or inside one
    long expression (the watchdog's); the loop's variables are as before it."""
    either_way(way, monkeypatch)
    s = session(locals={"k": 0}, limits={"time": 0.3, "loop_iterations": 10**9})
    r = s.run_fragment({"for": {"in": "{ range(10 ** 7) }", "item": "n", "commands": [body]}})
    assert r.code == "timedOut" and r.error is not None and r.error.code == "timedOut"
    assert s.locals["k"] == 0 and "n" not in s.locals


class NoTruth:
    """A host object whose truth fails."""

    def __bool__(self) -> bool:
        raise ValueError("no truth here")


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_a_condition_whose_truth_fails_in_a_loop_is_runtime_at_the_condition(way, monkeypatch):
    either_way(way, monkeypatch)
    s = Session(Engine(bare_settings({"allowlist": "len"})), locals={"odd": NoTruth()})
    r = s.run_fragment([{"var": {"paths": []}}, {"for": {"in": "{ [1, 2] }", "item": "n", "commands": [
        {"if": IF("{ odd }", {"var": {"x": 1}}), "onError": [{"var": {"paths": "{ paths + [exc.code, exc.path] }"}}]}]}},
        {"return": "{ paths }"}])
    assert r.code == "success", r.error
    assert r.value == ["runtime", "[1].for.commands[0].if.condition"] * 2


# -- a while condition read by a plain call (fastpath.condition) ----------------------------------------

def counting_truth(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the conditions awaited through ``Interpreter.truth`` (the general path's)."""
    paths: list[str] = []
    truth = Interpreter.truth

    async def counted(self: Interpreter, raw: Any, path: str) -> bool:
        paths.append(path)
        return await truth(self, raw, path)
    monkeypatch.setattr(Interpreter, "truth", counted)
    return paths


@pytest.mark.parametrize("body", [{"var": {"n": "{ n + 1 }"}}, {"var": {"n": "{ await asyncio.sleep(0, n + 1) }"}}],
                         ids=["sync-body", "awaiting-body"])
def test_a_while_condition_that_cannot_await_is_read_by_a_plain_call(body, monkeypatch):
    """The plain call is taken (so the comparisons above compare it), whatever the body; a condition that
    may await, and every condition with the general path's switch, is awaited through ``truth``."""
    paths = counting_truth(monkeypatch)
    fragment = [{"var": {"n": 0}}, {"while": WHILE("{ n < 40 }", body)},
                {"while": WHILE("{ asyncio.sleep(0, n < 42) }", {"var": {"n": "{ n + 1 }"}})}, {"return": "{ n }"}]
    assert untraced(session()).run_fragment(fragment).value == 42
    assert paths == ["[2].while.condition"] * 3
    paths.clear()
    without_steps(monkeypatch)
    assert untraced(session()).run_fragment(fragment).value == 42
    assert paths == ["[1].while.condition"] * 41 + ["[2].while.condition"] * 3


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("condition", ["{ True }",
                                       "{ len([0 for i in range(10 ** 7) for j in range(10 ** 7) if i < 0]) == 0 }"],
                         ids=["many-passes", "one-long-condition"])
def test_a_time_limit_stops_a_while_loop(condition, way, monkeypatch):
    """A ``while`` past its time ends ``timedOut``, whether the time passes between passes or inside one
    long condition (the watchdog's); the loop's variables are as before it."""
    either_way(way, monkeypatch)
    s = session(locals={"k": 0}, limits={"time": 0.3, "loop_iterations": 10**9})
    r = s.run_fragment({"while": WHILE(condition, {"var": {"k": "{ k + 1 }"}})})
    assert r.code == "timedOut" and r.error is not None and r.error.code == "timedOut"
    assert s.locals["k"] == 0


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
def test_a_while_condition_whose_truth_fails_is_runtime_at_the_condition(way, monkeypatch):
    either_way(way, monkeypatch)
    s = Session(Engine(bare_settings({"allowlist": "len"})), locals={"odd": NoTruth(), "k": 0})
    r = s.run_fragment([{"while": WHILE("{ odd if k else True }", {"var": {"k": "{ k + 1 }"}}),
                         "onError": [{"var": {"paths": "{ [exc.code, exc.path, exc.message, k] }"}}]},
                        {"return": "{ paths }"}])
    assert r.code == "success", r.error
    assert r.value == ["runtime", "[0].while.condition", "ValueError: no truth here", 0]


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("body", ["sync", "awaiting"])
def test_a_host_object_stored_in_a_while_loop_turns_its_condition_guarded(body, way, monkeypatch):
    """Storing a host object mid-loop turns the session's engine guarded (a ``Fraction`` counts as one
    here): the condition read by a plain call for the old engine gives way to ``truth``, which runs the
    guarded engine's code, and the loop goes on reading the run's scopes."""
    either_way(way, monkeypatch)
    host = reach.is_host_itself
    monkeypatch.setattr(reach, "is_host_itself", lambda value: type(value) is Fraction or host(value))
    paths = counting_truth(monkeypatch)
    s = untraced(Session(Engine(bare_settings({"allowlist": "fractions.Fraction as Fraction\nlen\nasyncio.sleep"}))))
    step = "{ await asyncio.sleep(0, len(ks) + 1) }" if body == "awaiting" else "{ len(ks) + 1 }"
    r = s.run_fragment([{"var": {"ks": []}}, {"while": WHILE("{ len(ks) < 6 and sys.inputs.get('q') == 7 }", [
        {"if": IF("{ len(ks) == 2 }", {"var": {"host": "{ Fraction(1, 3) * 1 }"}})},
        {"var": {"ks": "{ ks + [" + step[2:-2] + "] }"}}])}, {"return": "{ ks }"}], inputs={"q": 7})
    assert r.code == "success", r.error
    assert r.value == [1, 2, 3, 4, 5, 6]
    assert s.engine.guarded
    read = [p for p in paths if p.endswith("while.condition")]
    if way == "sync":  # three passes read it by plain calls, the rest (after the host was stored) by truth
        assert read == ["[1].while.condition"] * 4
    else:
        assert read == ["[1].while.condition"] * 7


@pytest.mark.parametrize("way", ["sync", "general", "coroutine"])
@pytest.mark.parametrize("loop", ["while", "for"])
def test_the_time_limit_is_checked_before_each_pass_of_a_loop(loop, way, monkeypatch):
    """A run whose time passed in a loop's condition (its ``in`` for a ``for``) stops at the loop, before
    the pass begins: ``timedOut`` at the loop's own path, not at the body's first command (nor by the
    watchdog, 0.1 s later)."""
    either_way(way, monkeypatch)
    s = Session(Engine(bare_settings({"allowlist": "time.sleep", "limits": {"time": SHORT_LIMIT}})), locals={"k": 0})
    slow = "{ [time.sleep(0.09), 1][1:] }"
    fields = WHILE(slow, {"var": {"k": "{ k + 1 }"}}) if loop == "while" else \
        {"in": slow, "item": "n", "commands": {"var": {"k": "{ k + 1 }"}}}
    r = s.run_fragment([{"var": {"a": 1}}, {loop: fields}])
    assert r.code == "timedOut" and r.error is not None and r.error.path == f"[1].{loop}"
    assert s.locals["k"] == 0 and s.locals["a"] == 1
