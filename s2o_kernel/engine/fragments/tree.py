"""The parsed form of a fragment (SPEC 7): commands, functions, programs, and the signals that unwind them.

:func:`~.parser.parse_fragment` builds these; :mod:`.interpreter` runs them. The signals are raised by
commands (``break``, ``continue``, ``return``, ``end``, ``fail``) and caught by the loop, function or run
that they end; they never leave a run. Also here, for the parser, the interpreter and the commands alike:
the argument types a function may declare (:data:`TYPES`) and the error codes ``onError`` does not
handle (:data:`UNHANDLED`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import S2OError
from ..language.references import Expr
from .dataflow import Dataflow

#: Argument types a function may declare (SPEC 7).
ARG_TYPES = ("str", "int", "float", "bool", "list", "dict", "any")

#: SPEC 7 argument types: name → test of a value.
TYPES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, (list, tuple)),
    "dict": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


def type_name(value: Any) -> str:
    """The SPEC 7 type name of a value (``str``, ``int``, …), else the Python type's name."""
    for name in ("bool", "int", "float", "str", "list", "dict"):
        if (name != "float" and TYPES[name](value)) or (name == "float" and isinstance(value, float)):
            return name
    return type(value).__name__


@dataclass
class Command:
    """One parsed command.

    Attributes:
        name: the command's name (a key of the command registry).
        fields: its raw fields as written (``onError`` removed).
        path: its JSON path (``functions.main.commands[2].var``).
        children: named command lists (``then``, ``else``, ``commands``).
        branches: ``parallel``'s command lists.
        on_error: the ``onError`` command list, or ``None``.
        model: what the command's parser made of its fields (a pydantic model, a target table, …).
        output_path: the parsed ``outputPath`` (SPEC 8) of a command that produces a result, or ``None``.
        sync: the command runs as a plain function (``CommandSpec.run_sync``): none of its expressions
            awaits and every command inside it (children, ``onError``) is sync; set by the parser.
        atomic: the command changes variables at most once, as its last step (a ``var`` of one
            field), so when it fails there is nothing to restore: the interpreter takes no snapshot.
    """

    name: str
    fields: Any
    path: str
    children: dict[str, list[Command]] = field(default_factory=dict)
    branches: list[list[Command]] = field(default_factory=list)
    on_error: list[Command] | None = None
    model: Any = None
    output_path: Expr | None = None
    sync: bool = False
    atomic: bool = False


def all_sync(commands: list[Command] | None) -> bool:
    """True when every command of ``commands`` (``None``: no list) is sync."""
    return commands is None or all(c.sync for c in commands)


@dataclass
class Function:
    """A parsed function: argument name → type, default values, body, ``on_error``, JSON path."""

    name: str
    args: dict[str, str]
    defaults: dict[str, Any]
    commands: list[Command]
    on_error: list[Command] | None
    path: str


@dataclass
class Program:
    """A parsed fragment: its kind (``command``, ``commands``, ``function``, ``agent``), the function to
    run, the functions ``call`` can reach, its data flow (SPEC 8) and an agent definition's ``bounds``
    (SPEC 7.1: ``time`` seconds, ``cost`` dollars; :mod:`.definition_bounds`)."""

    kind: str
    body: Function
    functions: dict[str, Function]
    dataflow: Dataflow = field(default_factory=Dataflow)
    bounds: dict[str, float] = field(default_factory=dict)


#: Errors that ``onError`` does not handle: they end the run.
UNHANDLED = frozenset({"timedOut", "stopped", "loop-limit", "cost-limit", "memory-limit", "row-limit",
                       "output-limit", "ask"})


class Break(Exception):
    """``break``: ends the innermost loop."""


class Continue(Exception):
    """``continue``: ends the innermost loop's pass."""


class Return(Exception):
    """``return``: ends the function with ``value``."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


class End(Exception):
    """``end``: ends the run with success."""


class Fail(Exception):
    """``fail``: ends the run with code ``failCommand`` and ``error``."""

    def __init__(self, error: S2OError) -> None:
        super().__init__()
        self.error = error


def join(base: str, key: str) -> str:
    """The JSON path of ``key`` under ``base`` (``[i]`` keys attach without a dot)."""
    if key.startswith("["):
        return base + key
    return f"{base}.{key}" if base else key
