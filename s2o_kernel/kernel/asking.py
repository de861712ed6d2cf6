"""``ask`` in the kernel (SPEC 7.1, 9): each input through Jupyter's ``input_request``, or nobody asked.

For each cell the kernel hands :func:`install` its one-line prompt (``raw_input``, or ``getpass`` for a
``password`` input) when the ``execute_request`` allowed stdin, else ``None``. :func:`install` sets the
``answer`` function of the session's door to the outside (``session.outside``; the in-process gateway,
or the gateway an isolated session serves its worker's calls with): the engine's
:func:`~s2o_kernel.engine.ask_each`, which asks every question through the prompt (the message before
the first), lists a choice's options, and re-asks an answer that does not fit, saying why; the line a
person types on starts with :data:`MARK`, so no run passes for the kernel's own prompts. With no
prompt the answer function is ``None``, so the run ends with result code ``ask`` at once (nbclient,
nbval, papermill) instead of waiting.
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.engine import ask_each
from s2o_kernel.kernel.contract import AnswerFn, AskPrompt

#: Starts the line a person types an ``ask`` answer on. The run writes the rest of the prompt and could
#: make it read like the kernel's own (``%secret``'s ``Value of the secret NAME: ``, hidden typing and
#: all), but never that line without this.
MARK = "[agent] "


def marked(text: str) -> str:
    """``text`` (an ``ask`` prompt) with :data:`MARK` at the start of its last line, the one typed on."""
    head, newline, last = text.rpartition("\n")
    return f"{head}{newline}{MARK}{last}"


def answer_function(prompt: AskPrompt | None) -> AnswerFn | None:
    """The ``answer`` function that asks through ``prompt`` (each prompt :func:`marked`), or ``None`` when
    there is no prompt."""
    if prompt is None:
        return None

    def ask_marked(text: str, password: bool) -> str | None:
        return prompt(marked(text), password)

    def answer(message: str, questions: list[dict[str, Any]]) -> dict[str, Any] | None:
        return ask_each(message, questions, ask_marked)

    return answer


def install(session: Any, prompt: AskPrompt | None) -> None:
    """Make ``ask`` commands of ``session``'s next runs ask through ``prompt`` (``None``: nobody can answer).

    A session without a door to the outside that takes an ``answer`` (a stand-in session) is left alone.
    """
    door: Any = getattr(session, "outside", None)
    if hasattr(door, "answer"):  # an Answering door: what isinstance() checks, without the Protocol's cost
        door.answer = answer_function(prompt)
