"""A session's state and its evaluation (SPEC 5, 6): :class:`SessionState`, the base of :class:`~.session.Session`.

What persists between runs: locals, agent and conversation variables, the functions of the last agent
definition, and the :class:`~.engine.Engine` in use; the scopes expressions read (``agent``, ``conv``,
``const``, ``sys``, ``command``, ``exc``); snapshots a failed command is undone with; and the evaluation of
expressions and dynamic strings (a state is its own :class:`~.execution.Execution`). It is what a fragment's
commands, its interpreter (:mod:`.fragments`), introspection and the gateway's evaluator of profile fields
(:mod:`.outside.gateway`) need of a session; :class:`~.session.Session` adds running fragments, the default
door outside and the tools' API on top, so this module imports none of those.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from ..errors import S2OError
from ..language import rules
from ..language.dynamic import expression_of
from ..outside.call import Outside
from ..policy import reach
from ..policy.parts import PLAIN_TYPES
from ..settings import Settings, bare_settings, merge
from . import scopes
from .engine import Engine, Validation
from .execution import Execution
from .progress import RunProgress
from .scopes import NO_FIELDS, CommandScope, ErrorView, SysScope, VarScope, check_json, check_target_name, copy_json
from .undo import ItemJournal, Window

#: What :meth:`SessionState.snapshot` returns: shallow copies of (the current namespace, agent, conv), and the mark
#: of the run's journal of items written (:class:`~.undo.ItemJournal`).
Snapshot = tuple[dict[str, Any], dict[str, Any], dict[str, Any], Window]

#: Scopes of variables: ``local`` (the run's locals), ``agent`` and ``conv`` (JSON only, SPEC 5).
VARIABLE_SCOPES = ("local", "agent", "conv")

#: Names a called function's namespace shares with its caller's: the builtins and the runtime scopes.
SHARED_NAMES = ("__builtins__", "agent", "conv", "const", "sys")

#: The namespace of the function call running in the current task of a fragment run, with the
#: evaluator it belongs to; unset (``None``) outside calls: the notebook's function, whose namespace
#: is the evaluator's globals. Each task of a run (``parallel`` branches) sees its own call's locals.
_FRAME: ContextVar[tuple[Execution, dict[str, Any]] | None] = ContextVar("s2o_frame", default=None)


class SessionState(Execution):
    """A session without fragments: variables, scopes, settings changes and evaluation (see the module doc).

    ``SessionState(engine)``; ``engine`` defaults to ``Engine(Settings())``. Optional ``locals``, ``agent`` and
    ``conv`` give starting variables (agent and conversation values must be JSON: ``not-json`` otherwise).
    """

    def __init__(self, engine: Engine | None = None, *, locals: dict[str, Any] | None = None,
                 agent: dict[str, Any] | None = None, conv: dict[str, Any] | None = None) -> None:
        super().__init__(engine if engine is not None else Engine())
        self._agent: dict[str, Any] = {}
        self._conv: dict[str, Any] = {}
        self._agent_functions: dict[str, Any] = {}
        #: The items of locals the current run's commands wrote (``var``'s item targets, ``outputPath``).
        self.items_written = ItemJournal()
        self._outside: Outside | None = None
        self._own_outside = True
        self.llm_messages: list[dict[str, Any]] = []  # the conversation's model messages (llm, SPEC 7.1)
        #: The loop counts of the last (or running) fragment run, readable from another thread.
        self.progress = RunProgress()
        #: Whether fragment runs keep their trace (SPEC 14; ``RunResult.trace``). On by default; the benchmarks
        #: turn it off to measure what keeping one costs.
        self.keep_trace = True
        self._bind_engine()
        for name, value in (agent or {}).items():
            check_json(value, f"agent.{name}")
            self._agent[name] = copy_json(value)
        for name, value in (conv or {}).items():
            check_json(value, f"conv.{name}")
            self._conv[name] = copy_json(value)
        for name, value in (locals or {}).items():
            self.set_local(name, value)

    def _bind_engine(self) -> None:
        s = self.engine.settings
        g = self.globals
        g["__builtins__"] = self.engine.builtins
        g["agent"] = VarScope(self._agent, "agent")
        g["conv"] = VarScope(self._conv, "conv")
        g["const"] = VarScope(dict(s.const), "const")
        g["sys"] = self._sys_scope(dict(s.sys.inputs))
        g["command"] = CommandScope({}, "command")

    def _sys_scope(self, inputs: dict[str, Any]) -> SysScope:
        s = self.engine.settings
        return SysScope(inputs, s.sys.enabled(), dict(s.secrets), self.exists)

    # -- what the session is ----------------------------------------------------------------
    @property
    def execution(self) -> Execution:
        """The session's evaluator (its globals, loop thread and time limit); used by the fragment runner."""
        return self

    @property
    def settings(self) -> Settings:
        """The settings in use."""
        return self.engine.settings

    def settings_dict(self) -> dict[str, Any]:
        """The settings as a SPEC-10-shaped dict (secret values masked)."""
        return self.engine.settings.masked_dict()

    @property
    def outside(self) -> Outside:
        """The door outside calls go through (SPEC 7.1): the one set (the containment worker's forwarder, a
        caller's own door), else :meth:`default_outside`, made on first use (and anew after a change of
        profiles or secrets)."""
        if self._outside is None:
            self._outside, self._own_outside = self.default_outside(), True
        return self._outside

    @outside.setter
    def outside(self, door: Outside) -> None:  # the containment worker's forwarder, a caller's own door
        self._outside, self._own_outside = door, False

    def default_outside(self) -> Outside:
        """The door made when none was set. A state alone evaluates expressions, which call nothing outside
        (commands do); :class:`~.session.Session` makes a :class:`~.outside.gateway.Gateway`."""
        raise S2OError("unexpected", "this evaluator has no door to the outside world")

    @property
    def warnings(self) -> list[str]:
        """What the settings in use loaded with a warning (one message per allowlist entry)."""
        return list(self.engine.warnings)

    @property
    def functions(self) -> dict[str, Any]:
        """Functions of the last agent definition, name → parsed function (``call`` reaches them)."""
        return dict(self._agent_functions)

    # -- variables ------------------------------------------------------------------------------
    @property
    def locals(self) -> dict[str, Any]:
        """A copy of the local variables, name → value (inside a fragment's ``call``, the called function's)."""
        return {k: v for k, v in self.namespace().items() if k not in rules.RESERVED_NAMES and k != "__builtins__"}

    @property
    def agent_vars(self) -> dict[str, Any]:
        """A copy of the agent variables."""
        return dict(copy_json(self._agent))

    @property
    def conv_vars(self) -> dict[str, Any]:
        """A copy of the conversation variables."""
        return dict(copy_json(self._conv))

    def exists(self, scope: str, name: str) -> bool:
        """Whether ``name`` is set in ``scope`` (``local``, ``agent``, ``conv``, ``const``, else the allowlist).

        This is ``sys.exists(scope, name)`` of SPEC 5.
        """
        if scope == "local":
            return name in self.namespace() and name not in rules.RESERVED_NAMES and not name.startswith("_")
        if scope == "agent":
            return name in self._agent
        if scope == "conv":
            return name in self._conv
        if scope == "const":
            return name in self.engine.settings.const
        return self.engine.allowlist.grants(name)

    def variable(self, scope: str, name: str) -> Any:
        """The value of variable ``name`` in ``scope`` (``local``, ``agent`` or ``conv``; agent and
        conversation values as copies). Raises ``S2OError`` ``not-set`` when it is not set."""
        if scope == "local" and self.exists("local", name):
            return self.namespace()[name]
        store = self._agent if scope == "agent" else self._conv if scope == "conv" else None
        if store is not None and name in store:
            return copy_json(store[name])
        shown = name if scope == "local" else f"{scope}.{name}"
        raise S2OError("not-set", f"'{shown}' has not been set")

    def set_vars(self, *, locals: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
                 conv: dict[str, Any] | None = None) -> None:
        """Set several variables at once, taken literally (agent and conversation values must be JSON).

        All or nothing: when one name or value is refused (``S2OError``), no variable changes.
        """
        snap = self.snapshot()
        try:
            for name, value in (locals or {}).items():
                self.set_local(name, value)
            for name, value in (agent or {}).items():
                self.set_agent(name, value)
            for name, value in (conv or {}).items():
                self.set_conv(name, value)
        except BaseException:
            self.restore(snap)
            raise
        self.release(snap)

    def set_variable(self, scope: str, name: str, value: Any) -> None:
        """Set ``name`` in ``scope`` (``local``, ``agent`` or ``conv``); see :meth:`set_local` and :meth:`set_agent`."""
        if scope == "local":
            self.set_local(name, value)
        elif scope == "agent":
            self.set_agent(name, value)
        elif scope == "conv":
            self.set_conv(name, value)
        else:
            raise S2OError("fragment", f"'{scope}' is not a variable scope; scopes are {', '.join(VARIABLE_SCOPES)}")

    def set_local(self, name: str, value: Any) -> None:
        """Set local ``name``; raises ``S2OError`` for a name the rules refuse or a reserved name, and
        ``not-allowed`` for a value holding a generator, coroutine, frame, code object or module."""
        check_target_name(name)
        if type(value) not in PLAIN_TYPES:  # a str, a number, None…: nothing to refuse, never a host object
            host = reach.check_given(value, f"the local '{name}'")  # a host object, or a container holding one
            if host and not self.engine.guarded:
                self.use_engine(self.engine.with_guard())  # the same settings: the scopes stay (a run's
                self.globals["__builtins__"] = self.engine.builtins  # own sys among them), not the builtins
        self.namespace()[name] = value

    def set_agent(self, name: str, value: Any) -> None:
        """Set agent variable ``name`` to a JSON value (``not-json`` otherwise)."""
        check_target_name(name)
        check_json(value, f"agent.{name}")
        self._agent[name] = copy_json(value)

    def set_conv(self, name: str, value: Any) -> None:
        """Set conversation variable ``name`` to a JSON value (``not-json`` otherwise)."""
        check_target_name(name)
        check_json(value, f"conv.{name}")
        self._conv[name] = copy_json(value)

    def reset(self) -> None:
        """Clear locals, agent and conversation variables; the settings stay. The session's own door outside
        closes its pooled connections and is made anew on the next call, so a cassette answers from its first
        entry again (SPEC 13), as in a new session; a door the caller gave is closed only."""
        g = self.globals
        self.forget_functions()
        for name in list(self.locals):
            del g[name]
        g.pop("result", None)
        g.pop("exc", None)
        self._agent.clear()
        self._conv.clear()
        self.llm_messages.clear()
        if self._outside is not None:
            self._outside.close()  # pooled connections go; the next call opens them anew
            if self._own_outside:
                self._outside = None

    def snapshot(self) -> Snapshot:
        """Shallow copies of (the current namespace, agent, conv), to restore after a failed command, and the
        mark of the journal of items written (:attr:`items_written`)."""
        return dict(self.namespace()), dict(self._agent), dict(self._conv), self.items_written.mark()

    def release(self, snap: Snapshot) -> None:
        """The command :meth:`snapshot` was taken for succeeded: nothing of it will be restored."""
        self.items_written.release(snap[3])

    def restore(self, snap: Snapshot) -> None:
        """Restore state saved by :meth:`snapshot`: the variables, and the items written since."""
        g, a, c, window = snap
        self.items_written.undo(window)
        namespace = self.namespace()
        if not g.keys() >= namespace.keys():  # a name the failed command set goes: a function made since
            self.forget_functions()  # would run until it read it (names that stay keep their functions)
        namespace.clear()
        namespace.update(g)
        self._agent.clear()
        self._agent.update(a)
        self._conv.clear()
        self._conv.update(c)

    # -- settings ------------------------------------------------------------------------------
    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        """Merge ``patch`` (SPEC 10 names, nested) into the settings, all or nothing.

        Returns the new engine's warnings. Raises ``S2OError`` with stage ``load`` (codes ``settings``,
        ``allowlist``, ``refused-entry``) and then leaves the session exactly as it was.
        """
        engine = Engine(bare_settings(merge(self.engine.settings.to_dict(), patch)), code_cache=self.engine.code_cache)
        if self.engine.guarded:
            engine = engine.with_guard()
        old = self.engine.settings
        self.use_engine(engine)
        if self._own_outside and self._outside is not None and not old.same_outside(engine.settings):
            self._outside.close()
            self._outside = None
        self._bind_engine()
        return list(engine.warnings)

    # -- expressions ---------------------------------------------------------------------------
    def validate(self, expr: str) -> Validation:
        """Check ``expr`` against the rules and this session's locals, without running it."""
        return self.engine.validate(expr, locals=self.locals.keys())

    def evaluate_dynamic(self, text: str) -> Any:
        """The value of a dynamic string (SPEC 1): plain text as is, ``{ expr }`` evaluated.

        Raises ``S2OError`` ``syntax`` for a value that is not exactly a ``str``, ``too-long`` past
        ``limits.definition_length`` characters, else as
        :meth:`evaluate`; positions stay relative to the expression, as SPEC 3 says.
        """
        limit = self.engine.settings.limits.definition_length
        if type(text) is not str:
            raise S2OError("syntax", f"a dynamic string is text (a str), not {type(text).__name__}", stage="validate")
        if len(text) > limit:
            raise S2OError("too-long", f"the value is {len(text)} characters long; the limit is {limit}",
                           stage="validate")
        found = expression_of(text)
        if found is None:
            return text
        return self.evaluate(found[0])

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***`` (for messages and displayed values)."""
        return self.engine.settings.redact(text)

    # -- what the fragment runner sets -----------------------------------------------------------
    def namespace(self) -> dict[str, Any]:
        """The globals dict expressions of the current task evaluate against: the namespace of the function
        call running in this task of a fragment run, else the evaluator's globals (the notebook's function)."""
        frame = _FRAME.get()
        if frame is None or frame[0] is not self:
            return self.globals
        return frame[1]

    @contextlib.contextmanager
    def function_scope(self, bound: dict[str, Any]) -> Iterator[None]:
        """Run the body (in the current task and the tasks it starts) in a namespace of its own (SPEC 7).

        The new namespace holds the called function's arguments ``bound`` and shares the builtins and
        the scopes (``agent``, ``conv``, ``const``, ``sys``) with the caller's; ``result`` and ``exc``
        start unset. The caller's namespace is never touched, so calls running at the same time
        (``parallel`` branches) each keep their own locals.
        """
        caller = self.namespace()
        frame = {name: caller[name] for name in SHARED_NAMES if name in caller}
        frame["command"] = NO_FIELDS
        frame.update(bound)
        token = _FRAME.set((self, frame))
        handling = scopes.HANDLING.set(None)
        try:
            yield
        finally:
            scopes.HANDLING.reset(handling)
            _FRAME.reset(token)

    @contextlib.contextmanager
    def handling(self, error: S2OError) -> Iterator[None]:
        """Make ``exc`` read ``error`` in the current task while an ``onError`` handler runs; the outer
        ``exc`` (or none) after. Expressions read it through :meth:`prepare`."""
        token = scopes.HANDLING.set(ErrorView(error))
        try:
            yield
        finally:
            scopes.HANDLING.reset(token)
            self._show_exc(self.namespace())

    @staticmethod
    def _show_exc(namespace: dict[str, Any]) -> None:
        view = scopes.HANDLING.get()
        if view is None:
            namespace.pop("exc", None)
        else:
            namespace["exc"] = view

    def prepare(self, fields: dict[str, Any] | None) -> dict[str, Any]:
        """The namespace for one expression of a fragment, with ``command`` reading ``fields`` (the command's
        fields set so far, or none) and ``exc`` the error handled in the current task (or unset).

        Called right before the expression runs, so tasks sharing a namespace (``parallel`` branches of
        one function) each see their own command fields and error.
        """
        namespace = self.namespace()
        namespace["__builtins__"] = self.engine.builtins  # the engine may have turned guarded mid-run
        namespace["command"] = CommandScope(fields, "command") if fields else NO_FIELDS
        self._show_exc(namespace)
        return namespace

    def clear_command_fields(self) -> None:
        """Make ``command`` read no fields again (the runtime calls this after each command)."""
        namespace = self.namespace()
        if namespace.get("command") is not NO_FIELDS:
            namespace["command"] = NO_FIELDS

    def set_result(self, value: Any) -> None:
        """Set ``result``, the last result-producing command's value, checked as a local (``not-allowed``)."""
        reach.check_kept(value, "result")
        self.namespace()["result"] = value

