"""The typed contract between the kernel and the engine: what the kernel needs of a session (issue 7).

The kernel reaches the engine only through these protocols, so its needs are written in one place
and checked, statically by mypy and at run time by ``tests/kernel/test_contract.py``:

* :class:`SessionLike`: the session cells run in. The engine's in-process ``Session`` and its
  contained ``IsolatedSession`` (SPEC 12) implement it, and so does the stand-in session of the
  kernel's unit tests. Values and errors are the engine's own types: ``evaluate`` raises
  :class:`~s2o_kernel.engine.S2OError`, ``validate`` returns a
  :class:`~s2o_kernel.engine.Validation`, ``run_fragment`` a :class:`~s2o_kernel.engine.RunResult`
  and ``dataflow`` a :class:`~s2o_kernel.engine.Dataflow` (SPEC 2, 3, 7, 8).
* :class:`ContainedSessionLike`: what a session whose runs happen in a worker process adds:
  ``on_print`` (text printed by evaluated code, handed to the cell as it comes), ``on_progress``
  (how far a run past two seconds has got) and ``close()`` (stops the worker; the kernel calls it
  on shutdown).
* :class:`EngineFunctions`: the pure engine functions the cell runner uses; the module
  ``s2o_kernel.engine`` is one.
* :data:`Prompt`: the front end's password prompt, as the kernel hands it to ``%secret``.
* :class:`Answering`: the door of a session's outside calls (its ``outside``) as far as ``ask``
  needs it: the ``answer`` function the kernel sets per cell (SPEC 7.1); :data:`AskPrompt` is the
  front end's one-line prompt that function asks through.

Nothing here imports Jupyter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from s2o_kernel.engine import Dataflow, RunResult, Validation

__all__ = ["Answering", "AskPrompt", "ContainedSessionLike", "EngineFunctions", "OutputSink", "Prompt",
           "SessionLike"]

#: ``on_output(part)``: called with each ``output`` part of a run as it is produced (SPEC 7).
OutputSink = Callable[[dict[str, Any]], None]

#: ``prompt(text) -> value``: asks the person at the front end for a value without echoing it;
#: ``None`` when the front end cannot prompt. Raises ``EOFError`` when nothing was entered and
#: ``KeyboardInterrupt`` when the person interrupted.
Prompt = Callable[[str], str | None]

#: ``prompt(text, password) -> value``: asks the person at the front end for one line (without echo when
#: ``password``); ``None`` when the front end cannot prompt.
AskPrompt = Callable[[str, bool], str | None]

#: ``answer(message, questions) -> answers``: what an ``ask`` command's questions are answered with
#: (SPEC 7.1); ``None`` when nobody can answer.
AnswerFn = Callable[[str, list[dict[str, Any]]], "dict[str, Any] | None"]


@runtime_checkable
class Answering(Protocol):
    """A session's door to the outside (``session.outside``) as ``ask`` uses it: the kernel sets its
    ``answer`` for each cell, ``None`` when the front end allows no stdin (SPEC 7.1)."""

    answer: AnswerFn | None


@runtime_checkable
class SessionLike(Protocol):
    """One running agent as the kernel uses it (SPEC 5, 9).

    Every method may raise the engine's ``S2OError``; none needs Jupyter.
    """

    def settings_dict(self) -> dict[str, Any]:
        """The settings as a SPEC-10-shaped dict (``allowlist``, ``rules``, ``limits``, ``sys``,
        ``const``, ``secrets`` with every value ``***``, ...)."""
        ...

    def update_settings(self, patch: dict[str, Any]) -> list[str]:
        """Merge ``patch`` (SPEC 10 names) into the settings, all or nothing; the new warnings.

        Objects merge key by key (``secrets`` too); ``sys.inputs``, ``const`` and anything that
        is not an object replace. Raises ``S2OError`` with stage ``load`` and changes nothing.
        """
        ...

    def validate(self, expr: str) -> Validation:
        """Check ``expr`` against the rules and the session's locals without running it (SPEC 3)."""
        ...

    def dataflow(self, fragment: Any) -> Dataflow:
        """The paths ``fragment`` reads and writes (SPEC 8), checked but not run; raises its validation
        error (an ``ErrorGroup`` for several)."""
        ...

    def evaluate(self, expr: str) -> Any:
        """Run one expression and return its value (SPEC 2, 6)."""
        ...

    def evaluate_dynamic(self, text: str) -> Any:
        """The value of a dynamic string (SPEC 1)."""
        ...

    def run_fragment(
        self,
        fragment: Any,
        *,
        on_output: OutputSink | None = None,
        inputs: dict[str, Any] | None = None,
        function: str | None = None,
        on_print: Callable[[str], None] | None = None,
    ) -> RunResult:
        """Check then run a fragment as one run (SPEC 7); never raises for bad input.

        With ``on_output``, each output part goes to it alone as it is produced and nothing keeps
        it (``RunResult.outputs`` stays empty); without it, the parts are in ``RunResult.outputs``.
        ``on_print`` likewise takes the text the run prints, else ``RunResult.printed`` holds it.
        """
        ...

    def set_vars(
        self,
        *,
        locals: dict[str, Any] | None = None,
        agent: dict[str, Any] | None = None,
        conv: dict[str, Any] | None = None,
    ) -> None:
        """Set variables to the values given, taken literally (agent and conversation values are JSON)."""
        ...

    def reset(self) -> None:
        """Clear locals, agent and conversation variables; the settings stay."""
        ...

    @property
    def locals(self) -> dict[str, Any]:
        """The local variables, name to value (a copy)."""
        ...

    @property
    def agent_vars(self) -> dict[str, Any]:
        """The agent variables (a copy)."""
        ...

    @property
    def conv_vars(self) -> dict[str, Any]:
        """The conversation variables (a copy)."""
        ...

    def completion_names(self) -> dict[str, str]:
        """Names an expression may start with, name to kind (``variable``, ``module``, ...)."""
        ...

    def member_names(self, dotted: str) -> list[str]:
        """Public members after ``dotted.`` that an expression may read."""
        ...

    def describe(self, dotted: str) -> str | None:
        """A short description of a granted name or a variable, or ``None``."""
        ...

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        ...


@runtime_checkable
class ContainedSessionLike(Protocol):
    """What a session whose runs happen in a supervised worker process (SPEC 12) has besides :class:`SessionLike`.

    The engine's ``IsolatedSession`` has it. Deliberately not a subclass of :class:`SessionLike`:
    ``isinstance(session, ContainedSessionLike)`` then looks only at ``on_print``, ``on_progress`` and ``close``
    (Python 3.11 evaluates every property a runtime protocol names, and each of
    ``SessionLike``'s is a round trip to the worker).
    """

    #: ``on_print(text)``: called with text that evaluated code printed, in order with the run's
    #: output parts; ``None`` drops it.
    on_print: Callable[[str], None] | None
    #: ``on_progress(report)``: called twice a second while a run that has gone on for 2 s goes on;
    #: ``report`` is ``{"elapsed", "time_limit", "passes", "longest", "loop_limit"}`` (seconds and
    #: counts, SPEC 6's limits); ``None`` drops it.
    on_progress: Callable[[dict[str, Any]], None] | None

    def close(self) -> None:
        """Stop the worker."""
        ...


class EngineFunctions(Protocol):
    """The engine's pure functions the cell runner uses (the module ``s2o_kernel.engine`` is one)."""

    def fragment_kind(self, obj: Any) -> str | None:
        """``"command"``, ``"commands"``, ``"function"``, ``"agent"``, or ``None`` for other JSON (SPEC 7, 9)."""
        ...

    def fragment_hint(self, obj: Any) -> str | None:
        """Why JSON that is not a fragment looks like a misspelled one (``'vars' is not a command (did you
        mean 'var'?)``), or ``None``."""
        ...

    def as_json(self, value: Any) -> Any:
        """``value`` as JSON, or ``None`` when it is not JSON (SPEC 5)."""
        ...
