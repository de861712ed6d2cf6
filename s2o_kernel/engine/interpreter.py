"""Running a parsed fragment as one run (SPEC 6, 7).

:func:`run_program` runs a :class:`~.fragments.Program` on the session's
event loop thread as one coroutine, so awaited calls in the branches of a
``parallel`` command overlap, the run-time limit covers everything including
awaits (``asyncio.wait_for`` for awaiting, the watchdog for work that never
yields), and an interrupt cancels the whole run.

Semantics:

* A command that fails leaves locals, agent and conversation variables as
  they were before it; when it carries ``onError``, ``exc`` holds the error
  while the handler runs and the run goes on after it. An error inside the
  handler propagates. Limits (``timedOut``, ``stopped``, ``loop-limit``) and
  ``fail`` are not handled by ``onError``: they end the run.
* Each execution of a ``for``/``while`` command counts its own iterations
  against ``limits.loop_iterations`` (a loop inside a loop counts separately).
* ``call`` runs a function with fresh locals holding its arguments, each
  checked against its declared type; ``result`` is its return value.
* ``parallel`` runs its branches concurrently; errors of every branch are
  gathered into one; a ``fail`` or a limit in one branch cancels the others.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
import types
from typing import Any, Callable

from .dynamic import expression_of
from .errors import ErrorGroup, S2OError
from .fragments import Command, Function, Program
from .limits import RunInterrupt, RunTimeout

#: Errors that ``onError`` does not handle: they end the run.
UNHANDLED = frozenset({"timedOut", "stopped", "loop-limit", "cost-limit", "memory-limit", "row-limit"})

_TYPES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, (list, tuple)),
    "dict": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _End(Exception):
    pass


class _Fail(Exception):
    def __init__(self, error: S2OError) -> None:
        self.error = error


def type_name(value: Any) -> str:
    """The SPEC 7 type name of a value (``str``, ``int``, …), else the Python type's name."""
    for name in ("bool", "int", "float", "str", "list", "dict"):
        if name != "float" and _TYPES[name](value) or name == "float" and isinstance(value, float):
            return name
    return type(value).__name__


class Interpreter:
    """Runs one program for one session; collects output parts and log lines."""

    def __init__(self, session: Any, program: Program, on_output: Callable[[dict[str, Any]], None] | None,
                 start: float) -> None:
        self.s = session
        self.program = program
        self.on_output = on_output
        self.start = start
        self.outputs: list[dict[str, Any]] = []
        self.logs: list[str] = []
        self.limits = session.settings.limits
        self.parallel_depth = 0
        self.current_path: str | None = None

    # -- values --------------------------------------------------------------------
    async def value(self, raw: Any, path: str, fields: dict[str, Any] | None = None) -> Any:
        """A dynamic value: strings are dynamic strings (awaited when async), lists and dicts are walked."""
        if isinstance(raw, str):
            found = expression_of(raw)
            if found is None:
                return raw
            return await self.expression(found[0], path, fields)
        if isinstance(raw, list):
            return [await self.value(v, f"{path}[{i}]", fields) for i, v in enumerate(raw)]
        if isinstance(raw, dict):
            return {k: await self.value(v, f"{path}.{k}", fields) for k, v in raw.items()}
        return raw

    async def expression(self, source: str, path: str, fields: dict[str, Any] | None) -> Any:
        s = self.s
        names = list(fields) if fields is not None else []
        try:
            compiled = s.engine.compile(source, command_fields=names)
        except S2OError as exc:
            raise exc.with_context(path=path) from None
        if fields is not None:
            s.set_command_fields(fields)
        try:
            value = eval(compiled.code, s._globals)
            if compiled.is_coroutine_code or (type(value) is types.CoroutineType and compiled.top_call):
                value = await value
            value = s._finish(compiled, value)
        except BaseException as exc:
            if isinstance(exc, (asyncio.CancelledError, _Return, _End)):
                raise
            err = s._map_error(exc, compiled, self.start)
            if isinstance(exc, NameError) and err.code == "runtime":
                err.code = "not-set"
                err.message = f"'{getattr(exc, 'name', '?')}' has not been set at this point of the run"
            raise err.with_context(path=path) from None
        return value

    async def truth(self, raw: Any, path: str) -> bool:
        try:
            return bool(await self.value(raw, path))
        except S2OError:
            raise
        except Exception as exc:  # __bool__ of a host object
            raise S2OError("runtime", f"{type(exc).__name__}: {exc}", path=path) from None

    def emit(self, part: dict[str, Any]) -> None:
        self.outputs.append(part)
        if self.on_output is not None:
            self.on_output(part)

    def check_time(self, path: str) -> None:
        if time.monotonic() - self.start > self.limits.time:
            raise S2OError("timedOut", f"the run took longer than the time limit (limits.time = "
                           f"{self.limits.time:g} s)", path=path)

    # -- commands ------------------------------------------------------------------
    async def block(self, commands: list[Command]) -> None:
        for cmd in commands:
            await self.command(cmd)

    async def command(self, cmd: Command) -> None:
        self.check_time(cmd.path)
        self.current_path = cmd.path
        snap = self.s.snapshot() if self.parallel_depth == 0 else None
        try:
            await getattr(self, f"run_{cmd.name}")(cmd)
        except (asyncio.CancelledError, RunTimeout, RunInterrupt, KeyboardInterrupt):
            if snap is not None:  # a limit or an interrupt: nothing of this command stays
                self.s.restore(snap)
            raise
        except S2OError as exc:
            exc.with_context(path=cmd.path)
            if exc.stage == "validate":
                exc.stage = "run"
            if snap is not None:
                self.s.restore(snap)
            if cmd.on_error is None or exc.code in UNHANDLED:
                raise
            await self.handle(cmd.on_error, exc)
        finally:
            self.s.set_command_fields({})

    async def handle(self, handler: list[Command], error: S2OError) -> None:
        previous = self.s._globals.get("exc")
        self.s.set_exc(error)
        try:
            await self.block(handler)
        finally:
            if previous is None:
                self.s.set_exc(None)
            else:
                self.s._globals["exc"] = previous

    async def run_var(self, cmd: Command) -> None:
        done: dict[str, Any] = {}
        for target, raw in cmd.fields.items():
            scope, name, items = cmd.model[target]
            path = f"{cmd.path}.{target}"
            value = await self.value(raw, path, done)
            try:
                self.assign(scope, name, items, value, target)
            except S2OError as exc:
                exc.stage = "run"
                raise exc.with_context(path=path) from None
            done[name] = value

    def assign(self, scope: str, name: str, items: list[Any], value: Any, target: str) -> None:
        s = self.s
        if items:
            if scope == "local":
                if name not in s._globals:
                    raise S2OError("not-set", f"'{name}' has not been set, so '{target}' cannot be set")
                root = s._globals[name]
            else:
                store = s._agent if scope == "agent" else s._conv
                if name not in store:
                    raise S2OError("not-set", f"{scope}.{name} has not been set, so '{target}' cannot be set")
                root = json.loads(json.dumps(store[name]))
            holder = root
            try:
                for key in items[:-1]:
                    holder = holder[key]
                if isinstance(holder, list) and items[-1] == len(holder):
                    holder.append(value)
                else:
                    if isinstance(holder, list) and not -len(holder) <= items[-1] < len(holder):
                        raise IndexError("list index out of range")
                    holder[items[-1]] = value
            except (KeyError, IndexError, TypeError) as exc:
                raise S2OError("runtime", f"{type(exc).__name__}: cannot set {target}: {exc}") from None
            value = root
        if scope == "local":
            s.set_local(name, value)
        elif scope == "agent":
            s.set_agent(name, value)
        else:
            s.set_conv(name, value)

    async def run_if(self, cmd: Command) -> None:
        if await self.truth(cmd.model.condition, f"{cmd.path}.condition"):
            await self.block(cmd.children["then"])
        else:
            await self.block(cmd.children["else"])

    def _count(self, count: int, cmd: Command) -> None:
        limit = self.limits.loop_iterations
        if count > limit:
            raise S2OError("loop-limit", f"the loop ran more than {limit} iterations "
                           f"(limits.loop_iterations = {limit})", path=cmd.path)

    async def run_for(self, cmd: Command) -> None:
        m = cmd.model
        iterable = await self.value(m.in_, f"{cmd.path}.in")
        if isinstance(iterable, dict):
            iterable = list(iterable)
        try:
            iterator = iter(iterable)
        except TypeError:
            raise S2OError("runtime", f"TypeError: 'in' is expected to be a list, got {type_name(iterable)}",
                           path=f"{cmd.path}.in") from None
        count = 0
        for item in iterator:
            count += 1
            self.s.set_local(m.item, item)
            if m.index:
                self.s.set_local(m.index, count - 1)
            if not await self.iteration(cmd, count):
                break

    async def run_while(self, cmd: Command) -> None:
        count = 0
        while await self.truth(cmd.model.condition, f"{cmd.path}.condition"):
            count += 1
            if not await self.iteration(cmd, count):
                break

    async def iteration(self, cmd: Command, count: int) -> bool:
        """Run one pass of a loop's body under the limits; ``False`` after a ``break``."""
        self._count(count, cmd)
        self.check_time(cmd.path)
        try:
            await self.block(cmd.children["commands"])
        except _Break:
            return False
        except _Continue:
            pass
        await asyncio.sleep(0)  # let parallel branches and cancellation in
        return True

    async def run_break(self, cmd: Command) -> None:
        raise _Break

    async def run_continue(self, cmd: Command) -> None:
        raise _Continue

    async def run_return(self, cmd: Command) -> None:
        raise _Return(await self.value(cmd.fields, cmd.path))

    async def run_end(self, cmd: Command) -> None:
        raise _End

    async def run_fail(self, cmd: Command) -> None:
        message = await self.value(cmd.fields, cmd.path)
        raise _Fail(S2OError("failCommand", str(message), path=cmd.path))

    async def run_log(self, cmd: Command) -> None:
        text = await self.value(cmd.fields, cmd.path)
        self.logs.append(text if isinstance(text, str) else json.dumps(text, default=repr))

    async def run_output(self, cmd: Command) -> None:
        m = cmd.model
        if m.text is not None:
            text = await self.value(m.text, f"{cmd.path}.text")
            self.emit({"type": "text", "text": text if isinstance(text, str) else repr(text)})
        elif m.html is not None:
            html = await self.value(m.html, f"{cmd.path}.html")
            self.emit({"type": "html", "html": str(html)})
        else:
            data = await self.value(m.image, f"{cmd.path}.image")
            try:
                base64.b64decode(str(data), validate=True)
            except (binascii.Error, ValueError):
                raise S2OError("runtime", "ValueError: an image part must be base64 text",
                               path=f"{cmd.path}.image") from None
            self.emit({"type": "image", "data": str(data), "mime": m.mime})

    async def run_call(self, cmd: Command) -> None:
        m = cmd.model
        fn = self.program.functions[m.function]
        args = {}
        for name, raw in m.args.items():
            args[name] = await self.value(raw, f"{cmd.path}.args.{name}")
        value = await self.call(fn, args, f"{cmd.path}.args")
        self.s.set_result(value)

    def bind_args(self, fn: Function, args: dict[str, Any], path: str) -> dict[str, Any]:
        """Check ``args`` against ``fn``'s declared names and types (SPEC 7)."""
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
            if not _TYPES[kind](value):
                raise S2OError("argument", f"{name} is expected to be {kind}, got {type_name(value)}",
                               path=f"{path}.{name}")
            bound[name] = value
        return bound

    async def call(self, fn: Function, args: dict[str, Any], path: str) -> Any:
        bound = self.bind_args(fn, args, path)
        with self.s.function_scope(bound):
            return await self.function_body(fn)

    async def function_body(self, fn: Function) -> Any:
        try:
            await self.block(fn.commands)
        except _Return as ret:
            return ret.value
        except S2OError as exc:
            if fn.on_error is None or exc.code in UNHANDLED:
                raise
            try:
                await self.handle(fn.on_error, exc)
            except _Return as ret:
                return ret.value
        return None

    async def run_parallel(self, cmd: Command) -> None:
        self.parallel_depth += 1
        tasks = [asyncio.ensure_future(self.block(branch)) for branch in cmd.branches]
        try:
            failed: dict[int, S2OError] = {}
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=tasks.index):
                    exc = task.exception()
                    if exc is None:
                        continue
                    if isinstance(exc, S2OError) and exc.code not in UNHANDLED:
                        failed[tasks.index(task)] = exc
                        continue
                    for other in pending:
                        other.cancel()
                    await asyncio.gather(*pending, return_exceptions=True)
                    raise exc
            errors = [failed[i] for i in sorted(failed)]  # in branch order, whatever finished first
            if errors:
                if len(errors) == 1:
                    raise errors[0]
                group = ErrorGroup(errors)
                group.message = f"{len(errors)} branches failed: " + "; ".join(
                    f"{e.path}: {e.code}: {e.message}" for e in errors)
                group.path = cmd.path
                raise group
        finally:
            self.parallel_depth -= 1
            for task in tasks:
                if not task.done():
                    task.cancel()


async def run_program(session: Any, program: Program, on_output: Callable[[dict[str, Any]], None] | None,
                      start: float, inputs_args: dict[str, Any] | None = None) -> Any:
    """Run ``program`` as one run; returns ``(code, value, outputs, logs, error)``."""
    interp = Interpreter(session, program, on_output, start)
    remaining = max(session.settings.limits.time - (time.monotonic() - start), 0.0)
    code, value, error = "success", None, None
    try:
        body = program.body
        if program.kind in ("agent", "function") and body.args:
            given = {k: v for k, v in (inputs_args or {}).items() if k in body.args}  # the rest stays in sys.inputs
            bound = interp.bind_args(body, given, "sys.inputs")
            with session.function_scope(bound) if program.kind == "agent" else _merge_locals(session, bound):
                value = await asyncio.wait_for(interp.function_body(body), remaining)
        elif program.kind == "agent":
            with session.function_scope({}):
                value = await asyncio.wait_for(interp.function_body(body), remaining)
        else:
            value = await asyncio.wait_for(interp.function_body(body), remaining)
    except _End:
        pass
    except _Fail as f:
        code, error = "failCommand", f.error
    except (asyncio.TimeoutError, TimeoutError):
        code = "timedOut"
        error = S2OError("timedOut", f"the run took longer than the time limit (limits.time = "
                         f"{session.settings.limits.time:g} s)", path=interp.current_path)
    except S2OError as exc:
        code = {"timedOut": "timedOut", "stopped": "stopped"}.get(exc.code, "errorInAgent")
        if exc.stage == "validate":
            exc.stage = "run"
        error = exc
    except (_Break, _Continue):  # pragma: no cover - refused at validation
        code, error = "errorInAgent", S2OError("loop-control", "break or continue outside a loop")
    return code, value, interp.outputs, interp.logs, error


class _merge_locals:
    """Context manager: set ``bound`` as locals of the current (notebook) function."""

    def __init__(self, session: Any, bound: dict[str, Any]) -> None:
        self.session = session
        self.bound = bound

    def __enter__(self) -> None:
        for k, v in self.bound.items():
            self.session.set_local(k, v)

    def __exit__(self, *exc: Any) -> None:
        return None
