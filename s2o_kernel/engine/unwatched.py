"""Which expressions may run without the watchdog, and what their tested functions check (SPEC 6, 12).

The watchdog (:mod:`.limits`) stops Python code: its exception lands at the next bytecode boundary of the
evaluating thread. An expression that runs no Python frame, no loop and a bounded number of C operations
over exact builtin values needs no watchdog; :func:`plan` decides which expressions can be made so by a
test of exact types at run time, and what that test is (``docs/performance.md``, "Method calls" and
"Operators are watched too"):

* every *name* whose value is used in a way that dispatches to its type's methods must hold one of the
  exact types that use allows (:data:`OPERAND_TYPES` for an operand, a truth test, an attribute read, a
  hash or a format; :data:`SUBSCRIBED_TYPES` for a value subscripted);
* every *item* a subscript gives that is itself used so (``items[numbers[42]]['name']``: the item of
  ``numbers`` is an index, the item of ``items`` is subscripted again) is tested where it is made, inside
  the expression's tested function (:mod:`.functions`), against the types its use allows;
* a call must be a C method of an exact builtin value (:data:`UNWATCHED_METHODS`) or the f-string's helper;
  never an operator's helper (:data:`.rewrites.OPERATOR_HELPERS`): the numeric fast path of ``*`` and ``%``
  runs natively on small numbers, and the tested function gives way where it would call the helper; at most
  :data:`MAX_UNWATCHED_OPERATIONS` operations, :data:`MAX_UNWATCHED_CALLS` method calls among them; no
  comprehension, ``await``, lambda or walrus.

A value only *carried* (an ``if``'s branch, a list item, the last operand of ``and``/``or``, the item a
subscript gives to the result) is not tested: nothing runs on it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from .rewrites import OPERATOR_HELPERS, SMALL_NUMBER

#: Methods that run no bytecode, by the exact receiver type they are safe for: C methods whose
#: arguments (``str``, ``int``, ``float``, ``bool``, ``None``) are read by C code alone, that call no
#: codec, iterate nothing given and look nothing up, and whose output is at most linear in their
#: inputs. Not here: the sized methods (``zfill``, ``center``…: rewritten to a bounded helper anyway),
#: ``replace``, ``join``, ``translate``, ``encode``, ``format``/``format_map`` (refused by the rules),
#: ``maketrans``, ``to_bytes``/``from_bytes``, the backward searches ``rfind``, ``rindex``, ``rpartition`` and
#: ``rsplit`` (CPython 3.11 searches backwards in O(n·m): 0.6 s for a 20 KB needle in 200 KB; red team of
#: 2026-12-04, fourth round; the forward ones are linear), and every method of a container (``list.sort``,
#: ``list.index``, ``dict.get`` compare or hash the items, which may run Python code).
UNWATCHED_METHODS: dict[type, frozenset[str]] = {
    str: frozenset({
        "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha", "isascii",
        "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle",
        "isupper", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "rstrip", "split",
        "splitlines", "startswith", "strip", "swapcase", "title", "upper"}),
    int: frozenset({"bit_length", "bit_count", "as_integer_ratio", "conjugate"}),
    bool: frozenset({"bit_length", "bit_count", "as_integer_ratio", "conjugate"}),
    float: frozenset({"is_integer", "as_integer_ratio", "conjugate", "hex"}),
}

#: Method name → the exact receiver types it runs no bytecode on.
_RECEIVERS: dict[str, frozenset[type]] = {}
for _kind, _names in UNWATCHED_METHODS.items():
    for _name in _names:
        _RECEIVERS[_name] = _RECEIVERS.get(_name, frozenset()) | {_kind}

#: Methods of :data:`UNWATCHED_METHODS` whose result is an exact ``str`` when the receiver is one, so
#: their call may be the receiver of another (``name.strip().lower()``).
STR_RESULTS = frozenset({"capitalize", "casefold", "lower", "lstrip", "removeprefix", "removesuffix", "rstrip",
                         "strip", "swapcase", "title", "upper"})

#: Exact types a name given as an argument must have; constants may also be ``None``.
ARGUMENT_TYPES = frozenset({str, int, float, bool})
_CONSTANT_TYPES = ARGUMENT_TYPES | {type(None)}
#: Exact types a value must have where it is operated on (an operand, iterated, hashed, formatted, tested
#: for truth, its attribute read, an index): their dunders are C and read nothing given but exact builtins.
#: Not ``None``: a name the allowlist gives is not in the globals the test reads, which say ``None`` for it.
OPERAND_TYPES = ARGUMENT_TYPES
#: Exact types a value must have where it is subscripted (``row['name']``, ``xs[0]``): the lookup hashes and
#: compares the key, an exact scalar, in C (a stored key's own ``__eq__`` runs only on a hash collision, once
#: per colliding key the dict was built with). The item is carried, or tested where it is made.
SUBSCRIBED_TYPES = OPERAND_TYPES | {list, tuple, dict}
#: The same types where a value is sliced (a copy: linear in its length, so a name or item used so is *sized*,
#: :attr:`Plan.sized`); a set of its own, told from :data:`SUBSCRIBED_TYPES` by identity, so that a value carried
#: to the slice (an ``if``'s branch, the last operand of ``and``/``or``) is sized too (red team of 2026-12-04,
#: seventh round: ``(c and s)[::-1]`` eight times ran 1.7 s past a 1 s limit and returned a value).
SLICED_TYPES = frozenset(list(SUBSCRIBED_TYPES))  # not frozenset(SUBSCRIBED_TYPES): that is the same object

#: Exact types a name must have as an operand of a numeric fast path (``a * b if <small numbers> else
#: helper(a, b)``, :func:`.rewrites._rewrite_numeric`) run unwatched: its native operation on an int within
#: the rewrite's test or a float is constant time. The helper is never called unwatched: a bounded operator's
#: C work grows faster than its operands (a remainder of a 10**6-bit int by a 5 * 10**5-bit one takes ~0.35
#: s, 32 of them ~12 s), and on a ``str`` ``bounded_mod`` checks the widths by a Python loop over the text.
FAST_OPERAND_TYPES = frozenset({int, float})
#: Most operations (operators, calls, comparisons, subscripts, truth tests) an expression run without the
#: watchdog may hold: each may be one C call over a long value, and a chain of them (``s.count('x') == 0 and
#: …``, ``s + s + …``) would otherwise run as many as the definition length allows, past the time limit.
MAX_UNWATCHED_OPERATIONS = 32
#: Most method calls among them: each is one C call over a value of any length (``s.split()`` of 10 MB takes
#: ~0.14 s, ``s.upper()`` of 40 M characters ~1 s). Armed, the watchdog's exception lands after the call during
#: which the time ran out; unwatched, every call runs (24 splits ran 3 s past a 0.5 s limit: red team of
#: 2026-12-04, third round; four ``upper()`` of 40 M characters 3 s past a 1 s limit with four allowed: fifth
#: round). With one call at most, an unwatched run passes the limit by no more than an armed one does.
MAX_UNWATCHED_CALLS = 1

#: Exact types whose operations take time linear in the value's length (a concatenation, a comparison, a
#: method, a format, a slice): a name or item of these, used so, must also be shorter than
#: :data:`UNWATCHED_SIZE` to run unwatched (:func:`.functions.tested_code` tests ``len``), so that the
#: operations an unwatched run may hold end within milliseconds: 30 ``+`` of a 10 M-character text and one
#: ``upper()`` ran 2.4 s past a 1 s limit and returned a value from the second run, where the first run, armed,
#: timed out at the call (red team of 2026-12-04, sixth round). Indexing one is constant time: not tested.
SIZED_TYPES = frozenset({str, list, tuple, dict})
#: Length below which a value of :data:`SIZED_TYPES` runs unwatched (items or characters).
UNWATCHED_SIZE = 100_000

#: Pairs of ``(name, exact types)``: what :func:`plan` asks of the names an expression reads.
Needs = tuple[tuple[str, frozenset[type]], ...]


@dataclass(frozen=True)
class Plan:
    """What must hold for an expression to run unwatched (:func:`plan`).

    ``needs``: ``(name, exact types)`` pairs, one per name whose value is used, tested before the expression
    runs. ``tests``: ``(node, exact types)`` pairs, one per subscript (a node of the tree planned) whose item
    is used, tested where the item is made (:func:`.functions.tested_code`).
    """

    needs: Needs
    tests: tuple[tuple[ast.Subscript, frozenset[type]], ...]
    #: The names, and the indexes of :attr:`tests`, whose value is used in a way that takes time linear in its
    #: length (anything but being indexed): tested shorter than :data:`UNWATCHED_SIZE` when of :data:`SIZED_TYPES`.
    sized: frozenset[str] = frozenset()
    sized_items: frozenset[int] = frozenset()


def plan(tree: ast.AST, helpers: frozenset[str] = frozenset()) -> Plan | None:
    """The :class:`Plan` that lets the compiled (rewritten) ``tree`` run no bytecode the watchdog could stop,
    or ``None`` when no test of types could do (then the time limit is armed).

    ``helpers`` are the hidden names the engine binds to its own helpers: the f-string's helper and test, which
    may be called on used values, and the bounded operators with a numeric fast path (``*`` and ``%``:
    :data:`.rewrites.NUMERIC_SAFE`), whose helper never runs unwatched: their fast path (``a * b if <a and b
    are small numbers> else helper(a, b)``, every such operator of an expression's function) is planned as its
    native operation on names of :data:`FAST_OPERAND_TYPES` or small number constants, and
    :func:`.functions.tested_code` makes its call of the helper give way (``Unsure``); a call of such a helper
    (the same operator at the top level of an ``eval``'d expression) is planned as the fast path its
    function form has. Any other operator's helper (``**``, ``<<``) is not planned. A call must be
    ``name.method(args)`` with ``method`` in :data:`UNWATCHED_METHODS` for the receiver's type (``name`` may
    also be such a call of a method of :data:`STR_RESULTS`: ``name.strip().lower()``), no ``*``/``**``, every
    argument a constant (``str``, ``int``, ``float``, ``bool``, ``None``) or a name of :data:`ARGUMENT_TYPES`.
    Any other hidden name, call, comprehension, ``await``, lambda or walrus, or more than
    :data:`MAX_UNWATCHED_OPERATIONS` operations: ``None``.

    An expression with item tests but no name to test (``[[1]][0][0]``) is ``None``: ``()`` says that nothing
    in the expression dispatches to any value's methods (``Compiled.simple``)."""
    walk = _Walk(helpers)
    if (not walk.value(getattr(tree, "body", tree), None) or not all(walk.needs.values())
            or walk.operations > MAX_UNWATCHED_OPERATIONS or walk.calls > MAX_UNWATCHED_CALLS
            or (walk.tests and not walk.needs)):
        return None
    return Plan(tuple(walk.needs.items()), tuple(walk.tests), frozenset(walk.sized), frozenset(walk.sized_items))


def needs(tree: ast.AST, helpers: frozenset[str] = frozenset()) -> Needs | None:
    """:attr:`Plan.needs` of :func:`plan` (``()``: nothing dispatches; ``None``: no plan)."""
    found = plan(tree, helpers)
    return None if found is None else found.needs


#: Nodes whose every operand is operated on, by the fields that hold them.
_OPERATED: dict[type, tuple[str, ...]] = {
    ast.BinOp: ("left", "right"), ast.UnaryOp: ("operand",), ast.Compare: ("left", "comparators"),
    ast.Attribute: ("value",), ast.Starred: ("value",), ast.Set: ("elts",), ast.Slice: ("lower", "upper", "step"),
    ast.JoinedStr: ("values",), ast.FormattedValue: ("value", "format_spec"),
}
#: Operators whose C work on two ints grows faster than their operands (a quotient or remainder of two big ints
#: is quadratic), when the settings leave them native (``//`` always): never unwatched, so that a second run
#: behaves as the first (red team of 2026-12-04, third round: 12 ``a // b`` of big ints).
_SUPERLINEAR = (ast.FloorDiv, ast.Mod, ast.Mult, ast.Pow, ast.LShift, ast.MatMult)
#: Every type a listed method is listed for.
_RECEIVERS_ANY = frozenset(UNWATCHED_METHODS)


def _hidden(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id.startswith("_")


def numeric_fast_path(node: ast.AST) -> bool:
    """Whether ``node`` is the numeric fast path :func:`.rewrites._rewrite_numeric` made: its ``orelse`` calls
    the helper with the very operand nodes of its ``body`` (no parsed expression shares nodes so)."""
    if not isinstance(node, ast.IfExp):
        return False
    call, native = node.orelse, node.body
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and _hidden(call.func)
            and isinstance(native, ast.BinOp) and len(call.args) == 2 and not call.keywords
            and call.args[0] is native.left and call.args[1] is native.right)


class _Walk:
    """One run of :func:`plan`: what it asks of names and items so far, and the helpers it allows."""

    def __init__(self, helpers: frozenset[str]) -> None:
        self.needs: dict[str, frozenset[type]] = {}
        self.tests: list[tuple[ast.Subscript, frozenset[type]]] = []
        self.helpers = helpers
        #: Operations seen so far (see :data:`MAX_UNWATCHED_OPERATIONS`).
        self.operations = 0
        #: Method calls seen so far (see :data:`MAX_UNWATCHED_CALLS`).
        self.calls = 0
        #: Names and item tests used in a way linear in the value's length (see :attr:`Plan.sized`).
        self.sized: set[str] = set()
        self.sized_items: set[int] = set()
        self.kinds: dict[type, Any] = {
            ast.Constant: lambda node, used: True,
            ast.Name: self.name, ast.List: self.display, ast.Tuple: self.display, ast.Dict: self.dict,
            ast.IfExp: self.if_exp, ast.BoolOp: self.bool_op, ast.Subscript: self.subscript,
            ast.Call: lambda node, used: self.call(node, _RECEIVERS_ANY),
        }

    def need(self, name: str, kinds: frozenset[type]) -> None:
        self.needs[name] = self.needs.get(name, kinds) & kinds

    def value(self, node: ast.AST, used: frozenset[type] | None) -> bool:
        """Whether ``node`` qualifies; ``used``: the exact types its value may have where it is used
        (``None``: carried, not used)."""
        if not isinstance(node, (ast.Constant, ast.Name, ast.List, ast.Tuple)):
            self.operations += len(node.ops) if isinstance(node, ast.Compare) else (
                len(node.values) - 1 if isinstance(node, ast.BoolOp) else 1)
        kind = self.kinds.get(type(node))
        if kind is not None:
            return bool(kind(node, used))
        fields = _OPERATED.get(type(node))
        if fields is None or (isinstance(node, ast.BinOp) and isinstance(node.op, _SUPERLINEAR)):
            return False  # a comprehension, await, lambda, walrus, a node kind not listed: armed
        return all(self.value(n, OPERAND_TYPES) for n in _children(node, fields))

    def name(self, node: ast.Name, used: frozenset[type] | None) -> bool:
        if node.id.startswith("_"):
            return node.id in self.helpers
        if used is not None:
            self.need(node.id, used)
            if used is not SUBSCRIBED_TYPES:  # operated on, not only indexed
                self.sized.add(node.id)
        return True

    def display(self, node: ast.List | ast.Tuple, used: frozenset[type] | None) -> bool:
        # items carried, or operated on with it (compared, hashed, iterated)
        inner = None if used is None else OPERAND_TYPES
        return all(self.value(e, inner) for e in node.elts)

    def dict(self, node: ast.Dict, used: frozenset[type] | None) -> bool:  # keys are hashed; a ``**`` mapping is read
        inner = None if used is None else OPERAND_TYPES
        return all(self.value(v, OPERAND_TYPES) if k is None else self.value(k, OPERAND_TYPES) and self.value(v, inner)
                   for k, v in zip(node.keys, node.values, strict=True))

    def if_exp(self, node: ast.IfExp, used: frozenset[type] | None) -> bool:
        if numeric_fast_path(node):  # its native operation on small numbers; its helper never (Unsure)
            native, call = node.body, node.orelse
            assert isinstance(native, ast.BinOp) and isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            return call.func.id in self.helpers and self.fast_operand(native.left) and self.fast_operand(native.right)
        return self.value(node.test, OPERAND_TYPES) and self.value(node.body, used) and self.value(node.orelse, used)

    def bool_op(self, node: ast.BoolOp, used: frozenset[type] | None) -> bool:  # the last operand is carried
        return all(self.value(n, OPERAND_TYPES) for n in node.values[:-1]) and self.value(node.values[-1], used)

    def subscript(self, node: ast.Subscript, used: frozenset[type] | None) -> bool:
        within = SLICED_TYPES if isinstance(node.slice, ast.Slice) else SUBSCRIBED_TYPES
        if not (self.value(node.value, within) and self.value(node.slice, OPERAND_TYPES)):
            return False
        if used is not None:  # the item is used: tested where it is made
            if used is not SUBSCRIBED_TYPES:
                self.sized_items.add(len(self.tests))
            self.tests.append((node, used))
        return True

    def call(self, node: ast.Call, within: frozenset[type]) -> bool:
        """Whether the call ``node`` qualifies, its receiver being of one of ``within``."""
        func = node.func
        if isinstance(func, ast.Name) and func.id in OPERATOR_HELPERS:  # planned as its function form's fast path
            return (func.id in self.helpers and not node.keywords and len(node.args) == 2
                    and all(self.fast_operand(a) for a in node.args))
        if isinstance(func, ast.Name):  # the f-string's helper or test, on operated-on values
            return (func.id in self.helpers and not node.keywords
                    and all(not isinstance(a, ast.Starred) and self.value(a, OPERAND_TYPES) for a in node.args))
        if not isinstance(func, ast.Attribute) or any(kw.arg is None for kw in node.keywords):
            return False
        kinds = _RECEIVERS.get(func.attr, frozenset()) & within
        self.calls += 1
        return bool(kinds) and self.receiver(func.value, kinds) and self.arguments(node)

    def fast_operand(self, node: ast.AST) -> bool:
        """Whether ``node`` is an operand a numeric fast path is made for: a number constant within
        :data:`.rewrites.SMALL_NUMBER`, or a name (then asked to hold an exact number)."""
        if isinstance(node, ast.Constant):
            value = node.value
            return type(value) in FAST_OPERAND_TYPES and isinstance(value, (int, float)) and abs(value) < SMALL_NUMBER
        if isinstance(node, ast.Name) and not _hidden(node):
            self.need(node.id, FAST_OPERAND_TYPES)
            return True
        return False

    def receiver(self, node: ast.AST, kinds: frozenset[type]) -> bool:
        if isinstance(node, ast.Call):  # a chain: the link's result is a str if its receiver is one
            self.operations += 1
            link = node.func
            return (str in kinds and isinstance(link, ast.Attribute) and link.attr in STR_RESULTS
                    and self.call(node, frozenset({str})))
        if isinstance(node, ast.Name) and not _hidden(node):
            self.need(node.id, kinds)
            self.sized.add(node.id)
            return True
        return False

    def arguments(self, node: ast.Call) -> bool:
        for arg in [*node.args, *(kw.value for kw in node.keywords)]:
            if isinstance(arg, ast.Name) and not _hidden(arg):
                self.need(arg.id, ARGUMENT_TYPES)
                self.sized.add(arg.id)
            elif not (isinstance(arg, ast.Constant) and type(arg.value) in _CONSTANT_TYPES):
                return False
        return True


def _children(node: ast.AST, fields: tuple[str, ...]) -> list[ast.AST]:
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, list):
            out.extend(value)
        elif value is not None:
            out.append(value)
    return out
