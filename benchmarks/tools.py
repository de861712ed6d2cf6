"""The expression evaluators the engine section compares, each configured to run what it can (issue 12).

The data, the twelve expressions and every third-party configuration follow
``../shared/notes/perf-anchors.md`` ("Method"). Each tool is an :class:`Evaluator` with

* ``prepare(src)`` → a prepared object (compiled code, parsed tree…), raising when the tool refuses;
* ``hot_stmt`` — a ``timeit`` statement evaluating the prepared object ``p`` (names in ``ns``);
* ``cold(src)`` → the value of a source never seen before (parse, check, compile, run).

A tool whose result differs from CPython's ``eval`` for an expression is ``n/a`` for it; where a
library rejects a generator expression, the list form (``sum([...])``) is tried and marked ``†``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DATA: dict[str, Any] = {
    "price": 12.5,
    "quantity": 3,
    "items": [{"name": f"n{i}", "paid": i % 2 == 0, "amount": float(i)} for i in range(100)],
    "numbers": list(range(100)),
    "name": "Ada",
    "city": "Oslo",
    "temperature": 7,
}

SUITE: dict[str, str] = {
    "arith": "price * quantity",
    "fstring": "f'{city}: {temperature}'",
    "listcomp": "[n * n for n in numbers]",
    "dictcomp": "{i['name']: i['amount'] for i in items}",
    "filtsum": "sum(i['amount'] for i in items if i['paid'])",
    "join": "', '.join(sorted(i['name'] for i in items if i['paid']))",
    "subscr": "items[numbers[42]]['name'][0]",
    "cond": "'hot' if temperature > 25 else ('mild' if temperature > 10 else 'cold')",
    "builtins": "len(numbers) + min(numbers) + max(numbers)",
    "strmeth": "name.upper()",
    "boolean": "(price > 10 and quantity >= 3) or (city == 'Bergen' and not temperature < 0)",
    "nested": "[[r * c for c in numbers[:10]] for r in numbers[:10]]",
}

#: The list forms tried where a library rejects a generator expression.
LIST_FORMS = {
    "filtsum": "sum([i['amount'] for i in items if i['paid']])",
    "join": "', '.join(sorted([i['name'] for i in items if i['paid']]))",
}

#: The builtins every compiled tool grants (the anchors' ``ALLOW``, 20 names).
ALLOW_NAMES = ("len", "min", "max", "sum", "sorted", "abs", "all", "any", "bool", "dict", "enumerate", "filter",
               "float", "int", "list", "map", "range", "reversed", "round", "str")
ALLOW = {n: getattr(builtins, n) for n in ALLOW_NAMES}


@dataclass
class Evaluator:
    """One tool: how it prepares, evaluates hot (a timeit statement on ``p``) and evaluates cold."""

    name: str
    prepare: Callable[[str], Any]
    hot_stmt: str
    cold: Callable[[str], Any]
    ns: dict[str, Any] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


def raw() -> Evaluator:
    """CPython's floor: ``eval`` of code compiled once, against globals built once; cold ``eval(source)``."""
    g = {"__builtins__": ALLOW, **DATA}
    return Evaluator("eval", lambda s: compile(s, "<expr>", "eval"), "eval(p, g)",
                     lambda s: eval(s, g), {"g": g})


class _OneCall:
    """The least any evaluator with a Python-level entry point pays: one method call around ``eval``."""

    def __init__(self) -> None:
        self.codes: dict[str, Any] = {}
        self.g = {"__builtins__": ALLOW, **DATA}

    def prepare(self, src: str) -> str:
        self.codes[src] = compile(src, "<expr>", "eval")
        return src

    def evaluate(self, src: str) -> Any:
        return eval(self.codes[src], self.g)


def one_call() -> Evaluator:
    """Hot only: ``obj.evaluate(src)`` = a dict lookup and ``eval`` in a method (the anchors' DIY hot path)."""
    ref = _OneCall()
    return Evaluator("eval in a method", ref.prepare, "ref.evaluate(p)", ref.evaluate, {"ref": ref})


def raw_ast() -> Evaluator:
    """Cold reference: ``ast.parse`` then ``compile(tree)`` and ``eval``, no checking."""
    import ast

    g = {"__builtins__": ALLOW, **DATA}
    return Evaluator("parse+compile", lambda s: compile(ast.parse(s, mode="eval"), "<expr>", "eval"), "eval(p, g)",
                     lambda s: eval(compile(ast.parse(s, mode="eval"), "<expr>", "eval"), g), {"g": g})


def s2o(*, guard: bool = False) -> Evaluator:
    """``Session.evaluate(source)`` on the kernel's default configuration: hot on the compile cache, cold on a
    new source (``guard``: guarded code, as when the allowlist grants a host object)."""
    from s2o_kernel.engine import Engine, Session, default_settings

    session = Session(Engine(default_settings(), guard=guard), locals=DATA)

    def prepare(src: str) -> str:
        session.evaluate(src)
        return src

    return Evaluator("s2o-guarded" if guard else "s2o", prepare, "session.evaluate(p)", session.evaluate,
                     {"session": session})


def s2o_isolated() -> Evaluator:
    """``IsolatedSession.evaluate``: the worker round trip the kernel pays per cell (hot only)."""
    from s2o_kernel.engine import IsolatedSession, default_settings

    iso = IsolatedSession(default_settings())
    iso.run_fragment({"var": dict(DATA)})

    def prepare(src: str) -> str:
        iso.evaluate(src)
        return src

    return Evaluator("s2o-isolated", prepare, "iso.evaluate(p)", iso.evaluate, {"iso": iso}, iso.close)


def simpleeval() -> Evaluator:
    """simpleeval's ``EvalWithCompoundTypes`` (comprehensions), the parsed tree reused when hot."""
    import simpleeval as se

    functions = {**se.DEFAULT_FUNCTIONS, "len": len, "min": min, "max": max, "sum": sum, "sorted": sorted}
    ev = se.EvalWithCompoundTypes(names=dict(DATA), functions=functions)
    return Evaluator("simpleeval", lambda s: (s, ev.parse(s)), "ev.eval(p[0], previously_parsed=p[1])",
                     ev.eval, {"ev": ev})


def asteval() -> Evaluator:
    """asteval's ``Interpreter``, ``run(node)`` on the parsed tree when hot (the parse-reuse path)."""
    import asteval as ae

    ev = ae.Interpreter(user_symbols=dict(DATA))

    def prepare(src: str) -> Any:
        node = ev.parse(src)
        ev.run(node)
        if ev.error:
            msg = ev.error[0].get_error()
            ev.error = []
            raise RuntimeError(msg)
        return node

    def cold(src: str) -> Any:
        ev.error = []  # a refused expression leaves its error behind; later runs would return None
        return ev.run(ev.parse(src))

    return Evaluator("asteval", prepare, "ev.run(p)", cold, {"ev": ev})


def restrictedpython() -> Evaluator:
    """RestrictedPython ``compile_restricted_eval``, identity iteration and item guards, ``safer_getattr``."""
    from RestrictedPython import compile_restricted_eval, safe_builtins
    from RestrictedPython.Eval import default_guarded_getitem, default_guarded_getiter
    from RestrictedPython.Guards import safer_getattr

    rb = {**safe_builtins, "sum": sum, "min": min, "max": max, "sorted": sorted}
    rg = {"__builtins__": rb, "_getiter_": default_guarded_getiter, "_getitem_": default_guarded_getitem,
          "_getattr_": safer_getattr, **DATA}

    def prepare(src: str) -> Any:
        result = compile_restricted_eval(src)
        if result.errors:
            raise RuntimeError("; ".join(result.errors))
        return result.code

    return Evaluator("RestrictedPython", prepare, "eval(p, rg)", lambda s: eval(prepare(s), rg), {"rg": rg})


def evalidate() -> Evaluator:
    """evalidate ``Expr`` with a model allowing the suite's nodes, functions and attributes."""
    from evalidate import EvalModel, Expr

    nodes = ["Expression", "Constant", "Name", "Load", "Store", "BinOp", "Mult", "Add", "Sub", "Compare", "Gt",
             "GtE", "Lt", "Eq", "BoolOp", "And", "Or", "UnaryOp", "Not", "IfExp", "Subscript", "Slice", "Call",
             "Attribute", "ListComp", "DictComp", "GeneratorExp", "comprehension", "JoinedStr", "FormattedValue",
             "List"]
    model = EvalModel(nodes=nodes, allowed_functions=["len", "min", "max", "sum", "sorted"],
                      attributes=["upper", "join"])
    g = {"__builtins__": ALLOW, **DATA}
    return Evaluator("evalidate", lambda s: Expr(s, model=model), "p.eval(g)",
                     lambda s: Expr(s, model=model).eval(g), {"g": g})


#: Every tool of the engine section, by constructor; ``eval`` is the floor.
HOT_TOOLS = (raw, one_call, s2o, lambda: s2o(guard=True), s2o_isolated, simpleeval, asteval, restrictedpython,
             evalidate)
COLD_TOOLS = (raw, raw_ast, s2o, simpleeval, asteval, restrictedpython, evalidate)
