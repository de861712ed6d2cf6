"""The shape of the code (issue 7): the map in docs/design.md, module sizes, complexity, import graph."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "s2o_kernel"
MODULES = sorted(PACKAGE.rglob("*.py"))
#: Longest module, in lines ("small enough to read in one sitting").
MAX_LINES = 700
#: Highest cyclomatic complexity of a function (radon's measure).
MAX_COMPLEXITY = 20


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {_name(p): p for p in MODULES}


def test_the_scan_sees_the_package() -> None:
    assert {"s2o_kernel.engine.run.session", "s2o_kernel.kernel.kernel", "s2o_kernel.engine.commands.var"} <= set(NAMES)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_small(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_no_function_is_too_complex() -> None:
    found = []
    for path in MODULES:
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                found.append(f"{path.relative_to(ROOT)}:{block.lineno} {block.name} ({block.complexity})")
    assert found == []


def test_the_design_map_names_every_module() -> None:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    start = text.index("## Where things live")
    tree = text[start:text.index("```", text.index("```", start) + 3)]
    missing = []
    for path in MODULES:
        if path.name == "__init__.py" and path.parent != PACKAGE / "engine":
            continue  # a package's own line names it
        if path.name not in tree:
            missing.append(str(path.relative_to(ROOT)))
    for folder in ("kernelspec/", "language/", "policy/", "run/", "commands/", "fragments/", "worker/", "confine/",
                   "magics/"):
        assert folder in tree
    assert missing == []


def _imports(source: str, name: str, *, package: bool) -> set[str]:
    """Modules of the package that the module ``name`` (``package``: an ``__init__.py``) imports anywhere in
    ``source``: at its top, inside functions and methods, and under ``if TYPE_CHECKING:`` alike. Importing
    ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, unless they are ancestors of the module itself
    (those are already being imported when it runs)."""
    here = name.split(".")
    base_package = here if package else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*base_package[: len(base_package) - node.level + 1], *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    ancestors = {".".join(here[:i]) for i in range(1, len(here))}
    closed = set()
    for imported in found:
        parts = imported.split(".")
        closed.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {n for n in closed if n in NAMES and n != name and n not in ancestors}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import circle per knot of ``graph`` (module -> modules it imports): for each strongly connected
    component of more than one module, the shortest path from its first module back to itself
    (``[a, b, c, a]``); ``[]`` when the graph has no circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    knots: list[set[str]] = []

    def connect(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            knot = {stack.pop()}
            while module not in knot:
                knot.add(stack.pop())
            if len(knot) > 1 or module in graph[module]:
                knots.append(knot)

    for module in sorted(graph):
        if module not in index:
            connect(module)
    found = []
    for knot in knots:
        first = min(knot)
        paths = {first: [first]}
        queue = [first]
        while queue:  # breadth first, inside the knot: the shortest way back to ``first``
            module = queue.pop(0)
            if first in graph[module]:
                found.append([*paths[module], first])
                break
            for imported in sorted(graph[module] & knot):
                if imported not in paths:
                    paths[imported] = [*paths[module], imported]
                    queue.append(imported)
    return sorted(found)


def test_the_cycle_finder_finds_circles() -> None:
    """The finder itself: a circle of three, a module importing itself, and a graph with none."""
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"a", "e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_every_import_counts() -> None:
    """An import inside a function, a method or ``if TYPE_CHECKING:`` is an edge like one at the top."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import errors\n"
        "if TYPE_CHECKING:\n"
        "    from .run.engine import Engine\n"
        "def f():\n"
        "    from .fragments.parser import parse_fragment\n"
        "class C:\n"
        "    def m(self):\n"
        "        import s2o_kernel.engine.run.session\n"
    )
    found = _imports(source, "s2o_kernel.engine.settings", package=False)
    assert found == {"s2o_kernel.engine.errors", "s2o_kernel.engine.run.engine", "s2o_kernel.engine.fragments",
                     "s2o_kernel.engine.fragments.parser", "s2o_kernel.engine.run", "s2o_kernel.engine.run.session"}


def test_no_import_cycle() -> None:
    """No module of the package imports, through any chain of imports (every import counts: at the top,
    in a function, under ``if TYPE_CHECKING``), a module that imports it back. A circle is opened by
    moving the shared piece down (a protocol, a base module), never by hiding an import in a function."""
    graph = {name: _imports(path.read_text(encoding="utf-8"), name, package=path.name == "__init__.py")
             for name, path in NAMES.items()}
    assert "s2o_kernel.engine.fragments.tree" in graph["s2o_kernel.engine.commands.var"]
    assert [" -> ".join(cycle) for cycle in _cycles(graph)] == []


def test_engine_imports_nothing_from_the_kernel_or_jupyter() -> None:
    banned = re.compile(r"^(ipykernel|jupyter_client|jupyter_core|zmq|nbformat|IPython|s2o_kernel\.kernel)\b")
    for name, path in NAMES.items():
        if not name.startswith("s2o_kernel.engine"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                assert not any(banned.match(a.name) for a in node.names), name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                assert not banned.match(node.module), name


# -- every numeric bound in one module (s2o_kernel/bounds.py) ---------------------------------------------

BOUNDS = PACKAGE / "bounds.py"
#: Modules whose numbers are another system's, not bounds: the Linux kernel's ABI (syscall numbers, prctl
#: options, seccomp, BPF and Landlock values) and the pixels of a drawing's layout.
NOT_BOUNDS_MODULES = {
    "s2o_kernel.engine.confine": "Linux ABI values",
    "s2o_kernel.engine.confine.landlock": "Landlock syscall numbers, rule types, access and scope bits",
    "s2o_kernel.engine.confine.process": "prctl options and the capability header's version",
    "s2o_kernel.engine.confine.seccomp": "BPF opcodes, seccomp return values, flags, argument offsets",
    "s2o_kernel.engine.confine.syscalls": "syscall numbers and audit architectures",
    "s2o_kernel.engine.fragments.dataflow_svg": "drawing metrics of the data-flow SVG, in pixels",
    "s2o_kernel.engine.fragments.otlp": "OTLP's span kinds and status codes (opentelemetry.proto.trace.v1)",
}
#: Names whose numbers are not bounds, each with why: a protocol constant, a sentinel, a heuristic's parameter.
NOT_BOUNDS = {
    ("s2o_kernel.engine.outside.cassette", "FORMAT"): "the cassette file's format version (SPEC 13)",
    ("s2o_kernel.engine.fragments.trace", "VERSION"): "the trace schema's version (SPEC 14)",
    ("s2o_kernel.engine.policy.denylist", "_TYPE_SUBCLASS_FLAG"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.guards", "_STR"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.guards", "_DICT"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.iterators", "_HEAP_TYPE_FLAG"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.kept", "_HEAP_TYPE"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.parts", "_LIST_FLAG"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.parts", "_TUPLE_FLAG"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.policy.parts", "_DICT_FLAG"): "a bit of CPython's tp_flags",
    ("s2o_kernel.engine.outside.db", "_SQLITE_READONLY"): "a SQLite result code",
    ("s2o_kernel.engine.outside.db", "_SQLITE_TOOBIG"): "a SQLite result code",
    ("s2o_kernel.engine.worker.launch", "_PR_SET_NAME"): "a prctl option",
    ("s2o_kernel.engine.policy.stores", "RECEIVER"): "a sentinel key (the callee's receiver)",
    ("s2o_kernel.engine.spelling", "CUTOFF"): "a similarity ratio of a heuristic, not a limit",
}


def _numeric_constants(source: str, known: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """``(name, line)`` of each numeric constant that ``source`` defines outside functions: an assignment at
    module level (any name), or of an UPPER_CASE name in a class body (a lower-case one there is a field's
    starting value: ``count: int = 0``), whose value is an int or float literal (not a bool), arithmetic of
    such values (``64 << 20``, ``int(2_000 * 3.32)``, ``1 << JSON_INT_BITS``), or the name of a numeric
    constant defined above it or in ``known`` (an alias: ``LIMIT = MAX_MESSAGE`` defines the bound again
    under another name). Tuple targets count each name (``FONT, CHAR = 13, 8``)."""
    found: list[tuple[str, int]] = []
    seen = set(known)

    def numeric(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return type(node.value) in (int, float)
        if isinstance(node, ast.UnaryOp):
            return numeric(node.operand)
        if isinstance(node, ast.BinOp):
            return numeric(node.left) and numeric(node.right)
        if isinstance(node, ast.Tuple):
            return bool(node.elts) and all(numeric(e) for e in node.elts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float"):
            return len(node.args) == 1 and numeric(node.args[0])
        return isinstance(node, ast.Name) and node.id in seen

    def scan(body: list[ast.stmt], in_class: bool) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                scan(node.body, in_class=True)
                continue
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            names = [e.id for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])
                     if isinstance(e, ast.Name) and (not in_class or e.id.isupper())]
            if names and numeric(value):
                found.extend((name, node.lineno) for name in names)
                seen.update(names)

    scan(ast.parse(source).body, in_class=False)
    return found


def test_the_bound_finder_finds_bounds() -> None:
    source = (
        "A = 5\nB: float = 0.5\nC = 64 << 20\nD = int(A * 3.32)\nE = C\nF, G = 1, 2\nH = -1\n"
        "NOT_A = True\nNOT_B = 'text'\nNOT_C = frozenset({1})\nI = MAX_MESSAGE\n"
        "class K:\n    J = 3\n    not_e: int = 0\n"
        "def f():\n    NOT_D = 4\n"
    )
    found = [name for name, _ in _numeric_constants(source, frozenset({"MAX_MESSAGE"}))]
    assert found == ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]


def test_every_bound_is_in_the_bounds_module() -> None:
    """No module but ``s2o_kernel/bounds.py`` defines a numeric bound. The rule: every numeric constant
    (:func:`_numeric_constants`: a number, arithmetic of numbers, or an alias of a numeric constant, at module
    level or in a class body) is a bound, unless its module's numbers are another system's
    (:data:`NOT_BOUNDS_MODULES`) or it is one of :data:`NOT_BOUNDS`, each with its reason. A module that needs
    a bound imports it from ``s2o_kernel.bounds`` under the same name."""
    bounds = frozenset(name for name, _ in _numeric_constants(BOUNDS.read_text(encoding="utf-8")))
    found = []
    for name, path in NAMES.items():
        if path == BOUNDS or name in NOT_BOUNDS_MODULES:
            continue
        for constant, line in _numeric_constants(path.read_text(encoding="utf-8"), bounds):
            if (name, constant) not in NOT_BOUNDS:
                found.append(f"{path.relative_to(ROOT)}:{line} {constant}")
    assert found == [], "define these in s2o_kernel/bounds.py (or list them in NOT_BOUNDS, with why)"
    for name, constant in NOT_BOUNDS:  # every exemption still names a constant that exists
        assert constant in dict(_numeric_constants(NAMES[name].read_text(encoding="utf-8"))), (name, constant)


def test_the_bounds_module_stands_alone() -> None:
    """``bounds.py`` imports nothing (any module may import it, the kernel's engine-free start among them),
    defines each bound once, and says above each what it bounds, in which unit and why."""
    source = BOUNDS.read_text(encoding="utf-8")
    tree = ast.parse(source)
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    lines = source.splitlines()
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
            assert lines[node.lineno - 2].startswith("#: "), f"bounds.py:{node.lineno} has no '#:' comment"
    assert len(names) == len(set(names))
    assert set(names) == {name for name, _ in _numeric_constants(source)}  # nothing but numeric bounds


def test_the_policy_table_names_every_policy_module() -> None:
    """``engine/policy/__init__.py`` states the whole policy (``POLICY``): each row names a module of the folder,
    and each module of the folder has a row."""
    from s2o_kernel.engine.policy import POLICY

    folder = PACKAGE / "engine" / "policy"
    modules = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    named = {rule.module for rule in POLICY}
    assert named == modules
    assert all(rule.stage in ("load", "compile", "run") and rule.what and rule.spec for rule in POLICY)


def test_the_engine_folder_shows_the_layers() -> None:
    """The language, the policy and the run each have a folder; only the package's shared pieces stay flat: the
    codes, the error type, the settings and the near-miss rule every error message about a key uses."""
    flat = {p.name for p in (PACKAGE / "engine").glob("*.py")}
    assert flat == {"__init__.py", "codes.py", "errors.py", "settings.py", "spelling.py"}
