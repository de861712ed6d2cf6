"""Evaluation: the :class:`Engine` (settings compiled once) and the :class:`Session` (SPEC 2, 5, 6).

An :class:`Engine` loads the allowlist and compile rules of one
:class:`~.settings.Settings` and keeps a cache of compiled expressions keyed
by source text, so an expression is parsed, checked and compiled once and
then run with a plain ``eval`` of its code object against the session's one
globals dict (no per-call dict building; see ``docs/performance.md``).

A :class:`Session` is what persists between runs: locals, agent and
conversation variables, and the engine in use. It runs expressions in the
calling thread under the time limit (:mod:`.limits`); a coroutine result
(top-level ``await``, or a whole-expression call of an async function) is
driven on the session's own event loop thread, "the shared event loop" of
SPEC 6. A session runs one evaluation at a time.

Every failure is an :class:`~.errors.S2OError`; Python exceptions raised by
the expression become code ``runtime`` with a message that starts with the
exception's type name (``ZeroDivisionError: division by zero``), secret values
scrubbed, and the line and column of the failing operation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from . import introspection, rules
from .allowlist import Allowlist, load_allowlist
from .bounded import BOUNDED_OPERATORS
from .dynamic import expression_of
from .errors import ErrorGroup, S2OError
from .guards import FSTRING_HELPER, check_value, format_string, guard_kwargs, guarded_call, guarded_import
from .limits import WATCHDOG, Armed, RunInterrupt, RunTimeout
from .scopes import CommandScope, ErrorView, SysScope, VarScope, as_json, copy_json
from .settings import Settings, make_settings, merge

#: File name given to compiled expressions (how run-time errors find their position).
FILENAME = "<s2o>"

_CACHE_SIZE = 4096

#: Result types that cannot hold anything: no scan needed.
_PLAIN_RESULTS = frozenset({str, int, float, bool, type(None), bytes, complex})


@dataclass
class Validation:
    """What :meth:`Engine.validate` found (SPEC 3).

    Attributes:
        errors: every refusal, each an :class:`S2OError` with stage ``validate``.
        allowlist_names: allowlist names the expression uses.
        local_names: names that must come from locals.
        secrets: secret names read with ``sys.secret['NAME']``.
    """

    errors: list[S2OError] = field(default_factory=list)
    allowlist_names: set[str] = field(default_factory=set)
    local_names: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        """True when the expression passed every rule."""
        return not self.errors


@dataclass
class Compiled:
    """A checked, rewritten and compiled expression (cached per engine)."""

    source: str
    code: types.CodeType
    local_names: frozenset[str]
    name_positions: dict[str, tuple[int, int]]
    may_run_long: bool
    may_hold_objects: bool
    is_coroutine_code: bool
    top_call: bool

    simple: bool = False  # no call, comprehension or await: one eval, no limit bookkeeping

    def __post_init__(self) -> None:
        self.simple = not (self.may_run_long or self.may_hold_objects or self.is_coroutine_code)


def _validation_of(checked: rules.Checked) -> Validation:
    return Validation(list(checked.errors), set(checked.allowlist_names), set(checked.local_names),
                      set(checked.secrets))


def _two_argument(fn: Any) -> bool:
    if not callable(fn):
        return False
    try:
        inspect.signature(fn).bind(1, 2)
    except TypeError:
        return False
    except ValueError:  # no signature available: accept
        return True
    return True


class Engine:
    """Settings made ready to run: the loaded allowlist, the compile rules and a compile cache.

    ``Engine(settings)`` raises ``S2OError`` with stage ``load`` when the
    allowlist fails (codes ``allowlist``, ``refused-entry``) or an operator
    rewrite names a function that is neither a two-argument allowlist name nor
    one of the engine's bounded operators (code ``settings``). ``warnings``
    lists what loaded with a warning.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings if settings is not None else Settings()
        self.allowlist: Allowlist = load_allowlist(
            self.settings.allowlist, allow_unsafe_entries=self.settings.allow_unsafe_entries)
        self.warnings: list[str] = list(self.allowlist.warnings)
        self.builtins = self._make_builtins()
        limits = self.settings.limits
        rules_cfg = self.settings.rules
        self.rule_context = rules.RuleContext(
            allowlist_names=frozenset(self.allowlist.names),
            is_async_name=self.allowlist.is_async,
            locals=None,
            sys_members=frozenset({"inputs", "query", "secret", "exists", *self.settings.sys.enabled()}),
            secrets=frozenset(self.settings.secrets),
            operators=dict(rules_cfg.operators),
            max_comprehension_depth=rules_cfg.max_comprehension_depth,
            max_for_clauses=rules_cfg.max_for_clauses,
            definition_length=limits.definition_length,
        )
        self._cache: dict[tuple[str, frozenset[str] | None], Compiled | rules.Checked] = {}
        #: source -> Compiled for plain expressions (no command fields): the hot path's lookup
        self.compiled: dict[str, Compiled] = {}

    def _make_builtins(self) -> dict[str, Any]:
        table: dict[str, Any] = dict(self.allowlist.names)
        table["__import__"] = guarded_import
        table[FSTRING_HELPER] = format_string
        table[rules.KWARGS_GUARD] = guard_kwargs
        table[rules.CALL_GUARD] = guarded_call
        for symbol, setting in self.settings.rules.operators.items():
            if setting in ("on", "off"):
                continue
            target = self.allowlist.names.get(setting)
            if target is None:
                target = BOUNDED_OPERATORS.get(setting)
            if target is None or not _two_argument(target):
                raise S2OError(
                    "settings",
                    f"rules.operators['{symbol}'] = '{setting}': a rewrite must name an allowlist function "
                    f"taking two values or one of {', '.join(sorted(BOUNDED_OPERATORS))}",
                    path=f"rules.operators.{symbol}", stage="load")
            table[rules.operator_helper_name(symbol)] = target
        return table

    # -- validation and compilation ---------------------------------------
    def check(self, source: str, *, locals: Iterable[str] | None = None,
              command_fields: Iterable[str] | None = None) -> rules.Checked:
        """Run the compile rules on ``source`` (no caching); see :func:`rules.check_expression`."""
        ctx = self.rule_context
        if locals is not None or command_fields is not None:
            ctx = rules.RuleContext(**{
                **ctx.__dict__,
                "locals": frozenset(locals) if locals is not None else None,
                "command_fields": frozenset(command_fields) if command_fields is not None else None,
            })
        return rules.check_expression(source, ctx)

    def validate(self, source: str, *, locals: Iterable[str] | None = None) -> Validation:
        """Check ``source`` without running it (SPEC 3).

        ``locals`` are the names of locals set earlier; when ``None``, every
        name that is not reserved or granted counts as a local. Never raises
        for bad input: problems are in ``Validation.errors``.
        """
        return _validation_of(self.check(source, locals=locals))

    def compile(self, source: str, *, command_fields: Iterable[str] | None = None) -> Compiled:
        """Check and compile ``source`` once; later calls return the cached result.

        Raises :class:`S2OError` (an :class:`ErrorGroup` when there are
        several problems) with stage ``validate``.
        """
        key = (source, frozenset(command_fields) if command_fields is not None else None)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._compile_uncached(source, key[1])
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
                self.compiled.clear()
            self._cache[key] = hit
            if key[1] is None and isinstance(hit, Compiled):
                self.compiled[source] = hit
        if isinstance(hit, rules.Checked):
            errors = hit.errors
            raise (errors[0] if len(errors) == 1 else ErrorGroup(errors))
        return hit

    def _compile_uncached(self, source: str, command_fields: frozenset[str] | None) -> Compiled | rules.Checked:
        checked = self.check(source, command_fields=command_fields)
        if checked.errors:
            return checked
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # compiler SyntaxWarnings must not reach the host's stderr
                code = compile(checked.tree, FILENAME, "eval", flags=_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            checked.errors.append(S2OError("syntax", str(getattr(exc, "msg", exc)), line=getattr(exc, "lineno", None),
                                           col=(exc.offset - 1) if getattr(exc, "offset", None) else None,
                                           stage="validate", source=source))
            return checked
        except (RecursionError, MemoryError):
            checked.errors.append(S2OError("too-deep", "the expression is too deeply nested to compile",
                                           stage="validate", source=source))
            return checked
        return Compiled(
            source=source,
            code=code,
            local_names=frozenset(checked.local_names),
            name_positions=checked.name_positions,
            may_run_long=checked.may_run_long or checked.is_async,
            may_hold_objects=checked.may_hold_objects or checked.is_async,
            is_coroutine_code=bool(code.co_flags & inspect.CO_COROUTINE),
            top_call=checked.top_call,
        )


_ALLOW_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class _LoopThread:
    """A session's event loop, running in its own daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="s2o-session-loop", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        while not self.loop.is_closed():
            try:
                self.loop.run_forever()
                return
            except BaseException:  # a limit exception that landed in the loop itself: keep serving
                continue


@dataclass
class RunResult:
    """The outcome of one run of a fragment (SPEC 7).

    Attributes:
        code: ``success``, ``ask``, ``failCommand``, ``errorInAgent``,
            ``callFailed``, ``timedOut``, ``stopped`` or ``unexpected``.
        value: the value returned (``return``) or of the last command, or ``None``.
        outputs: output parts in order, each ``{"type": "text"|"html"|"image", …}``.
        logs: ``log`` lines.
        error: the :class:`S2OError` that ended the run, or ``None``.
    """

    code: str = "success"
    value: Any = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: S2OError | None = None


class Session:
    """One running agent: locals, agent and conversation variables, and the engine in use (SPEC 5).

    ``Session(engine)``; ``engine`` defaults to ``Engine(Settings())``.
    Optional ``locals``, ``agent`` and ``conv`` give starting variables
    (agent and conversation values must be JSON: ``not-json`` otherwise).
    """

    def __init__(self, engine: Engine | None = None, *, locals: dict[str, Any] | None = None,
                 agent: dict[str, Any] | None = None, conv: dict[str, Any] | None = None) -> None:
        self._engine = engine if engine is not None else Engine()
        self._agent: dict[str, Any] = {}
        self._conv: dict[str, Any] = {}
        self._globals: dict[str, Any] = {}
        self._loop_thread: _LoopThread | None = None
        self._functions: dict[str, Any] = {}
        self._deadline = Armed(0, 0.0)  # reused by the hot path's time limit
        self._token: Any = None
        self._bind_engine()
        from .scopes import check_json
        for name, value in (agent or {}).items():
            check_json(value, f"agent.{name}")
            self._agent[name] = copy_json(value)
        for name, value in (conv or {}).items():
            check_json(value, f"conv.{name}")
            self._conv[name] = copy_json(value)
        for name, value in (locals or {}).items():
            self.set_local(name, value)

    # -- state ---------------------------------------------------------------
    def _bind_engine(self) -> None:
        s = self._engine.settings
        g = self._globals
        g["__builtins__"] = self._engine.builtins
        g["agent"] = VarScope(self._agent, "agent")
        g["conv"] = VarScope(self._conv, "conv")
        g["const"] = VarScope(dict(s.const), "const")
        g["sys"] = SysScope(dict(s.sys.inputs), s.sys.enabled(), dict(s.secrets), self._exists)
        g["command"] = CommandScope({}, "command")

    @property
    def engine(self) -> Engine:
        """The engine in use (replaced by :meth:`update_settings`)."""
        return self._engine

    @property
    def settings(self) -> Settings:
        """The settings in use."""
        return self._engine.settings

    def settings_dict(self) -> dict[str, Any]:
        """The settings as a SPEC-10-shaped dict (secret values masked)."""
        return self._engine.settings.masked_dict()

    @property
    def locals(self) -> dict[str, Any]:
        """A copy of the local variables, name → value."""
        return {k: v for k, v in self._globals.items() if k not in rules.RESERVED_NAMES and k != "__builtins__"}

    @property
    def agent_vars(self) -> dict[str, Any]:
        """A copy of the agent variables."""
        return copy_json(self._agent)

    @property
    def conv_vars(self) -> dict[str, Any]:
        """A copy of the conversation variables."""
        return copy_json(self._conv)

    def set_vars(self, *, locals: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
                 conv: dict[str, Any] | None = None) -> None:
        """Set several variables at once, taken literally (agent and conversation values must be JSON)."""
        for name, value in (locals or {}).items():
            self.set_local(name, value)
        for name, value in (agent or {}).items():
            self.set_agent(name, value)
        for name, value in (conv or {}).items():
            self.set_conv(name, value)

    def set_local(self, name: str, value: Any) -> None:
        """Set local ``name``; raises ``S2OError`` for a name the rules refuse or a reserved name, and
        ``not-allowed`` for a value holding a generator, coroutine, frame, code object or module."""
        _check_target_name(name)
        self._check_value(value, f"the local '{name}'")
        self._globals[name] = value

    def set_agent(self, name: str, value: Any) -> None:
        """Set agent variable ``name`` to a JSON value (``not-json`` otherwise)."""
        from .scopes import check_json
        _check_target_name(name)
        check_json(value, f"agent.{name}")
        self._agent[name] = copy_json(value)

    def set_conv(self, name: str, value: Any) -> None:
        """Set conversation variable ``name`` to a JSON value (``not-json`` otherwise)."""
        from .scopes import check_json
        _check_target_name(name)
        check_json(value, f"conv.{name}")
        self._conv[name] = copy_json(value)

    def reset(self) -> None:
        """Clear locals, agent and conversation variables; the settings stay."""
        for name in list(self.locals):
            del self._globals[name]
        self._globals.pop("result", None)
        self._globals.pop("exc", None)
        self._agent.clear()
        self._conv.clear()

    def snapshot(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """Shallow copies of (globals, agent, conv), to restore after a failed command."""
        return dict(self._globals), dict(self._agent), dict(self._conv)

    def restore(self, snap: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]) -> None:
        """Restore state saved by :meth:`snapshot`."""
        g, a, c = snap
        self._globals.clear()
        self._globals.update(g)
        self._agent.clear()
        self._agent.update(a)
        self._conv.clear()
        self._conv.update(c)

    def _exists(self, scope: str, name: str) -> bool:
        if scope == "local":
            return name in self._globals and name not in rules.RESERVED_NAMES and not name.startswith("_")
        if scope == "agent":
            return name in self._agent
        if scope == "conv":
            return name in self._conv
        if scope == "const":
            return name in self._engine.settings.const
        return self._engine.allowlist.grants(name)

    # -- settings ------------------------------------------------------------
    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        """Merge ``patch`` (SPEC 10 names, nested) into the settings, all or nothing.

        Returns the new engine's warnings. Raises ``S2OError`` with stage
        ``load`` (codes ``settings``, ``allowlist``, ``refused-entry``) and
        then leaves the session exactly as it was.
        """
        engine = Engine(make_settings(merge(self._engine.settings.to_dict(), patch)))
        self._engine = engine
        self._bind_engine()
        return list(engine.warnings)

    # -- validation ----------------------------------------------------------
    def validate(self, expr: str) -> Validation:
        """Check ``expr`` against the rules and this session's locals, without running it."""
        return self._engine.validate(expr, locals=self.locals.keys())

    # -- evaluation ----------------------------------------------------------
    def evaluate(self, expr: str) -> Any:
        """Run one expression and return its value (SPEC 2, 6).

        Raises :class:`S2OError`: a validation code (stage ``validate``), a
        run-time code (``runtime``, ``not-set``, ``not-allowed``,
        ``not-awaited``, …), ``timedOut`` when the time limit passes, or
        ``stopped`` when interrupted (``KeyboardInterrupt`` or
        :meth:`interrupt`). The session keeps its variables either way.
        """
        compiled = self._engine.compiled.get(expr)
        if compiled is None or compiled.is_coroutine_code:
            return self._evaluate(expr, time.monotonic())
        if compiled.simple:
            try:
                return eval(compiled.code, self._globals)
            except BaseException as exc:
                if isinstance(exc, NameError) and not compiled.local_names <= self._globals.keys():
                    self._unknown_names(compiled)
                raise self._map_error(exc, compiled, 0.0) from None
        # calls or comprehensions: under the time limit
        value = self._eval_limited(compiled, self._engine.settings.limits.time, 0.0)
        if type(value) in _PLAIN_RESULTS:
            return value
        if type(value) is types.CoroutineType:
            coro = self._coroutine_of(compiled, value)
            return self._await_here(coro, compiled, time.monotonic())
        return self._finish(compiled, value)

    def evaluate_dynamic(self, text: str) -> Any:
        """The value of a dynamic string (SPEC 1): plain text as is, ``{ expr }`` evaluated."""
        limit = self._engine.settings.limits.definition_length
        if len(text) > limit:
            raise S2OError("too-long", f"the value is {len(text)} characters long; the limit is {limit}",
                           stage="validate")
        found = expression_of(text)
        if found is None:
            return text
        source, offset = found
        try:
            return self._evaluate(source, time.monotonic())
        except S2OError as exc:
            if exc.line == 1 and exc.col is not None and exc.source == source:
                pass  # positions stay relative to the expression, as SPEC 3 says
            raise

    async def evaluate_async(self, expr: str) -> Any:
        """Like :meth:`evaluate`, for callers on an event loop: awaiting happens off their loop."""
        start = time.monotonic()
        compiled, value = self._run_sync(expr, start)
        coro = self._coroutine_of(compiled, value)
        if coro is None:
            return self._finish(compiled, value)
        fut = self._submit(coro, compiled, start)
        try:
            value = await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            self._interrupt_async()
            raise
        except BaseException as exc:
            raise self._map_error(exc, compiled, start) from None
        return self._finish(compiled, value)

    def interrupt(self) -> None:
        """Stop the evaluation in progress (from another thread); it ends with code ``stopped``."""
        token = self._token
        if token is not None:
            WATCHDOG.interrupt(token)

    def _evaluate(self, source: str, start: float, *, command_fields: Iterable[str] | None = None) -> Any:
        compiled, value = self._run_sync(source, start, command_fields=command_fields)
        coro = self._coroutine_of(compiled, value)
        if coro is None:
            return self._finish(compiled, value)
        return self._await_here(coro, compiled, start)

    def _await_here(self, coro: Any, compiled: Compiled, start: float) -> Any:
        """Drive ``coro`` on the session's loop thread and wait for it in this thread."""
        fut = self._submit(coro, compiled, start)
        limit = self._engine.settings.limits.time
        try:
            value = fut.result(max(limit - (time.monotonic() - start), 0) + 1.0)
        except concurrent.futures.TimeoutError:
            self._interrupt_async()
            raise self._timeout_error(compiled) from None
        except KeyboardInterrupt:
            self._interrupt_async()
            try:
                fut.result(2.0)
            except BaseException:
                pass
            raise S2OError("stopped", "the run was interrupted; the session keeps its variables",
                           source=compiled.source) from None
        except BaseException as exc:
            raise self._map_error(exc, compiled, start) from None
        return self._finish(compiled, value)

    def _run_sync(self, source: str, start: float, *, command_fields: Iterable[str] | None = None
                  ) -> tuple[Compiled, Any]:
        compiled = self._engine.compile(source, command_fields=command_fields)
        g = self._globals
        if not compiled.local_names <= g.keys():
            self._unknown_names(compiled)
        if not compiled.may_run_long:
            try:
                return compiled, eval(compiled.code, g)
            except BaseException as exc:
                raise self._map_error(exc, compiled, start) from None
        limit = self._engine.settings.limits.time
        return compiled, self._eval_limited(compiled, max(limit - (time.monotonic() - start), 0.0), start)

    def _eval_limited(self, compiled: Compiled, seconds: float, start: float) -> Any:
        """``eval`` of ``compiled`` with the watchdog armed for ``seconds``; errors become ``S2OError``.

        The exception the watchdog raises may arrive anywhere up to the disarm,
        even inside the ``finally``: the outer handler disarms again
        (idempotent) and maps it, so it never escapes as a raw exception.
        """
        token = WATCHDOG.rearm(self._deadline, seconds)
        self._token = token
        try:
            try:
                return eval(compiled.code, self._globals)
            finally:
                self._token = None
                WATCHDOG.disarm(token)
        except BaseException as exc:
            self._token = None
            WATCHDOG.disarm(token)
            if isinstance(exc, NameError) and not compiled.local_names <= self._globals.keys():
                self._unknown_names(compiled)
            raise self._map_error(exc, compiled, start) from None

    def _unknown_names(self, compiled: Compiled) -> None:
        errors = []
        for name in sorted(compiled.local_names - self._globals.keys(),
                           key=lambda n: compiled.name_positions.get(n, (0, 0))):
            line, col = compiled.name_positions.get(name, (None, None))
            errors.append(S2OError("unknown-name", f"'{name}' is not an argument, a variable set earlier, "
                                   "a runtime namespace or an allowlist name", line=line, col=col,
                                   stage="validate", source=compiled.source))
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)

    def _coroutine_of(self, compiled: Compiled, value: Any) -> Any:
        if compiled.is_coroutine_code:
            return value
        if type(value) is types.CoroutineType:
            if compiled.top_call:
                return value
            value.close()
            raise S2OError("not-awaited", "the result holds a coroutine that was never awaited: "
                           "put 'await' before the async call", source=compiled.source)
        return None

    def warm_up(self) -> None:
        """Start the threads a run uses (event loop, watchdog) by running a trivial expression and
        a trivial coroutine, so that memory measured afterwards is the session's resting size."""
        self.evaluate("[1 for x in [1]]")
        self._submit(_noop(), None, time.monotonic()).result(5)

    def _submit(self, coro: Any, compiled: Compiled, start: float) -> concurrent.futures.Future:
        if self._loop_thread is None or self._loop_thread.loop.is_closed():
            self._loop_thread = _LoopThread()
        remaining = max(self._engine.settings.limits.time - (time.monotonic() - start), 0.0)
        session = self

        async def step() -> Any:
            token = WATCHDOG.arm(remaining + 0.1)
            session._token = token
            try:
                return await asyncio.wait_for(coro, remaining)
            finally:
                session._token = None
                WATCHDOG.disarm(token)

        self._pending = asyncio.run_coroutine_threadsafe(step(), self._loop_thread.loop)
        return self._pending

    def _interrupt_async(self) -> None:
        fut = getattr(self, "_pending", None)
        if fut is not None and not fut.done():
            fut.cancel()
            token = self._token
            if token is not None:
                WATCHDOG.interrupt(token)

    def _finish(self, compiled: Compiled, value: Any) -> Any:
        if compiled.may_hold_objects and value is not None:
            self._check_result(value, compiled)
        return value

    def _check_result(self, value: Any, compiled: Compiled) -> None:
        """Refuse results holding coroutines, generators, frames, modules (SPEC 6, 12)."""
        try:
            self._check_value(value, "the result of an expression")
        except S2OError as exc:
            exc.source = compiled.source
            raise

    _check_value = staticmethod(check_value)  # guards.check_value: deep, trusts no subclass (SPEC 12)

    def _timeout_error(self, compiled: Compiled | None) -> S2OError:
        limit = self._engine.settings.limits.time
        return S2OError("timedOut", f"the run took longer than the time limit (limits.time = {limit:g} s)",
                        source=compiled.source if compiled else None)

    def _map_error(self, exc: BaseException, compiled: Compiled, start: float) -> S2OError:
        """Turn anything raised while running into an :class:`S2OError` with a position."""
        line, col = _position(exc.__traceback__)
        if isinstance(exc, S2OError):
            err = exc
            if err.stage != "validate":
                err.stage = "run"
        elif isinstance(exc, RunTimeout):
            err = self._timeout_error(compiled)
        elif isinstance(exc, (RunInterrupt, KeyboardInterrupt, asyncio.CancelledError)):
            err = S2OError("stopped", "the run was interrupted; the session keeps its variables")
        elif isinstance(exc, TimeoutError) and time.monotonic() - start >= self._engine.settings.limits.time - 0.05:
            err = self._timeout_error(compiled)
        elif isinstance(exc, NameError) and getattr(exc, "name", None) in ("result", "exc"):
            name = exc.name
            err = S2OError("not-set", f"'{name}' has not been set: "
                           + ("no command has produced a result yet" if name == "result"
                              else "exc exists only inside an onError block"))
        elif isinstance(exc, MemoryError):
            err = S2OError("memory-limit", "the evaluation ran out of memory")
        elif isinstance(exc, RecursionError):
            err = S2OError("runtime", "RecursionError: the value is nested too deeply", python_type="RecursionError")
        elif isinstance(exc, Exception):
            text = str(exc).replace("; use sys.set_int_max_str_digits() to increase the limit", "")
            message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            err = S2OError("runtime", message, python_type=type(exc).__name__)
        else:
            err = S2OError("unexpected", f"{type(exc).__name__}: {exc}")
        err.stage = err.stage if err.stage in ("validate",) else "run"
        if err.line is None and line is not None:
            err.line, err.col = line, col
        err.source = err.source or compiled.source
        err.message = self.redact(err.message)
        err.__traceback__ = None
        err.__cause__ = None
        err.__context__ = None
        return err

    # -- text ------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***`` (for messages and displayed values)."""
        return self._engine.settings.redact(text)

    # -- introspection for tools (completion, inspection): see introspection.py --
    def completion_names(self) -> dict[str, str]:
        """Names an expression may start with, name → kind (``variable``, ``namespace``, ``module``,
        ``class``, ``function``, ``keyword``)."""
        return introspection.completion_names(self)

    def member_names(self, dotted: str) -> list[str]:
        """Public members after ``dotted.`` that an expression may read (empty when unknown)."""
        return introspection.member_names(self, dotted)

    def describe(self, dotted: str) -> str | None:
        """A short description of a granted name or a variable: signature and doc, or type and value."""
        return introspection.describe(self, dotted)

    # -- fragments -------------------------------------------------------------
    def run_fragment(self, fragment: Any, *, on_output: Callable[[dict[str, Any]], None] | None = None,
                     inputs: dict[str, Any] | None = None, function: str | None = None) -> RunResult:
        """Check then run a fragment as one run (SPEC 7); never raises for bad input.

        ``fragment`` is parsed JSON: a command object, a list of commands, a
        function object or an agent definition. Every problem is reported
        before anything runs (``RunResult.error`` is then an
        :class:`ErrorGroup` when there are several). An agent definition's
        functions stay defined for later ``call`` commands; ``function``
        picks the one to run (default ``main``), whose declared arguments
        come from ``inputs`` (also ``sys.inputs`` during the run).
        ``on_output`` is called with each output part as it is produced.
        """
        from .fragments import fragment_kind, parse_fragment
        from .interpreter import run_program

        start = time.monotonic()
        if function is not None and fragment_kind(fragment) != "agent":
            return RunResult(code="errorInAgent", error=S2OError(
                "fragment", "a function can only be chosen in an agent definition ({\"functions\": {...}})",
                stage="validate"))
        try:
            program = parse_fragment(self._engine, fragment, known=set(self.locals), functions=self._functions)
        except S2OError as exc:
            return RunResult(code="errorInAgent", error=exc)
        if program.kind == "agent":
            self._functions = dict(program.functions)
            if function is not None:
                if function not in program.functions:
                    return RunResult(code="errorInAgent", error=S2OError(
                        "unknown-function", f"there is no function named '{function}'", stage="validate"))
                program.body = program.functions[function]
        sys_scope = self._globals["sys"]
        if inputs is not None:
            s = self._engine.settings
            self._globals["sys"] = SysScope(dict(inputs), s.sys.enabled(), dict(s.secrets), self._exists)
        try:
            coro = run_program(self, program, on_output, start, inputs if inputs is not None
                               else dict(self._engine.settings.sys.inputs))
            try:
                code, value, outputs, logs, error = self._run_coroutine(coro, start)
            except S2OError as exc:
                code = exc.code if exc.code in ("timedOut", "stopped") else "errorInAgent"
                return RunResult(code=code, error=exc)
        finally:
            self._globals["sys"] = sys_scope
        return RunResult(code=code, value=value, outputs=outputs, logs=logs, error=error)

    def _run_coroutine(self, coro: Any, start: float) -> Any:
        """Run ``coro`` on the session's loop thread under the time limit; wait for it here."""
        fut = self._submit(coro, None, start)
        limit = self._engine.settings.limits.time
        try:
            return fut.result(max(limit - (time.monotonic() - start), 0) + 1.0)
        except concurrent.futures.TimeoutError:
            self._interrupt_async()
            raise self._timeout_error(None) from None
        except (KeyboardInterrupt, concurrent.futures.CancelledError):
            self._interrupt_async()
            try:
                fut.result(2.0)
            except BaseException:
                pass
            raise S2OError("stopped", "the run was interrupted; the session keeps its variables") from None

    @contextlib.contextmanager
    def function_scope(self, bound: dict[str, Any]) -> Iterator[None]:
        """Run the body with fresh locals ``bound`` (a called function's arguments), then restore."""
        g = self._globals
        keep = {k: g[k] for k in list(g) if k not in rules.RESERVED_NAMES and k != "__builtins__"}
        for k in keep:
            del g[k]
        g.update(bound)
        try:
            yield
        finally:
            for k in [k for k in g if k not in rules.RESERVED_NAMES and k != "__builtins__"]:
                del g[k]
            g.update(keep)

    def set_command_fields(self, fields: dict[str, Any]) -> None:
        """Make ``command.<field>`` read ``fields`` (the runtime calls this per command)."""
        self._globals["command"] = CommandScope(fields, "command")

    def set_result(self, value: Any) -> None:
        """Set ``result``, the value of the last result-producing command."""
        self._globals["result"] = value

    def set_exc(self, error: S2OError | None) -> None:
        """Set or clear ``exc`` (inside ``onError``)."""
        if error is None:
            self._globals.pop("exc", None)
        else:
            self._globals["exc"] = ErrorView(error)


async def _noop() -> None:
    return None


def _check_target_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise S2OError("fragment", f"{name!r} is not a valid variable name", stage="validate")
    if name.startswith("_"):
        raise S2OError("underscore", f"names starting with '_' are not allowed: '{name}'", stage="validate")
    if name in rules.RESERVED_NAMES:
        raise S2OError("fragment", f"'{name}' is a runtime namespace, not a variable", stage="validate")


def _position(tb: types.TracebackType | None) -> tuple[int | None, int | None]:
    """Line and column of the innermost operation of a compiled expression in ``tb``."""
    found = (None, None)
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == FILENAME:
            try:
                positions = list(code.co_positions())
                line, _end, col, _ecol = positions[tb.tb_lasti // 2]
                found = (line, col)
            except (IndexError, ValueError):
                found = (tb.tb_lineno, None)
        tb = tb.tb_next
    return found


__all__ = ["Engine", "Session", "Validation", "RunResult", "Compiled", "as_json"]
