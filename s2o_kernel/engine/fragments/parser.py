"""Parsing a fragment: JSON made of commands, checked whole before anything runs (SPEC 7).

:func:`~.kind.fragment_kind` tells a fragment from other JSON. :func:`parse_fragment` turns a fragment into a
tree of :class:`~.tree.Command` objects and reports every problem at once, each with its JSON path
(``functions.main.commands[2].var.total``), line and column:

* shapes: each command's fields are checked by the command's own parser (:mod:`..commands`), most with
  a pydantic model (unknown fields, wrong types, missing fields); commands with no fields accept
  ``{}``, ``null`` or ``true``;
* every expression, with the compile rules of SPEC 3 and the names known at that point of the function
  (its arguments, then variables and loop names set earlier, in document order);
* ``break``/``continue`` outside a loop, ``call`` of a function that does not exist, a function that
  calls itself directly or through others, and a definition longer than ``limits.definition_length``.

Codes: ``fragment`` (shape), ``loop-control``, ``unknown-function``, ``recursion``, ``too-long``, plus
the expression codes of SPEC 3. The :class:`Parser` dispatches each command to its registry entry.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ...bounds import MAX_NESTING
from ..commands import registry
from ..commands.spec import FieldsModel
from ..errors import ErrorGroup, S2OError
from ..language.dynamic import expression_of
from ..language.references import And, Expr, Or, is_reference, parse_reference, refs_of
from ..language.rules import RESERVED_NAMES
from ..run.engine import Engine
from ..run.scopes import check_target_name
from ..spelling import did_you_mean, words_at
from .dataflow import Access, Dataflow, expression_reads
from .definition_bounds import parse_bounds
from .depth import check_fragment_json, nesting_error, nesting_errors
from .kind import describe_misses, fragment_kind, misspelled, unknown_commands
from .tree import ARG_TYPES, Command, Function, Program, all_sync, join
from .wiring import targets

CommandList = dict[str, Any] | list[Any]


class ArgSpec(FieldsModel):
    """A function argument written as ``{"type": …, "default": …}``."""

    type: str = "any"
    default: Any = None


class FunctionFields(FieldsModel):
    """A function object: ``args`` (names → types, or a list of names), ``commands``, ``onError``."""

    args: dict[str, str | ArgSpec] | list[str] = Field(default_factory=dict)
    commands: CommandList
    onError: CommandList | None = None


_EXPECTED = {"string_type": "str", "int_type": "int", "float_type": "float", "bool_type": "bool",
             "dict_type": "dict", "list_type": "list", "int_parsing": "int", "bool_parsing": "bool"}
_COMMAND_LIST_FIELDS = ("then", "else", "commands", "onError")


def json_type(value: Any) -> str:
    """The SPEC 7 type name of a JSON value (``str``, ``int``, ``null``, …)."""
    if value is None:
        return "null"
    for name, t in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", list), ("dict", dict)):
        if isinstance(value, t):
            return name
    return type(value).__name__


class Parser:
    """Builds the command tree and collects every problem (see the module doc).

    Attributes:
        engine: the engine whose compile rules check expressions.
        errors: every problem found, in document order.
        calls: function name → ``[(callee, JSON path)]``, for ``unknown-function`` and ``recursion``.
        current: the name of the function being parsed.
        nesting: how many command lists enclose the one being parsed (bounded by ``MAX_NESTING``).
        flow: every path read and written, in document order (:mod:`.dataflow`).
        command_path: the JSON path of the command being parsed.
        awaits: an expression of the command being parsed (or of a command inside it) may await:
            it contains ``await`` or is one call whose coroutine the run awaits (SPEC 6); such a
            command is not sync (``Command.sync``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.errors: list[S2OError] = []
        self.calls: dict[str, list[tuple[str, str]]] = {}
        self.current: str = ""
        self.nesting = 0
        self.flow: list[Access] = []
        self.command_path = ""
        self.awaits = False

    def access(self, mode: str, data: str, path: str, via: str, when: str = "") -> None:
        """Record that the field at ``path`` of the command being parsed reads or writes ``data`` (SPEC 8)."""
        self.flow.append(Access(mode, data, self.command_path, path, via, when))

    def error(self, code: str, message: str, path: str) -> None:
        """Record a validation error at ``path``."""
        self.errors.append(S2OError(code, message, path=path, stage="validate"))

    def model(self, cls: type[BaseModel], data: Any, path: str) -> Any:
        """``data`` checked by the pydantic model ``cls``, or ``None`` after recording each problem."""
        if not isinstance(data, dict):
            self.error("fragment", f"the fields are expected to be an object, got {json_type(data)}", path)
            return None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            self._model_errors(cls, exc, path)
            return None

    def _model_errors(self, cls: type[BaseModel], exc: ValidationError, path: str) -> None:
        seen: set[str] = set()
        # An unknown key first: a misspelled field is also a missing one, and its "did you mean" says both.
        for err in sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden"):
            loc = path
            field_name = None
            for part in err["loc"]:
                if isinstance(part, str) and not part.replace("_", "").isalnum():
                    continue  # a union member's tag, not a field
                loc = join(loc, f"[{part}]" if isinstance(part, int) else str(part))
                field_name = part if isinstance(part, str) else field_name
            if loc in seen:
                continue
            seen.add(loc)
            expected = _EXPECTED.get(err["type"])
            if expected is not None and field_name is not None:
                if len([e for e in exc.errors() if e["loc"][:1] == err["loc"][:1]]) > 1:
                    expected = "a command list (an object or a list)" if field_name in _COMMAND_LIST_FIELDS \
                        else expected
                self.error("fragment", f"{field_name} is expected to be {expected}, got "
                           f"{json_type(err.get('input'))}", loc)
            elif err["type"] == "extra_forbidden":
                key = err["loc"][-1]
                hint = did_you_mean(key, words_at(cls, err["loc"][:-1])) if isinstance(key, str) else ""
                self.error("fragment", f"unknown field '{key}'{hint}", loc)
            elif err["type"] == "missing":
                self.error("fragment", f"the field '{err['loc'][-1]}' is required", loc)
            else:
                self.error("fragment", err["msg"].removeprefix("Value error, "), loc)

    # -- expressions ------------------------------------------------------------------------------
    def value(self, raw: Any, path: str, known: set[str], fields: list[str] | None = None) -> None:
        """Check a dynamic value (strings at any depth) with the names known here and the command's
        fields set so far."""
        if isinstance(raw, str):
            found = expression_of(raw)
            if found is None:
                if is_reference(raw):
                    self.reference(raw, path)
                return
            checked = self.engine.check_remembered(found[0], locals=known, command_fields=fields or [])
            self.errors.extend(e.with_context(path=path) for e in checked.errors)
            if checked.is_async or checked.top_call:
                self.awaits = True
            if not checked.errors:
                for data in expression_reads(found[0], checked.local_names):
                    self.access("read", data, path, "expression")
        elif isinstance(raw, list):
            for i, v in enumerate(raw):
                self.value(v, f"{path}[{i}]", known, fields)
        elif isinstance(raw, dict):
            for k, v in raw.items():
                self.value(v, join(path, k), known, fields)

    def reference(self, text: str, path: str) -> Expr | None:
        """The reference expression ``text`` of the field at ``path`` (SPEC 8), or ``None`` after recording
        its problem (codes of :mod:`..references`, with the column and the field's path)."""
        expr = self._parse_reference(text, path)
        for ref in refs_of(expr) if expr is not None else ():
            self.access("read", ref.text(), path, "reference")
        return expr

    def _parse_reference(self, text: str, path: str) -> Expr | None:
        try:
            return parse_reference(text)
        except S2OError as exc:
            self.errors.append(exc.with_context(path=path))
            return None

    def name(self, name: str | None, path: str) -> None:
        """Check a variable name a command or function declares (loop item, index, argument)."""
        if name is None:
            return
        try:
            check_target_name(name)  # an ASCII identifier (no look-alike folded to another name), not a keyword
        except S2OError as exc:
            self.errors.append(exc.with_context(path=path))

    def no_fields(self, cmd: Command, fields: Any) -> Command | None:
        """``cmd`` when its fields are ``{}``, ``null`` or ``true``; otherwise record the problem."""
        if fields in (None, True) or fields == {}:
            return cmd
        self.error("fragment", f"'{cmd.name}' takes no fields: write {{}}, null or true", cmd.path)
        return None

    # -- commands -----------------------------------------------------------------------------------
    def commands(self, raw: Any, path: str, known: set[str], in_loop: bool) -> list[Command]:
        """Parse a command list: an object of commands (JSON order) or a list of such objects.

        A non-empty list past :data:`~.depth.MAX_NESTING` levels is ``too-deep`` and not parsed.
        """
        if raw and self.nesting >= MAX_NESTING:
            self.errors.append(nesting_error(path))
            return []
        self.nesting += 1
        try:
            return self._commands(raw, path, known, in_loop)
        finally:
            self.nesting -= 1

    def _commands(self, raw: Any, path: str, known: set[str], in_loop: bool) -> list[Command]:
        if isinstance(raw, dict):
            return self.command_object(raw, path, known, in_loop)
        if isinstance(raw, list):
            out: list[Command] = []
            for i, item in enumerate(raw):
                if not isinstance(item, dict):
                    self.error("fragment", "a command is an object such as {\"var\": {...}}", f"{path}[{i}]")
                    continue
                out.extend(self.command_object(item, f"{path}[{i}]", known, in_loop))
            return out
        self.error("fragment", "commands are an object of commands or a list of command objects", path)
        return []

    def command_object(self, obj: dict[str, Any], path: str, known: set[str], in_loop: bool) -> list[Command]:
        """Parse one object of commands; an ``onError`` key applies to each of them."""
        out: list[Command] = []
        on_error_raw = obj.get("onError")
        for name, fields in obj.items():
            if name == "onError":
                continue
            cpath = join(path, name)
            if name not in registry.COMMAND_NAMES:
                self.error("fragment", f"unknown command '{name}'", cpath)
                continue
            cmd = self.command(name, fields, cpath, known, in_loop)
            if cmd is not None:
                out.append(cmd)
        if on_error_raw is not None:
            handler = self.commands(on_error_raw, join(path, "onError"), known, in_loop)
            for cmd in out:
                cmd.on_error = handler
                cmd.sync = cmd.sync and all_sync(handler)
        return out

    def command(self, name: str, fields: Any, path: str, known: set[str], in_loop: bool) -> Command | None:
        """Parse one command through its registry entry; ``None`` after recording a problem."""
        outer, self.command_path = self.command_path, path
        outer_awaits, self.awaits = self.awaits, False
        try:
            cmd = self._command(name, fields, path, known, in_loop)
            if cmd is not None:
                cmd.sync = (registry.REGISTRY[name].run_sync is not None and not self.awaits and not cmd.branches
                            and all_sync(cmd.on_error) and all(all_sync(c) for c in cmd.children.values()))
            return cmd
        finally:
            self.command_path = outer
            self.awaits = outer_awaits or self.awaits

    def _command(self, name: str, fields: Any, path: str, known: set[str], in_loop: bool) -> Command | None:
        cmd = Command(name, fields, path)
        spec = registry.REGISTRY.get(name)
        if spec is None:
            self.error("fragment", f"the command '{name}' needs an outside system and is not supported yet", path)
            return None
        if not spec.parses_on_error and isinstance(fields, dict) and "onError" in fields:
            cmd.on_error = self.commands(fields["onError"], join(path, "onError"), known, in_loop)
            fields = {k: v for k, v in fields.items() if k != "onError"}
            cmd.fields = fields
        if spec.fields is not None and isinstance(fields, dict) and "outputPath" in fields:
            out_path = join(path, "outputPath")
            if spec.produces_result:
                cmd.output_path = self.output_path(fields["outputPath"], out_path)
            else:
                self.error("ref-output", f"'{name}' produces no result, so it takes no outputPath", out_path)
            fields = {k: v for k, v in fields.items() if k != "outputPath"}
            cmd.fields = fields
        parsed = spec.parse(self, cmd, fields, known, in_loop)
        if parsed is not None and spec.produces_result:
            self._result_written(cmd, known)
        return parsed

    def _result_written(self, cmd: Command, known: set[str]) -> None:
        """Record what a command that produces a result writes once its fields are read (SPEC 7, 8):
        ``result``, then each target of its ``outputPath`` (whose ``local`` targets are known after it)."""
        self.access("write", "result", cmd.path, "result")
        if cmd.output_path is None:
            return
        on_success, on_failure = targets(cmd.output_path)
        for refs, when in ((on_success, "on success" if on_failure else ""), (on_failure, "on failure")):
            for ref in refs:
                self.access("write", ref.text(), join(cmd.path, "outputPath"), "outputPath", when)
        known.update(str(r.items[0]) for r in refs_of(cmd.output_path) if r.scope == "local")

    def output_path(self, raw: Any, path: str) -> Expr | None:
        """Check an ``outputPath`` (SPEC 8): a reference expression whose targets are ``local``, ``agent``
        or ``conv`` variables, either a fan-out ``a && b && …`` or two alternatives ``ok || failed``
        (each side a reference or a fan-out). Code ``ref-output``."""
        if not isinstance(raw, str) or not is_reference(raw) or expression_of(raw) is not None:
            self.error("ref-output", "outputPath is a reference expression such as \u2020agent.total, "
                       "\u2020agent.a && \u2020conv.b or \u2020agent.ok || \u2020agent.failed", path)
            return None
        expr = self._parse_reference(raw, path)
        if expr is None:
            return None
        problem = output_shape_problem(expr)
        if problem is not None:
            self.errors.append(S2OError("ref-output", problem[0], line=1, col=problem[1], path=path,
                                        stage="validate"))
            return None
        return expr

    # -- functions ----------------------------------------------------------------------------------
    def function(self, name: str, raw: Any, path: str, extra_known: set[str] | None = None) -> Function | None:
        """Parse a function object; its arguments are the names known in its body."""
        m = self.model(FunctionFields, raw, path)
        if m is None:
            return None
        args: dict[str, str] = {}
        defaults: dict[str, Any] = {}
        specs = dict.fromkeys(m.args, "any") if isinstance(m.args, list) else m.args
        for arg, spec in specs.items():
            apath = join(join(path, "args"), arg)
            kind = spec if isinstance(spec, str) else spec.type
            if kind not in ARG_TYPES:
                self.error("fragment", f"unknown type '{kind}'; types are {', '.join(ARG_TYPES)}", apath)
            self.name(arg, apath)
            args[arg] = kind
            if isinstance(spec, ArgSpec) and "default" in spec.model_fields_set:
                defaults[arg] = spec.default
        self.current = name
        known = set(args) | (extra_known or set())
        commands = self.commands(m.commands, join(path, "commands"), known, False)
        on_error = self.commands(m.onError, join(path, "onError"), known, False) if m.onError else None
        return Function(name, args, defaults, commands, on_error, path)


def _check_whole(engine: Engine, fragment: Any) -> str:
    """The fragment's kind, after the checks of the whole value (not text, JSON and not too deep, a fragment,
    not too long); raises :class:`S2OError` for the first that fails."""
    if isinstance(fragment, (str, bytes, bytearray)):
        raise S2OError("fragment", f"a fragment is parsed JSON, and this is a {type(fragment).__name__} "
                       "(JSON text?); pass the parsed value: run_fragment(json.loads(text))", stage="validate")
    check_fragment_json(fragment, engine.settings.limits.definition_length)  # before anything reads it: a library's
    # value may hold anything, a list held twice over included (each pass over it would then be exponential)
    kind = fragment_kind(fragment)
    if kind is None:
        misses = misspelled(fragment)
        unknown = unknown_commands(fragment)
        hint = f" ({describe_misses(misses)})" if misses else \
            f" (unknown command {', '.join(repr(k) for k in unknown)}; commands are " \
            f"{', '.join(sorted(registry.COMMAND_NAMES))})" if unknown else ""
        raise S2OError("fragment", "this JSON is not a fragment: expected a command object, a list of commands, "
                       f"a function object or an agent definition{hint}", stage="validate")
    size = len(json.dumps(fragment))
    limit = engine.settings.limits.definition_length
    if size > limit:
        raise S2OError("too-long", f"the definition is {size} characters long; the limit is {limit} "
                       "(limits.definition_length)", stage="validate")
    return kind


def parse_fragment(engine: Engine, fragment: Any, *, known: set[str] | None = None,
                   functions: dict[str, Function] | None = None) -> Program:
    """Parse and check ``fragment`` whole; raises :class:`S2OError` or an ``ErrorGroup`` listing every problem.

    ``fragment`` is parsed JSON; JSON *text* (a ``str`` or ``bytes``) is refused with code ``fragment``
    and a message saying to pass ``json.loads(text)`` (text is never parsed here: a JSON string is
    a valid JSON document but never a fragment, so guessing could only mislead).

    ``known`` are the locals already set (a notebook's earlier cells); ``functions`` are functions
    defined earlier that ``call`` may reach.
    """
    kind = _check_whole(engine, fragment)
    p = Parser(engine)
    funcs: dict[str, Function] = dict(functions or {})
    try:
        body = _parse_body(p, kind, fragment, funcs, known)
    except RecursionError:  # not expected within the depth bounds; never a crash
        raise S2OError("too-deep", "the fragment nests too deeply to be checked", stage="validate") from None
    for callees in p.calls.values():
        for callee, path in callees:
            if callee not in funcs:
                p.error("unknown-function", f"there is no function named '{callee}'", path)
    cycle_path = _find_cycle(p.calls)
    if cycle_path is not None:
        where = next(path for callee, path in p.calls[cycle_path[0]] if callee == cycle_path[1])
        p.error("recursion", "functions cannot call themselves, directly or through others: "
                + " → ".join(cycle_path), where)
    elif not p.errors:
        p.errors.extend(nesting_errors(funcs, body))
    bounds: dict[str, float] = {}
    if kind == "agent" and "bounds" in fragment:
        bounds, bound_errors = parse_bounds(fragment["bounds"])
        p.errors.extend(bound_errors)
    if p.errors:
        errors = [_notebook_name_hint(e, known) for e in p.errors] if kind == "agent" and known else p.errors
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return Program(kind, body, funcs, Dataflow(p.flow), bounds)


def _notebook_name_hint(error: S2OError, known: set[str]) -> S2OError:
    """``error``, or for an ``unknown-name`` in an agent definition that names a notebook variable a copy
    saying how to pass it: an agent's functions start with fresh locals (SPEC 7), so a notebook's earlier
    cells reach ``main`` as its arguments or through ``sys.inputs`` (papermill parameters land there too)."""
    name = error.details.get("name") if error.code == "unknown-name" and error.details else None
    if not isinstance(name, str) or name not in known:
        return error
    hint = (f"; '{name}' is a notebook variable, and an agent's functions start with fresh locals: "
            f"give main an argument '{name}' (\"args\") and pass it in the run's inputs, or read "
            f"sys.inputs['{name}']")
    return S2OError(error.code, error.message + hint, line=error.line, col=error.col, path=error.path,
                    stage=error.stage, source=error.source, details=error.details)


def output_shape_problem(expr: Expr) -> tuple[str, int] | None:
    """``(message, column)`` of what makes ``expr`` no ``outputPath`` (SPEC 8), or ``None`` when it is one."""
    sides = expr.operands if isinstance(expr, Or) else (expr,)
    if isinstance(expr, Or) and len(sides) != 2:
        return ("an outputPath's || names two alternatives: the path on success || the path on failure",
                refs_of(sides[2])[0].col)
    for side in sides:
        inner = _first_or(side)
        if inner is not None:
            return "|| may only separate the two alternatives of an outputPath", refs_of(inner)[0].col
    for ref in refs_of(expr):
        if ref.scope not in ("local", "agent", "conv"):
            return (f"an outputPath writes to local, agent or conv variables; {ref.scope} is read-only", ref.col)
        if ref.scope == "local" and ref.items[0] in RESERVED_NAMES:
            return f"'{ref.items[0]}' is a runtime namespace, not a variable", ref.col
    return None


def _first_or(expr: Expr) -> Or | None:
    """The first ``||`` group inside ``expr`` (itself included), or ``None``."""
    if isinstance(expr, Or):
        return expr
    if isinstance(expr, And):
        return next((found for op in expr.operands if (found := _first_or(op)) is not None), None)
    return None


def _parse_body(p: Parser, kind: str, fragment: Any, funcs: dict[str, Function], known: set[str] | None) -> Function:
    if kind == "agent":
        for name, raw in fragment["functions"].items():
            if type(name) is not str or not name.isidentifier() or not name.isascii() or name.startswith("_"):
                p.error("fragment", f"'{name}' is not a valid function name", f"functions.{name}")
                continue
            f = p.function(name, raw, f"functions.{name}")
            if f is not None:
                funcs[name] = f
        if "main" not in fragment["functions"]:
            p.error("fragment", "an agent definition needs a function named 'main'", "functions")
        return funcs.get("main") or Function("main", {}, {}, [], None, "functions.main")
    p.current = "<cell>"
    if kind == "function":
        return p.function("<cell>", fragment, "", set(known or ())) or Function("<cell>", {}, {}, [], None, "")
    return Function("<cell>", {}, {}, p.commands(fragment, "", set(known or ()), False), None, "")


def _find_cycle(calls: dict[str, list[tuple[str, str]]]) -> list[str] | None:
    """A cycle of the call graph as ``[f, g, …, f]``, or ``None``; iterative, whatever the chain's length."""
    graph = {caller: [c for c, _ in callees] for caller, callees in calls.items()}
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        trail = [start]
        on_trail = {start}
        nexts = [iter(graph.get(start, []))]
        while nexts:
            nxt = next(nexts[-1], None)
            if nxt is None:
                done.add(trail[-1])
                on_trail.discard(trail.pop())
                nexts.pop()
            elif nxt in on_trail:
                return [*trail[trail.index(nxt):], nxt]
            elif nxt not in done:
                trail.append(nxt)
                on_trail.add(nxt)
                nexts.append(iter(graph.get(nxt, [])))
    return None
