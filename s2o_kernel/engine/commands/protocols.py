"""The fragment parser and the interpreter as a command sees them (typing.Protocol; SPEC 7).

A command (:class:`~.spec.CommandSpec`) checks its fields with a :class:`Parser` and runs with an
:class:`Interpreter`. The real ones, :class:`..fragments.parser.Parser` and
:class:`..fragments.interpreter.Interpreter`, dispatch through the registry (:mod:`.registry`), which imports
every command; the commands name only these protocols, so they sit below the parser and the interpreter and
import neither. A loop's fast path (:mod:`..fragments.fastpath`) sees the interpreter the same way.

Each protocol lists what the commands and the fast path use, nothing more; mypy checks that the real
parser and interpreter have it wherever they are handed to a command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from ..errors import S2OError
from ..fragments.trace import Tracer
from ..fragments.tree import Command, Function, Program
from ..language.compiled import Compiled
from ..run.budget import OutputBudget
from ..run.engine import Engine
from ..run.execution import Execution
from ..run.scopes import ErrorView
from ..run.state import SessionState, Snapshot
from ..settings import Limits

#: One command's step in a loop's sync body: runs it in ``namespace`` with ``exc`` reading ``view``
#: (:mod:`..fragments.fastpath`).
Step = Callable[[dict[str, Any], ErrorView | None], None]


class Parser(Protocol):
    """What a command's ``parse`` uses of the fragment parser (:class:`..fragments.parser.Parser`)."""

    #: The engine the fragment is checked against.
    engine: Engine
    #: Every problem found so far (a command may add its own).
    errors: list[S2OError]
    #: Function name → the functions it calls, with the JSON path of each call (for call cycles).
    calls: dict[str, list[tuple[str, str]]]
    #: The name of the function being parsed.
    current: str

    def access(self, mode: str, data: str, path: str, via: str, when: str = "") -> None:
        """Record a read or write of ``data`` (SPEC 8)."""

    def error(self, code: str, message: str, path: str) -> None:
        """Record a problem at the JSON ``path``."""

    def model(self, cls: type[BaseModel], data: Any, path: str) -> Any:
        """``data`` checked against the fields model ``cls``, or ``None`` after recording its problems."""

    def value(self, raw: Any, path: str, known: set[str], fields: list[str] | None = None) -> None:
        """Check a dynamic value (its expressions, with the names ``known``)."""

    def name(self, name: str | None, path: str) -> None:
        """Check a name a command sets."""

    def no_fields(self, cmd: Command, fields: Any) -> Command | None:
        """``cmd`` when ``fields`` is empty (``{}``, ``null``, ``true``), else ``None`` after an error."""

    def commands(self, raw: Any, path: str, known: set[str], in_loop: bool) -> list[Command]:
        """A nested command list, parsed."""


class Interpreter(Protocol):
    """What a command's runners and the loop fast path use of the interpreter
    (:class:`..fragments.interpreter.Interpreter`)."""

    session: SessionState
    execution: Execution
    program: Program
    #: When the run began (``time.monotonic()`` seconds).
    start: float
    logs: list[str]
    limits: Limits
    output_budget: OutputBudget
    parallel_depth: int
    current_path: str | None
    fast: dict[int, tuple[Engine, list[Command], list[Step]]]
    #: The run's trace as it is recorded (SPEC 14), ``None`` when the session keeps none.
    tracer: Tracer | None

    async def value(self, raw: Any, path: str, fields: dict[str, Any] | None = None) -> Any:
        """A dynamic value, evaluated."""

    def value_sync(self, raw: Any, path: str, fields: dict[str, Any] | None = None) -> Any:
        """:meth:`value` for a sync command."""

    def compiled_for(self, text: str, path: str, fields: dict[str, Any] | None) -> Compiled | None:
        """The compiled expression of a dynamic string, or ``None`` for plain text."""

    async def truth(self, raw: Any, path: str) -> bool:
        """The truth of a dynamic value."""

    def truth_sync(self, raw: Any, path: str) -> bool:
        """:meth:`truth` for a sync command."""

    def truth_of(self, value: Any, path: str) -> bool:
        """``bool(value)``; a failing ``__bool__`` is ``runtime`` at ``path``."""

    def emit(self, part: dict[str, Any]) -> None:
        """Charge an output part to the run's budget and hand it on."""

    async def outside(self, kind: str, profile: str | None, fields: dict[str, Any], path: str,
                      timeout: float | None = None) -> Any:
        """Make one outside call through the session's door (SPEC 7.1)."""

    def check_time(self, path: str) -> None:
        """Raise ``timedOut`` when the run has passed its time limit."""

    def add_spend(self, dollars: float, path: str) -> None:
        """Add a model call's price to the run's spend (``cost-limit`` past the bound)."""

    async def block(self, commands: list[Command]) -> None:
        """Run a command list, one level deeper."""

    def block_sync(self, commands: list[Command]) -> None:
        """:meth:`block` for a list of sync commands."""

    def command_sync(self, cmd: Command) -> None:
        """Run one sync command the general way."""

    def recover_sync(self, cmd: Command, raised: S2OError | RecursionError, snap: Snapshot | None) -> None:
        """What follows a sync command's failure (state restored, ``onError``)."""

    def write_output(self, cmd: Command, value: Any, *, failed: bool) -> bool:
        """Write ``value`` to ``cmd``'s ``outputPath`` targets (SPEC 8)."""

    async def call(self, fn: Function, args: dict[str, Any], path: str, site: str, call_id: str | None = None) -> Any:
        """Run ``fn`` with fresh locals holding ``args``; its return value. ``site`` names the caller in the call
        chain of an error raised inside (``details["calls"]``, outermost first); ``call_id``, a model's tool
        call's id, makes its span a ``tool`` span."""

    async def branch(self, index: int, path: str, commands: list[Command]) -> None:
        """Run ``parallel``'s branch ``index`` (at ``path``), in a span of its own."""
