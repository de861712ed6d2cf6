"""What a fragment command declares (SPEC 7): its name, fields model, parser and runner.

A command is one module of :mod:`s2o_kernel.engine.commands` that builds a :class:`CommandSpec`; the
registry (:mod:`.registry`) lists them. The parser (:mod:`..fragments.parser`) and the
interpreter (:mod:`..fragments.interpreter`) dispatch through the registry and know no command by name;
a command knows them only as the protocols of :mod:`.protocols`.

* ``parse(parser, cmd, fields, known, in_loop)`` checks the fields (recording every problem on the
  parser with its JSON path), checks their expressions with the names ``known`` at that point, adds
  the names the command sets to ``known``, fills ``cmd.model`` / ``cmd.children`` / ``cmd.branches``,
  and returns ``cmd``, or ``None`` when the command cannot run. ``in_loop`` says whether a ``for`` or
  ``while`` encloses it.
* ``run(interpreter, cmd)`` is a coroutine that runs the parsed command; it raises ``S2OError`` for a
  failure and the signals of :mod:`..fragments.tree` to unwind.
* ``run_sync(interpreter, cmd)`` is the same command as a plain function, for a command that never
  awaits (``Command.sync``, decided by the parser: none of its expressions contains ``await`` or is
  one call whose coroutine the run would await, and every command inside it is sync as well). A
  loop's pass then runs with no coroutine per level (``docs/performance.md``, "Fragments"). A command
  with no ``run`` has only ``run_sync`` and no expression (``end``, ``break``, ``continue``): it is
  always sync.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..fragments.tree import Command
from ..outside.secrets import profile_secret_reads
from .protocols import Interpreter, Parser

ParseFn = Callable[["Parser", "Command", Any, set[str], bool], "Command | None"]
RunFn = Callable[["Interpreter", "Command"], Awaitable[None]]
SyncRunFn = Callable[["Interpreter", "Command"], None]


class FieldsModel(BaseModel):
    """Base of every command's fields model: unknown fields refused, aliases (``in``, ``else``) accepted."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One fragment command.

    Attributes:
        name: the command's key in a fragment (``"for"``).
        parse: checks and parses the fields (see the module doc).
        run: runs the parsed command (a coroutine), or ``None`` for a command that is always sync.
        run_sync: runs it without awaiting (see the module doc), or ``None`` when it needs ``run``.
        fields: the pydantic model of its fields, or ``None`` when its fields are not an object of
            named fields (``var``'s targets, ``log``'s text, ``parallel``'s list).
        parses_on_error: the command reads ``onError`` among its own fields itself (``var``);
            otherwise the parser takes ``onError`` out of the fields before ``parse``.
        produces_result: the command sets ``result`` when it succeeds (``call``), so it may carry
            ``outputPath`` (SPEC 8); the parser takes ``outputPath`` out of the fields before ``parse``
            and the interpreter writes it, for every such command in one place.
    """

    name: str
    parse: ParseFn
    run: RunFn | None
    fields: type[BaseModel] | None = None
    parses_on_error: bool = False
    produces_result: bool = False
    run_sync: SyncRunFn | None = None

    def __post_init__(self) -> None:
        if self.run is None and self.run_sync is None:
            raise TypeError(f"the command {self.name!r} has no runner")


def parse_text(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Parser of commands whose field is one dynamic string (``log``, ``fail``)."""
    if not isinstance(fields, str):
        p.error("fragment", f"'{cmd.name}' takes a string (plain text or {{ expression }})", cmd.path)
        return None
    p.value(fields, cmd.path, known)
    return cmd


def parse_no_fields(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Parser of commands that take no fields (``{}``, ``null`` or ``true``)."""
    return p.no_fields(cmd, fields)


def parse_profile(p: Parser, kind: str, name: str, path: str) -> Any:
    """The model of ``profiles.<kind>.<name>`` for a command's ``profile`` field at ``path`` (SPEC 7.1), or
    ``None`` after recording ``unknown-profile`` (no such profile) or ``missing-secret`` (its credential
    fields read a secret the settings do not hold; the worker's copy of the settings keeps the names)."""
    settings = p.engine.settings
    named = getattr(settings.profiles, kind)
    if name not in named:
        known = ", ".join(sorted(named)) or "none"
        p.error("unknown-profile", f"there is no {kind} profile named {name!r} (profiles.{kind}: {known})", path)
        return None
    profile = named[name]
    missing = [s for s in profile_secret_reads(kind, profile.model_dump()) if s not in settings.secrets]
    if missing:
        p.error("missing-secret", f"the {kind} profile {name!r} reads sys.secret[{missing[0]!r}], which is not "
                f"available (set S2O_SECRET_{missing[0]}, [secrets] in s2o.toml or %secret {missing[0]})", path)
        return None
    return profile
