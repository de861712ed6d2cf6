"""``for``, ``while``, ``break`` and ``continue`` (SPEC 6, 7).

Each execution of a ``for``/``while`` command counts its own iterations against
``limits.loop_iterations`` (a loop inside a loop counts separately; code ``loop-limit``) and checks the
run's time limit on every pass; every pass is counted on the session's ``progress``
(:mod:`..progress`). ``break`` and ``continue`` outside a loop are refused at validation (``loop-control``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from time import monotonic
from typing import Any

from pydantic import Field

from ...bounds import TRACE_PASSES, YIELD_EVERY, YIELD_INTERVAL
from ..errors import S2OError
from ..fragments import fastpath
from ..fragments.trace import Tracer
from ..fragments.tree import Break, Command, Continue, all_sync, join, type_name
from ..policy.parts import PLAIN_TYPES
from ..policy.values import runtime_error
from ..run.scopes import HANDLING, check_target_name
from .protocols import Interpreter, Parser, Step
from .spec import CommandSpec, FieldsModel, parse_no_fields


class ForFields(FieldsModel):
    """``for``'s fields: ``item`` and optional ``index`` (names), ``in`` (iterable), ``commands``."""

    item: str
    in_: Any = Field(alias="in")
    index: str | None = None
    commands: dict[str, Any] | list[Any]


class WhileFields(FieldsModel):
    """``while``'s fields: ``condition`` (checked before each pass) and ``commands``."""

    condition: Any
    commands: dict[str, Any] | list[Any]


def parse_for(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the iterable and the loop names; the names are known in the body and after the loop."""
    m = p.model(ForFields, fields, cmd.path)
    if m is None:
        return None
    p.value(m.in_, join(cmd.path, "in"), known)
    p.name(m.item, join(cmd.path, "item"))
    p.name(m.index, join(cmd.path, "index"))
    known.add(m.item)
    p.access("write", f"local.{m.item}", join(cmd.path, "item"), "loop")
    if m.index:
        known.add(m.index)
        p.access("write", f"local.{m.index}", join(cmd.path, "index"), "loop")
    cmd.model = m
    cmd.children["commands"] = p.commands(m.commands, join(cmd.path, "commands"), known, True)
    return cmd


def parse_while(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the condition and the body."""
    m = p.model(WhileFields, fields, cmd.path)
    if m is None:
        return None
    p.value(m.condition, join(cmd.path, "condition"), known)
    cmd.model = m
    cmd.children["commands"] = p.commands(m.commands, join(cmd.path, "commands"), known, True)
    return cmd


def parse_loop_control(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """``break`` / ``continue``: only inside a loop, with no fields."""
    if not in_loop:
        p.error("loop-control", f"'{cmd.name}' can only be used inside a for or while loop", cmd.path)
        return None
    return parse_no_fields(p, cmd, fields, known, in_loop)


async def run_for(it: Interpreter, cmd: Command) -> None:
    """Run the body once per item (a dict's keys), setting ``item`` and ``index`` as locals. With a trace, the
    first passes are recorded (:class:`LoopTrace`), the rest run as they would without one."""
    m = cmd.model
    iterable = await it.value(m.in_, f"{cmd.path}.in")
    if isinstance(iterable, dict):
        iterable = list(iterable)
    try:
        iterator = iter(iterable)
    except TypeError:
        raise S2OError("runtime", f"TypeError: 'in' is expected to be a list, got {type_name(iterable)}",
                       path=f"{cmd.path}.in") from None
    body = cmd.children["commands"]
    trace = LoopTrace.of(it)
    try:
        if trace is not None and not await traced_for(it, cmd, iterator, body, trace):
            return
        count = trace.count if trace is not None else 0
        if all_sync(body):
            await for_steps(it, cmd, iterator, fastpath.steps(it, body), count, trace)
            return
        await for_passes(it, cmd, iterator, body, count, trace)
    finally:
        if trace is not None:
            trace.end()


async def traced_for(it: Interpreter, cmd: Command, iterator: Iterator[Any], body: list[Command],
                     trace: LoopTrace) -> bool:
    """The recorded passes of a ``for`` (at most :data:`~s2o_kernel.bounds.TRACE_PASSES`), each through the
    general path in a span of its own; whether the loop goes on after them (then the task is muted)."""
    m, session = cmd.model, it.session
    while trace.count < TRACE_PASSES:
        item = next_item(iterator, cmd)
        if item is _DONE:
            return False
        trace.count += 1
        session.set_local(m.item, item)
        if m.index:
            session.set_local(m.index, trace.count - 1)
        begin_pass(it, cmd, trace.count)
        bound = ((m.item, item), (m.index, trace.count - 1)) if m.index else ((m.item, item),)
        if not await trace.run_pass(it, body, bound):
            return False
    trace.mute()
    return True


async def for_passes(it: Interpreter, cmd: Command, iterator: Iterator[Any], body: list[Command], count: int,
                     trace: LoopTrace | None) -> None:
    """:func:`run_for`'s passes over a body that may await, from pass ``count`` + 1."""
    m, session = cmd.model, it.session
    turned = monotonic()
    try:
        while True:
            item = next_item(iterator, cmd)
            if item is _DONE:
                break
            count += 1
            session.set_local(m.item, item)
            if m.index:
                session.set_local(m.index, count - 1)
            begin_pass(it, cmd, count)
            if not await pass_async(it, body):
                break
            if not count % YIELD_EVERY and monotonic() - turned >= YIELD_INTERVAL:
                await asyncio.sleep(0)  # let parallel branches and cancellation in
                turned = monotonic()
    finally:
        if trace is not None:
            trace.count = count


async def for_steps(it: Interpreter, cmd: Command, iterator: Iterator[Any], steps: list[Step], count: int = 0,
                    trace: LoopTrace | None = None) -> None:
    """:func:`run_for`'s passes over a body of sync commands from pass ``count`` + 1, each command a step
    (:mod:`..fragments.fastpath`; the namespace and ``exc`` read once, as the steps take them). A plain item
    (``str``, number…) is set in the namespace as :meth:`~..session.Session.set_local` would, any other through
    it. The passes made are left on ``trace`` when there is one, however the loop ends."""
    m, session = cmd.model, it.session
    namespace, view = session.namespace(), HANDLING.get()
    item_name, index_name = m.item, m.index
    named = accepted(item_name) and (not index_name or accepted(index_name))
    passes, seconds, start, progress = it.limits.loop_iterations, it.limits.time, it.start, session.progress
    turned = monotonic()
    try:
        while True:
            try:  # next_item, inline
                item = next(iterator)
            except StopIteration:
                break
            except S2OError:
                raise
            except Exception as exc:
                raise runtime_error(exc, f"{cmd.path}.in") from None
            count += 1
            if named and type(item) in PLAIN_TYPES:
                namespace[item_name] = item
                if index_name:
                    namespace[index_name] = count - 1
            else:
                session.set_local(item_name, item)
                if index_name:
                    session.set_local(index_name, count - 1)
            if count > passes:  # begin_pass, inline
                raise loop_limit(it, cmd)
            if monotonic() - start > seconds:
                it.check_time(cmd.path)
            progress.note_pass(count)
            try:
                for step in steps:
                    step(namespace, view)
            except Break:
                break
            except Continue:
                pass
            if not count % YIELD_EVERY and monotonic() - turned >= YIELD_INTERVAL:
                await asyncio.sleep(0)
                turned = monotonic()
    finally:
        if trace is not None:
            trace.count = count


#: What :func:`next_item` returns after the last item.
_DONE = object()


def next_item(iterator: Iterator[Any], cmd: Command) -> Any:
    """The loop's next item, or :data:`_DONE`; a host iterator that fails is ``runtime`` at the loop's ``in``."""
    try:
        return next(iterator)
    except StopIteration:
        return _DONE
    except S2OError:
        raise
    except Exception as exc:
        raise runtime_error(exc, f"{cmd.path}.in") from None


def accepted(name: str) -> bool:
    """Whether ``name`` may be set as a local (:func:`~..scopes.check_target_name`); the loop sets a refused
    name through ``Session.set_local``, which raises its error."""
    try:
        return check_target_name(name) == name
    except S2OError:
        return False


async def run_while(it: Interpreter, cmd: Command) -> None:
    """Run the body while the condition is true. A condition that cannot await is read by a plain call
    (:func:`..fragments.fastpath.condition`) and a body of sync commands runs as steps; a condition that
    may await, or any condition once the session's engine changed mid-run (turned guarded), is awaited
    through :meth:`~..fragments.interpreter.Interpreter.truth`, a body that may await through ``block``.
    With a trace, the first passes are recorded through the general path (:class:`LoopTrace`)."""
    raw, path = cmd.model.condition, f"{cmd.path}.condition"
    body = cmd.children["commands"]
    trace = LoopTrace.of(it)
    try:
        if trace is not None:
            while trace.count < TRACE_PASSES:
                if not await it.truth(raw, path):
                    return
                trace.count += 1
                begin_pass(it, cmd, trace.count)
                if not await trace.run_pass(it, body):
                    return
            trace.mute()
        await while_passes(it, cmd, body, trace.count if trace is not None else 0, trace)
    finally:
        if trace is not None:
            trace.end()


async def while_passes(it: Interpreter, cmd: Command, body: list[Command], count: int,
                       trace: LoopTrace | None) -> None:
    """:func:`run_while`'s passes from pass ``count`` + 1, the passes made left on ``trace`` however they end."""
    steps = fastpath.steps(it, body) if all_sync(body) else None
    raw, path = cmd.model.condition, f"{cmd.path}.condition"
    test = fastpath.condition(it, raw, path)
    namespace, view = it.session.namespace(), HANDLING.get()
    execution, engine, truth_of = it.execution, it.execution.engine, it.truth_of
    passes, seconds, start, progress = it.limits.loop_iterations, it.limits.time, it.start, it.session.progress
    turned = monotonic()
    try:
        while True:
            if test is not None and execution.engine is engine:
                value = test(namespace, view)
                if not (value if type(value) is bool else truth_of(value, path)):
                    break
            elif not await it.truth(raw, path):
                break
            count += 1
            if count > passes:  # begin_pass, inline
                raise loop_limit(it, cmd)
            if monotonic() - start > seconds:
                it.check_time(cmd.path)
            progress.note_pass(count)
            if steps is not None:  # pass_async for a body of sync commands, as steps
                try:
                    for step in steps:
                        step(namespace, view)
                except Break:
                    break
                except Continue:
                    pass
            elif not await pass_async(it, body):
                break
            if not count % YIELD_EVERY and monotonic() - turned >= YIELD_INTERVAL:
                await asyncio.sleep(0)
                turned = monotonic()
    finally:
        if trace is not None:
            trace.count = count


def begin_pass(it: Interpreter, cmd: Command, count: int) -> None:
    """Start pass ``count`` (1-based) of a loop: ``loop-limit`` past ``limits.loop_iterations``,
    ``timedOut`` past the run's time, and the pass counted on the session's progress."""
    if count > it.limits.loop_iterations:
        raise loop_limit(it, cmd)
    if monotonic() - it.start > it.limits.time:  # Interpreter.check_time, inline: once a pass
        it.check_time(cmd.path)
    it.session.progress.note_pass(count)


def loop_limit(it: Interpreter, cmd: Command) -> S2OError:
    """The ``loop-limit`` error of ``cmd``, a loop that started a pass past ``limits.loop_iterations``."""
    limit = it.limits.loop_iterations
    return S2OError("loop-limit", f"the loop ran more than {limit} iterations (limits.loop_iterations = {limit})",
                    path=cmd.path)


async def pass_async(it: Interpreter, body: list[Command]) -> bool:
    """Run one pass of a loop's body; ``False`` after a ``break``."""
    try:
        await it.block(body)
    except Break:
        return False
    except Continue:
        pass
    return True


def run_break(it: Interpreter, cmd: Command) -> None:
    """End the innermost loop."""
    raise Break


def run_continue(it: Interpreter, cmd: Command) -> None:
    """End the innermost loop's pass."""
    raise Continue


class LoopTrace:
    """A loop's passes in the run's trace (SPEC 14; :mod:`..fragments.trace`): the first
    :data:`~s2o_kernel.bounds.TRACE_PASSES` each in a span numbered by pass, run through the general path;
    then the task muted (:meth:`~..fragments.trace.Tracer.mute`) and the passes counted. ``count``: passes made
    so far; ``loop``: the loop command's span."""

    __slots__ = ("count", "limit", "loop", "token", "tracer")

    def __init__(self, tracer: Tracer, loop: int, limit: int) -> None:
        self.tracer, self.loop, self.count, self.token, self.limit = tracer, loop, 0, None, limit

    @classmethod
    def of(cls, it: Interpreter) -> LoopTrace | None:
        """The loop's trace, or ``None`` when the run keeps none or the loop's own span is not recorded."""
        tracer = it.tracer
        if tracer is None:
            return None
        loop = tracer.current()
        return cls(tracer, loop, it.limits.loop_iterations) if loop >= 0 else None

    async def run_pass(self, it: Interpreter, body: list[Command], bound: tuple[tuple[str, Any], ...] = ()) -> bool:
        """Run pass :attr:`count` in a span of its own (:func:`pass_async`), which shows the loop's names
        ``bound`` for it (a ``for``'s item and index); ``False`` after a ``break``."""
        tracer = self.tracer
        span = tracer.open("pass", f"pass {self.count}", join(self.loop_path(), "commands"))
        tracer.note("pass", self.count)
        for name, value in bound:
            tracer.bound(span, name, value)
        try:
            going = await pass_async(it, body)
        except BaseException as exc:
            tracer.close(span, exc)
            raise
        tracer.close(span)
        return going

    def loop_path(self) -> str:
        """The loop command's JSON path."""
        return self.tracer.spans[self.loop].path

    def mute(self) -> None:
        """The recorded passes are done: the rest are counted, not kept."""
        self.token = self.tracer.mute(self.loop)

    def end(self) -> None:
        """The loop ended (however): its passes on its span (a pass refused by ``loop-limit`` was not made); the
        task records again."""
        self.count = min(self.count, self.limit)
        if self.token is not None:
            self.tracer.unmute(self.token, self.loop, self.count, TRACE_PASSES)
        else:
            self.tracer.spans[self.loop].info["passes"] = self.count


FOR = CommandSpec("for", parse_for, run_for, fields=ForFields)
WHILE = CommandSpec("while", parse_while, run_while, fields=WhileFields)
BREAK = CommandSpec("break", parse_loop_control, None, run_sync=run_break)
CONTINUE = CommandSpec("continue", parse_loop_control, None, run_sync=run_continue)
