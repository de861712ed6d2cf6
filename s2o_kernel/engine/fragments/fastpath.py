"""The fast path of a loop's sync body: commands compiled once into steps (issue 12; ``docs/performance.md``).

A ``for`` or ``while`` whose body is all sync commands (``Command.sync``) runs each pass as a list of
*steps*, one plain callable per command: ``step(namespace, view)``. :func:`steps` builds them once per
run (and again when the session's engine changes) and keeps them on the interpreter
(:attr:`~.interpreter.Interpreter.fast`). A step does for its command what
:meth:`~.interpreter.Interpreter.command_sync` does — the time check before it, the snapshot (unless the
command is atomic or runs inside ``parallel``), the failure handling (``failed``, ``onError``),
``outputPath``, ``command`` reset after it — with what the general path looks up on every pass held in
the closure instead: each expression's compiled code, flags and JSON path, the target names (already
checked), the branches' own steps. No registry lookup, no run-table lookup, no ``prepare`` call.

A ``while`` condition that cannot await is read the same way, whatever the loop's body
(:func:`condition`: the :func:`reader` of its expression, called by ``commands/loops.run_while`` before
each pass). A body that awaits may call functions and run handlers, but each ``call`` and each
``onError`` sets its namespace and ``exc`` back when it ends, so the namespace and ``exc`` the loop read
once are still its own when the condition is read again.

Which commands have a step of their own (:data:`BUILDERS`): ``var`` (a local target without items is
set in place when its value is a plain ``str``, number…, as :meth:`~..session.Session.set_local` would;
any other value or target goes through :func:`..commands.var.store`), ``if``, ``break`` and
``continue``. Every other sync command's step is the general path itself (``command_sync``); so is a
command whose step cannot be built (an expression that does not compile: the general path raises that
error where it always did).

What a step takes as given, and why it holds:

* ``namespace``: read once per loop run (:meth:`~..session.Session.namespace`). The loop's task keeps
  one namespace while it runs: a sync body calls no function, and the task's context changes only
  through a call (``function_scope``).
* ``view``: what ``exc`` reads in the loop's task (:data:`~..scopes.HANDLING`), read once per loop run:
  it changes only while an ``onError`` handler runs, and handlers run on the general path
  (``Interpreter.recover_sync``). Each expression still sets ``__builtins__``, ``command`` and ``exc`` in
  the namespace right before it runs, as ``Session.prepare`` does: ``parallel`` branches sharing the
  namespace set their own between the loop's passes.
* the engine: checked before every step (and before every read of a ``while`` condition, which then
  goes back to being awaited through ``Interpreter.truth``). A host object stored mid-run turns the session's engine
  guarded (``Session.set_local``); a step built for the old engine then runs the general path, and the
  next loop run builds steps for the new one.

The time limit inside an expression is the run's watchdog's, as on the general path (the expression is
the same function of the same code); the watchdog's exception landing in a step's own code is handled as
``command_sync`` handles it (the snapshot restored, the exception raised on).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from time import monotonic
from typing import Any, Protocol

from ..commands.protocols import Interpreter, Step
from ..commands.var import Target, store
from ..errors import S2OError
from ..language.dynamic import expression_of
from ..language.references import is_reference
from ..policy.parts import PLAIN_TYPES
from ..run.engine import Engine
from ..run.limits import RunInterrupt, RunTimeout
from ..run.scopes import NO_FIELDS, CommandScope, ErrorView, check_target_name
from .tree import Break, Command, Continue


class Reader(Protocol):
    """A dynamic value's reader: its value in ``namespace`` with ``exc`` reading ``view`` and ``command``
    reading ``fields`` (the command's fields set so far, or ``None``)."""

    def __call__(self, namespace: dict[str, Any], view: ErrorView | None, fields: dict[str, Any] | None = None) -> Any:
        ...


#: What builds a step of its own for a command (``None``: the general path's).
Builder = Callable[["Interpreter", Command, "Engine"], Step | None]


def steps(it: Interpreter, body: list[Command]) -> list[Step]:
    """The steps of ``body`` (every command sync) for the session's engine now, built on first use in the run."""
    engine = it.execution.engine
    found = it.fast.get(id(body))
    if found is None or found[0] is not engine:
        found = (engine, body, [step_of(it, cmd, engine) for cmd in body])  # the body kept: its id stays its own
        it.fast[id(body)] = found
    return found[2]


def step_of(it: Interpreter, cmd: Command, engine: Engine) -> Step:
    """``cmd``'s step: its own (:data:`BUILDERS`), or the general path's when it has none or it cannot be built."""
    build = BUILDERS.get(cmd.name)
    if build is not None:
        try:
            own = build(it, cmd, engine)
        except S2OError:  # an expression that does not compile, a name refused: the general path reports it
            own = None
        if own is not None:
            return own
    general = it.command_sync
    return lambda namespace, view: general(cmd)


def reader(it: Interpreter, raw: Any, path: str, names: tuple[str, ...], into: Target | None = None) -> Reader:
    """What reads the dynamic value ``raw`` at ``path`` in a command whose fields ``names`` are set before it.

    An expression is ``Interpreter.value_sync`` and ``Execution.run_now`` in one closure: its function
    (:mod:`..compiled`) bound once to the namespace of the loop run and called each pass; the run's time
    limit is armed around the whole run. Plain text is itself; a reference, a list or a dict
    goes through ``value_sync``. Raises a compile error (``S2OError``).
    With ``into``, an expression's reader also sets the value at that ``var`` target (a local without items:
    the reader is then the whole of a one-field ``var``, one call less a pass)."""
    value_sync = it.value_sync
    if not isinstance(raw, str):
        return lambda namespace, view, fields=None: value_sync(raw, path, fields)
    compiled = it.compiled_for(raw, path, dict.fromkeys(names))
    if compiled is None:
        if is_reference(raw):
            return lambda namespace, view, fields=None: value_sync(raw, path, fields)
        return lambda namespace, view, fields=None: raw
    execution, start = it.execution, it.start
    builtins = execution.engine.builtins
    awaits, checks = compiled.is_coroutine_code or compiled.top_call, compiled.may_hold_objects
    name = into[4] if into is not None else ""
    bound: list[Any] = [None, None]  # the namespace the expression's function was made for, and the function

    def read(namespace: dict[str, Any], view: ErrorView | None, fields: dict[str, Any] | None = None) -> Any:
        namespace["__builtins__"] = builtins  # Session.prepare, inline
        namespace["command"] = CommandScope(fields, "command") if fields else NO_FIELDS
        if view is None:
            namespace.pop("exc", None)
        else:
            namespace["exc"] = view
        try:  # Execution.run_now, inline
            if bound[0] is not namespace:  # the expression's function over this namespace, made once a loop run
                bound[0], bound[1] = namespace, compiled.bind(namespace)
            value = bound[1]()  # the run's time limit is armed around the whole run
            if awaits and type(value) is types.CoroutineType:
                value.close()
                raise S2OError("unexpected", "an expression of a sync command awaited")
            if checks:
                value = execution.finish(compiled, value)
        except BaseException as exc:
            raise execution.fragment_error(exc, compiled, start).with_context(path=path) from None
        if into is not None:
            if type(value) in PLAIN_TYPES:  # Session.set_local of a value with nothing to check
                namespace[name] = value
            else:
                store(it, into, value)
        return value
    return read


def condition(it: Interpreter, raw: Any, path: str) -> Reader | None:
    """The reader of a ``while`` condition ``raw`` (at ``path``) that cannot await, for the session's engine
    now: a dynamic string whose expression neither awaits nor is one call whose coroutine the run awaits
    (``Compiled.is_coroutine_code``, ``top_call``), a reference or plain text. ``None`` for any other
    (the loop then awaits :meth:`~.interpreter.Interpreter.truth`, as it always did), and for an
    expression that does not compile (the general path reports that error where it always did).

    The reader is :func:`reader`'s: the expression's function over the loop's namespace, ``__builtins__``,
    ``command`` and ``exc`` set first, the result checked, any failure coded at ``path``. What it does not
    do is the loop's: the truth (:meth:`~.interpreter.Interpreter.truth_of`) and, before each read, the
    check that the session's engine is still the one the reader was built for."""
    if not isinstance(raw, str):  # a list or a dict: the general path walks it (an item may await)
        return None
    try:
        compiled = it.compiled_for(raw, path, None)
        if compiled is not None and (compiled.is_coroutine_code or compiled.top_call):
            return None
        return reader(it, raw, path, ())
    except S2OError:
        return None


def command_step(it: Interpreter, cmd: Command, engine: Engine, run: Step, *, snapshot: bool = True) -> Step:
    """The step running ``run`` as ``command_sync`` runs a command (see the module doc); ``snapshot=False``
    for a command that changes nothing before it raises its signal (``break``, ``continue``)."""
    general, execution, session = it.command_sync, it.execution, it.session
    start, limit, path = it.start, it.limits.time, cmd.path
    snapshot = snapshot and not cmd.atomic
    output = cmd.output_path is not None

    def step(namespace: dict[str, Any], view: ErrorView | None) -> None:
        if execution.engine is not engine:  # the session turned guarded mid-run
            general(cmd)
            return
        if monotonic() - start > limit:
            it.check_time(path)
        it.current_path = path
        snap = session.snapshot() if snapshot and not it.parallel_depth else None
        try:
            run(namespace, view)
            if output:
                it.write_output(cmd, namespace.get("result"), failed=False)
            if snap is not None:
                session.release(snap)
        except (RunTimeout, RunInterrupt, KeyboardInterrupt):
            if snap is not None:
                session.restore(snap)
            raise
        except (S2OError, RecursionError) as raised:
            it.recover_sync(cmd, raised, snap)
        finally:
            if namespace.get("command") is not NO_FIELDS:  # Session.clear_command_fields
                namespace["command"] = NO_FIELDS
    return step


def var_step(it: Interpreter, cmd: Command, engine: Engine) -> Step:
    """``var``: each field's value read, then assigned; later fields see earlier ones as ``command``."""
    fields = []
    names: dict[str, None] = {}
    for field in cmd.model:
        _, path, raw, scope, name, items = field
        local = scope == "local" and not items and check_target_name(name) == name
        fields.append((reader(it, raw, path, tuple(names)), field, name, local))
        names[name] = None
    if len(fields) == 1 and fields[0][3]:  # one local: when it is an expression, its reader sets it
        field = fields[0][1]
        if isinstance(field[2], str) and expression_of(field[2]) is not None:
            return command_step(it, cmd, engine, reader(it, field[2], field[1], (), into=field))

    execution, value_sync = it.execution, it.value_sync

    def run(namespace: dict[str, Any], view: ErrorView | None) -> None:
        done: dict[str, Any] = {}
        same = True  # the engine the readers were built for is still the session's
        for read, field, name, local in fields:
            value = read(namespace, view, done) if same else value_sync(field[2], field[1], done)
            if local and type(value) in PLAIN_TYPES:  # Session.set_local of a value with nothing to check
                namespace[name] = value
            else:
                store(it, field, value)  # a host object stored turns the engine guarded
                same = execution.engine is engine
            done[name] = value
    return command_step(it, cmd, engine, run)


def if_step(it: Interpreter, cmd: Command, engine: Engine) -> Step:
    """``if``: the condition's truth, then the steps of ``then`` or ``else``."""
    path = f"{cmd.path}.condition"
    condition = reader(it, cmd.model.condition, path, ())
    then = [step_of(it, c, engine) for c in cmd.children["then"]]
    other = [step_of(it, c, engine) for c in cmd.children["else"]]
    truth_of = it.truth_of

    def run(namespace: dict[str, Any], view: ErrorView | None) -> None:
        for step in then if truth_of(condition(namespace, view, None), path) else other:
            step(namespace, view)
    return command_step(it, cmd, engine, run)


def signal_step(it: Interpreter, cmd: Command, engine: Engine) -> Step:
    """``break`` and ``continue``: their signal, after the checks every command makes."""
    signal = Break if cmd.name == "break" else Continue

    def run(namespace: dict[str, Any], view: ErrorView | None) -> None:
        raise signal
    return command_step(it, cmd, engine, run, snapshot=False)


#: Command name → what builds its own step (the rest run the general path).
BUILDERS: dict[str, Builder] = {"var": var_step, "if": if_step, "break": signal_step, "continue": signal_step}
