"""Running a parsed fragment as one run (SPEC 6, 7).

:func:`run_program` runs a :class:`~.tree.Program` on the session's event loop thread as one coroutine,
so awaited calls in the branches of a ``parallel`` command overlap, the run-time limit covers everything
including awaits (``asyncio.timeout`` for awaiting, the watchdog for work that never yields), and an
interrupt cancels the whole run. Each command runs through its registry entry (:mod:`..commands`), a
loop's sync body as steps (:mod:`.fastpath`); expressions through the session's one evaluator.

Semantics:

* A command that fails leaves locals, agent and conversation variables as they were before it; when
  it carries ``onError``, ``exc`` holds the error while the handler runs and the run goes on after it.
  An error inside the handler propagates. Limits (``timedOut``, ``stopped``, ``loop-limit``,
  ``output-limit``, …) and ``fail`` are not handled by ``onError``: they end the run.
* ``outputPath`` (SPEC 8; :meth:`Interpreter.write_output`): after a result-producing command succeeds,
  its ``result`` is written to every success target; when it fails, ``{"code", "message"}`` of the
  error is written to the failure alternative (``ok || failed``) and the run goes on; its ``onError``,
  if any, runs after that write. Limits and ``fail`` are not written: they end the run.
* ``call`` runs a function with fresh locals holding its arguments, each checked against its
  declared type; ``result`` is its return value. Each call has a namespace of its own
  (:meth:`~..session.Session.function_scope`), held per task, so calls running at the same time in
  ``parallel`` branches never see each other's locals; ``command`` and ``exc`` are set per task
  right before each expression runs (:meth:`~..session.Session.prepare`).
* Depth: every command list entered counts one level, per task (a ``call`` enters its callee's
  body one level below the ``call``); past :data:`~.depth.MAX_NESTING` the run stops with
  ``too-deep``. Validation already refuses such fragments (:mod:`.depth`), so this is the backstop,
  and so is turning a ``RecursionError`` anywhere in the run into ``too-deep``: a run never crashes
  on depth.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from ...bounds import MAX_CALL_CHAIN, MAX_NESTING
from ..commands import registry
from ..commands.protocols import Step
from ..errors import S2OError
from ..language.compiled import Compiled
from ..language.dynamic import expression_of
from ..language.references import is_reference, parse_reference
from ..outside.call import CALL_FAILED_CODES, RECEIPT, OutsideCall, json_fields
from ..outside.llm import cost_limit_error
from ..policy.guards import PRINT_SINK
from ..policy.values import error_message, runtime_error
from ..run.budget import OutputBudget
from ..run.engine import Engine
from ..run.failures import INTERRUPTED
from ..run.limits import RunInterrupt, RunTimeout
from ..run.state import SessionState, Snapshot
from . import wiring
from .trace import Tracer
from .tree import TYPES, UNHANDLED, Break, Command, Continue, End, Fail, Function, Program, Return, join, type_name

OutputSink = Callable[[dict[str, Any]], None]

#: How many command lists enclose the running one, in the current task (see the module doc).
_DEPTH: ContextVar[int] = ContextVar("s2o_depth", default=0)

TOO_DEEP = "the run nests too deeply"



class Interpreter:
    """Runs one program for one session; collects output parts and log lines.

    Attributes:
        session: the :class:`~..session.Session` the run changes.
        program: the parsed fragment.
        start: when the run began (``time.monotonic()`` seconds).
        outputs: output parts in order, kept only when there is no output sink (``on_output``):
            with one, parts go to the sink alone, so nothing holds a run's output; ``logs``: log lines.
        output_budget: the run's output caps and what was used (:class:`~..budget.OutputBudget`).
        parallel_depth: how many ``parallel`` commands enclose the running command (no per-command
            snapshot inside one: branches share state). current_path: the running command's JSON path;
            stopped_at: the field's, when an interrupt cancelled its expression.
        execution: the session's evaluator (:class:`~..execution.Execution`).
        spend: US dollars the run's model calls have cost so far (SPEC 6, 7.1; :meth:`add_spend`).
        compiled: (dynamic string, command field names) → its code under ``compiled_by``, the session's
            engine; ``fast``: a sync loop body's steps, by the body's id (:func:`.fastpath.steps`).
        tracer: the run's trace as it is recorded (SPEC 14; :mod:`.trace`), ``None`` when the session keeps
            none (``keep_trace``).
    """

    def __init__(self, session: SessionState, program: Program, on_output: OutputSink | None, start: float) -> None:
        self.session = session
        self.execution = session.execution
        self.program = program
        self.on_output = on_output
        self.start = start
        self.outputs: list[dict[str, Any]] = []
        self.logs: list[str] = []
        self.limits = session.settings.limits
        self.output_budget = OutputBudget.of(self.limits)
        self.parallel_depth, self.spend = 0, 0.0
        self.current_path: str | None = None
        self.stopped_at: str | None = None  # the field an interrupt cancelled while it awaited
        self.compiled: dict[tuple[str, tuple[str, ...]], Compiled] = {}
        self.compiled_by: Engine | None = None
        self.fast: dict[int, tuple[Engine, list[Command], list[Step]]] = {}
        self.tracer: Tracer | None = Tracer(program.kind) if session.keep_trace else None

    # -- values -------------------------------------------------------------------------------------
    async def value(self, raw: Any, path: str, fields: dict[str, Any] | None = None) -> Any:
        """A dynamic value: strings are dynamic strings (awaited when async), lists and dicts are walked.

        ``fields`` are the command's fields set so far (``command.<field>``), or ``None``.
        """
        if isinstance(raw, str):
            compiled = self.compiled_for(raw, path, fields)
            if compiled is None:
                return self.reference(raw, path) if is_reference(raw) else raw
            namespace = self.session.prepare(fields)
            if compiled.is_coroutine_code and self.parallel_depth:
                namespace = dict(namespace)  # what this task sees stays put while it awaits
            try:
                value = await self.execution.run_on_loop(compiled, self.start, namespace)
            except S2OError as exc:
                raise exc.with_context(path=path) from None
            except asyncio.CancelledError:  # interrupted while it awaited: where the run stopped
                self.stopped_at = path
                raise
            if self.tracer is not None:
                self.tracer.field(path, value)
            return value
        if isinstance(raw, list):
            return [await self.value(v, f"{path}[{i}]", fields) for i, v in enumerate(raw)]
        if isinstance(raw, dict):
            return {k: await self.value(v, f"{path}.{k}", fields) for k, v in raw.items()}
        return raw

    def value_sync(self, raw: Any, path: str, fields: dict[str, Any] | None = None) -> Any:
        """:meth:`value` for a sync command (``Command.sync``: none of its expressions awaits)."""
        if isinstance(raw, str):
            compiled = self.compiled_for(raw, path, fields)
            if compiled is None:
                return self.reference(raw, path) if is_reference(raw) else raw
            try:
                value = self.execution.run_now(compiled, self.start, self.session.prepare(fields))
            except S2OError as exc:
                raise exc.with_context(path=path) from None
            if self.tracer is not None:
                self.tracer.field(path, value)
            return value
        if isinstance(raw, list):
            return [self.value_sync(v, f"{path}[{i}]", fields) for i, v in enumerate(raw)]
        if isinstance(raw, dict):
            return {k: self.value_sync(v, f"{path}.{k}", fields) for k, v in raw.items()}
        return raw

    def reference(self, text: str, path: str) -> Any:
        """The value of the reference expression ``text`` at ``path`` (SPEC 8; :func:`.wiring.read`)."""
        try:
            return wiring.read(self.session, parse_reference(text), text)
        except S2OError as exc:
            raise exc.with_context(path=path) from None

    def compiled_for(self, text: str, path: str, fields: dict[str, Any] | None) -> Compiled | None:
        """The compiled expression of the dynamic string ``text`` at ``path`` of the fragment, with the
        command's fields ``fields`` set so far, or ``None`` when ``text`` is plain text; a compile error
        carries ``path``. Looked up in the run's table (:attr:`compiled`) before the engine's cache."""
        engine = self.execution.engine
        key = (text, tuple(fields) if fields else ())
        if engine is self.compiled_by:
            compiled = self.compiled.get(key)
            if compiled is not None:
                return compiled
        else:  # a new engine (the session turned guarded): its own code
            self.compiled.clear()
            self.compiled_by = engine
        found = expression_of(text)
        if found is None:
            return None
        try:
            compiled = engine.compile(found[0], command_fields=key[1])
        except S2OError as exc:
            raise exc.with_context(path=path) from None
        self.compiled[key] = compiled
        return compiled

    async def truth(self, raw: Any, path: str) -> bool:
        """The truth of a dynamic value; a host object's failing ``__bool__`` is ``runtime``."""
        return self.truth_of(await self.value(raw, path), path)

    def truth_sync(self, raw: Any, path: str) -> bool:
        """:meth:`truth` for a sync command."""
        return self.truth_of(self.value_sync(raw, path), path)

    @staticmethod
    def truth_of(value: Any, path: str) -> bool:
        """``bool(value)``; a host object's failing ``__bool__`` is ``runtime`` at ``path``."""
        try:
            return bool(value)
        except S2OError:
            raise
        except Exception as exc:
            raise runtime_error(exc, path) from None

    def emit(self, part: dict[str, Any]) -> None:
        """Charge an output part to the run's :class:`~..budget.OutputBudget` (SPEC 12), then
        hand it to the output sink as it is produced, or keep it in :attr:`outputs` when there is none.

        Raises ``output-limit`` (which ends the run) when the part would pass a cap; it is not emitted.
        """
        self.output_budget.charge(part)
        if self.on_output is not None:
            self.on_output(part)
        else:
            self.outputs.append(part)

    async def outside(self, kind: str, profile: str | None, fields: dict[str, Any], path: str,
                      timeout: float | None = None) -> Any:
        """Make one outside call through the session's :class:`~..outside.call.Outside` (SPEC 7.1).

        ``fields`` are the command's evaluated fields; secret text in them travels as its text
        (:func:`~..outside.call.json_fields`; ``not-json`` at its path for a value that is not JSON).
        The call may take ``timeout`` seconds at most, and never longer than what is left of the run's
        time limit: a call stopped by that is ``timedOut`` (which ends the run), one stopped by its own
        ``timeout`` keeps its kind's code (``api-timeout``). Returns the call's JSON result; raises its coded
        error (SPEC 7.1 codes, masked).
        """
        remaining = self.limits.time - (time.monotonic() - self.start)
        if remaining <= 0:
            self.check_time(path)
        limit = remaining if timeout is None else min(float(timeout), remaining)
        request = OutsideCall(kind, profile, json_fields(fields, path, kind), path, max(limit, 0.001))
        tracer = self.tracer
        span = tracer.open("outside", kind, path) if tracer is not None else -1
        receipt: dict[str, Any] = {}
        token = RECEIPT.set(receipt) if tracer is not None else None  # only a trace reads what the door tells
        try:
            if tracer is not None:
                tracer.request(span, kind, profile, request.fields)
            result = await self.session.outside.call(request, self.emit)
        except BaseException as exc:
            raised = exc
            if isinstance(exc, S2OError) and exc.code in ("api-timeout", "timedOut") and limit >= remaining:
                raised = S2OError("timedOut", self.session.engine.time_limit_text(), path=path)  # the run's time
            if tracer is not None:
                tracer.close(span, raised)
            if raised is exc:
                raise
            raise raised from None
        finally:
            if token is not None:
                RECEIPT.reset(token)
        if tracer is not None:
            tracer.response(span, kind, result, receipt)
            tracer.close(span)
        return result

    def check_time(self, path: str) -> None:
        """Raise ``timedOut`` when the run has passed ``limits.time`` seconds."""
        if time.monotonic() - self.start > self.limits.time:
            raise S2OError("timedOut", self.session.engine.time_limit_text(), path=path)

    def add_spend(self, dollars: float, path: str) -> None:
        """Add a model call's price to the run's spend; past ``limits.llm_cost`` (or the definition's
        ``bounds.cost``) raise ``cost-limit`` naming the spend and the bound (it ends the run)."""
        self.spend += dollars
        bound = self.limits.llm_cost
        if self.spend > bound:
            raise cost_limit_error(self.spend, bound, self.session.engine.limit_names["llm_cost"], path)

    # -- commands -----------------------------------------------------------------------------------
    async def block(self, commands: list[Command]) -> None:
        """Run a command list in order, one level deeper (``too-deep`` past :data:`~.depth.MAX_NESTING`);
        a sync command runs as a plain call (:meth:`command_sync`)."""
        if not commands:
            return
        depth = _DEPTH.get() + 1
        if depth > MAX_NESTING:
            raise S2OError("too-deep", f"{TOO_DEEP}: commands and calls nest more than {MAX_NESTING} levels",
                           path=commands[0].path)
        token = _DEPTH.set(depth)
        try:
            for cmd in commands:
                if cmd.sync:
                    self.command_sync(cmd)
                else:
                    await self.command(cmd)
        finally:
            _DEPTH.reset(token)

    def block_sync(self, commands: list[Command]) -> None:
        """:meth:`block` for a list of sync commands (:func:`~.tree.all_sync`). It counts no level: nothing below
        a sync command calls a function or runs an async command, so nothing below it reads the depth, and its
        nesting is within the bound validation checked (:mod:`.depth`; a ``RecursionError`` is ``too-deep``)."""
        for cmd in commands:
            self.command_sync(cmd)

    async def command(self, cmd: Command) -> None:
        """Run one command through its registry entry, restoring state when it fails (see module doc), in a
        span of the run's trace when it keeps one (SPEC 14). What it produced shows in the spans it holds: an
        outside call's response, a function's ``return``."""
        tracer = self.tracer
        if tracer is None or (span := tracer.open("command", cmd.name, cmd.path)) < 0:
            await self.run_command(cmd)
            return
        try:
            await self.run_command(cmd)
        except BaseException as exc:
            tracer.close(span, exc)
            raise
        tracer.close(span)

    async def run_command(self, cmd: Command) -> None:
        """:meth:`command` without its span."""
        run = registry.REGISTRY[cmd.name].run
        if run is None:  # cannot happen: a command with no run has no expression, so it is sync
            raise S2OError("unexpected", f"'{cmd.name}' has no way to run here", path=cmd.path)
        self.check_time(cmd.path)
        self.current_path = cmd.path
        snap = self.session.snapshot() if self.parallel_depth == 0 and not cmd.atomic else None
        try:
            await run(self, cmd)
            self.write_output(cmd, self.session.namespace().get("result"), failed=False)
            if snap is not None:
                self.session.release(snap)
        except (asyncio.CancelledError, RunTimeout, RunInterrupt, KeyboardInterrupt):
            if snap is not None:  # a limit or an interrupt: nothing of this command stays
                self.session.restore(snap)
            raise
        except (S2OError, RecursionError) as raised:
            exc = self.failed(cmd, raised, snap)
            if exc is not None:
                await self.handle(cmd.on_error or [], exc)
        finally:
            self.session.clear_command_fields()

    def command_sync(self, cmd: Command) -> None:
        """:meth:`command` for a sync command (``Command.sync``): the same steps, no coroutine, the same span."""
        tracer = self.tracer
        if tracer is None or (span := tracer.open("command", cmd.name, cmd.path)) < 0:
            self.run_command_sync(cmd)
            return
        try:
            self.run_command_sync(cmd)
        except BaseException as exc:
            tracer.close(span, exc)
            raise
        tracer.close(span)

    def run_command_sync(self, cmd: Command) -> None:
        """:meth:`command_sync` without its span. The time is checked before it as before every command: the
        watchdog fires only ``0.1`` s past the limit, so without the check a run whose time passed in a sync
        command would go on (and could succeed)."""
        run = registry.REGISTRY[cmd.name].run_sync
        if run is None:  # cannot happen: the parser makes only commands with run_sync sync
            raise S2OError("unexpected", f"'{cmd.name}' has no way to run here", path=cmd.path)
        if time.monotonic() - self.start > self.limits.time:  # check_time, inline: once a command
            self.check_time(cmd.path)
        self.current_path = cmd.path
        snap = self.session.snapshot() if self.parallel_depth == 0 and not cmd.atomic else None
        try:
            run(self, cmd)
            if cmd.output_path is not None:
                self.write_output(cmd, self.session.namespace().get("result"), failed=False)
            if snap is not None:
                self.session.release(snap)
        except (RunTimeout, RunInterrupt, KeyboardInterrupt):
            if snap is not None:
                self.session.restore(snap)
            raise
        except (S2OError, RecursionError) as raised:
            self.recover_sync(cmd, raised, snap)
        finally:
            self.session.clear_command_fields()

    def recover_sync(self, cmd: Command, raised: S2OError | RecursionError, snap: Snapshot | None) -> None:
        """What follows a sync command's failure: :meth:`failed`, then ``onError`` with ``exc`` reading the error."""
        exc = self.failed(cmd, raised, snap)
        if exc is not None:
            with self.session.handling(exc):
                self.block_sync(cmd.on_error or [])

    def failed(self, cmd: Command, raised: S2OError | RecursionError, snap: Snapshot | None) -> S2OError | None:
        """What follows ``cmd`` failing with ``raised``: state restored from ``snap``; a limit (``UNHANDLED``)
        raised again; the error written to ``outputPath``'s failure alternative. Returns the error for
        ``cmd``'s ``onError`` to handle, or ``None`` when the write handled it; raises it when neither does."""
        exc = raised if isinstance(raised, S2OError) else S2OError("too-deep", f"{TOO_DEEP} for Python's stack")
        exc.with_context(path=cmd.path)
        if exc.stage == "validate":
            exc.stage = "run"
        if snap is not None:
            self.session.restore(snap)
        if exc.code in UNHANDLED:
            raise exc from None
        try:
            wrote = self.write_output(cmd, {"code": exc.code, "message": exc.message}, failed=True)
        except S2OError:
            if snap is not None:
                self.session.restore(snap)
            raise
        if cmd.on_error is None:
            if wrote:
                if self.tracer is not None:
                    self.tracer.error(exc, "outputPath")
                return None
            raise exc from None
        if self.tracer is not None:
            self.tracer.error(exc, "onError")
        return exc

    def write_output(self, cmd: Command, value: Any, *, failed: bool) -> bool:
        """Write ``value`` to ``cmd``'s ``outputPath`` targets (SPEC 8): on success every target of the
        fan-out (or of the first alternative), on failure those of the second alternative. Returns whether
        any target was written; a failing write is an error at ``<command>.outputPath``."""
        if cmd.output_path is None:
            return False
        on_success, on_failure = wiring.targets(cmd.output_path)
        chosen = on_failure if failed else on_success
        for ref in chosen:
            try:
                wiring.write(self.session, ref, value)
            except S2OError as exc:
                exc.stage = "run"
                raise exc.with_context(path=join(cmd.path, "outputPath")) from None
            if self.tracer is not None:
                self.tracer.bound(self.tracer.current(), ref.text(), value)
        return bool(chosen)

    async def handle(self, handler: list[Command], error: S2OError) -> None:
        """Run an ``onError`` handler with ``exc`` reading ``error``."""
        with self.session.handling(error):
            await self.block(handler)

    async def branch(self, index: int, path: str, commands: list[Command]) -> None:
        """Run ``parallel``'s branch ``index`` (at ``path``, its own task) in a span of the run's trace."""
        tracer = self.tracer
        span = tracer.open("branch", f"branch {index}", path) if tracer is not None else -1
        if tracer is not None:
            tracer.note("branch", index)
        try:
            await self.block(commands)
        except BaseException as exc:
            if tracer is not None:
                tracer.close(span, exc)
            raise
        if tracer is not None:
            tracer.close(span)

    # -- functions ------------------------------------------------------------------------------------
    def bind_args(self, fn: Function, args: dict[str, Any], path: str) -> dict[str, Any]:
        """Check ``args`` against ``fn``'s declared names and types (SPEC 7); code ``argument``."""
        for name in args:
            if name not in fn.args:
                raise S2OError("argument", f"function '{fn.name}' has no argument '{name}'", path=f"{path}.{name}")
        bound = {}
        for name, kind in fn.args.items():
            if name in args:
                value = args[name]
            elif name in fn.defaults:
                value = fn.defaults[name]
            else:
                raise S2OError("argument", f"function '{fn.name}' needs the argument '{name}'", path=path)
            if not TYPES[kind](value):
                raise S2OError("argument", f"{name} is expected to be {kind}, got {type_name(value)}",
                               path=f"{path}.{name}")
            bound[name] = value
        return bound

    async def call(self, fn: Function, args: dict[str, Any], path: str, site: str, call_id: str | None = None) -> Any:
        """Run ``fn`` with fresh locals holding ``args``; its return value. An error raised inside names
        ``site`` (the command, or the model turn, that called) first in its call chain, ``details["calls"]``:
        outermost first, as Python's traceback lists frames, at most :data:`MAX_CALL_CHAIN` (SPEC 9). The call
        is a span of the run's trace: ``function``, or ``tool`` (a model's tool call ``call_id``)."""
        bound = self.bind_args(fn, args, path)
        tracer = self.tracer
        span = tracer.open("function" if call_id is None else "tool", fn.name, fn.path) if tracer is not None else -1
        try:
            if tracer is not None and span >= 0:
                if call_id is not None:
                    tracer.note("call_id", tracer.cut(call_id))
                for name, value in bound.items():
                    tracer.field(f"{fn.path}.args.{name}", value)
            with self.session.function_scope(bound):
                value = await self.function_body(fn)
        except BaseException as exc:
            if tracer is not None:
                tracer.close(span, exc)
            if isinstance(exc, S2OError):
                self.chain(exc, site)
            raise
        if tracer is not None:
            tracer.close(span)
        return value

    @staticmethod
    def chain(exc: S2OError, site: str) -> None:
        """Put ``site`` first in ``exc``'s call chain (``details["calls"]``, at most :data:`MAX_CALL_CHAIN`)."""
        calls = (exc.details or {}).get("calls")
        chain = [site, *(calls if isinstance(calls, list) else [])]
        if len(chain) > MAX_CALL_CHAIN:
            half = MAX_CALL_CHAIN // 2
            chain = [*chain[:half], f"... {len(chain) - 2 * half} calls ...", *chain[-half:]]
        exc.details = {**(exc.details or {}), "calls": chain}

    async def function_body(self, fn: Function) -> Any:
        """Run a function's commands (and its ``onError``); the value of its ``return``, or ``None``."""
        try:
            await self.block(fn.commands)
        except Return as ret:
            return ret.value
        except S2OError as exc:
            if fn.on_error is None or exc.code in UNHANDLED:
                raise
            try:
                await self.handle(fn.on_error, exc)
            except Return as ret:
                return ret.value
        return None


#: ``(code, value, outputs, logs, error, tracer)``: ``tracer`` the run's trace as recorded, its run ended
#: (:meth:`.trace.Tracer.finish`), or ``None`` when the session keeps none.
RunOutcome = tuple[str, Any, list[dict[str, Any]], list[str], S2OError | None, "Tracer | None"]


async def run_program(session: SessionState, program: Program, on_output: OutputSink | None,
                      start: float, inputs_args: dict[str, Any] | None = None,
                      on_print: Callable[[str], None] | None = None) -> RunOutcome:
    """Run ``program`` as one run; returns :data:`RunOutcome`. ``inputs_args`` are the
    run's inputs; those the body declares as arguments are bound to them. ``on_print`` gets the text the
    run's expressions print (:data:`~..policy.guards.PRINT_SINK`, for this task and those it starts)."""
    PRINT_SINK.set(on_print)  # this coroutine's task has a context of its own: the caller's is untouched
    interp = Interpreter(session, program, on_output, start)
    remaining = max(session.settings.limits.time - (time.monotonic() - start), 0.0)
    code, value, error = "success", None, None
    try:
        body = program.body
        with _body_scope(session, interp, program, inputs_args):
            async with asyncio.timeout(remaining):  # in the run's task: no inner task whose end goes unseen
                value = await interp.function_body(body)
        if program.kind in ("agent", "function"):  # a definition run gives result its value, as a call does
            session.set_result(value)
    except End:
        pass
    except Fail as f:
        code, error = "failCommand", f.error
    except (TimeoutError, RunTimeout):  # RunTimeout: the watchdog's, landed outside an expression
        code = "timedOut"  # (a value check, a snapshot): the commands it crossed restored their state
        error = S2OError("timedOut", session.engine.time_limit_text(), path=interp.current_path)
    except S2OError as exc:
        code = {"timedOut": "timedOut", "stopped": "stopped", "ask": "ask"}.get(exc.code, "errorInAgent")
        if exc.code in CALL_FAILED_CODES:
            code = "callFailed"
        if exc.stage == "validate":
            exc.stage = "run"
        error = exc
        if code == "ask" and exc.details is not None:  # the questions are the run's value (SPEC 7.1)
            value = exc.details.get("questions")
    except RunInterrupt:  # the watchdog's, landed outside an expression: the commands restored their state
        code, error = "stopped", S2OError("stopped", INTERRUPTED, path=interp.current_path)
    except asyncio.CancelledError:  # interrupted (Session.interrupt): the caller reports ``stopped`` here
        session.stopped_at = interp.stopped_at or interp.current_path
        if interp.tracer is not None:  # the trace of a run stopped: its caller's (Session.stopped_trace)
            session.stopped_trace = interp.tracer.finish("stopped", S2OError("stopped", INTERRUPTED,
                                                                             path=session.stopped_at))
        raise
    except (Break, Continue):  # pragma: no cover - refused at validation
        code, error = "errorInAgent", S2OError("loop-control", "break or continue outside a loop")
    except RecursionError:
        code, error = "errorInAgent", S2OError("too-deep", f"{TOO_DEEP} for Python's stack", path=interp.current_path)
    except Exception as exc:  # a fault of the engine, reported as data, never raised out of the run
        code, error = "unexpected", S2OError("unexpected", error_message(exc), path=interp.current_path)
    trace = interp.tracer.finish(code, error) if interp.tracer is not None else None
    return code, value, interp.outputs, interp.logs, error, trace


@contextlib.contextmanager
def _body_scope(session: SessionState, interp: Interpreter, program: Program,
                inputs_args: dict[str, Any] | None) -> Iterator[None]:
    """The locals the program's body runs with: an agent's ``main`` gets fresh locals holding its
    arguments; a function cell's arguments become notebook locals; a command cell keeps the locals."""
    body, bound = program.body, {}
    if program.kind in ("agent", "function") and body.args:
        given = {k: v for k, v in (inputs_args or {}).items() if k in body.args}  # the rest stays in sys.inputs
        bound = interp.bind_args(body, given, "sys.inputs")
    if program.kind == "agent":
        with session.function_scope(bound):
            yield
        return
    for name, arg in bound.items():
        session.set_local(name, arg)
    yield
