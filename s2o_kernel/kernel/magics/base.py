"""What every magic is made of (SPEC 9.1): :class:`Magic`, :class:`MagicCall`, :class:`Registry`.

A magic lives in its own module whose docstring is its ``%help`` text (metakernel's pattern):
the first line is the summary ``%lsmagic`` shows, the rest is the usage. The module ends with
``MAGIC = Magic(name, __doc__, line=..., cell=..., parser=...)``; the package's ``__init__``
lists every ``MAGIC`` in the :class:`Registry`.

A handler takes one :class:`MagicCall` and shows what it produces through the call's
:class:`MagicContext` (the cell runner). It raises ``S2OError``: ``magic`` for a wrong use,
``syntax`` for an argument that is not JSON, and the engine's own codes unchanged.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from s2o_kernel.bounds import MAX_NEAR_MISSES
from s2o_kernel.engine import RunResult, S2OError, near_misses
from s2o_kernel.kernel.cells import CELL_MAGIC, Cell, valid_magic_name
from s2o_kernel.kernel.contract import Prompt, SessionLike
from s2o_kernel.kernel.history import HistoryLike
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser

#: IPython's magics a notebook person reaches for, and what does it here: the magics (named when they
#: exist) and a note for what no magic does (a cell's ``;``, an error's own text).
HABITS: dict[str, tuple[tuple[str, ...], str]] = {
    "whos": (("vars", "who"), ""),
    "hist": (("history",), ""),
    "who_ls": (("vars", "who"), ""),
    "debug": (("trace", "validate"), "an error shows its code, the expression with a caret under the column "
                                      "and the JSON path of the command"),
    "pdb": (("trace", "validate"), "an error shows its code, the expression with a caret and the command's path"),
    "tb": (("trace",), "an error shows its code, the expression with a caret and the command's path"),
    "xmode": (("trace",), "an error shows its code and position, never Python frames"),
    "capture": ((), "a trailing ';' runs a cell and shows no result, as in IPython"),
    "prun": (("timeit", "time"), ""),
    "load": (("run",), ""),
    "store": (("state",), ""),
    "save": (("state", "history"), ""),
    "env": (("sys", "config", "profiles"), ""),
    "reset_selective": (("reset",), ""),
    "pip": ((), "the kernel installs nothing: %%allowlist grants the functions cells may call"),
    "conda": ((), "the kernel installs nothing: %%allowlist grants the functions cells may call"),
    "matplotlib": ((), "an output command shows html or a png/jpeg image"),
}

Handler = Callable[["MagicCall"], None]
"""``handler(call)``: runs one magic cell."""


class MagicContext(Protocol):
    """What a magic needs of the cell runner: the session, display, and the state magics share."""

    #: Warnings of the settings in use that the person has seen (a settings magic shows only new ones).
    known_warnings: set[str]
    #: The front end's password prompt for this cell (``%secret``), or ``None``.
    getpass: Prompt | None
    #: The last fragment a cell ran (``%dataflow`` with no argument), or ``None``.
    last_fragment: Any
    #: The kernel's input history (``%history``), or ``None`` when it keeps none.
    history: HistoryLike | None
    #: How results show (``%display``): ``"plain"`` (text/plain, and a table for rows) or ``"json"``
    #: (also application/json).
    display: str
    #: Whether a run shows its trace after it (``%trace on``, SPEC 14).
    trace_after: bool

    @property
    def last_trace(self) -> dict[str, Any] | None:
        """The last fragment run's trace (SPEC 14; ``%trace``), or ``None``."""
        ...

    def require_session(self) -> SessionLike:
        """The session; raises ``S2OError("unexpected")`` when the engine did not start."""
        ...

    def redact(self, text: str) -> str:
        """``text`` with secret values replaced by ``***``."""
        ...

    def as_json(self, value: Any) -> Any:
        """``value`` as JSON, or ``None``."""
        ...

    def fragment_kind(self, obj: Any) -> str | None:
        """The kind of fragment ``obj`` is (SPEC 7), or ``None``."""
        ...

    def fragment_hint(self, obj: Any) -> str | None:
        """Why ``obj``, JSON that is not a fragment, looks like a misspelled one, or ``None``."""
        ...

    def emit_result(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        """Show ``data`` (a mime bundle) as the cell's result."""
        ...

    def emit_display(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        """Show ``data`` (a mime bundle) as display data, before the cell's result."""
        ...

    def emit_stream(self, name: str, text: str) -> None:
        """Write ``text`` to the cell's ``stdout`` or ``stderr`` stream."""
        ...

    def emit_warnings(self, warnings: list[str]) -> None:
        """Show each warning as a ``warning: ...`` line on ``stderr``."""
        ...

    def show_value(self, value: Any) -> None:
        """Show a value as the cell's result (``None`` shows nothing)."""
        ...

    def show_run(self, run: RunResult) -> None:
        """Show a run's output parts, log lines and value; raise its error when it did not succeed."""
        ...

    def run_fragment(
        self, data: Any, *, inputs: dict[str, Any] | None = None, function: str | None = None
    ) -> RunResult:
        """Run a fragment, showing its output parts as they come."""
        ...


def help_doc(doc: str | None) -> str:
    """A magic module's docstring as help text (indentation removed); empty when there is none."""
    return inspect.cleandoc(doc or "")


@dataclass(frozen=True)
class Magic:
    """One magic: ``name``, ``doc`` (its module's docstring), handlers and argument parser.

    ``line`` handles ``%name ...`` and ``cell`` handles ``%%name ...`` (``None``: no such form).
    ``parser`` reads the argument as shell-like words; its usage line opens the help text.
    """

    name: str
    doc: str | None
    line: Handler | None = None
    cell: Handler | None = None
    parser: MagicArgumentParser | None = None

    @property
    def summary(self) -> str:
        """The first line of the help text (what ``%lsmagic`` shows)."""
        return help_doc(self.doc).partition("\n")[0].strip()

    @property
    def usage(self) -> str:
        """The help text after the summary: the parser's usage line, then the docstring's usage."""
        rest = help_doc(self.doc).partition("\n")[2].strip("\n")
        if self.parser is None:
            return rest
        return self.parser.format_usage().strip() + ("\n" + rest if rest else "")

    def help_text(self) -> str:
        """``%help NAME``: the forms (``%name / %%name``), the summary and the usage."""
        forms = [f"%{self.name}"] if self.line is not None else []
        if self.cell is not None:
            forms.append(f"%%{self.name}")
        return f"{' / '.join(forms)}: {self.summary}\n\n{self.usage}"


@dataclass(frozen=True)
class MagicCall:
    """One use of a magic: the context, the magic, and what the cell gave it.

    ``arg`` is the text after the magic's name (for a line magic the rest of the cell, for a cell
    magic the rest of the first line); ``body`` the following lines without comment lines (``""``
    for a line magic) and ``raw_body`` those lines exactly as written.
    """

    ctx: MagicContext
    magic: Magic
    arg: str
    body: str
    raw_body: str
    registry: Registry

    @property
    def text(self) -> str:
        """The argument and the body joined (a magic that takes one text accepts either form)."""
        return "\n".join(p for p in (self.arg.strip(), self.body.strip()) if p).strip()

    def no_argument(self) -> None:
        """Raise ``magic`` when the magic, which takes no argument, was given one."""
        if self.text:
            raise S2OError("magic", f"%{self.magic.name} takes no argument.")

    def words(self) -> argparse.Namespace:
        """The argument read by the magic's parser (``magic`` when it does not fit)."""
        if self.magic.parser is None:  # a programming error: the magic declares no parser
            raise S2OError("unexpected", f"%{self.magic.name} has no argument parser.")
        return self.magic.parser.parse_words(self.text)


class Registry:
    """Every magic by name: what ``%lsmagic`` lists, ``%help`` explains and a magic cell runs."""

    def __init__(self, magics: Iterable[Magic]) -> None:
        self._magics = {magic.name: magic for magic in magics}

    def get(self, name: str) -> Magic | None:
        """The magic called ``name``, or ``None``."""
        return self._magics.get(name)

    def line_names(self) -> list[str]:
        """Names of the magics with a line form, sorted."""
        return sorted(n for n, m in self._magics.items() if m.line is not None)

    def cell_names(self) -> list[str]:
        """Names of the magics with a cell form, sorted."""
        return sorted(n for n, m in self._magics.items() if m.cell is not None)

    def known_hint(self) -> str:
        """One sentence naming every magic, for error messages."""
        names = ", ".join(f"%{n}" for n in sorted(self._magics))
        return f"Known magics: {names} (%lsmagic lists them)."

    def closest(self, name: str) -> str:
        """What to use here for the unknown magic ``name``: IPython's habits (:data:`HABITS`) and the
        magics whose names are near misses of it (the engine's one rule, ``near_misses``), as one sentence
        (``Closest: %vars, %who.``);
        ``""`` when there is none. A habit's magic that is not registered is not named."""
        habit_names, habit_note = HABITS.get(name.lower(), ((), ""))
        near = near_misses(name, self._magics, n=MAX_NEAR_MISSES)
        names = [f"%{n}" for n in dict.fromkeys([*habit_names, *near]) if n in self._magics][:MAX_NEAR_MISSES]
        if not names and not habit_note:
            return ""
        listed = ", ".join(names) if names else habit_note
        note = f" ({habit_note})" if names and habit_note else ""
        return f"Closest: {listed}{note}."

    def lsmagic_text(self) -> str:
        """``%lsmagic``: the line magics, then the cell magics, each with its summary."""
        width = max(len(n) for n in self._magics) + 4
        lines = ["Line magics:"]
        lines.extend(f"  %{name:<{width}}{self._magics[name].summary}" for name in self.line_names())
        lines.append("Cell magics:")
        lines.extend(f"  %%{name:<{width - 1}}{self._magics[name].summary}" for name in self.cell_names())
        lines.append("%help NAME explains one magic.")
        return "\n".join(lines)

    def run(self, ctx: MagicContext, cell: Cell) -> None:
        """Run a classified magic cell (``cells.LINE_MAGIC`` or ``cells.CELL_MAGIC``).

        Raises ``S2OError("magic")`` for a name that is not a magic's, an unknown magic, or a
        cell form of a magic that has only a line form; the handler's own errors pass through.
        """
        name = cell.magic or ""
        is_cell = cell.kind == CELL_MAGIC
        prefix = "%%" if is_cell else "%"
        if not valid_magic_name(name):
            raise S2OError("magic", f"{prefix}{name} is not a magic name. {self.known_hint()}", stage="validate")
        magic = self.get(name)
        if magic is None:
            closest = self.closest(name)
            raise S2OError("magic", f"Unknown magic {prefix}{name}.{' ' + closest if closest else ''} "
                                    f"{self.known_hint()}", stage="validate")
        handler = magic.cell if is_cell else magic.line
        if handler is None and is_cell:
            raise S2OError("magic", f"%%{name} is not a cell magic; use %{name} on a line of its own.")
        if handler is None:
            raise S2OError("magic", f"%{name} is a cell magic only; start the cell with %%{name}.")
        body, raw_body = (cell.body, cell.raw_body) if is_cell else ("", "")
        handler(MagicCall(ctx, magic, cell.arg, body, raw_body, self))
