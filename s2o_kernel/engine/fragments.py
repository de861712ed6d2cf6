"""Fragments: JSON made of commands (SPEC 7).

:func:`fragment_kind` tells a fragment from other JSON; :func:`run_fragment`
checks the whole fragment before its first command runs (every expression
and every command's shape, all problems reported at once with their JSON
paths) and then runs it as one run, returning a :class:`RunResult`.

This version runs the ``var`` command (targets ``x``, ``agent.x``,
``conv.x``, set in order, later fields seeing earlier ones through their
names and through ``command.<field>``). Other commands are recognised and
refused at validation with code ``fragment`` until they are implemented.
A command that fails leaves the session as it was before that command.
"""

from __future__ import annotations

import time
from typing import Any

from .dynamic import expression_of
from .errors import ErrorGroup, S2OError
from .evaluation import RunResult, Session
from .scopes import check_json

#: Every command name of SPEC 7.
COMMANDS = frozenset({"var", "if", "for", "while", "break", "continue", "return", "fail", "end", "output",
                      "log", "call", "parallel", "api", "db", "llm", "ask"})
#: Commands this version runs.
SUPPORTED = frozenset({"var"})


def _is_command(obj: Any) -> bool:
    return (isinstance(obj, dict) and bool(obj)
            and any(k in COMMANDS for k in obj) and all(k in COMMANDS or k == "onError" for k in obj))


def fragment_kind(obj: Any) -> str | None:
    """``"command"``, ``"commands"``, ``"function"``, ``"agent"`` or ``None`` for other JSON (SPEC 7, 9)."""
    if _is_command(obj):
        return "command"
    if isinstance(obj, list) and obj and all(_is_command(x) for x in obj):
        return "commands"
    if isinstance(obj, dict) and isinstance(obj.get("functions"), dict):
        return "agent"
    if isinstance(obj, dict) and "commands" in obj and set(obj) <= {"args", "commands", "onError"}:
        return "function"
    return None


def _commands_of(obj: Any, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """``(path, command)`` pairs of a command or command-list fragment."""
    if kind == "command":
        return [("", obj)]
    return [(f"[{i}]", c) for i, c in enumerate(obj)]


def _join(base: str, key: str) -> str:
    return f"{base}.{key}" if base else key


def _split_target(target: str) -> tuple[str, str]:
    """``("local"|"agent"|"conv", name)`` for a ``var`` target."""
    if "." in target:
        scope, _, name = target.partition(".")
        if scope in ("agent", "conv"):
            return scope, name
        raise S2OError("fragment", f"'{target}' is not a var target: use x, agent.x or conv.x", stage="validate")
    return "local", target


def _check_var(session: Session, fields: Any, path: str, known: set[str], errors: list[S2OError]) -> None:
    if not isinstance(fields, dict) or not fields:
        errors.append(S2OError("fragment", "var takes an object of target → value", path=path, stage="validate"))
        return
    earlier: list[str] = []
    for target, value in fields.items():
        fpath = _join(path, target)
        if target == "onError":
            continue
        try:
            scope, name = _split_target(target)
            if not name.isidentifier():
                raise S2OError("fragment", f"'{target}' is not a var target: use x, agent.x or conv.x",
                               stage="validate")
            if name.startswith("_"):
                raise S2OError("underscore", f"names starting with '_' are not allowed: '{name}'", stage="validate")
            if scope == "local" and name in ("agent", "conv", "sys", "const", "command", "result", "exc"):
                raise S2OError("fragment", f"'{name}' is a runtime namespace, not a variable", stage="validate")
        except S2OError as exc:
            errors.append(exc.with_context(path=fpath))
            continue
        _check_value(session, value, fpath, known, earlier, errors)
        if scope == "local":
            known.add(name)
        earlier.append(name)


def _check_value(session: Session, value: Any, path: str, known: set[str], earlier: list[str],
                 errors: list[S2OError]) -> None:
    if isinstance(value, str):
        found = expression_of(value)
        if found is None:
            return
        checked = session.engine.check(found[0], locals=known, command_fields=earlier)
        errors.extend(e.with_context(path=path) for e in checked.errors)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_value(session, v, f"{path}[{i}]", known, earlier, errors)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_value(session, v, f"{path}.{k}", known, earlier, errors)


def validate_fragment(session: Session, fragment: Any) -> list[S2OError]:
    """Every problem of ``fragment`` before anything runs, each with its JSON path."""
    kind = fragment_kind(fragment)
    if kind is None:
        return [S2OError("fragment", "this JSON is not a fragment: expected a command object, a list of "
                         "commands, a function object or an agent definition", stage="validate")]
    if kind in ("function", "agent"):
        return [S2OError("fragment", f"running a {kind} definition is not supported yet", stage="validate")]
    errors: list[S2OError] = []
    known = set(session.locals)
    for cpath, command in _commands_of(fragment, kind):
        for name, fields in command.items():
            npath = _join(cpath, name)
            if name == "onError":
                errors.append(S2OError("fragment", "onError is not supported yet", path=npath, stage="validate"))
            elif name not in SUPPORTED:
                errors.append(S2OError("fragment", f"the command '{name}' is not supported yet",
                                       path=npath, stage="validate"))
            else:
                _check_var(session, fields, npath, known, errors)
    return errors


def run_fragment(session: Session, fragment: Any) -> RunResult:
    """Validate then run ``fragment`` as one run (SPEC 7); never raises :class:`S2OError`.

    Returns a :class:`RunResult`; when validation fails nothing runs and the
    result's ``error`` holds every problem (an :class:`ErrorGroup` when there
    are several).
    """
    errors = validate_fragment(session, fragment)
    if errors:
        error = errors[0] if len(errors) == 1 else ErrorGroup(errors)
        return RunResult(code="errorInAgent", error=error)
    start = time.monotonic()
    result = RunResult()
    for cpath, command in _commands_of(fragment, fragment_kind(fragment)):
        for name, fields in command.items():
            snap = session.snapshot()
            try:
                _run_var(session, fields, _join(cpath, name), start)
            except S2OError as exc:
                session.restore(snap)
                result.code = {"timedOut": "timedOut", "stopped": "stopped"}.get(exc.code, "errorInAgent")
                result.error = exc
                return result
            except KeyboardInterrupt:
                session.restore(snap)
                result.code = "stopped"
                result.error = S2OError("stopped", "the run was interrupted; the session keeps its variables")
                return result
            finally:
                session.set_command_fields({})
    return result


def _run_var(session: Session, fields: dict[str, Any], path: str, start: float) -> None:
    done: dict[str, Any] = {}
    for target, value in fields.items():
        if target == "onError":
            continue
        fpath = _join(path, target)
        scope, name = _split_target(target)
        session.set_command_fields(done)
        v = session.evaluate_value(value, path=fpath, start=start, command_fields=list(done))
        try:
            if scope == "local":
                session.set_local(name, v)
            elif scope == "agent":
                check_json(v, target)
                session.set_agent(name, v)
            else:
                check_json(v, target)
                session.set_conv(name, v)
        except S2OError as exc:
            exc.stage = "run"
            raise exc.with_context(path=fpath) from None
        done[name] = v
