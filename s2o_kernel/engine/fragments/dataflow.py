"""The data flow of a fragment (SPEC 8): every path it reads and writes, and where.

The fragment parser records one :class:`Access` per path a field reads or writes, in document order:

* ``reference``: each reference of a reference expression in an input field (read);
* ``expression``: the variables an expression reads: locals, ``agent.x``, ``conv.x``, ``sys.inputs``
  (with its literal key, ``sys.query`` as ``sys.inputs.query``) and ``result`` (read);
* ``var``: each ``var`` target (write);
* ``loop``: the ``item`` and ``index`` names of a ``for`` loop (write);
* ``result``: ``result`` itself, written by every command that produces one (``db``, ``api``, ``llm``,
  ``ask``, ``call``; SPEC 7) when it succeeds, before its ``outputPath`` copies it;
* ``outputPath``: each target of a result-producing command's ``outputPath`` (write), ``when``
  ``"on success"`` or ``"on failure"`` for the two alternatives of ``ok || failed``;
* ``ask``: each ``sys.inputs.NAME`` an ``ask`` adds its answer to (write, SPEC 7).

Paths are written in the reference notation without the dagger: ``local.total``, ``agent.cart['items'][0]``,
``sys.inputs.city``, ``result``. A :class:`Dataflow` is plain data (it crosses the worker's pipe as
:meth:`Dataflow.to_dict`) and draws itself as a text listing (:meth:`Dataflow.text`), as a graph in text
(:meth:`Dataflow.graph`) and as SVG (:meth:`Dataflow.svg`, drawn by :mod:`.dataflow_svg`): data paths on
the left and right, the commands that read and write them in between.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import asdict, dataclass, field
from typing import Any

from ...bounds import READS_CACHE
from ..language.references import Ref
from . import dataflow_svg

#: How an access came about (see the module doc).
VIAS = ("reference", "expression", "var", "loop", "result", "outputPath", "ask")
#: When an ``outputPath`` target is written: always, or one of its two alternatives.
WHENS = ("", "on success", "on failure")
#: The first line of :meth:`Dataflow.graph`: how to read it.
GRAPH_LEGEND = "data flow: paths read --> [command] --> paths written (..+ read by an expression)"
#: What :meth:`Dataflow.graph` and :meth:`Dataflow.svg` say of a fragment that reads and writes no path.
NO_FLOW = "data flow: none (the fragment reads and writes no path)"


@dataclass(frozen=True, slots=True)
class Access:
    """One path read or written.

    Attributes:
        mode: ``"read"`` or ``"write"``.
        data: the path, in the reference notation without the dagger (``conv.userInput``).
        command: the JSON path of the command (``functions.main.commands[0].call``).
        field: the JSON path of the field (``functions.main.commands[0].call.args.city``).
        via: one of :data:`VIAS`.
        when: ``""``, or ``"on success"`` / ``"on failure"`` for an ``outputPath``'s alternatives.
    """

    mode: str
    data: str
    command: str
    field: str
    via: str
    when: str = ""


@dataclass
class Dataflow:
    """Every :class:`Access` of a fragment, in document order."""

    accesses: list[Access] = field(default_factory=list)

    @property
    def reads(self) -> list[str]:
        """The paths read, sorted, each once."""
        return sorted({a.data for a in self.accesses if a.mode == "read"})

    @property
    def writes(self) -> list[str]:
        """The paths written, sorted, each once."""
        return sorted({a.data for a in self.accesses if a.mode == "write"})

    def to_dict(self) -> dict[str, Any]:
        """``{"reads": [...], "writes": [...], "accesses": [{mode, data, command, field, via, when}, ...]}``."""
        return {"reads": self.reads, "writes": self.writes, "accesses": [asdict(a) for a in self.accesses]}

    def commands(self) -> list[str]:
        """The JSON paths of the commands that read or write, in document order, each once."""
        return list(dict.fromkeys(a.command for a in self.accesses))

    def text(self) -> str:
        """A plain-text listing: what the fragment reads and writes, then each command's accesses."""
        lines = [f"reads:  {', '.join(self.reads) or '(nothing)'}",
                 f"writes: {', '.join(self.writes) or '(nothing)'}"]
        for command in self.commands():
            lines.append("")
            lines.append(command or "(the fragment)")
            for a in (x for x in self.accesses if x.command == command):
                arrow = "<-" if a.mode == "read" else "->"
                where = a.field[len(command):].lstrip(".") if a.field.startswith(command) else a.field
                note = ", ".join(x for x in (a.via, "" if where == a.via else where, a.when) if x)
                lines.append(f"  {arrow} {a.data}  ({note})")
        return "\n".join(lines)

    def graph(self) -> str:
        """The flowchart as plain text for a terminal (``jupyter console``, the ``text/plain`` of
        ``%dataflow``'s result): a legend line, then one block per command in document order, the paths it
        reads on the left, the command in brackets, the paths it writes on the right::

            conv.userInput --+--> [var] --+--> local.x
            agent.default  --+            +--> agent.seen
            local.x        ..+

        ``..+`` is a read by an expression (the SVG's dashed arrow); an ``outputPath``'s
        alternatives are ``+-- on success --> path`` and ``+-- on failure --> path``. Each path shows once
        per command and way; the read paths of all blocks share one column width. Deterministic: the
        same fragment gives the same text.
        """
        blocks = self._blocks()
        if not blocks:
            return NO_FLOW
        width = max((len(data) for _, reads, _ in blocks for data, _ in reads), default=0)
        lines = [GRAPH_LEGEND]
        for command, reads, writes in blocks:
            lines.append("")
            lines.extend(_graph_block(f"[{command}]", reads, writes, width))
        return "\n".join(lines)

    def svg(self, label: dataflow_svg.Label = str) -> str:
        """The flowchart as an SVG document (the ``image/svg+xml`` of ``%dataflow``'s result), laid out
        like :meth:`graph`: one block per command in document order, top to bottom, its reads in rounded
        boxes on the left, the command in a box, its writes on the right; a read by an expression is a
        dashed arrow, an ``outputPath``'s alternatives are labelled ``on success`` / ``on failure``. A
        fragment with no path gets a small SVG saying :data:`NO_FLOW`.

        Every label goes through ``label`` before it is XML-escaped: the kernel passes its redactor, so a
        secret value (even one with ``<`` or ``&`` in it) never reaches the document. No script, event
        handler, ``<foreignObject>`` or reference of any kind; deterministic. The structure, sizes and
        safety rules are in :mod:`.dataflow_svg`.
        """
        blocks = self._blocks()
        return dataflow_svg.draw(blocks, label) if blocks else dataflow_svg.message(NO_FLOW, label)

    def _blocks(self) -> list[dataflow_svg.Block]:
        """One block per command in document order, for :meth:`graph` and :meth:`svg`: the command's label,
        its reads as ``(path, by an expression)`` and its writes as ``(path, when)``, each path once per
        command and way."""
        blocks: list[dataflow_svg.Block] = []
        for command in self.commands():
            mine = [a for a in self.accesses if a.command == command]
            reads = list(dict.fromkeys((a.data, a.via == "expression") for a in mine if a.mode == "read"))
            writes = list(dict.fromkeys((a.data, a.when) for a in mine if a.mode == "write"))
            blocks.append((command or "(the fragment)", reads, writes))
        return blocks


def _graph_block(box: str, reads: list[tuple[str, bool]], writes: list[tuple[str, str]], width: int) -> list[str]:
    """The lines of one command in :meth:`Dataflow.graph`: ``reads`` as ``(path, by an expression)``,
    ``writes`` as ``(path, when)``, the read paths padded to ``width``; the command on the first line."""
    lines = []
    for i in range(max(len(reads), len(writes), 1)):
        left = ""
        if reads:
            left = (f"{reads[i][0]:<{width}} {'..+' if reads[i][1] else '--+'}" if i < len(reads)
                    else " " * (width + 4)) + ("--> " if i == 0 else "    ")
        right = ""
        if i < len(writes):
            data, when = writes[i]
            right = (" --" if i == 0 else "   ") + (f"+-- {when} --> " if when else "+--> ") + data
        lines.append((left + (box if i == 0 else " " * len(box)) + right).rstrip())
    return lines


def ref_path(scope: str, items: tuple[Any, ...]) -> str:
    """The path of ``scope`` and ``items`` in the reference notation (``agent.cart['my key'][0]``)."""
    return Ref(scope, tuple(items)).text()


def expression_reads(source: str, local_names: set[str]) -> list[str]:
    """The paths an expression reads (see the module doc); ``local_names`` are its names from locals.

    A pure function of its arguments, cached (a fragment run again is parsed again)."""
    return list(_reads(source, frozenset(local_names)))


@functools.lru_cache(maxsize=READS_CACHE)
def _reads(source: str, local_names: frozenset[str]) -> tuple[str, ...]:
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        path = _scope_read(node)
        if path is not None:
            found.append(path)
            continue
        if isinstance(node, ast.Name) and node.id == "result":
            found.append("result")
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    found.extend(f"local.{name}" for name in sorted(local_names) if name != "result")
    return tuple(dict.fromkeys(found))


def _scope_read(node: ast.AST) -> str | None:
    """``agent.x``, ``conv.x``, ``sys.inputs[...]``, ``sys.inputs`` or ``sys.query`` read by ``node``."""
    if isinstance(node, ast.Subscript) and _is_attr(node.value, "sys", "inputs") \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return ref_path("sys.inputs", (node.slice.value,))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in ("agent", "conv"):
            return ref_path(node.value.id, (node.attr,))
        if node.value.id == "sys" and node.attr in ("inputs", "query"):
            return "sys.inputs" if node.attr == "inputs" else ref_path("sys.inputs", ("query",))
    return None


def _is_attr(node: ast.AST, base: str, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id == base
