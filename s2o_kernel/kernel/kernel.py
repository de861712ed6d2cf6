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
from collections.abc import Iterator
from typing import Any

from ipykernel.iostream import OutStream
from ipykernel.kernelbase import Kernel
from IPython.core.error import StdinNotImplementedError

from s2o_kernel import __version__, engine
from s2o_kernel.kernel import asking, completion
from s2o_kernel.kernel.contract import AskPrompt, ContainedSessionLike
from s2o_kernel.kernel.history import History
from s2o_kernel.kernel.magics import cell_magic_names, line_magic_names
from s2o_kernel.kernel.render import error_info
from s2o_kernel.kernel.runner import CellRunner, Outcome
from s2o_kernel.kernel.startup import start_session


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
        started = start_session(self.log)
        self.s2o_session = started.session
        self.runner = CellRunner(
            started.session,
            engine,
            pending_error=started.pending_error,
            startup_error=started.startup_error,
            startup_warnings=started.warnings,
        )
        self.runner.log = self.log
        self.runner.publisher = self._publish_now
        self.runner.history = self.history
        # The contained session's worker is a child process: stop it when the
        # kernel shuts down (do_shutdown) or exits any other way; the history
        # writes what is pending and closes its session.
        atexit.register(self._close_session)

    def _close_session(self) -> None:
        self.history.close()
        if isinstance(self.s2o_session, ContainedSessionLike):
            with contextlib.suppress(Exception):
                self.s2o_session.close()

    def _password(self, prompt: str) -> str | None:
        """The front end's password prompt (``input_request`` with ``password``); ``None`` when it cannot prompt."""
        try:
            return self.getpass(prompt)
        except StdinNotImplementedError:
            return None

    def _line_prompt(self, context: contextvars.Context) -> AskPrompt:
        """The front end's one-line prompt for ``ask`` (``input_request``; ``password`` hides the typing).

        The engine asks from a thread of its own, so each prompt runs in (a copy of) ``context``, the
        cell's: ipykernel finds the cell's ``execute_request`` (its stdin routing) there. ``None`` when
        the front end cannot prompt; nothing entered (end of input) is ``ask-answer``.
        """

        def prompt(text: str, password: bool) -> str | None:
            try:
                answer: str = context.copy().run(self.getpass if password else self.raw_input, text)
                return answer
            except StdinNotImplementedError:
                return None
            except EOFError:
                raise engine.S2OError("ask-answer", "no answer was entered (end of input)") from None

        return prompt

    # -- kernel_info -------------------------------------------------------

    @property
    def kernel_info(self) -> dict[str, Any]:
        """ipykernel's kernel_info without the features this kernel does not have (debugger, subshells)."""
        info = dict(super().kernel_info)
        features = info.get("supported_features") or []
        info["supported_features"] = [f for f in features if f not in ("debugger", "kernel subshells")]
        return info

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
        for stream in (sys.stdout, sys.stderr):
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
        self.runner.getpass = self._password if allow_stdin else None
        asking.install(self.s2o_session, self._line_prompt(contextvars.copy_context()) if allow_stdin else None)
        try:
            outcome = self.runner.run(code, silent=silent)
            user_results: dict[str, Any] = {}
            if outcome.ok and user_expressions:
                user_results = self.runner.evaluate_user_expressions(dict(user_expressions))
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
            info = error_info(exc)
            return {"status": "error", "execution_count": self.execution_count, **info.content()}

    # -- completion, inspection, is_complete --------------------------------

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:
        """``complete_request``: names, members, magics and fragment words (never an error)."""
        try:
            return completion.complete(
                code, cursor_pos, self.s2o_session, line_magics=line_magic_names(), cell_magics=cell_magic_names()
            )
        except BaseException:  # an interrupt while completing: still a reply
            pos = len(code) if cursor_pos is None else cursor_pos
            return completion.empty_reply(completion.clamp(pos, code or ""))

    async def do_inspect(
        self, code: str, cursor_pos: int | None, detail_level: int = 0, omit_sections: Any = ()
    ) -> dict[str, Any]:
        """``inspect_request``: the description of the name under the cursor."""
        try:
            return completion.inspect(code, cursor_pos, self.s2o_session)
        except BaseException:  # an interrupt while inspecting: still a reply
            return completion.NOT_FOUND.copy()

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        """``is_complete_request``: complete, incomplete (with an indent) or invalid."""
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

    class S2OKernelApp(IPKernelApp):
        """IPKernelApp whose IOPub socket never drops a message: a run may emit up to
        ``limits.output_parts`` parts (1,000 by default, SPEC 12), and ZeroMQ's default high-water
        mark (1,000 messages) silently drops output when the front end reads more slowly than the
        run writes. The caps bound what a run can queue."""

        def init_iopub(self, context: zmq.Context[Any]) -> None:
            context.setsockopt(zmq.SNDHWM, 0)
            super().init_iopub(context)

    app = S2OKernelApp.instance(kernel_class=S2OKernel)
    app.initialize(argv)
    app.start()
    control = app.control_thread
    if control is not None and control.is_alive() and control is not threading.current_thread():
        control.join(timeout=1.0)
