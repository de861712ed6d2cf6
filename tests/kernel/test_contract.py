"""The kernel's contract with the engine (s2o_kernel.kernel.contract) and the kernel's import graph.

The engine's ``Session`` and ``IsolatedSession`` and the unit tests' stand-in session must
implement :class:`SessionLike` with the same method signatures (names, kinds and defaults of the
parameters), so the kernel needs nothing else of a session; the isolated one also implements
:class:`ContainedSessionLike`. The kernel's modules import each other without a cycle.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Generic, Protocol

import pytest
from fake_session import FakeSession

from s2o_kernel import engine
from s2o_kernel.engine import IsolatedSession, Session
from s2o_kernel.kernel.contract import ContainedSessionLike, EngineFunctions, SessionLike

KERNEL_DIR = Path(__file__).resolve().parents[2] / "s2o_kernel" / "kernel"

pytestmark = pytest.mark.timeout(60)


def _members(protocol: type) -> dict[str, Any]:
    """The protocol's own members (methods and properties), by name; data members excluded."""
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (Protocol, Generic, object):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
                found[name] = value
    return found


def _shape(fn: Any) -> list[tuple[str, Any, Any]]:
    """Each parameter's name, kind and default (``self`` included), for comparing signatures."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.fixture(scope="module")
def isolated() -> Iterator[IsolatedSession]:
    session = IsolatedSession()
    try:
        yield session
    finally:
        session.close()


def test_the_protocols_name_what_the_kernel_uses() -> None:
    members = set(_members(SessionLike))
    assert {"evaluate", "evaluate_dynamic", "run_fragment", "validate", "dataflow", "update_settings", "settings_dict",
            "set_vars", "reset", "locals", "agent_vars", "conv_vars", "completion_names", "member_names",
            "describe", "redact"} == members  # fmt: skip
    assert set(_members(ContainedSessionLike)) == {"close"}  # and the attribute on_print


@pytest.mark.parametrize("implementation", [Session, IsolatedSession, FakeSession])
def test_signatures_match_the_protocol(implementation: type) -> None:
    members = _members(SessionLike)
    if implementation is IsolatedSession:
        members |= _members(ContainedSessionLike)
    for name, member in members.items():
        actual = inspect.getattr_static(implementation, name, None)
        if isinstance(member, property):
            if implementation is FakeSession:  # plain attributes stand in for the properties
                continue
            assert isinstance(actual, property), (implementation.__name__, name)
        else:
            assert inspect.isfunction(actual), (implementation.__name__, name)
            assert _shape(actual) == _shape(member), (implementation.__name__, name)


def test_sessions_are_instances_of_the_protocols(isolated: IsolatedSession) -> None:
    in_process = Session()
    assert isinstance(in_process, SessionLike)
    assert not isinstance(in_process, ContainedSessionLike)  # no worker: nothing to close
    assert isinstance(isolated, SessionLike) and isinstance(isolated, ContainedSessionLike)
    assert isinstance(FakeSession(), SessionLike)
    # A session missing one method is not one.
    assert not isinstance(object(), SessionLike)


def test_engine_module_has_the_engine_functions() -> None:
    for name, member in _members(EngineFunctions).items():
        assert _shape(getattr(engine, name))[: len(_shape(member)) - 1] == _shape(member)[1:]


def _static_check(
    session: Session, isolated: IsolatedSession, fake: FakeSession
) -> tuple[list[SessionLike], ContainedSessionLike, EngineFunctions]:
    """Never called: mypy checks here that each implementation fits the protocols' types."""
    return [session, isolated, fake], isolated, engine


# -- the import graph -------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(KERNEL_DIR.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The kernel modules ``path`` imports (``from pkg import sub`` counts ``pkg.sub`` when it is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found.update(subs or {node.module})
    return found & modules


def test_kernel_modules_import_without_a_cycle() -> None:
    paths = sorted(KERNEL_DIR.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imports(p, modules) for p in paths}
    assert "s2o_kernel.kernel.magics.run_magic" in graph  # the scan sees the package
    done: set[str] = set()

    def visit(module: str, stack: list[str]) -> None:
        assert module not in stack, " -> ".join([*stack[stack.index(module):], module])
        if module in done:
            return
        for imported in graph[module]:
            visit(imported, [*stack, module])
        done.add(module)

    for module in graph:
        visit(module, [])


# -- completion offers only what the engine accepts ----------------------------------------------

#: Fragments that use every word completion offers inside JSON (SPEC 7).
ACCEPTED = [
    {"var": {"x": 1}},
    {"if": {"condition": True, "then": [], "else": []}},
    {"for": {"item": "i", "in": [1], "index": "k", "commands": [{"continue": {}}]}},
    {"while": {"condition": True, "commands": [{"break": {}}]}},
    {"return": 1},
    {"fail": "no"},
    {"end": {}},
    {"output": "x"},
    {"output": {"text": "x"}},
    {"output": {"html": "<b>x</b>"}},
    {"output": {"image": "aGk=", "mime": "image/png"}},
    {"log": "x"},
    {"parallel": [{"log": "a"}, {"log": "b"}]},
    {"functions": {"main": {"args": {}, "commands": [{"call": {"function": "f", "args": {}}}], "onError": []},
                   "f": {"commands": []}}},
    {"api": {"profile": "open", "method": "GET", "path": "/x", "query": {}, "headers": {}, "body": None,
             "timeout": 5}},
    {"db": {"profile": "demo", "sql": "SELECT 1 AS one", "params": {}}},
    {"functions": {"main": {"commands": [{"llm": {"profile": "scripted", "prompt": "demo", "input": "hi",
                                                  "functions": ["f"], "streamOutput": False}}]},
                   "f": {"commands": []}}, "bounds": {"time": 5, "cost": 0.1}},
    {"ask": {"message": "m", "inputs": [{"name": "a", "type": "chooseOne", "label": "A", "options": ["x"],
                                         "default": "x"}]}},
]  # fmt: skip
#: Words completion leaves out, with a fragment the engine refuses at validation.
REFUSED = {
    "url": {"api": {"profile": "echo", "url": "https://example.com"}},
    "query_text": {"db": {"profile": "demo", "query_text": "select 1"}},
    "question": {"ask": {"question": "name?", "inputs": [{"name": "a"}]}},
    "outputPath": {"output": "x", "outputPath": "answer"},
}


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_fragment_words_are_the_ones_the_engine_accepts() -> None:
    from s2o_kernel.kernel.completion import FRAGMENT_KEYWORDS

    session = Session(engine.Engine(engine.default_settings()))  # with the embedded default's profiles
    session.update_settings({"profiles": {"api": {"open": {"url": "s2o-echo:", "allow_headers": True}}}})
    assert set(FRAGMENT_KEYWORDS) <= {k for fragment in ACCEPTED for k in _keys(fragment)}
    for fragment in ACCEPTED:
        run = session.run_fragment(fragment)
        assert run.error is None or run.error.stage != "validate", (fragment, run.error)
    for word, fragment in REFUSED.items():
        assert word not in FRAGMENT_KEYWORDS
        run = session.run_fragment(fragment)
        assert run.error is not None and (run.error.code, run.error.stage) == ("fragment", "validate"), word
