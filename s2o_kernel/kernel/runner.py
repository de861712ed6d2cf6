"""Run one cell against an engine session and collect what it shows.

:class:`CellRunner` is the Jupyter-free core of ``do_execute``: it classifies
the cell, calls the engine *synchronously* (never awaiting, so an interrupt
raises ``KeyboardInterrupt`` right inside the engine call), and returns an
:class:`Outcome` listing the IOPub messages to publish, in order, plus the
error triple when the cell failed. It never raises: every exception,
``KeyboardInterrupt`` included, becomes ``Outcome.error``.

The engine is reached only through the session object and two functions of
the engine module (``fragment_kind``, ``as_json``) handed in as ``api``, so
the runner is unit-tested with a stand-in session.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from s2o_kernel.kernel import cells as _cells
from s2o_kernel.kernel import magics as _magics
from s2o_kernel.kernel.render import (
    CellError,
    ErrorInfo,
    error_info,
    is_coded,
    output_part_bundle,
    value_bundle,
)

log = logging.getLogger(__name__)


def _accepts_keyword(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@dataclass
class Outcome:
    """What one cell produced.

    ``outputs``: ``(msg_type, content)`` pairs for IOPub, in order
    (``stream``, ``display_data``, ``execute_result`` — the latter without
    ``execution_count``, which the kernel adds). ``error``: set when the cell
    failed. ``payload``: reply payloads (the pager). ``result_text``: the
    ``text/plain`` of the result, for history. ``published``: how many
    leading ``outputs`` went out live (fragment output parts are streamed as
    the run produces them); the kernel publishes the rest.
    """

    outputs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: ErrorInfo | None = None
    payload: list[dict[str, Any]] = field(default_factory=list)
    result_text: str | None = None
    #: How many of ``outputs`` were already published while the cell ran.
    published: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


def run_error(run: Any) -> BaseException:
    """The error a cell fails with when a fragment run did not succeed (SPEC 7, 9).

    ``failCommand``, ``timedOut`` and ``stopped`` are the ``ename`` as they
    are; for ``errorInAgent`` the ``ename`` is the error's own code
    (``runtime``, ``not-json``, ``loop-limit``, ...); any other code
    (``ask``, ``callFailed``, ``unexpected``) is the ``ename`` itself. The
    message, position, path and notes of the run's error are kept.
    """
    code = str(getattr(run, "code", None) or "unexpected")
    error = getattr(run, "error", None)
    if code == "success":  # an error with a success code: the error wins
        code = "errorInAgent"
    if code == "errorInAgent":
        if error is not None and is_coded(error):
            return error
        ename = "errorInAgent"
    else:
        ename = code
    if error is None:
        if code == "ask":
            message = (
                "The run stopped at an 'ask' command, waiting for a person's answers; "
                "set them with %sys {\"inputs\": {...}} and run the cell again."
            )
        else:
            message = f"The run ended with code {code!r}."
        return CellError(ename, message)
    if is_coded(error) and str(error.code) == ename:
        return error
    if not is_coded(error):
        text = str(error)
        message = f"{type(error).__name__}: {text}" if text else type(error).__name__
        return CellError(ename, message)
    renamed = CellError(
        ename,
        str(error.message),
        line=getattr(error, "line", None),
        col=getattr(error, "col", None),
        path=getattr(error, "path", None),
        source=getattr(error, "source", None),
        stage=getattr(error, "stage", None) or "run",
        details=getattr(error, "details", None),
        notes=[str(n) for n in getattr(error, "__notes__", None) or []],
    )
    if ename not in (str(error.code), "stopped"):
        renamed.add_note(f"(error code: {error.code})")
    return renamed


class CellRunner:
    """Runs cells for one session.

    ``session``: the engine session, or ``None`` when the engine could not
    start (every cell then reports ``startup_error``). ``api``: an object with
    ``fragment_kind(obj)`` and ``as_json(value)``. ``pending_error``: an error
    to report once, on the first cell (settings that failed to load).
    ``startup_warnings``: warnings of the settings loaded at start (e.g. a
    blocking allowlist entry), shown once on the first cell.
    """

    def __init__(
        self,
        session: Any,
        api: Any,
        *,
        pending_error: BaseException | None = None,
        startup_error: BaseException | None = None,
        startup_warnings: list[str] | None = None,
        logger: logging.Logger | logging.LoggerAdapter[Any] | None = None,
    ) -> None:
        self.session = session
        self.api = api
        self.pending_error = pending_error
        self.startup_error = startup_error
        #: Warnings of the settings loaded at start, shown once on the first cell.
        self.pending_warnings = [str(w) for w in startup_warnings or []]
        #: Warnings of the settings in use that the user has seen (or will see).
        self.known_warnings: set[str] = set(self.pending_warnings)
        self.log = logger or log
        self._outcome = Outcome()
        #: ``publish(msg_type, content)``: sends an IOPub message now. Set by
        #: the kernel; used to stream a fragment's output parts while it runs.
        self.publisher: Callable[[str, dict[str, Any]], None] | None = None
        #: ``getpass(prompt) -> str``: the front end's password prompt, or
        #: ``None`` when it cannot prompt (``allow_stdin`` false). Set by the
        #: kernel for each cell; used by ``%secret``.
        self.getpass: Callable[[str], str] | None = None
        self._live = False
        self._running = False
        self._streamed_parts = 0
        # A contained session hands over what its worker prints (IsolatedSession.on_print).
        if session is not None and hasattr(session, "on_print"):
            try:
                session.on_print = self._on_print
            except Exception:  # pragma: no cover - defensive
                pass

    def _on_print(self, text: str) -> None:
        """Text printed by evaluated code in the worker: a ``stdout`` stream of the cell."""
        if not self._running:
            self.log.info("s2o: worker output outside a cell: %r", text[:200])
            return
        self.emit_stream("stdout", text)
        self.flush_live()

    # -- helpers used by magics ------------------------------------------------

    def redact(self, text: str) -> str:
        session = self.session
        if session is None:
            return text
        try:
            out = session.redact(text)
        except Exception:
            return text
        return out if isinstance(out, str) else text

    def fragment_kind(self, obj: Any) -> str | None:
        fk = getattr(self.api, "fragment_kind", None)
        if fk is None:
            return None
        try:
            return fk(obj)
        except Exception:
            return None

    def as_json(self, value: Any) -> Any:
        aj = getattr(self.api, "as_json", None)
        if aj is None:
            return None
        try:
            return aj(value)
        except Exception:
            return None

    def require_session(self) -> Any:
        if self.session is None:
            err = self.startup_error
            detail = f" ({type(err).__name__}: {err})" if err is not None else ""
            raise CellError(
                "unexpected",
                f"The s2o engine could not be started{detail}; see the kernel log.",
            )
        return self.session

    def emit_stream(self, name: str, text: str) -> None:
        if text:
            self._outcome.outputs.append(("stream", {"name": name, "text": self.redact(text)}))

    def emit_display(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        self._outcome.outputs.append(("display_data", {"data": data, "metadata": metadata or {}}))

    def emit_result(self, data: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        self._outcome.outputs.append(("execute_result", {"data": data, "metadata": metadata or {}}))
        text = data.get("text/plain")
        self._outcome.result_text = text if isinstance(text, str) else None

    def emit_page(self, text: str) -> None:
        self._outcome.payload.append(
            {"source": "page", "data": {"text/plain": self.redact(text)}, "start": 0}
        )

    def emit_warnings(self, warnings: Any) -> None:
        if not warnings:
            return
        if isinstance(warnings, str):
            warnings = [warnings]
        text = "".join(f"warning: {w}\n" for w in warnings)
        self.emit_stream("stderr", text)

    def show_value(self, value: Any) -> None:
        """``execute_result`` for a value; ``None`` shows nothing (as in IPython)."""
        if value is None:
            return
        self.emit_result(value_bundle(value, as_json=self.as_json, redact=self.redact))

    def flush_live(self) -> None:
        """Publish the outputs collected so far, when live publishing is on."""
        outcome = self._outcome
        if not self._live or self.publisher is None:
            return
        while outcome.published < len(outcome.outputs):
            msg_type, content = outcome.outputs[outcome.published]
            if msg_type == "execute_result":  # needs the execution count: the kernel sends it
                return
            outcome.published += 1
            try:
                self.publisher(msg_type, content)
            except Exception:  # never break the run because of the frontend
                self.log.warning("s2o: could not publish an output", exc_info=True)

    def run_fragment(
        self, data: Any, *, inputs: dict[str, Any] | None = None, function: str | None = None
    ) -> Any:
        """``session.run_fragment``, streaming output parts as the run produces them.

        ``inputs`` and ``function`` (``%run``) are passed on when given.
        """
        session = self.require_session()
        streamed: list[Any] = []
        extra: dict[str, Any] = {}
        if inputs is not None:
            extra["inputs"] = inputs
        if function is not None:
            extra["function"] = function

        def on_output(part: Any) -> None:
            try:
                streamed.append(part)
                self.emit_display(output_part_bundle(part, redact=self.redact))
                self.flush_live()
            except Exception:  # never raise into the engine
                self.log.warning("s2o: could not show an output part", exc_info=True)

        if _accepts_keyword(session.run_fragment, "on_output"):
            run = session.run_fragment(data, on_output=on_output, **extra)
        else:  # an engine without streaming: parts are shown after the run
            run = session.run_fragment(data, **extra)
        self._streamed_parts = len(streamed)
        return run

    def show_run(self, run: Any) -> None:
        """Show a fragment's RunResult: output parts, log lines, then value or error.

        On ``success`` the value is the cell's result (none for ``None``).
        Otherwise the cell fails with :func:`run_error`.
        """
        streamed, self._streamed_parts = self._streamed_parts, 0
        for part in list(getattr(run, "outputs", None) or [])[streamed:]:
            self.emit_display(output_part_bundle(part, redact=self.redact))
        logs = list(getattr(run, "logs", None) or [])
        if logs:
            self.emit_stream("stderr", "".join(f"{line}\n" for line in logs))
        code = getattr(run, "code", "success")
        if code == "success" and getattr(run, "error", None) is None:
            self.show_value(getattr(run, "value", None))
            return
        raise run_error(run)

    # -- running -----------------------------------------------------------

    def run(self, code: str, *, silent: bool = False) -> Outcome:
        """Run one cell; never raises."""
        self._outcome = outcome = Outcome()
        self._live = not silent and self.publisher is not None
        self._streamed_parts = 0
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
        except BaseException as exc:  # noqa: BLE001 - every request must get a reply
            if not isinstance(exc, KeyboardInterrupt) and not is_coded(exc):
                self.log.error("s2o: unexpected error while running a cell", exc_info=exc)
            outcome.error = error_info(exc, self.redact)
            outcome.result_text = None
        finally:
            self._running = False
        return outcome

    def _run(self, code: str) -> None:
        cell = _cells.classify(code, self.fragment_kind)
        kind = cell.kind
        if kind == _cells.EMPTY:
            return
        if kind in (_cells.LINE_MAGIC, _cells.CELL_MAGIC):
            _magics.run_magic(self, cell)
            return
        session = self.require_session()
        if kind == _cells.HELP:
            self.show_help(cell.arg)
        elif kind == _cells.FRAGMENT:
            self.show_run(self.run_fragment(cell.data))
        elif kind == _cells.DYNAMIC:
            self._show_expression_value(self._with_json_hint(session.evaluate_dynamic, cell), cell)
        else:
            self._show_expression_value(self._with_json_hint(session.evaluate, cell), cell)

    def _show_expression_value(self, value: Any, cell: _cells.Cell) -> None:
        # A fragment with a JSON mistake that Python still reads (a trailing
        # comma, a comment at the end of a line) would silently show as a
        # dict instead of running: say so.
        if cell.json_error and isinstance(value, (dict, list)) and self.fragment_kind(value):
            self.emit_stream(
                "stderr",
                "note: this cell looks like a fragment but is not valid JSON "
                f"({cell.json_error}), so it was read as an expression and did not run.\n",
            )
        self.show_value(value)

    def _with_json_hint(self, fn: Any, cell: _cells.Cell) -> Any:
        try:
            return fn(cell.text)
        except BaseException as exc:
            if cell.json_error and is_coded(exc) and getattr(exc, "code", None) == "syntax":
                try:
                    exc.add_note(
                        "note: the cell was read as a Python expression; "
                        f"as JSON it is not valid either: {cell.json_error}"
                    )
                except Exception:  # pragma: no cover - defensive
                    pass
            raise

    def show_help(self, name: str) -> None:
        session = self.require_session()
        text = session.describe(name)
        if text:
            self.emit_page(str(text))
        else:
            self.emit_stream("stdout", f"No help for {name!r}: not a granted name or a variable.\n")

    def evaluate_user_expressions(self, expressions: dict[str, Any] | None) -> dict[str, Any]:
        """Evaluate ``user_expressions`` independently; per-key error dicts."""
        results: dict[str, Any] = {}
        if not expressions:
            return results
        self._running = True
        try:
            self._user_expressions(expressions, results)
        finally:
            self._running = False
        return results

    def _user_expressions(self, expressions: dict[str, Any], results: dict[str, Any]) -> None:
        for key, expr in expressions.items():
            try:
                session = self.require_session()
                value = session.evaluate(str(expr))
                results[key] = {
                    "status": "ok",
                    "data": value_bundle(value, as_json=self.as_json, redact=self.redact),
                    "metadata": {},
                }
            except BaseException as exc:  # noqa: BLE001
                info = error_info(exc, self.redact)
                results[key] = {"status": "error", **info.content()}
