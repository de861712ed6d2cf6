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
MAX_LINES = 500
#: Highest cyclomatic complexity of a function (radon's measure).
MAX_COMPLEXITY = 20


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {_name(p): p for p in MODULES}


def test_the_scan_sees_the_package() -> None:
    assert {"s2o_kernel.engine.session", "s2o_kernel.kernel.kernel", "s2o_kernel.engine.commands.var"} <= set(NAMES)


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
    for folder in ("kernelspec/", "commands/", "fragments/", "worker/", "confine/", "magics/"):
        assert folder in tree
    assert missing == []


def _top_level_imports(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports when it is imported (not inside functions or
    ``if TYPE_CHECKING``); importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, unless
    they are ancestors of ``path`` itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    ancestors = {".".join(here[:i]) for i in range(1, len(here))}
    closed = set()
    for name in found:
        parts = name.split(".")
        closed.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    # a module's own ancestors are already being imported when it runs: they add no edge
    return {n for n in closed if n in NAMES and n != _name(path) and n not in ancestors}


def test_no_import_cycle() -> None:
    graph = {name: _top_level_imports(path) for name, path in NAMES.items()}
    assert "s2o_kernel.engine.fragments.tree" in graph["s2o_kernel.engine.commands.var"]
    done: set[str] = set()

    def visit(module: str, stack: list[str]) -> None:
        assert module not in stack, " -> ".join([*stack[stack.index(module):], module])
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*stack, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


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
