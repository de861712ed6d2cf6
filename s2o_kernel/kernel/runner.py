"""Run one cell against an engine session and collect what it shows (SPEC 9).

:class:`CellRunner` is the Jupyter-free core of ``do_execute``: it classifies
the cell, calls the engine *synchronously* (never awaiting, so an interrupt
raises ``KeyboardInterrupt`` right inside the engine call), and returns an
:class:`Outcome` listing the IOPub messages to publish, in order, plus the
error triple when the cell failed. It never raises: every exception,
``KeyboardInterrupt`` included, becomes ``Outcome.error``.

The engine is reached only through the session (:class:`~.contract.SessionLike`)
and the pure functions of :class:`~.contract.EngineFunctions` handed in as ``api``,
so the runner is unit-tested with a stand-in session. The runner is the
:class:`~.magics.MagicContext` the magics work with.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from s2o_kernel.engine import RunResult, S2OError
from s2o_kernel.kernel import cells, trace_view
from s2o_kernel.kernel.contract import ContainedSessionLike, EngineFunctions, Prompt, SessionLike
from s2o_kernel.kernel.history import HistoryLike
from s2o_kernel.kernel.magics import run_magic_cell
from s2o_kernel.kernel.progress import ProgressDisplay
from s2o_kernel.kernel.render import (
    ErrorInfo,
    error_info,
    escape_surrogates,
    notes_of,
    output_part_bundle,
    terminal_text,
    value_bundle,
)

_T = TypeVar("_T")

log = logging.getLogger(__name__)

#: ``publish(msg_type, content)``: sends one IOPub message now.
Publisher = Callable[[str, dict[str, Any]], None]

#: The reply payload that ends ``jupyter console`` as IPython's ``exit`` does (ipykernel's ``ask_exit``).
ASK_EXIT = {"source": "ask_exit", "keepkernel": False}


@dataclass
class Outcome:
    """What one cell produced.

    ``outputs``: ``(msg_type, content)`` pairs for IOPub not published yet, in
    order (``stream``, ``display_data``, ``update_display_data``, ``execute_result`` — the latter
    without ``execution_count``, which the kernel adds); the kernel publishes
    them after the cell. ``published``: how many went out live instead while
    the cell ran (fragment output parts and printed text, streamed as the run
    produces them); those are not kept, so a cell's output never piles up in
    the kernel process (SPEC 12). ``error``: set when the cell failed.
    ``payload``: reply payloads (the pager). ``result_text``: the
    ``text/plain`` of the result, for history.
    """

    outputs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: ErrorInfo | None = None
    payload: list[dict[str, Any]] = field(default_factory=list)
    result_text: str | None = None
    #: How many outputs were published (and dropped from ``outputs``) while the cell ran.
    published: int = 0

    @property
    def ok(self) -> bool:
        """True when the cell did not fail."""
        return self.error is None


def _run_without_error(code: str) -> S2OError:
    """The error of a run that ended with ``code`` but reported no error."""
    if code == "ask":
        return S2OError(
            "ask",
            "The run stopped at an 'ask' command, waiting for a person's answers; "
            'set them with %sys {"inputs": {...}} and run the cell again.',
        )
    return S2OError(code, f"The run ended with code {code!r}.")


def run_error(run: RunResult) -> S2OError:
    """The error a cell fails with when a fragment run did not succeed (SPEC 7, 9).

    ``failCommand``, ``timedOut`` and ``stopped`` are the ``ename`` as they
    are; for ``errorInAgent`` and ``callFailed`` the ``ename`` is the error's
    own code (``runtime``, ``not-json``, ``loop-limit``; ``api-status``,
    ``llm-failed``, ``db-failed``, the code ``onError`` sees as ``exc.code``),
    and a ``callFailed`` run notes its result code; any other code (``ask``,
    ``unexpected``) is the ``ename`` itself. The message, position, path and
    notes of the run's error are kept; a renamed error notes the original code.
    """
    code = "errorInAgent" if run.code == "success" else run.code  # an error with a success code: the error wins
    error = run.error
    if error is None:
        return _run_without_error(code)
    if code in ("errorInAgent", error.code):
        return error
    name, note = (error.code, f"(the run's result code: {code})") if code == "callFailed" \
        else (code, f"(error code: {error.code})")
    renamed = S2OError(name, error.message, line=error.line, col=error.col, path=error.path,
                       stage=error.stage, source=error.source, details=error.details)  # fmt: skip
    for earlier in notes_of(error):
        renamed.add_note(earlier)
    if code != "stopped":
        renamed.add_note(note)
    return renamed


class CellRunner:
    """Runs cells for one session.

    ``session``: the engine session, or ``None`` when the engine could not
    start (every cell then reports ``startup_error``). ``api``: the engine's
    ``fragment_kind``, ``fragment_hint`` and ``as_json``. ``pending_error``: an error to report
    once, on the first cell (settings that failed to load).
    ``startup_warnings``: warnings of the settings loaded at start (e.g. a
    blocking allowlist entry), shown once on the first cell. A contained
    session's printed text is shown as the cell's ``stdout`` as it comes, and
    the progress of a run past two seconds as a display updated in place
    (:mod:`.progress`; with a publisher only, never for a silent cell nor a headless one).
    Every output's texts have lone surrogates escaped (never dropped); a
    silent cell keeps no output at all.
    """

    def __init__(
        self,
        session: SessionLike | None,
        api: EngineFunctions | None,
        *,
        pending_error: BaseException | None = None,
        startup_error: BaseException | None = None,
        startup_warnings: list[str] | None = None,
    ) -> None:
        self.session = session
        self.api = api
        self.pending_error = pending_error
        self.startup_error = startup_error
        #: Warnings of the settings loaded at start, shown once on the first cell.
        self.pending_warnings = list(startup_warnings or [])
        #: Warnings of the settings in use that the user has seen (or will see).
        self.known_warnings: set[str] = set(self.pending_warnings)
        #: Where unexpected errors are logged (the kernel sets its own logger).
        self.log: logging.Logger | logging.LoggerAdapter[Any] = log
        self._outcome = Outcome()
        #: Sends an IOPub message now. Set by the kernel; used to stream a
        #: fragment's output parts (and printed text) while it runs.
        self.publisher: Publisher | None = None
        #: The front end's password prompt, or ``None`` when it cannot prompt
        #: (``allow_stdin`` false). Set by the kernel for each cell; used by ``%secret``.
        self.getpass: Prompt | None = None
        #: The last fragment a cell ran (``%dataflow`` with no argument shows its data flow).
        self.last_fragment: Any = None
        #: The kernel's input history (``%history``), or ``None`` when it keeps none.
        self.history: HistoryLike | None = None
        #: How results show (``%display``, SPEC 9): ``"plain"`` or ``"json"`` (adds ``application/json``).
        self.display = "plain"
        #: The last fragment run's trace, written out when read (:attr:`last_trace`), and whether each run shows
        #: its trace (``%trace on``, SPEC 14).
        self._trace_source: Any = None
        self.trace_after = False
        self._live = False
        self._silent = False
        self._running = False
        self._progress: ProgressDisplay | None = None
        #: Set (from the thread that asked) when the person answered an ``ask`` during the run.
        self._asked = False
        #: Whether the cell's last output was streamed text that did not end its line (see :meth:`_end_line`).
        self._line_open = False
        #: Whether someone watches the cell run (the kernel sets it from ``allow_stdin``): a headless run
        #: (nbclient, nbval, papermill) shows no progress, so its outputs never depend on timing.
        self.watched = True
        if isinstance(session, ContainedSessionLike):
            session.on_print = self._on_print
            session.on_progress = self._on_progress

    def _on_print(self, text: str) -> None:
        """Text printed by evaluated code (a run's, in either kind of session; any, in the worker): a
        ``stdout`` stream of the cell."""
        if not self._running:
            self.log.info("s2o: worker output outside a cell: %r", text[:200])
            return
        self.emit_stream("stdout", text)
        self.flush_live()

    def _on_progress(self, report: dict[str, Any]) -> None:
        """A long run's progress report: shown (after the outputs so far) in the cell's progress display."""
        if not (self._running and self._live and self.watched and self.publisher is not None):
            return
        try:
            self.flush_live()
            if self._asked:  # the answer is shown below the display: go on in a new one (see note_asked)
                self._asked = False
                self._end_progress()
            if self._progress is None:
                self._progress = ProgressDisplay(self.publisher)
            self._progress.show(report)
            self._line_open = False  # a terminal prints the display on a line of its own
        except Exception:  # never break the run because of the frontend
            self.log.warning("s2o: could not show the progress of a run", exc_info=True)

    def note_asked(self) -> None:
        """The person answered an ``ask`` prompt of the running cell (called from the thread that asked).

        The run's next progress report ends the display shown before the prompt and starts a new one,
        below the answer: ``jupyter console`` prints only a display's first message (it ignores
        ``update_display_data``), so updates of a display above the prompt would not show there.
        """
        self._asked = True

    def _end_progress(self) -> None:
        progress, self._progress = self._progress, None
        if progress is not None:
            try:
                progress.end()
            except Exception:  # never break the reply because of the frontend
                self.log.warning("s2o: could not clear the progress of a run", exc_info=True)

    # -- the MagicContext: what magics use ----------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with the session's secret values replaced by ``***``."""
        return text if self.session is None else self.session.redact(text)

    def _call_engine(self, ask: Callable[[EngineFunctions], _T]) -> _T | None:
        """``ask(api)`` (one of the engine's pure functions on a value), or ``None`` without an engine or
        when it raises: an evaluated value of any type may be asked about."""
        if self.api is None:
            return None
        try:
            return ask(self.api)
        except Exception:
            return None

    def fragment_kind(self, obj: Any) -> str | None:
        """The kind of fragment ``obj`` is, or ``None`` (also for a value the engine cannot judge)."""
        return self._call_engine(lambda api: api.fragment_kind(obj))

    def fragment_hint(self, obj: Any) -> str | None:
        """Why ``obj`` looks like a misspelled fragment (the engine's ``fragment_hint``), or ``None``."""
        return self._call_engine(lambda api: api.fragment_hint(obj))

    def as_json(self, value: Any) -> Any:
        """``value`` as JSON, or ``None`` (also for a value the engine cannot convert)."""
        return self._call_engine(lambda api: api.as_json(value))

    def require_session(self) -> SessionLike:
        """The session; ``unexpected`` (naming the start-up problem) when the engine did not start."""
        if self.session is None:
            err = self.startup_error
            detail = f" ({type(err).__name__}: {err})" if err is not None else ""
            raise S2OError("unexpected", f"The s2o engine could not be started{detail}; see the kernel log.")
        return self.session

    def _add(self, msg_type: str, content: dict[str, Any]) -> None:
        """Queue one IOPub output (lone surrogates and, in what a terminal prints, control characters
        escaped); a silent cell keeps nothing."""
        if not self._silent:
            if msg_type == "stream":
                self._line_open = not str(content.get("text", "")).endswith("\n")
            else:
                self._line_open = False
            self._outcome.outputs.append((msg_type, terminal_text(msg_type, escape_surrogates(content))))

    def _end_line(self) -> None:
        """End the line that streamed text left open, before the cell's result, where someone watches.

        ``jupyter console`` prints a stream's text as it is and then ``Out[5]:`` right after it, so a
        model's streamed answer that does not end with a newline ran into the result (``… on its
        way.Out[5]: …``). The line is ended by a display of empty text, which the console prints as a
        newline, updated at once to the empty bundle ``{}``, which JupyterLab renders as nothing and
        saves as an output nbval does not compare (as the progress display's end, :mod:`.progress`).
        The streamed text itself is left as it is, so a notebook's stored outputs do not change; a
        headless run (nbclient, nbval, papermill) sends nothing more at all.
        """
        if not (self._line_open and self.watched):
            return
        transient = {"display_id": f"s2o-line-end-{uuid.uuid4().hex}"}
        self._add("display_data", {"data": {"text/plain": ""}, "metadata": {}, "transient": transient})
        self._add("update_display_data", {"data": {}, "metadata": {}, "transient": transient})

    def emit_stream(self, name: str, text: str) -> None:
        """Add a ``stream`` output (``stdout`` or ``stderr``); nothing for empty text."""
        if text:
            self._add("stream", {"name": name, "text": self.redact(text)})

    def emit_display(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        """Add a ``display_data`` output with the mime bundle ``data``."""
        self._add("display_data", {"data": data, "metadata": metadata or {}})

    def emit_result(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        """Add the ``execute_result`` (the kernel adds its execution count). Its ``application/json``
        is kept only in the ``json`` display mode (SPEC 9: ``%display json``)."""
        if self.display != "json" and "application/json" in data:
            data = {mime: part for mime, part in data.items() if mime != "application/json"}
        data = escape_surrogates(data)
        self._end_line()
        self._add("execute_result", {"data": data, "metadata": metadata or {}})
        text = data.get("text/plain")
        self._outcome.result_text = text if isinstance(text, str) else None

    def emit_page(self, text: str) -> None:
        """Add a pager payload (``name?``)."""
        self._outcome.payload.append(
            {"source": "page", "data": {"text/plain": escape_surrogates(self.redact(text))}, "start": 0})

    def emit_warnings(self, warnings: list[str]) -> None:
        """Add one ``warning: ...`` line per warning on ``stderr``."""
        self.emit_stream("stderr", "".join(f"warning: {w}\n" for w in warnings))

    def show_value(self, value: Any) -> None:
        """``execute_result`` for a value; ``None`` shows nothing (as in IPython)."""
        if value is None:
            return
        self.emit_result(self.result_bundle(value))

    def result_bundle(self, value: Any) -> dict[str, Any]:
        """The mime bundle of a result in the session's display mode (:func:`.render.value_bundle`)."""
        return value_bundle(value, as_json=self.as_json, redact=self.redact, with_json=self.display == "json")

    def flush_live(self) -> None:
        """Publish the outputs collected so far and forget them, when live publishing is on."""
        outcome = self._outcome
        if not self._live or self.publisher is None:
            return
        while outcome.outputs:
            msg_type, content = outcome.outputs[0]
            if msg_type == "execute_result":  # needs the execution count: the kernel sends it
                return
            del outcome.outputs[0]
            outcome.published += 1
            try:
                self.publisher(msg_type, content)
            except Exception:  # never break the run because of the frontend
                self.log.warning("s2o: could not publish an output", exc_info=True)

    def run_fragment(
        self, data: Any, *, inputs: dict[str, Any] | None = None, function: str | None = None
    ) -> RunResult:
        """``session.run_fragment``, showing output parts as the run produces them.

        Each part is published as it comes (when live) and not kept: the session hands parts
        to the sink only, so neither holds a run's output. A model's streamed text (a text part
        with ``"stream": "llm"``, from ``llm`` with ``streamOutput``, SPEC 7.1) is the cell's
        ``stdout`` stream, which front ends join into one block as it grows. ``inputs`` and
        ``function`` (``%run``) are passed on.
        """
        session = self.require_session()
        self.last_fragment = data

        def on_output(part: dict[str, Any]) -> None:
            try:
                if isinstance(part, dict) and part.get("stream") == "llm" and isinstance(part.get("text"), str):
                    self.emit_stream("stdout", part["text"])  # a model's streamed text: one growing block
                else:
                    self.emit_display(output_part_bundle(part, redact=self.redact))
                self.flush_live()
            except Exception:  # never raise into the engine
                self.log.warning("s2o: could not show an output part", exc_info=True)

        run = session.run_fragment(data, on_output=on_output, inputs=inputs, function=function,
                                   on_print=self._on_print)
        if run.trace_source is not None or run.error is None or run.error.stage != "validate":
            # a fragment refused before it ran leaves the last run's trace; a run whose worker was killed, none
            self._trace_source = run.trace_source  # written out only when %trace reads it
        return run

    @property
    def last_trace(self) -> dict[str, Any] | None:
        """The last fragment run's trace (``%trace``, SPEC 14), or ``None``."""
        return self._trace_source.json() if self._trace_source is not None else None

    def show_run(self, run: RunResult, *, quiet: bool = False) -> None:
        """Show a fragment's RunResult: printed text and output parts it kept (none when they went to the
        sinks), log lines, then value or error.

        On ``success`` the value is the cell's result (none for ``None``, nor when ``quiet``: a cell
        written with a trailing ``;``). Otherwise the cell fails with :func:`run_error`.
        """
        if run.printed:
            self.emit_stream("stdout", run.printed)
        for part in run.outputs:
            self.emit_display(output_part_bundle(part, redact=self.redact))
        if run.logs:
            self.emit_stream("stderr", "".join(f"{line}\n" for line in run.logs))
        if self.trace_after and run.trace is not None:
            try:
                self.emit_display(trace_view.bundle(run.trace, redact=self.redact))
            except Exception:  # the run's own outcome is shown whatever happens to its trace
                self.log.warning("s2o: could not show a run's trace", exc_info=True)
        if run.code == "success" and run.error is None:
            if not quiet:
                self.show_value(run.value)
            return
        raise run_error(run)

    # -- running -----------------------------------------------------------

    def run(self, code: str, *, silent: bool = False) -> Outcome:
        """Run one cell; never raises."""
        self._outcome = outcome = Outcome()
        self._line_open = False
        self._live = not silent and self.publisher is not None
        self._silent = silent
        self._running = True
        try:
            if not silent:
                if self.pending_warnings:
                    pending_warnings, self.pending_warnings = self.pending_warnings, []
                    self.emit_warnings(pending_warnings)
                if self.pending_error is not None:
                    pending, self.pending_error = self.pending_error, None
                    raise pending
            self._run(code)
        except BaseException as exc:  # every request must get a reply
            if not isinstance(exc, (KeyboardInterrupt, S2OError)):
                self.log.error("s2o: unexpected error while running a cell", exc_info=exc)
            outcome.error = error_info(exc, self.redact)
            outcome.result_text = None
        finally:
            self._running = False
            self._silent = False
            self._asked = False
            self._end_progress()
        return outcome

    def _run(self, code: str) -> None:
        cell = cells.classify(code, self.fragment_kind)
        kind = cell.kind
        if kind == cells.EMPTY:
            return
        if kind in (cells.LINE_MAGIC, cells.CELL_MAGIC):
            run_magic_cell(self, cell)
            return
        if kind == cells.EXIT and (self.session is None or cell.arg not in self.session.locals):
            self._outcome.payload.append(dict(ASK_EXIT))
            return
        session = self.require_session()
        if kind == cells.HELP:
            self.show_help(cell.arg)
        elif kind == cells.FRAGMENT:
            if cell.duplicate_keys:  # every JSON reader keeps the last; a slip, more often than not
                self.emit_stream("stderr", "note: " + ", ".join(repr(k) for k in cell.duplicate_keys)
                                 + " appears more than once in one object of this fragment; the last one counts.\n")
            self.show_run(self.run_fragment(cell.data), quiet=cell.quiet)
        elif kind == cells.DYNAMIC:
            self._show_expression_value(self._with_json_hint(session.evaluate_dynamic, cell), cell)
        else:
            self._show_expression_value(self._with_json_hint(session.evaluate, cell), cell)

    def _show_expression_value(self, value: Any, cell: cells.Cell) -> None:
        # A fragment that Python reads but JSON does not (Python's quotes or ``True``, a trailing comma, a
        # comment at the end of a line) would silently show as a dict instead of running: say so.
        if isinstance(value, (dict, list)) and cells.looks_like_json(cell.text, python=True) \
                and self.fragment_kind(value):
            reason = cell.json_error or cells.json_problem(cell.text)
            self.emit_stream(
                "stderr",
                "note: this cell reads as a fragment but is not valid JSON "
                f"({reason}): it ran as an expression, shown below, and the fragment's commands did "
                "not run; write it as JSON (double quotes, true/false/null) to run it, and %%fragment refuses "
                "JSON that is not valid.\n",
            )
        elif isinstance(value, (dict, list)) and cells.looks_like_json(cell.text):
            hint = self.fragment_hint(value)  # JSON, but a misspelled fragment: it showed back, ran nothing
            if hint:
                self.emit_stream(
                    "stderr",
                    f"note: this cell is JSON but not a fragment ({hint}): it ran as an expression, shown "
                    "below, and its commands did not run; %%fragment reads it as a fragment.\n",
                )
        if not cell.quiet:  # ``x;``: run, show no result (IPython)
            self.show_value(value)

    @staticmethod
    def _with_json_hint(evaluate: Callable[[str], Any], cell: cells.Cell) -> Any:
        """``evaluate(cell.text)``; a ``syntax`` or ``too-deep`` error notes why the text was not JSON either."""
        try:
            return evaluate(cell.text)
        except S2OError as exc:
            if cell.json_error and exc.code in ("syntax", "too-deep"):
                exc.add_note(
                    "note: the cell was read as a Python expression; "
                    f"as JSON it is not valid either: {cell.json_error}"
                )
            raise

    def show_help(self, name: str) -> None:
        """``name?``: the session's description of ``name`` in the pager, or a line saying there is none."""
        text = self.require_session().describe(name)
        if text:
            self.emit_page(text)
        else:
            self.emit_stream("stdout", f"No help for {name!r}: not a granted name or a variable.\n")

    def evaluate_user_expressions(self, expressions: dict[str, Any] | None) -> dict[str, Any]:
        """Evaluate ``user_expressions`` independently; per-key error dicts."""
        results: dict[str, Any] = {}
        if not expressions:
            return results
        self._running = True
        try:
            for key, expr in expressions.items():
                results[key] = self._user_expression(str(expr))
        finally:
            self._running = False
        return results

    def _user_expression(self, expr: str) -> dict[str, Any]:
        try:
            value = self.require_session().evaluate(expr)
        except BaseException as exc:  # each expression gets its own result
            return {"status": "error", **error_info(exc, self.redact).content()}
        return {
            "status": "ok",
            "data": escape_surrogates(self.result_bundle(value)),
            "metadata": {},
        }
