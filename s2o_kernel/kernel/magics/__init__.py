"""Magics (SPEC 9.1): ``%name ...`` line magics and ``%%name`` cell magics, one module each.

A line magic's argument is the rest of the cell after its name (so a JSON argument may span
lines); a cell magic's argument is the rest of its first line and its body the following lines.
Magics that take an argument accept both forms (``%rules {...}`` and ``%%rules`` with the JSON as
the body); the allowlist is the exception: ``%allowlist`` shows it, ``%%allowlist`` replaces it.

Each magic's module docstring is its ``%help`` text; :data:`REGISTRY` lists them all (what
``%lsmagic`` shows). To add a magic, write a module ending in ``MAGIC = Magic(...)`` and add it
below. Errors are the engine's ``S2OError``: ``magic`` for an unknown magic or a wrong use (a file
that cannot be read included), ``syntax`` for an argument or a file that is not valid JSON (with
its line and column); the engine's own errors (``settings``, ``allowlist``, ...) pass through.
File names (``%run``, ``%config``, ``%state``) are relative to the kernel's working directory;
quote a name that holds spaces.
"""

from __future__ import annotations

from s2o_kernel.kernel.cells import Cell
from s2o_kernel.kernel.magics import (
    allowlist_magic,
    config_magic,
    dataflow_magic,
    display_magic,
    expr_magic,
    fragment_magic,
    help_magic,
    history_magic,
    limits_magic,
    lsmagic_magic,
    parameters_magic,
    profiles_magic,
    replay_magic,
    reset_magic,
    rules_magic,
    run_magic,
    secret_magic,
    state_magic,
    sys_magic,
    time_magic,
    timeit_magic,
    trace_magic,
    validate_magic,
    vars_magic,
    who_magic,
)
from s2o_kernel.kernel.magics.base import Magic, MagicCall, MagicContext, Registry
from s2o_kernel.kernel.magics.run_magic import parse_run_arguments

__all__ = [
    "REGISTRY",
    "Magic",
    "MagicCall",
    "MagicContext",
    "Registry",
    "cell_magic_names",
    "line_magic_names",
    "parse_run_arguments",
    "run_magic_cell",
]

#: Every magic, by name.
REGISTRY = Registry([
    allowlist_magic.MAGIC,
    rules_magic.MAGIC,
    limits_magic.MAGIC,
    sys_magic.MAGIC,
    vars_magic.MAGIC,
    who_magic.MAGIC,
    profiles_magic.MAGIC,
    display_magic.MAGIC,
    reset_magic.MAGIC,
    validate_magic.MAGIC,
    dataflow_magic.MAGIC,
    expr_magic.MAGIC,
    fragment_magic.MAGIC,
    parameters_magic.MAGIC,
    run_magic.MAGIC,
    secret_magic.MAGIC,
    config_magic.MAGIC,
    state_magic.MAGIC,
    replay_magic.MAGIC,
    trace_magic.MAGIC,
    time_magic.MAGIC,
    timeit_magic.MAGIC,
    history_magic.MAGIC,
    lsmagic_magic.MAGIC,
    help_magic.MAGIC,
])


def line_magic_names() -> list[str]:
    """Names of the magics with a line form (``%name``), sorted (for completion)."""
    return REGISTRY.line_names()


def cell_magic_names() -> list[str]:
    """Names of the magics with a cell form (``%%name``), sorted (for completion)."""
    return REGISTRY.cell_names()


def magic_help(name: str) -> str | None:
    """The help text of the magic ``name`` (its module's docstring, as ``%help NAME`` shows it), or ``None``."""
    magic = REGISTRY.get(name)
    return magic.help_text() if magic is not None else None


def run_magic_cell(ctx: MagicContext, cell: Cell) -> None:
    """Run a classified magic cell against ``ctx`` (see :meth:`Registry.run`)."""
    REGISTRY.run(ctx, cell)
