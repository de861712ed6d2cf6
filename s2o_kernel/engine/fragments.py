"""Fragments: JSON made of commands, checked whole before anything runs (SPEC 7).

:func:`fragment_kind` tells a fragment from other JSON. :func:`parse_fragment`
turns a fragment into a tree of :class:`Command` objects and reports every
problem at once, each with its JSON path (``functions.main.commands[2].var.total``),
line and column:

* shapes: each command's fields are checked by a pydantic model (unknown
  fields, wrong types, missing fields), commands with no fields accept
  ``{}``, ``null`` or ``true``;
* every expression, with the compile rules of SPEC 3 and the names known at
  that point of the function (its arguments, then variables and loop names
  set earlier, in document order);
* ``break``/``continue`` outside a loop, ``call`` of a function that does not
  exist, a function that calls itself directly or through others, and a
  definition longer than ``limits.definition_length``.

Codes: ``fragment`` (shape), ``loop-control`` (break/continue outside a
loop), ``unknown-function``, ``recursion``, plus the expression codes of
SPEC 3. :mod:`.interpreter` runs the tree.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .dynamic import expression_of
from .errors import S2OError

#: Every command name of SPEC 7.
COMMANDS = frozenset({"var", "if", "for", "while", "break", "continue", "return", "fail", "end", "output",
                      "log", "call", "parallel", "api", "db", "llm", "ask"})
#: Commands that need outside systems, not run by this version.
EXTERNAL = frozenset({"api", "db", "llm", "ask"})
#: Argument types a function may declare (SPEC 7).
ARG_TYPES = ("str", "int", "float", "bool", "list", "dict", "any")
RESERVED = frozenset({"agent", "conv", "sys", "const", "command", "result", "exc"})


# -- field models (one per command) -------------------------------------------------
class _Fields(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


CommandList = Union[dict[str, Any], list[Any]]


class IfFields(_Fields):
    condition: Any
    then: CommandList
    else_: CommandList | None = Field(default=None, alias="else")


class ForFields(_Fields):
    item: str
    in_: Any = Field(alias="in")
    index: str | None = None
    commands: CommandList


class WhileFields(_Fields):
    condition: Any
    commands: CommandList


class OutputFields(_Fields):
    text: Any = None
    html: Any = None
    image: Any = None
    mime: str = "image/png"


class CallFields(_Fields):
    function: str
    args: dict[str, Any] = Field(default_factory=dict)


class ArgSpec(_Fields):
    type: str = "any"
    default: Any = None


class FunctionFields(_Fields):
    args: dict[str, Union[str, ArgSpec]] | list[str] = Field(default_factory=dict)
    commands: CommandList
    onError: CommandList | None = None


# -- the parsed tree ---------------------------------------------------------------------
@dataclass
class Command:
    """One parsed command: ``name``, its raw ``fields``, JSON ``path``, children, ``on_error``."""

    name: str
    fields: Any
    path: str
    children: dict[str, list["Command"]] = field(default_factory=dict)
    branches: list[list["Command"]] = field(default_factory=list)
    on_error: list["Command"] | None = None
    model: Any = None


@dataclass
class Function:
    """A parsed function: argument name → type, default values, body, ``on_error``."""

    name: str
    args: dict[str, str]
    defaults: dict[str, Any]
    commands: list[Command]
    on_error: list[Command] | None
    path: str


@dataclass
class Program:
    """A parsed fragment: the commands to run and the functions ``call`` can reach."""

    kind: str
    body: Function
    functions: dict[str, Function]


_EXPECTED = {"string_type": "str", "int_type": "int", "float_type": "float", "bool_type": "bool",
             "dict_type": "dict", "list_type": "list", "int_parsing": "int", "bool_parsing": "bool"}


def _json_type(value: Any) -> str:
    """The SPEC 7 type name of a JSON value (``str``, ``int``, ``null``, …)."""
    if value is None:
        return "null"
    for name, t in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", list), ("dict", dict)):
        if isinstance(value, t):
            return name
    return type(value).__name__


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


def _unknown_commands(obj: Any) -> list[str]:
    """Keys of a would-be command object that are not commands (to name them in the message)."""
    items = obj if isinstance(obj, list) else [obj]
    found: list[str] = []
    for item in items:
        if isinstance(item, dict):
            found.extend(k for k in item if k not in COMMANDS and k not in ("onError", "functions", "args",
                                                                           "commands") and k not in found)
    return found[:5]


def _join(base: str, key: str) -> str:
    if key.startswith("["):
        return base + key
    return f"{base}.{key}" if base else key


def parse_target(target: str) -> tuple[str, str, list[Any]]:
    """Split a ``var`` target into ``(scope, name, item path)``.

    ``x`` → ``("local", "x", [])``; ``agent.cart['items'][0]`` →
    ``("agent", "cart", ["items", 0])``. Raises ``S2OError`` (``fragment`` or
    ``underscore``) for anything else.
    """
    bad = S2OError("fragment", f"'{target}' is not a var target: use x, agent.x, conv.x, "
                   "optionally followed by [key] or [index]", stage="validate")
    try:
        node = ast.parse(target, mode="eval").body
    except SyntaxError:
        raise bad from None
    items: list[Any] = []
    while isinstance(node, ast.Subscript):
        key = node.slice
        if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, int)) and not isinstance(key.value, bool)):
            raise bad
        items.append(key.value)
        node = node.value
    items.reverse()
    if isinstance(node, ast.Name):
        scope, name = "local", node.id
        if name in RESERVED:
            raise S2OError("fragment", f"'{name}' is a runtime namespace, not a variable", stage="validate")
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("agent", "conv"):
        scope, name = node.value.id, node.attr
    else:
        raise bad
    if name.startswith("_") or any(isinstance(k, str) and k.startswith("_") for k in items):
        raise S2OError("underscore", f"names starting with '_' are not allowed: '{target}'", stage="validate")
    return scope, name, items


class _Parser:
    """Builds the command tree and collects every problem."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.errors: list[S2OError] = []
        self.calls: dict[str, list[tuple[str, str]]] = {}  # function -> [(callee, path)]
        self.current: str = ""

    def error(self, code: str, message: str, path: str) -> None:
        self.errors.append(S2OError(code, message, path=path, stage="validate"))

    def model(self, cls: type[BaseModel], data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            self.error("fragment", f"the fields are expected to be an object, got {_json_type(data)}", path)
            return None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            seen: set[str] = set()
            for err in exc.errors():
                loc = path
                field_name = None
                for part in err["loc"]:
                    if isinstance(part, str) and not part.replace("_", "").isalnum():
                        continue  # a union member's tag, not a field
                    loc = _join(loc, f"[{part}]" if isinstance(part, int) else str(part))
                    field_name = part if isinstance(part, str) else field_name
                if loc in seen:
                    continue
                seen.add(loc)
                expected = _EXPECTED.get(err["type"])
                if expected is not None and field_name is not None:
                    if len([e for e in exc.errors() if e["loc"][:1] == err["loc"][:1]]) > 1:
                        expected = "a command list (an object or a list)" if field_name in (
                            "then", "else", "commands", "onError") else expected
                    self.error("fragment", f"{field_name} is expected to be {expected}, got "
                               f"{_json_type(err.get('input'))}", loc)
                elif err["type"] == "extra_forbidden":
                    self.error("fragment", f"unknown field '{err['loc'][-1]}'", loc)
                elif err["type"] == "missing":
                    self.error("fragment", f"the field '{err['loc'][-1]}' is required", loc)
                else:
                    self.error("fragment", err["msg"].removeprefix("Value error, "), loc)
            return None

    # -- expressions ----------------------------------------------------------------
    def value(self, raw: Any, path: str, known: set[str], fields: list[str] | None = None) -> None:
        """Check a dynamic value (strings at any depth) with the names known here."""
        if isinstance(raw, str):
            found = expression_of(raw)
            if found is None:
                return
            checked = self.engine.check(found[0], locals=known, command_fields=fields or [])
            self.errors.extend(e.with_context(path=path) for e in checked.errors)
        elif isinstance(raw, list):
            for i, v in enumerate(raw):
                self.value(v, f"{path}[{i}]", known, fields)
        elif isinstance(raw, dict):
            for k, v in raw.items():
                self.value(v, _join(path, k), known, fields)

    # -- commands ---------------------------------------------------------------------
    def commands(self, raw: Any, path: str, known: set[str], in_loop: bool) -> list[Command]:
        """Parse a command list: an object of commands (JSON order) or a list of such objects."""
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
        out: list[Command] = []
        on_error_raw = obj.get("onError")
        for name, fields in obj.items():
            if name == "onError":
                continue
            cpath = _join(path, name)
            if name not in COMMANDS:
                self.error("fragment", f"unknown command '{name}'", cpath)
                continue
            cmd = self.command(name, fields, cpath, known, in_loop)
            if cmd is not None:
                out.append(cmd)
        if on_error_raw is not None:
            handler = self.commands(on_error_raw, _join(path, "onError"), known, in_loop)
            for cmd in out:
                cmd.on_error = handler
        return out

    def command(self, name: str, fields: Any, path: str, known: set[str], in_loop: bool) -> Command | None:
        cmd = Command(name, fields, path)
        if isinstance(fields, dict) and "onError" in fields and name != "var":
            cmd.on_error = self.commands(fields["onError"], _join(path, "onError"), known, in_loop)
            fields = {k: v for k, v in fields.items() if k != "onError"}
            cmd.fields = fields
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            self.error("fragment", f"the command '{name}' needs an outside system and is not supported yet", path)
            return None
        return handler(cmd, fields, path, known, in_loop)

    def _no_fields(self, cmd: Command, fields: Any, path: str) -> Command | None:
        if fields in (None, True) or fields == {}:
            return cmd
        self.error("fragment", f"'{cmd.name}' takes no fields: write {{}}, null or true", path)
        return None

    def cmd_var(self, cmd: Command, fields: Any, path: str, known: set[str], in_loop: bool) -> Command | None:
        if not isinstance(fields, dict) or not [k for k in fields if k != "onError"]:
            self.error("fragment", "var takes an object of target → value", path)
            return None
        if "onError" in fields:
            cmd.on_error = self.commands(fields["onError"], _join(path, "onError"), known, in_loop)
        targets = {}
        earlier: list[str] = []
        for target, value in fields.items():
            if target == "onError":
                continue
            fpath = _join(path, target)
            try:
                scope, name, items = parse_target(target)
            except S2OError as exc:
                self.errors.append(exc.with_context(path=fpath))
                continue
            if scope == "local" and items and name not in known:
                self.error("not-set", f"'{name}' has not been set, so '{target}' cannot be set", fpath)
            self.value(value, fpath, known, earlier)
            if scope == "local":
                known.add(name)
            earlier.append(name)
            targets[target] = (scope, name, items)
        cmd.model = targets
        cmd.fields = {k: v for k, v in fields.items() if k != "onError"}
        return cmd

    def cmd_if(self, cmd, fields, path, known, in_loop):
        m = self.model(IfFields, fields, path)
        if m is None:
            return None
        self.value(m.condition, _join(path, "condition"), known)
        cmd.model = m
        cmd.children["then"] = self.commands(m.then, _join(path, "then"), known, in_loop)
        cmd.children["else"] = self.commands(m.else_, _join(path, "else"), known, in_loop) if m.else_ is not None else []
        return cmd

    def _loop_name(self, name: str | None, path: str) -> None:
        if name is None:
            return
        if not name.isidentifier() or name in RESERVED:
            self.error("fragment", f"'{name}' is not a valid variable name", path)
        elif name.startswith("_"):
            self.error("underscore", f"names starting with '_' are not allowed: '{name}'", path)

    def cmd_for(self, cmd, fields, path, known, in_loop):
        m = self.model(ForFields, fields, path)
        if m is None:
            return None
        self.value(m.in_, _join(path, "in"), known)
        self._loop_name(m.item, _join(path, "item"))
        self._loop_name(m.index, _join(path, "index"))
        known.add(m.item)
        if m.index:
            known.add(m.index)
        cmd.model = m
        cmd.children["commands"] = self.commands(m.commands, _join(path, "commands"), known, True)
        return cmd

    def cmd_while(self, cmd, fields, path, known, in_loop):
        m = self.model(WhileFields, fields, path)
        if m is None:
            return None
        self.value(m.condition, _join(path, "condition"), known)
        cmd.model = m
        cmd.children["commands"] = self.commands(m.commands, _join(path, "commands"), known, True)
        return cmd

    def _loop_control(self, cmd, fields, path, known, in_loop):
        if not in_loop:
            self.error("loop-control", f"'{cmd.name}' can only be used inside a for or while loop", path)
            return None
        return self._no_fields(cmd, fields, path)

    cmd_break = _loop_control
    cmd_continue = _loop_control

    def cmd_end(self, cmd, fields, path, known, in_loop):
        return self._no_fields(cmd, fields, path)

    def cmd_return(self, cmd, fields, path, known, in_loop):
        self.value(fields, path, known)
        return cmd

    def _text(self, cmd, fields, path, known, in_loop):
        if not isinstance(fields, str):
            self.error("fragment", f"'{cmd.name}' takes a string (plain text or {{ expression }})", path)
            return None
        self.value(fields, path, known)
        return cmd

    cmd_fail = _text
    cmd_log = _text

    def cmd_output(self, cmd, fields, path, known, in_loop):
        if isinstance(fields, str):
            fields = {"text": fields}
            cmd.fields = fields
        m = self.model(OutputFields, fields, path)
        if m is None:
            return None
        given = [k for k in ("text", "html", "image") if getattr(m, k) is not None]
        if len(given) != 1:
            self.error("fragment", "output takes exactly one part: text, html or image", path)
            return None
        self.value(getattr(m, given[0]), _join(path, given[0]), known)
        cmd.model = m
        return cmd

    def cmd_call(self, cmd, fields, path, known, in_loop):
        m = self.model(CallFields, fields, path)
        if m is None:
            return None
        for name, value in m.args.items():
            self.value(value, _join(_join(path, "args"), name), known)
        self.calls.setdefault(self.current, []).append((m.function, _join(path, "function")))
        cmd.model = m
        return cmd

    def cmd_parallel(self, cmd, fields, path, known, in_loop):
        if not isinstance(fields, list) or not fields:
            self.error("fragment", "parallel takes a list of command lists", path)
            return None
        cmd.branches = [self.commands(branch, f"{path}[{i}]", known, False) for i, branch in enumerate(fields)]
        return cmd

    # -- functions ----------------------------------------------------------------------
    def function(self, name: str, raw: Any, path: str, extra_known: set[str] | None = None) -> Function | None:
        m = self.model(FunctionFields, raw, path)
        if m is None:
            return None
        args: dict[str, str] = {}
        defaults: dict[str, Any] = {}
        specs = {a: "any" for a in m.args} if isinstance(m.args, list) else m.args
        for arg, spec in specs.items():
            apath = _join(_join(path, "args"), arg)
            kind = spec if isinstance(spec, str) else spec.type
            if kind not in ARG_TYPES:
                self.error("fragment", f"unknown type '{kind}'; types are {', '.join(ARG_TYPES)}", apath)
            self._loop_name(arg, apath)
            args[arg] = kind
            if isinstance(spec, ArgSpec) and "default" in spec.model_fields_set:
                defaults[arg] = spec.default
        self.current = name
        known = set(args) | (extra_known or set())
        commands = self.commands(m.commands, _join(path, "commands"), known, False)
        on_error = self.commands(m.onError, _join(path, "onError"), known, False) if m.onError else None
        return Function(name, args, defaults, commands, on_error, path)


def parse_fragment(engine: Any, fragment: Any, *, known: set[str] | None = None,
                   functions: dict[str, Function] | None = None) -> Program:
    """Parse and check ``fragment`` whole; raises :class:`S2OError` or an ``ErrorGroup`` listing every problem.

    ``known`` are the locals already set (a notebook's earlier cells);
    ``functions`` are functions defined earlier that ``call`` may reach.
    """
    from .errors import ErrorGroup

    kind = fragment_kind(fragment)
    if kind is None:
        unknown = _unknown_commands(fragment)
        hint = f" (unknown command {', '.join(repr(k) for k in unknown)}; commands are {', '.join(sorted(COMMANDS))})" \
            if unknown else ""
        raise S2OError("fragment", "this JSON is not a fragment: expected a command object, a list of commands, "
                       f"a function object or an agent definition{hint}", stage="validate")
    limit = engine.settings.limits.definition_length
    size = len(json.dumps(fragment))
    if size > limit:
        raise S2OError("too-long", f"the definition is {size} characters long; the limit is {limit} "
                       "(limits.definition_length)", stage="validate")
    p = _Parser(engine)
    funcs: dict[str, Function] = dict(functions or {})
    if kind == "agent":
        for name, raw in fragment["functions"].items():
            if not name.isidentifier() or name.startswith("_"):
                p.error("fragment", f"'{name}' is not a valid function name", f"functions.{name}")
                continue
            f = p.function(name, raw, f"functions.{name}")
            if f is not None:
                funcs[name] = f
        if "main" not in fragment["functions"]:
            p.error("fragment", "an agent definition needs a function named 'main'", "functions")
        body = funcs.get("main") or Function("main", {}, {}, [], None, "functions.main")
    elif kind == "function":
        p.current = "<cell>"
        body = p.function("<cell>", fragment, "", set(known or ())) or Function("<cell>", {}, {}, [], None, "")
    else:
        p.current = "<cell>"
        body = Function("<cell>", {}, {}, p.commands(fragment, "", set(known or ()), False), None, "")
    for caller, callees in p.calls.items():
        for callee, path in callees:
            if callee not in funcs:
                p.error("unknown-function", f"there is no function named '{callee}'", path)
    cycle_path = _find_cycle(p.calls)
    if cycle_path is not None:
        where = next(path for callee, path in p.calls[cycle_path[0]] if callee == cycle_path[1])
        p.error("recursion", "functions cannot call themselves, directly or through others: "
                + " → ".join(cycle_path), where)
    if p.errors:
        raise p.errors[0] if len(p.errors) == 1 else ErrorGroup(p.errors)
    return Program(kind, body, funcs)


def _find_cycle(calls: dict[str, list[tuple[str, str]]]) -> list[str] | None:
    graph = {caller: [c for c, _ in callees] for caller, callees in calls.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
            if state.get(nxt) is None:
                found = visit(nxt, trail + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in list(graph):
        if state.get(start) is None:
            found = visit(start, [start])
            if found:
                return found
    return None
