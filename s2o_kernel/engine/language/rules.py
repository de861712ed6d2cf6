"""Compile rules: the checks every expression passes before it runs (SPEC 3, 3.1, 12).

:func:`check_expression` parses one expression and walks its tree
iteratively (never recursively, so a deep tree cannot crash the validator),
calling one ``rule_*`` method per kind of node. Each rule owns one or a few
refusal codes, the way RestrictedPython and ruff keep a rule in one place:

============================  =========================================
method                        codes
============================  =========================================
``rule_name``                 ``underscore``, ``sys``, ``unknown-name``
``rule_attribute``            ``underscore``, ``format``, ``attribute``,
                              ``sys``, ``sys-member``, ``secret-key``,
                              ``command-field``
``rule_subscript``            ``secret-key``, ``missing-secret``
``rule_call``                 ``call-target``, ``not-awaited``
``rule_keyword``              ``underscore``
``rule_lambda``               ``lambda``
``rule_namedexpr``            ``walrus``
``rule_comprehension``        ``comprehension-depth``, ``comprehension-clauses``
``rule_binop``                ``operator`` (and records rewrites)
``rule_await``                ``not-awaited``
``rule_yield``                ``syntax``
(any other node kind)         ``node``, unless :data:`ADMITTED`
============================  =========================================

Default deny, as RestrictedPython does: a node kind with no rule of its own
runs only when :data:`ADMITTED` lists it; any other kind (a node a newer
Python adds, such as template strings) is refused with code ``node``.

Checks on the raw text come first (``too-long``, ``non-ascii``), then the
parse (``syntax``, ``too-deep``), then the walk. The walk also records what
the expression uses (allowlist names, local names, secret names) and the
rewrites to apply before compiling (operator rewriting, guarded ``**``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...bounds import DEFAULT_COMPREHENSION_DEPTH, DEFAULT_DEFINITION_LENGTH, DEFAULT_FOR_CLAUSES, MAX_AST_DEPTH
from ..errors import S2OError
from ..policy import stores
from ..policy.bounded import SIZED_METHODS
from ..policy.denylist import name_violation
from .parsing import check_text, parse
from .rewrites import CALL_GUARD, FSTRING_HELPER, KWARGS_GUARD, SIZED_HELPER, apply_rewrites, operator_rewrite

#: Names that are namespaces of the runtime, never locals (SPEC 5).
RESERVED_NAMES = frozenset({"agent", "conv", "sys", "const", "command", "result", "exc"})


#: Binary operator symbols by AST class (SPEC 3, operator rewriting).
OPERATOR_SYMBOLS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
}

_SECRET_KEY = "sys.secret must be subscripted with a literal string: sys.secret['NAME']"

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class RuleContext:
    """What the rules need to know about the surroundings of one expression.

    Attributes:
        allowlist_names: names the allowlist puts in scope.
        is_async_name: callable telling whether a dotted allowlist path
            (``"fetch"``, ``"helpers.fetch"``) is a granted async function.
        locals: names of locals set earlier, or ``None`` when unknown (then
            every other name counts as a local and ``unknown-name`` is not
            raised).
        sys_members: members of ``sys`` in this configuration.
        secrets: names of the secrets available.
        command_fields: fields the current command has set earlier, or
            ``None`` outside a command.
        operators: operator symbol → ``"on"``, ``"off"`` or a function name.
        max_comprehension_depth, max_for_clauses: SPEC 3 limits.
        definition_length: the ``too-long`` limit in characters.
        keeps_nothing: allowlist names bound to builtins that keep none of their arguments (:mod:`.stores`).
    """

    allowlist_names: frozenset[str] = frozenset()
    is_async_name: Callable[[str], bool] = lambda _path: False
    locals: frozenset[str] | None = None
    sys_members: frozenset[str] = frozenset({"inputs", "query", "secret", "exists"})
    secrets: frozenset[str] = frozenset()
    command_fields: frozenset[str] | None = None
    operators: dict[str, str] = field(default_factory=dict)
    max_comprehension_depth: int = DEFAULT_COMPREHENSION_DEPTH
    max_for_clauses: int = DEFAULT_FOR_CLAUSES
    definition_length: int = DEFAULT_DEFINITION_LENGTH
    keeps_nothing: frozenset[str] = frozenset()


@dataclass
class Checked:
    """The outcome of checking one expression.

    Attributes:
        source: the expression text.
        tree: the rewritten ``ast.Expression`` ready to compile, or ``None``
            when there are errors.
        errors: every refusal found, in source order.
        allowlist_names: allowlist names the expression uses.
        local_names: names that must come from locals.
        secrets: secret names read (``sys.secret['X']`` → ``X``).
        is_async: the expression contains ``await`` or an async comprehension.
        top_call: the whole expression is one call (awaited for you when it
            returns a coroutine, SPEC 6).
        call_at: line and column where the top call starts.
    """

    source: str
    tree: ast.Expression | None = None
    errors: list[S2OError] = field(default_factory=list)
    allowlist_names: set[str] = field(default_factory=set)
    local_names: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)
    is_async: bool = False
    top_call: bool = False
    call_at: tuple[int, int] = (1, 0)
    name_positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    may_run_long: bool = False  # calls or comprehensions: arm the time limit
    may_hold_objects: bool = False  # calls or generator expressions: check what the result holds


class _Item:
    """One node waiting in the walk's stack."""

    __slots__ = ("awaited", "bound", "comp_depth", "depth", "node", "parent")

    def __init__(self, node: Any, parent: ast.AST, depth: int, comp_depth: int, bound: frozenset[str],
                 awaited: bool = False) -> None:
        self.node = node
        self.parent = parent
        self.depth = depth
        self.comp_depth = comp_depth
        self.bound = bound
        self.awaited = awaited


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of Attribute nodes over a Name, else ``None``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _bound_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


#: Node kinds that need no rule of their own: plain values, containers, operators and contexts
#: whose children are checked by the rules. Every other kind without a rule is refused (``node``).
ADMITTED: frozenset[type] = frozenset({
    ast.Constant, ast.BoolOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Dict, ast.Set, ast.List, ast.Tuple,
    ast.Starred, ast.Slice, ast.FormattedValue, ast.comprehension,
    ast.Load, ast.Store, ast.Del,
    ast.And, ast.Or,
    ast.Invert, ast.Not, ast.UAdd, ast.USub,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    *OPERATOR_SYMBOLS,
})


class Validator:
    """Walks one parsed expression and applies every rule (see the module table); default deny."""

    def __init__(self, ctx: RuleContext, checked: Checked) -> None:
        self.ctx = ctx
        self.out = checked
        self.rewrites: list[tuple[Any, str, int | None, ast.AST, str]] = []
        self._stack: list[_Item] = []

    # -- reporting -------------------------------------------------------
    def error(self, code: str, message: str, node: ast.AST | None, details: dict[str, Any] | None = None) -> None:
        line = getattr(node, "lineno", None) if node is not None else None
        col = getattr(node, "col_offset", None) if node is not None else None  # the offending node (SPEC 11)
        self.out.errors.append(S2OError(code, message, line=line, col=col, stage="validate", source=self.out.source,
                                        details=details))

    # -- walk --------------------------------------------------------------
    def walk(self, tree: ast.Expression) -> None:
        """Visit every node of ``tree`` iteratively; errors go to ``self.out``."""
        body = tree.body
        if isinstance(body, ast.Call):
            self.out.top_call, self.out.call_at = True, (body.lineno, body.col_offset)
        self._stack.append(_Item(body, tree, 1, 0, frozenset(), awaited=isinstance(body, ast.Call)))
        while self._stack:
            item = self._stack.pop()
            node = item.node
            if item.depth > MAX_AST_DEPTH:
                self.error("too-deep", f"the expression nests deeper than {MAX_AST_DEPTH} levels", node)
                self._stack.clear()
                return
            rule = _RULES.get(type(node))
            if rule is None and type(node) not in ADMITTED:
                self.error("node", f"'{type(node).__name__}' is not part of the expression language", node)
                continue
            handled = rule(self, item) if rule is not None else False
            if not handled:
                self.push_children(item, node)

    def push_children(self, item: _Item, node: ast.AST, bound: frozenset[str] | None = None,
                      comp_depth: int | None = None) -> None:
        """Queue the child nodes of ``node`` (in source order)."""
        children = []
        for _name, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                children.append(value)
            elif isinstance(value, list):
                children.extend(v for v in value if isinstance(v, ast.AST))
        b = item.bound if bound is None else bound
        cd = item.comp_depth if comp_depth is None else comp_depth
        for child in reversed(children):
            self._stack.append(_Item(child, node, item.depth + 1, cd, b))

    def push(self, item: _Item, child: ast.AST, *, bound: frozenset[str] | None = None,
             comp_depth: int | None = None, awaited: bool = False, parent: ast.AST | None = None) -> None:
        """Queue one child of ``item.node`` (or of ``parent``, a node between them such as a comprehension clause)."""
        self._stack.append(
            _Item(child, item.node if parent is None else parent, item.depth + 1,
                  item.comp_depth if comp_depth is None else comp_depth,
                  item.bound if bound is None else bound, awaited)
        )

    # -- rules ---------------------------------------------------------------
    def rule_name(self, item: _Item) -> bool:
        """``underscore``, ``sys`` (bare sys) and ``unknown-name``."""
        node: ast.Name = item.node
        name = node.id
        if name.startswith("_"):
            self.error("underscore", f"names starting with '_' are not allowed: '{name}'", node)
            return True
        if not isinstance(node.ctx, ast.Load) or name in item.bound:
            return True
        if name == "sys":
            if not (isinstance(item.parent, ast.Attribute) and item.parent.value is node):
                self.error("sys", "'sys' can only be used as sys.<member>", node)
            return True
        if name in RESERVED_NAMES:
            return True
        self.out.name_positions.setdefault(name, (node.lineno, node.col_offset))
        locs = self.ctx.locals
        if locs is not None and name in locs:
            self.out.local_names.add(name)
        elif name in self.ctx.allowlist_names:
            self.out.allowlist_names.add(name)
        elif locs is None:
            self.out.local_names.add(name)
        else:
            self.error("unknown-name", f"'{name}' is not an argument, a variable set earlier, "
                       "a runtime namespace or an allowlist name", node, {"name": name})
        return True

    def rule_attribute(self, item: _Item) -> bool:
        """Name rules on ``.attr`` plus the ``sys`` and ``command`` namespaces."""
        node: ast.Attribute = item.node
        bad = name_violation(node.attr)
        if bad is not None:
            self.error(bad[0], bad[1], node)
        value = node.value
        if node.attr in SIZED_METHODS and isinstance(node.ctx, ast.Load):
            self.rewrites.append((item.parent, "", None, node, SIZED_HELPER))
        if isinstance(value, ast.Name) and value.id not in item.bound:
            if value.id == "sys":
                self._sys_member(item, node)
            elif value.id == "command":
                fields = self.ctx.command_fields or frozenset()
                if node.attr not in fields:
                    self.error("command-field", f"command.{node.attr} is not a field this command has set earlier",
                               node)
        self.push(item, value)
        return True

    def _sys_member(self, item: _Item, node: ast.Attribute) -> None:
        member = node.attr
        if member.startswith("_"):
            return  # already reported by the underscore rule
        if member not in self.ctx.sys_members:
            self.error("sys-member", f"sys.{member} does not exist in this configuration", node)
            return
        parent = item.parent
        if member == "secret":
            if not (isinstance(parent, ast.Subscript) and parent.value is node):
                self.error("secret-key", _SECRET_KEY, node)
        elif member == "exists" and not (isinstance(parent, ast.Call) and parent.func is node):
            self.error("sys", "sys.exists can only be called: sys.exists(scope, name)", node)

    def rule_subscript(self, item: _Item) -> bool:
        """``sys.secret['NAME']``: literal key (``secret-key``) that exists (``missing-secret``)."""
        node: ast.Subscript = item.node
        value = node.value
        if (isinstance(value, ast.Attribute) and value.attr == "secret" and isinstance(value.value, ast.Name)
                and value.value.id == "sys" and "sys" not in item.bound):
            key = node.slice
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                self.error("secret-key", _SECRET_KEY, node)
            elif key.value not in self.ctx.secrets:
                self.error("missing-secret", f"no secret named '{key.value}' is available", node)
            else:
                self.out.secrets.add(key.value)
            self.push(item, value)
            return True
        return False

    def rule_call(self, item: _Item) -> bool:
        """``call-target``: callee is a plain name or an attribute; ``not-awaited``."""
        node: ast.Call = item.node
        func = node.func
        self.out.may_run_long = True
        self.out.may_hold_objects = True
        if not isinstance(func, (ast.Name, ast.Attribute)):
            self.error("call-target", "only a name or an attribute can be called "
                       "(not the result of a call, subscript or other expression)", node)
        elif not item.awaited:
            path = _dotted(func)
            if path is not None and path.split(".")[0] not in item.bound and self.ctx.is_async_name(path):
                self.error("not-awaited", f"'{path}' is async: write 'await {path}(...)' here", node)
        for kw in node.keywords:
            if kw.arg is None:
                self._double_star(item, kw)
        guard = stores.guard_of(node, item.bound, self.ctx.allowlist_names, self.ctx.keeps_nothing)
        if guard is not None:  # it may keep a value the expression made: checked first, no metaclass either
            self.rewrites.append((node, "", None, node, guard))
        elif (len(node.args) + len(node.keywords) >= 3 or any(isinstance(a, ast.Starred) for a in node.args)
                or any(kw.arg is None for kw in node.keywords)):
            self.rewrites.append((node, "", None, node, CALL_GUARD))  # the shape of M(name, bases, namespace)
        self.push_children(item, node)
        return True

    def _double_star(self, item: _Item, kw: ast.keyword) -> None:
        value = kw.value
        if isinstance(value, ast.Dict):
            for key in value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    bad = name_violation(key.value)
                    if bad is not None:
                        self.error(bad[0], bad[1], key)
        self.rewrites.append((kw, "value", None, value, KWARGS_GUARD))

    def rule_keyword(self, item: _Item) -> bool:
        """``underscore`` (and ``format``/``attribute``) on keyword argument names."""
        node: ast.keyword = item.node
        if node.arg is not None:
            bad = name_violation(node.arg)
            if bad is not None and bad[0] == "underscore":
                self.error(bad[0], bad[1], node)
        return False

    def rule_lambda(self, item: _Item) -> bool:
        """``lambda``."""
        self.error("lambda", "lambda is not allowed", item.node)
        return True

    def rule_namedexpr(self, item: _Item) -> bool:
        """``walrus``."""
        self.error("walrus", "':=' is not allowed", item.node)
        self.push(item, item.node.target)
        return True

    def rule_comprehension(self, item: _Item) -> bool:
        """``comprehension-depth`` and ``comprehension-clauses``; binds targets."""
        node = item.node
        self.out.may_run_long = True  # a comprehension can loop: arm the time limit
        if isinstance(node, ast.GeneratorExp):
            self.out.may_hold_objects = True
        depth = item.comp_depth + 1
        if depth > self.ctx.max_comprehension_depth:
            self.error("comprehension-depth",
                       f"comprehensions are nested {depth} deep; the limit is {self.ctx.max_comprehension_depth}", node)
        if len(node.generators) > self.ctx.max_for_clauses:
            self.error("comprehension-clauses",
                       f"{len(node.generators)} 'for' clauses in one comprehension; "
                       f"the limit is {self.ctx.max_for_clauses}",
                       node)
        inner = set(item.bound)
        for gen in node.generators:
            if gen.is_async:
                self.out.is_async = True
            inner |= _bound_names(gen.target)
        inner_b = frozenset(inner)
        # the first iterable is evaluated outside the comprehension
        # (child, names bound, the node that holds it: rewrites replace the child there)
        first = node.generators[0]
        children: list[tuple[ast.AST, frozenset[str], ast.AST]] = [(first.iter, item.bound, first)]
        for i, gen in enumerate(node.generators):
            children.append((gen.target, inner_b, gen))
            if i:
                children.append((gen.iter, inner_b, gen))
            children.extend((c, inner_b, gen) for c in gen.ifs)
        if isinstance(node, ast.DictComp):
            children += [(node.key, inner_b, node), (node.value, inner_b, node)]
        else:
            children.append((node.elt, inner_b, node))
        for child, b, holder in reversed(children):
            self.push(item, child, bound=b, comp_depth=depth, parent=holder)
        return True

    def rule_binop(self, item: _Item) -> bool:
        """``operator`` for an operator turned off; records operator rewrites."""
        node: ast.BinOp = item.node
        symbol = OPERATOR_SYMBOLS[type(node.op)]
        setting = self.ctx.operators.get(symbol, "on")
        if setting == "off":
            self.error("operator", f"the operator '{symbol}' is turned off in this configuration", node)
        elif setting != "on":
            self.rewrites.append((item.parent, "", None, node, operator_rewrite(symbol, setting)))
        return False

    def rule_await(self, item: _Item) -> bool:
        """``not-awaited``: ``await`` applies to a call of an async function."""
        node: ast.Await = item.node
        self.out.is_async = True
        if not isinstance(node.value, ast.Call):
            self.error("not-awaited", "'await' must be followed by a call of an async function", node)
            self.push(item, node.value)
        else:
            self.push(item, node.value, awaited=True)
        return True

    def rule_joinedstr(self, item: _Item) -> bool:
        """f-strings: records the rewrite to the format helper (no refusal of its own)."""
        self.rewrites.append((item.parent, "", None, item.node, FSTRING_HELPER))
        return False

    def rule_yield(self, item: _Item) -> bool:
        """``syntax``: ``yield`` is a statement-level construct."""
        self.error("syntax", "'yield' is not allowed in an expression", item.node)
        return True


_RULES: dict[type, Callable[[Validator, _Item], bool]] = {
    ast.Name: Validator.rule_name,
    ast.Attribute: Validator.rule_attribute,
    ast.Subscript: Validator.rule_subscript,
    ast.Call: Validator.rule_call,
    ast.keyword: Validator.rule_keyword,
    ast.Lambda: Validator.rule_lambda,
    ast.NamedExpr: Validator.rule_namedexpr,
    ast.ListComp: Validator.rule_comprehension,
    ast.SetComp: Validator.rule_comprehension,
    ast.DictComp: Validator.rule_comprehension,
    ast.GeneratorExp: Validator.rule_comprehension,
    ast.BinOp: Validator.rule_binop,
    ast.Await: Validator.rule_await,
    ast.JoinedStr: Validator.rule_joinedstr,
    ast.Yield: Validator.rule_yield,
    ast.YieldFrom: Validator.rule_yield,
}


def check_expression(source: str, ctx: RuleContext) -> Checked:
    """Check one expression against every compile rule (SPEC 3).

    Returns a :class:`Checked`; when ``errors`` is empty, ``tree`` is the
    rewritten tree ready for ``compile``. Never raises for bad input: every
    problem, including ``RecursionError`` and ``MemoryError`` in the parser,
    becomes a coded error in ``errors``.
    """
    out = Checked(source=source)
    err = check_text(source, ctx.definition_length)
    if err is not None:
        out.errors.append(err)
        return out
    try:
        tree = parse(source)
    except S2OError as exc:
        out.errors.append(exc)
        return out
    validator = Validator(ctx, out)
    try:
        validator.walk(tree)
    except (RecursionError, MemoryError):  # pragma: no cover - the walk is iterative
        out.errors.append(S2OError("too-deep", "the expression is too large to check", stage="validate", source=source))
    if out.errors:
        out.errors.sort(key=lambda e: (e.line or 0, e.col or 0))
        return out
    apply_rewrites(tree, validator.rewrites)
    out.tree = tree
    return out
