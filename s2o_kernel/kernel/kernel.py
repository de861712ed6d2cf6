"""The Jupyter kernel: :class:`S2OKernel`, a wrapper kernel on ipykernel's ``Kernel``.

Design rules (see ``notes/jupyter-kernel-field-notes.md`` section 0):

* every ``execute_request`` gets a reply — the whole evaluation sits in
  ``try/except BaseException`` (inside :class:`CellRunner`, and once more
  here as a last line of defence);
* evaluation is synchronous inside ``do_execute`` (no ``await``), so an
  interrupt (SIGINT → ``KeyboardInterrupt``) lands inside the engine call
  and the session survives; the interrupt goes to the kernel's process
  group, so the contained session's worker (the default, see
  :mod:`.startup`) gets it too and ends the run with ``stopped``;
* the worker is closed on shutdown (and at exit);
* an error is published as an IOPub ``error`` message *and* returned in the
  reply, with the same ``ename``/``evalue``/``traceback``;
* every output is published before ``do_execute`` returns;
* no debugger and no kernel subshells are advertised (the session is not
  thread-safe); ``create_subshell_request`` is refused with an error reply.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ipykernel._version import kernel_protocol_version
from ipykernel.iostream import OutStream
from ipykernel.kernelbase import Kernel
from IPython.core.error import StdinNotImplementedError

from s2o_kernel import __version__
from s2o_kernel.bounds import SESSION_START_DELAY
from s2o_kernel.kernel.history import History

if TYPE_CHECKING:
    from s2o_kernel.kernel.contract import AskPrompt, SessionLike
    from s2o_kernel.kernel.runner import CellRunner, Outcome


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while results are published (nothing is left to interrupt).

    Only possible on the main thread; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(signal.SIGINT, previous)


class S2OKernel(Kernel):
    """Jupyter kernel for Search2o expressions, dynamic strings and fragments."""

    implementation = "s2o"
    implementation_version = __version__
    language = "s2o"
    language_version = __version__
    language_info = {  # noqa: RUF012 - ipykernel's class attribute
        "name": "s2o",
        "version": __version__,
        "mimetype": "text/x-python",
        "codemirror_mode": "python",
        "pygments_lexer": "python3",
        "file_extension": ".s2o",
    }
    banner = (
        f"s2o {__version__}: Search2o agent expressions and JSON fragments\n"
        "Type %help for help, %lsmagic for the magics, name? for help on a name."
    )
    help_links = [  # noqa: RUF012 - ipykernel's class attribute
        {
            "text": "Python expressions (the expression syntax)",
            "url": "https://docs.python.org/3/reference/expressions.html",
        },
        {"text": "JSON (the fragment syntax)", "url": "https://www.json.org/json-en.html"},
        {
            "text": "Jupyter kernel messaging",
            "url": "https://jupyter-client.readthedocs.io/en/latest/messaging.html",
        },
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.history = History()
        self._runner: CellRunner | None = None
        self._closed = False
        self._answered = threading.Event()
        # The session (the engine, the settings and the worker) starts in the background, once the
        # kernel has answered its first kernel_info; the first request that needs it waits for it
        # (docs/design.md, "Containment"; docs/performance.md, "Kernel").
        self._starter = threading.Thread(target=self._start_session, name="s2o-session-start", daemon=True)
        self._starter.start()
        # The contained session's worker is a child process: stop it when the
        # kernel shuts down (do_shutdown) or exits any other way; the history
        # writes what is pending and closes its session.
        atexit.register(self._close_session)

    def _start_session(self) -> None:
        """Load the settings, import the engine and start the session's worker (on the starter thread).

        Waits first for the kernel's own start-up and its first ``kernel_info_reply`` (at most
        :data:`SESSION_START_DELAY` seconds): both run on the main thread, and this thread's imports would
        share the interpreter lock with them. Never raises: whatever goes wrong is reported by the
        first cell, as :func:`.startup.start_session` does.
        """
        self._answered.wait(SESSION_START_DELAY)
        try:
            from s2o_kernel import engine
            from s2o_kernel.kernel.runner import CellRunner
            from s2o_kernel.kernel.startup import start_session

            started = start_session(self.log)
            runner = CellRunner(started.session, engine, pending_error=started.pending_error,
                                startup_error=started.startup_error, startup_warnings=started.warnings)
        except BaseException as exc:  # the kernel must start whatever happens
            self.log.error("s2o: the session could not be started", exc_info=exc)
            from s2o_kernel.kernel.runner import CellRunner

            runner = CellRunner(None, None, startup_error=exc)
        runner.log = self.log
        runner.publisher = self._publish_now
        runner.history = self.history
        self._runner = runner
        if self._closed:  # shut down while starting
            self._close_session()

    @property
    def runner(self) -> CellRunner:
        """The cell runner, once the session has started (waits for the starter thread)."""
        self._answered.set()  # a request that needs the session: start it now if it has not started
        self._starter.join()
        runner = self._runner
        if runner is None:  # pragma: no cover - the starter always sets it
            raise RuntimeError("the s2o session did not start")
        return runner

    @property
    def s2o_session(self) -> SessionLike | None:
        """The engine session cells run in (waits for it to start); ``None`` when the engine could not start."""
        return self.runner.session

    def _close_session(self) -> None:
        self._closed = True
        self.history.close()
        runner = self._runner
        if runner is None:
            return  # still starting: the starter closes it when done
        from s2o_kernel.kernel.contract import ContainedSessionLike

        if isinstance(runner.session, ContainedSessionLike):
            with contextlib.suppress(Exception):
                runner.session.close()

    def _password(self, prompt: str) -> str | None:
        """The front end's password prompt (``input_request`` with ``password``); ``None`` when it cannot prompt."""
        try:
            return self.getpass(prompt)
        except StdinNotImplementedError:
            return None

    def _line_prompt(self, context: contextvars.Context, answered: Callable[[], None]) -> AskPrompt:
        """The front end's one-line prompt for ``ask`` (``input_request``; ``password`` hides the typing).

        The engine asks from a thread of its own, so each prompt runs in (a copy of) ``context``, the
        cell's: ipykernel finds the cell's ``execute_request`` (its stdin routing) there. ``None`` when
        the front end cannot prompt; nothing entered (end of input) is ``ask-answer``. ``answered()`` is
        called after each answer (the runner's :meth:`~.runner.CellRunner.note_asked`).
        """

        def prompt(text: str, password: bool) -> str | None:
            try:
                from s2o_kernel.kernel.render import escape_controls, escape_text

                # the run's text, on a terminal perhaps: no control sequence, no return to the line's start
                shown = escape_controls(escape_text(text)).replace("\r", "\\r")
                answer: str = context.copy().run(self.getpass if password else self.raw_input, shown)
                answered()
                return answer
            except StdinNotImplementedError:
                return None
            except EOFError:
                from s2o_kernel.engine import S2OError

                raise S2OError("ask-answer", "no answer was entered (end of input)") from None

        return prompt

    # -- kernel_info -------------------------------------------------------

    @property
    def kernel_info(self) -> dict[str, Any]:
        """ipykernel's kernel_info without the features this kernel does not have (debugger, subshells).

        Built here rather than filtered from ipykernel's, whose property imports
        ``ipykernel.debugger`` and with it debugpy: a few MiB more in the kernel process, and
        pydevd's "frozen modules" warning printed into ``jupyter console`` on some starts.
        """
        return {
            "protocol_version": kernel_protocol_version,
            "implementation": self.implementation,
            "implementation_version": self.implementation_version,
            "language_info": self.language_info,
            "banner": self.banner,
            "help_links": self.help_links,
            "supported_features": [],
        }

    async def kernel_info_request(self, stream: Any, ident: Any, parent: Any) -> None:
        """ipykernel's handler; the first reply lets the session start (see :meth:`_start_session`)."""
        await super().kernel_info_request(stream, ident, parent)
        self._answered.set()

    # -- parent routing ---------------------------------------------------

    def set_parent(self, ident: Any, parent: Any, channel: str = "shell") -> None:
        """Also route ``sys.stdout``/``sys.stderr`` output to the current request."""
        super().set_parent(ident, parent, channel)
        if channel == "shell":
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, OutStream):
                    with contextlib.suppress(Exception):
                        stream.set_parent(parent)

    # -- subshells: not supported ------------------------------------------

    async def create_subshell_request(self, socket: Any, ident: Any, parent: Any) -> None:
        """Refused: the session is not thread-safe."""
        self._refuse_subshells(socket, ident, parent, "create_subshell_reply",
                               "The s2o kernel does not support subshells: its session is not thread-safe.")

    async def delete_subshell_request(self, socket: Any, ident: Any, parent: Any) -> None:
        """Refused: there are no subshells."""
        self._refuse_subshells(socket, ident, parent, "delete_subshell_reply",
                               "The s2o kernel does not support subshells.")

    def _refuse_subshells(self, socket: Any, ident: Any, parent: Any, msg_type: str, evalue: str) -> None:
        if not self.session:
            return
        reply = {"status": "error", "ename": "subshells", "evalue": evalue, "traceback": []}
        self.session.send(socket, msg_type, reply, parent, ident)

    # -- execute -----------------------------------------------------------

    def _publish_now(self, msg_type: str, content: dict[str, Any]) -> None:
        """Send one IOPub message for the current cell (used while a fragment runs)."""
        self.send_response(self.iopub_socket, msg_type, content, channel="shell")

    def _publish(self, outcome: Outcome) -> None:
        # Text the kernel process printed during the cell goes first. A flush of ipykernel's stream
        # waits for a round trip to its IOPub thread, so only a stream with text waiting is flushed
        # (``_flush_pending``; a stream without that attribute is always flushed).
        for stream in (sys.stdout, sys.stderr):
            if getattr(stream, "_flush_pending", True):
                with contextlib.suppress(Exception):
                    stream.flush()
        for msg_type, content in outcome.outputs:
            if msg_type == "execute_result":
                content = {"execution_count": self.execution_count, **content}
            self.send_response(self.iopub_socket, msg_type, content)
        if outcome.error is not None:
            self.send_response(self.iopub_socket, "error", outcome.error.content())

    def _execute(self, code: str, silent: bool, store_history: bool, user_expressions: Any,
                 allow_stdin: bool) -> dict[str, Any]:  # fmt: skip
        # ipykernel's getpass() asks the front end only when this is true.
        self._allow_stdin = bool(allow_stdin)
        runner = self.runner  # waits for the session to start (the caller replies if interrupted)
        from s2o_kernel.kernel import asking
        from s2o_kernel.kernel.render import error_info
        from s2o_kernel.kernel.runner import Outcome

        prompt = self._line_prompt(contextvars.copy_context(), runner.note_asked) if allow_stdin else None
        asking.install(runner.session, prompt)
        try:
            runner.getpass = self._password if allow_stdin else None
            runner.watched = bool(allow_stdin)  # headless (nbclient, nbval, papermill): no progress display
            outcome = runner.run(code, silent=silent)
            user_results: dict[str, Any] = {}
            if outcome.ok and user_expressions:
                user_results = runner.evaluate_user_expressions(dict(user_expressions))
        except BaseException as exc:  # every request gets a reply
            outcome = Outcome(error=error_info(exc))
            user_results = {}
        with _sigint_ignored():
            try:
                if not silent:
                    self._publish(outcome)
                if store_history and not silent:
                    self.history.remember(self.execution_count, code, outcome.result_text)
            except BaseException:
                self.log.error("s2o: could not publish the outputs of a cell", exc_info=True)
            if outcome.error is not None:
                return {"status": "error", "execution_count": self.execution_count, **outcome.error.content()}
            return {
                "status": "ok",
                "execution_count": self.execution_count,
                "payload": list(outcome.payload),
                "user_expressions": user_results,
            }

    async def do_execute(
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: Any = None,
        allow_stdin: bool = False,
        *,
        cell_meta: Any = None,
        cell_id: Any = None,
    ) -> dict[str, Any]:
        """``execute_request``: run the cell synchronously, publish its outputs, reply."""
        try:
            return self._execute(code, silent, store_history, user_expressions, allow_stdin)
        except BaseException as exc:  # last line of defence: every request gets a reply
            if self._starter.is_alive():  # interrupted while waiting for the session: import nothing now
                content = {"ename": type(exc).__name__, "evalue": "the s2o session was still starting",
                           "traceback": [f"{type(exc).__name__}: the s2o session was still starting"]}
                if not silent:
                    self.send_response(self.iopub_socket, "error", content)
                return {"status": "error", "execution_count": self.execution_count, **content}
            from s2o_kernel.kernel.render import error_info

            info = error_info(exc)
            return {"status": "error", "execution_count": self.execution_count, **info.content()}

    # -- completion, inspection, is_complete --------------------------------

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:
        """``complete_request``: names, members, magics and fragment words (never an error)."""
        try:
            session = self.s2o_session
            from s2o_kernel.kernel import completion
            from s2o_kernel.kernel.magics import cell_magic_names, line_magic_names

            return completion.complete(
                code, cursor_pos, session, line_magics=line_magic_names(), cell_magics=cell_magic_names()
            )
        except BaseException:  # an interrupt while completing: still a reply
            from s2o_kernel.kernel import completion

            pos = len(code) if cursor_pos is None else cursor_pos
            return completion.empty_reply(completion.clamp(pos, code or ""))

    async def do_inspect(
        self, code: str, cursor_pos: int | None, detail_level: int = 0, omit_sections: Any = ()
    ) -> dict[str, Any]:
        """``inspect_request``: the description of the name under the cursor."""
        try:
            session = self.s2o_session
            from s2o_kernel.kernel import completion
            from s2o_kernel.kernel.magics import magic_help

            return completion.inspect(code, cursor_pos, session, magic_help)
        except BaseException:  # an interrupt while inspecting: still a reply
            from s2o_kernel.kernel import completion

            return completion.NOT_FOUND.copy()

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        """``is_complete_request``: complete, incomplete (with an indent) or invalid."""
        from s2o_kernel.kernel import completion

        try:
            return completion.is_complete(code)
        except BaseException:  # an interrupt while checking: still a reply
            return {"status": "unknown"}

    # -- history and shutdown ----------------------------------------------

    async def do_history(
        self,
        hist_access_type: str = "tail",
        output: bool = False,
        raw: bool = True,
        session: int | None = None,
        start: int | None = None,
        stop: int | None = None,
        n: int | None = None,
        pattern: str | None = None,
        unique: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """``history_request``: ``tail``, ``range`` or ``search`` over the cells of this and earlier
        kernels (the SQLite history of :mod:`.history`); ``raw`` is ignored (cells are kept as typed)."""
        try:
            history = self.history.reply(hist_access_type, output=output, session=session, start=start,
                                         stop=stop, n=n, pattern=pattern, unique=unique)  # fmt: skip
        except Exception:  # a malformed request gets an empty history
            history = []
        return {"status": "ok", "history": history}

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        """``shutdown_request``: stop the worker of a contained session."""
        self._close_session()
        return {"status": "ok", "restart": restart}


def launch(argv: list[str] | None = None) -> None:
    """Run the kernel (``IPKernelApp`` with :class:`S2OKernel`) until it shuts down.

    Same as ``IPKernelApp.launch_instance(kernel_class=S2OKernel)``, plus one
    step: after the main loop stops, wait (briefly) for the control thread to
    finish handling the shutdown request before the process exits. Otherwise
    ipykernel's exit handler may stop the IOPub thread while the control
    thread is still flushing after ``shutdown_reply``; that flush then blocks
    and the kernel only dies when jupyter_client sends SIGTERM (about 2.5 s
    later) instead of exiting in ~0.1 s.
    """
    import zmq
    from ipykernel.kernelapp import IPKernelApp

    from s2o_kernel.kernel.replay import ReplayGuardSession

    class S2OKernelApp(IPKernelApp):
        """IPKernelApp whose IOPub socket never drops a message: a run may emit up to
        ``limits.output_parts`` parts (1,000 by default, SPEC 12), and ZeroMQ's default high-water
        mark (1,000 messages) silently drops output when the front end reads more slowly than the
        run writes. The caps bound what a run can queue."""

        def init_iopub(self, context: zmq.Context[Any]) -> None:
            context.setsockopt(zmq.SNDHWM, 0)
            super().init_iopub(context)

        def _session_default(self) -> ReplayGuardSession:
            """The kernel's session keeps its replay memory compact (``kernel/replay.py``)."""
            return ReplayGuardSession(parent=self)

    app = S2OKernelApp.instance(kernel_class=S2OKernel)
    app.initialize(argv)
    app.start()
    control = app.control_thread
    if control is not None and control.is_alive() and control is not threading.current_thread():
        control.join(timeout=1.0)
