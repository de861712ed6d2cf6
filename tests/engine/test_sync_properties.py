"""Property test of sync commands (``Command.sync``) and atomic commands (``Command.atomic``): random
small fragments, drawn from a grammar of the commands that can run as plain calls, run on fresh
sessions four ways — as they are (a loop's sync body as steps and a ``while`` condition that cannot
await read by a plain call, :mod:`~s2o_kernel.engine.fragments.fastpath`); with a loop's sync body run
command by command and every condition awaited (no steps: ``fastpath.BUILDERS`` emptied,
``fastpath.condition`` giving none); with every command a coroutine (the registry's ``run_sync`` taken
away, every condition awaited); with no command atomic (a snapshot before every command) — and give the same result code,
value, outputs, logs, error (code, path, message), locals, agent and conversation variables, and the
same ``exc``/``result``/``command`` left in the namespace.

The grammar: ``var`` with one to three fields (locals, ``agent.``/``conv.`` variables, item targets
that may be out of range or of a variable not set), ``if``/``else``, ``for`` over small lists,
``while`` with a counter and a condition that may fail, read ``exc``, the loop's item, a reference
or plain text, or await, ``break``/``continue`` inside loops, ``log``, ``output``, ``return``,
``fail``, ``end``, ``onError`` handlers reading ``exc``, an awaiting ``var`` now and then (so a sync
command sits beside, inside and around coroutine ones), and expressions that sometimes fail (division
by zero, an index out of range, a name set on one branch only, a value that is no JSON in an agent
variable). Derandomized: the same examples every run, no example database.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings
from s2o_kernel.engine.commands import registry
from s2o_kernel.engine.fragments import fastpath

ALLOWLIST = "asyncio.sleep\nlen\nstr\nint\nlist\nrange"
LIMITS = {"loop_iterations": 12, "output_parts": 6}
START_LOCALS = {"a": 2, "b": 0, "lst": [1, 2, 3], "d": {"k": 1}}
START_AGENT = {"x": 1, "cart": {"n": 1}}
START_CONV = {"z": 0}

#: Expressions giving an int; some fail (ZeroDivisionError, IndexError, KeyError, a name not set).
INT_EXPRS = [
    "{ a + 1 }", "{ a * 2 - b }", "{ a // b }", "{ lst[a] }", "{ lst[-1] }", "{ d['k'] + 1 }",
    "{ d['q'] }", "{ m + 1 }", "{ m }", "{ len(lst) }", "{ agent.x + a }", "{ conv.z + 1 }", "{ 7 }", "3",
    "{ agent.cart['n'] }", "{ int('x') }",
]
#: Values only inside a loop (the loop's item ``n``) or a handler (``exc``), or of another kind.
LOOP_EXPRS = ["{ n }", "{ n * a }", "{ a // (n - 2) }"]
HANDLER_EXPRS = ["{ exc.code }", "{ exc.message }", "{ exc.path }"]
OTHER_EXPRS = ["{ [a, b] }", "{ 'w' + str(a) }", "{ lst + [a] }", "{ range(2) }"]
CONDITIONS = ["{ a > 1 }", "{ a % 2 == 0 }", "{ b }", "{ lst[5] }", "{ m > 0 }", "{ len(lst) > 3 }",
              "{ agent.x > 2 }", "{ n > 1 }"]
TARGETS = ["a", "b", "m", "agent.x", "conv.z", "lst[0]", "lst[3]", "lst[9]", "d['k']", "d['new']",
           "agent.cart['n']", "agent.gone['n']", "conv.z2"]
AWAITING = "{ await asyncio.sleep(0, 5) }"
#: ``while`` conditions (the counter ``w``); some fail, some never turn false (``loop-limit``), one awaits.
WHILE_CONDITIONS = ["{ w < 4 }", "{ w < a + 2 }", "{ lst[w] < 9 }", "{ w < len(lst) }", "{ 8 // (3 - w) }",
                    "{ [w] if w < 3 else [] }", "{ asyncio.sleep(0, w < 3) }", "{ w < 3 and d['k'] > 0 }",
                    "{ await asyncio.sleep(0, w < 2) }", "{ lst[w + 2] < 9 }", "{ 2 // (1 - w) }",
                    "{ d['q'] > w }", "{ int(str(w) + 'x') }",
                    "†agent.x", "on"]
#: … only inside a handler (``exc``), a ``for`` (its item ``n``), after ``m`` was written.
WHILE_HANDLER = ["{ exc.code != 'none' and w < 3 }"]
WHILE_ITEM = ["{ w < n + 1 }"]
WHILE_M = ["{ w < m }"]


@dataclasses.dataclass
class Where:
    """Where in the fragment being drawn: inside a loop (``break``/``continue`` allowed), inside a ``for``
    (its item ``n`` is set), inside a handler (``exc`` is set), and whether ``m`` was written earlier in
    document order (validation then knows it; at run time it may be set on one branch only)."""

    depth: int = 0
    in_loop: bool = False
    has_item: bool = False
    in_handler: bool = False
    wrote_m: list[bool] = dataclasses.field(default_factory=lambda: [False])

    def inner(self, **changes: Any) -> Where:
        return dataclasses.replace(self, depth=self.depth + 1, **changes)


def expression(draw: st.DrawFn, at: Where) -> Any:
    pool = [e for e in INT_EXPRS if "m" not in e or at.wrote_m[0]] + OTHER_EXPRS[:1]
    pool += (LOOP_EXPRS if at.has_item else []) + (HANDLER_EXPRS if at.in_handler else [])
    return draw(st.sampled_from(pool))


def var(draw: st.DrawFn, at: Where) -> dict[str, Any]:
    targets = draw(st.lists(st.sampled_from(TARGETS), min_size=1, max_size=3, unique=True))
    fields: dict[str, Any] = {}
    for i, target in enumerate(targets):
        kind = draw(st.integers(0, 9))
        if kind == 0 and i:
            fields[target] = "{ command." + targets[0].split(".")[-1].split("[")[0] + " }"
        elif kind == 1:
            fields[target] = draw(st.sampled_from(OTHER_EXPRS))
        elif kind == 2 and draw(st.booleans()):
            fields[target] = AWAITING
        else:
            fields[target] = expression(draw, at)
        at.wrote_m[0] = at.wrote_m[0] or target == "m"
    return {"var": fields}


def commands(draw: st.DrawFn, at: Where) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        cmd = command(draw, at)
        if "while" in cmd:
            out.append({"var": {"w": 0}})  # the loop's counter
        out.append(cmd)
    return out


def command(draw: st.DrawFn, at: Where) -> dict[str, Any]:
    kinds = ["var", "var", "log", "output"]
    if at.depth < 3:
        kinds += ["if", "for", "while", "if"]
    if at.in_loop:
        kinds += ["break", "continue"]
    kinds += ["return", "fail", "end"] if draw(st.integers(0, 4)) == 0 else []
    kind = draw(st.sampled_from(kinds))
    cmd: dict[str, Any]
    if kind == "var":
        cmd = var(draw, at)
    elif kind == "log":
        cmd = {"log": draw(st.sampled_from(["plain", *OTHER_EXPRS[:3], expression(draw, at)]))}
    elif kind == "output":
        cmd = {"output": {"text": draw(st.sampled_from(["{ 'v' + str(a) }", "{ str(lst) }", "done",
                                                         expression(draw, at)]))}}
    elif kind == "if":
        branch: dict[str, Any] = {"condition": draw(st.sampled_from([c for c in CONDITIONS if ('n' not in c.split() or at.has_item) and ('m' not in c.split() or at.wrote_m[0])])),
                                  "then": commands(draw, at.inner())}
        if draw(st.booleans()):
            branch["else"] = commands(draw, at.inner())
        cmd = {"if": branch}
    elif kind == "for":
        cmd = {"for": {"in": draw(st.sampled_from(["{ [1, 2, 3] }", "{ lst }", "{ list(range(a)) }", "{ d }"])),
                       "item": "n", "commands": commands(draw, at.inner(in_loop=True, has_item=True))}}
        if draw(st.booleans()):
            cmd["for"]["index"] = "i"
    elif kind == "while":
        pool = WHILE_CONDITIONS + (WHILE_HANDLER if at.in_handler else []) + (WHILE_ITEM if at.has_item else [])
        pool += WHILE_M if at.wrote_m[0] else []
        cmd = {"while": {"condition": draw(st.sampled_from(["{ w < 4 }", *pool])),
                         "commands": [{"var": {"w": "{ w + 1 }"}}, *commands(draw, at.inner(in_loop=True))]}}
    elif kind in ("break", "continue", "end"):
        cmd = {kind: {}}
    elif kind == "return":
        cmd = {"return": expression(draw, at)}
    else:
        cmd = {"fail": draw(st.sampled_from(["stop", "{ 'f' + str(a) }", "{ str(1 // b) }"]))}
    if at.depth < 3 and kind not in ("break", "continue", "end") and draw(st.integers(0, 3)) == 0:
        cmd["onError"] = commands(draw, at.inner(in_handler=True))
    return cmd


@st.composite
def fragments(draw: st.DrawFn) -> list[dict[str, Any]]:
    return commands(draw, Where())


def outcome(fragment: Any, keep_trace: bool = False) -> tuple[Any, ...]:
    """Everything a run of ``fragment`` on a fresh session shows. Without a trace by default: a loop's sync body
    then runs as steps from its first pass (with one, its first passes run the general path, each in a span)."""
    s = Session(Engine(bare_settings({"allowlist": ALLOWLIST, "limits": LIMITS})),
                locals=dict(START_LOCALS, lst=list(START_LOCALS["lst"]), d=dict(START_LOCALS["d"])),
                agent=START_AGENT, conv=START_CONV)
    s.keep_trace = keep_trace
    r = s.run_fragment(fragment)
    err = r.error
    names = s.execution.globals
    left = ("exc" in names, names.get("result"), repr(names.get("command")))
    return (r.code, r.value, r.outputs, r.logs, err and (err.code, err.path, err.message),
            {k: repr(v) for k, v in s.locals.items()}, s.agent_vars, s.conv_vars, left)


@contextlib.contextmanager
def every_command_a_coroutine() -> Iterator[None]:
    """The registry's ``run_sync`` taken away from every command that has a coroutine runner; every
    ``while`` condition awaited."""
    with pytest.MonkeyPatch.context() as mp:
        for name, spec in list(registry.REGISTRY.items()):
            if spec.run is not None and spec.run_sync is not None:
                mp.setitem(registry.REGISTRY, name, dataclasses.replace(spec, run_sync=None))
        mp.setattr(fastpath, "condition", lambda it, raw, path: None)
        yield


@contextlib.contextmanager
def no_steps() -> Iterator[None]:
    """No command has a step of its own: a loop's sync body runs ``Interpreter.command_sync`` per command,
    and every ``while`` condition is awaited (``Interpreter.truth``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastpath, "BUILDERS", {})
        mp.setattr(fastpath, "condition", lambda it, raw, path: None)
        yield


@contextlib.contextmanager
def no_command_atomic() -> Iterator[None]:
    """``var`` parses as before but is never atomic: a snapshot before every command."""
    spec = registry.REGISTRY["var"]

    def parse(p: Any, cmd: Any, fields: Any, known: set[str], in_loop: bool) -> Any:
        parsed = spec.parse(p, cmd, fields, known, in_loop)
        if parsed is not None:
            parsed.atomic = False
        return parsed
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.REGISTRY, "var", dataclasses.replace(spec, parse=parse))
        yield


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(fragment=fragments())
def test_a_fragment_runs_the_same_sync_as_a_coroutine_and_with_snapshots(fragment: list[dict[str, Any]]) -> None:
    fast = outcome(fragment)
    assert outcome(fragment, keep_trace=True) == fast  # keeping a trace changes nothing a run shows
    with no_steps():
        assert outcome(fragment) == fast
    with every_command_a_coroutine():
        assert outcome(fragment) == fast
    with no_command_atomic():
        assert outcome(fragment) == fast


def test_the_grammar_reaches_what_it_means_to():
    """The drawn fragments are not all refused at validation, and they do reach sync commands, failures,
    handlers and loops, loops whose body runs as steps and ``while`` conditions read by plain calls among
    them, and those conditions failing (so the property above is not vacuous)."""
    seen: dict[str, int] = {}

    @settings(max_examples=120, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(fragment=fragments())
    def tally(fragment: list[dict[str, Any]]) -> None:
        code, _, outputs, logs, err, *_ = outcome(fragment)
        stage = "validate" if err and code == "errorInAgent" and err[0] in ("fragment", "name") else "run"
        for key in (code, err and err[0], stage, "outputs" if outputs else None, "logs" if logs else None):
            if key:
                seen[key] = seen.get(key, 0) + 1
    real_steps, real_condition = fastpath.steps, fastpath.condition

    def steps(it: Any, body: Any) -> Any:
        seen["loops run as steps"] = seen.get("loops run as steps", 0) + 1
        return real_steps(it, body)

    def condition(it: Any, raw: Any, path: str) -> Any:
        found = real_condition(it, raw, path)
        key = "plain conditions" if found is not None else "awaited conditions"
        seen[key] = seen.get(key, 0) + 1
        if found is None:
            return None

        def read(namespace: Any, view: Any, fields: Any = None) -> Any:
            try:
                return found(namespace, view, fields)
            except S2OError:
                seen["a plain condition failed"] = seen.get("a plain condition failed", 0) + 1
                raise
        return read
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastpath, "steps", steps)
        mp.setattr(fastpath, "condition", condition)
        tally()
    assert seen.get("loops run as steps", 0) >= 20, seen
    assert seen.get("plain conditions", 0) >= 20 and seen.get("awaited conditions", 0) >= 3, seen
    assert seen.get("a plain condition failed", 0) >= 3, seen
    assert seen.get("success", 0) >= 20
    assert seen.get("errorInAgent", 0) >= 10
    for code in ("runtime", "not-set"):
        assert seen.get(code, 0) >= 3, seen
    assert seen.get("outputs", 0) >= 10 and seen.get("logs", 0) >= 10
