"""The :class:`Session`: one running agent's state and the engine's public API (SPEC 5, 6, 7).

A session is a :class:`~.state.SessionState` (locals, agent and conversation variables, the engine in use,
settings changes, and the evaluation of expressions: it is its own :class:`~.execution.Execution`, the one
evaluator) that also runs fragments, parsed by :mod:`.fragments.parser` and run by
:mod:`.fragments.interpreter`, which reach the session only through the public methods of the state;
serves outside calls through a :class:`~.outside.gateway.Gateway` unless given another door; and answers
tools (:mod:`.introspection`). A session runs one evaluation at a time.

Every failure is an :class:`~.errors.S2OError`; see :mod:`.execution` for how Python errors map.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import S2OError
from ..fragments import definition_bounds
from ..fragments.dataflow import Dataflow
from ..fragments.interpreter import run_program
from ..fragments.kind import fragment_kind
from ..fragments.parser import parse_fragment
from ..fragments.trace import Tracer, TraceSource
from ..outside.call import Outside
from ..outside.gateway import Gateway
from ..outside.secrets import shared_masker
from . import introspection
from .progress import RunProgress
from .state import SessionState


@dataclass
class RunResult:
    """The outcome of one run of a fragment (SPEC 7).

    Attributes:
        code: a result code of the registry: ``success``, ``ask``, ``failCommand``, ``errorInAgent``,
            ``callFailed``, ``timedOut``, ``stopped`` or ``unexpected``.
        value: the value returned (``return``) or of the last command, or ``None``.
        outputs: output parts in order, each ``{"type": "text"|"html"|"image", …}``; empty when the run had an
            ``on_output`` sink, which alone gets them (nothing keeps a run's output, SPEC 12).
        logs: ``log`` lines.
        error: the :class:`S2OError` that ended the run, or ``None``.
        result: ``result`` when the run ended: the value of the last command that produces one (``db``, ``api``,
            ``llm``, ``ask``, ``call``, a definition run; SPEC 7), as the session's :attr:`Session.result` then
            holds it; ``None`` when none has.
        printed: the text the run's expressions printed (``print``), in order; empty when the run had an
            ``on_print`` sink, which alone gets it. Host code of your own that writes to ``sys.stdout``
            itself writes there in-process (in the worker it is printed text too).
        trace: the run's trace (SPEC 14) in its JSON form, schema ``s2o-trace`` version 1
            (:mod:`~.fragments.trace`, ``docs/tracing.md``), every secret the session knows masked; ``None`` for
            a fragment refused before it ran, or when the session keeps no trace (``keep_trace``). A property:
            the form is written out when first read, from ``trace_source``.
    """

    code: str = "success"
    value: Any = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: S2OError | None = None
    result: Any = None
    printed: str = ""
    trace_source: TraceSource | None = field(default=None, repr=False, compare=False)

    @property
    def trace(self) -> dict[str, Any] | None:
        """The run's trace in its JSON form, or ``None`` (see the class doc)."""
        return self.trace_source.json() if self.trace_source is not None else None


class Session(SessionState):
    """One running agent: locals, agent and conversation variables, and the engine in use (SPEC 5).

    How to use it::

        session = Session(Engine(make_settings({})), locals={"price": 4})
        session.evaluate("price * 3")                          # 12
        run = session.run_fragment([{"var": {"n": 2}}, {"return": "{ n * price }"}])
        run.code, run.value, run.printed, session.result       # 'success', 8, '', None

    ``Session(engine)``; ``engine`` defaults to ``Engine(Settings())`` (SPEC 10's bare defaults: an
    empty allowlist). Optional ``locals``, ``agent`` and ``conv`` give starting variables (agent and
    conversation values must be JSON: ``not-json`` otherwise). ``evaluate``, ``evaluate_dynamic`` and
    ``validate`` raise :class:`~..errors.S2OError`; ``run_fragment`` never raises and returns a
    :class:`RunResult`. ``interrupt()`` (from another thread) stops the running evaluation or run.

    A session is its own :class:`~.execution.Execution` (the run state: globals, loop thread, time limit),
    so that ``evaluate`` is a plain method call on it (docs/performance.md).

    An in-process session is for trusted text and for tools: it applies every language rule, the
    value checks and the time limit for Python-level work, but work Python cannot interrupt (a
    C-level loop, one huge allocation) and the memory limit need the worker process: use
    :class:`~.isolated.IsolatedSession` (as the kernel and ``python -m s2o_kernel.conformance
    --isolated`` do) for text you do not trust (SPEC 6, 12; ``docs/security.md``).
    """

    def default_outside(self) -> Outside:
        """The door outside calls go through when none was set: a :class:`~.outside.gateway.Gateway` over the
        settings (SPEC 7.1)."""
        return Gateway(self.settings)

    # -- introspection for tools (completion, inspection): see introspection.py --------------
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

    # -- fragments -------------------------------------------------------------------------------
    @property
    def result(self) -> Any:
        """``result`` of the notebook's function: what the last command that produces one set (SPEC 7), the
        last definition run's return value included; ``None`` when none has. Read without going through
        :attr:`locals` (``result`` is a runtime name, not a variable)."""
        return self.globals.get("result")

    def run_fragment(self, fragment: Any, *, on_output: Callable[[dict[str, Any]], None] | None = None,
                     inputs: dict[str, Any] | None = None, function: str | None = None,
                     on_print: Callable[[str], None] | None = None) -> RunResult:
        """Check then run a fragment as one run (SPEC 7); never raises for bad input. See :meth:`_run_fragment`;
        the :class:`RunResult` also carries ``result`` as the run left it, and the text the run printed
        (``printed``) unless ``on_print`` took it as it came."""
        printed: list[str] = []
        run = self._run_fragment(fragment, on_output=on_output, inputs=inputs, function=function,
                                 on_print=on_print if on_print is not None else printed.append)
        run.result = self.result
        run.printed = "".join(printed)
        return run

    def _run_fragment(self, fragment: Any, *, on_output: Callable[[dict[str, Any]], None] | None = None,
                      inputs: dict[str, Any] | None = None, function: str | None = None,
                      on_print: Callable[[str], None] | None = None) -> RunResult:
        """Check then run a fragment as one run (SPEC 7); never raises for bad input.

        ``fragment`` is parsed JSON: a command object, a list of commands, a function object or an
        agent definition; JSON text is refused (``fragment``: "pass the parsed value"). Every
        problem is reported before anything runs (``RunResult.error`` is then an
        :class:`~.errors.ErrorGroup` when there are several). An agent definition's functions stay
        defined for later ``call`` commands; ``function`` picks the one to run (default ``main``),
        whose declared arguments come from ``inputs`` (also ``sys.inputs`` during the run).
        ``on_output`` is called with each output part as it is produced, ``on_print`` with the text
        that expressions print.
        """
        start = time.monotonic()
        self.progress = RunProgress()
        if function is not None and fragment_kind(fragment) != "agent":
            return RunResult(code="errorInAgent", error=S2OError(
                "fragment", "a function can only be chosen in an agent definition ({\"functions\": {...}})",
                stage="validate"))
        try:
            program = parse_fragment(self.engine, fragment, known=set(self.locals), functions=self._agent_functions)
        except S2OError as exc:
            return RunResult(code="errorInAgent", error=exc)
        if program.kind == "agent":
            self._agent_functions = dict(program.functions)
            if function is not None:
                if function not in program.functions:
                    return RunResult(code="errorInAgent", error=S2OError(
                        "unknown-function", f"there is no function named '{function}'", stage="validate"))
                program.body = program.functions[function]
        g = self.globals
        run_inputs = dict(inputs if inputs is not None else self.settings.sys.inputs)
        sys_scope, g["sys"] = g["sys"], self._sys_scope(dict(run_inputs))  # the run's own: ask adds answers
        try:
            coro = run_program(self, program, on_output, start, run_inputs, on_print)
            try:
                with definition_bounds.applied(self, program.bounds):
                    code, value, outputs, logs, error, tracer = self.run_coroutine(coro, start)
            except S2OError as exc:
                code = exc.code if exc.code in ("timedOut", "stopped") else "errorInAgent"
                return RunResult(code=code, error=exc, trace_source=self.trace_source(self.stopped_trace))
        finally:
            g["sys"] = sys_scope
            self.items_written.clear()
        return RunResult(code=code, value=value, outputs=outputs, logs=logs, error=error,
                         trace_source=self.trace_source(tracer))

    def trace_source(self, tracer: Tracer | None) -> TraceSource | None:
        """The JSON form of ``tracer``'s trace (:mod:`~.fragments.trace`), made when first read, every text the
        session knows as secret masked (the settings' secrets and credentials, and what the door outside holds:
        password answers, as they are now), as outputs are (SPEC 14, 7.1)."""
        if tracer is None:
            return None
        door = self._outside
        masker = door.masker if isinstance(door, Gateway) else shared_masker(self.settings.sensitive_texts())
        return TraceSource(tracer.flat, masker.text if masker.texts else None)

    def dataflow(self, fragment: Any) -> Dataflow:
        """The data flow of ``fragment`` (SPEC 8): every path it reads and writes, checked as
        :meth:`run_fragment` checks it but not run. Raises its validation error (an
        :class:`~.errors.ErrorGroup` for several), as ``run_fragment`` reports them."""
        return parse_fragment(self.engine, fragment, known=set(self.locals), functions=self._agent_functions).dataflow
