"""Asking a person (SPEC 7.1 ``ask``): the questions' shape, typed answers, and the gateway's handler.

A question is ``{"name", "type", "label", "options", "default"}`` with ``type`` one of :data:`TYPES`.
:func:`check_answer` says whether a value answers a question (``number`` an int or float, ``bool`` a
bool, ``chooseOne`` one of the options, ``chooseMany`` a list of them, ``text`` and ``password`` text);
:func:`read_answer` turns what a person typed into that value (``yes``/``no``; an option by its
number or its text; ``chooseMany`` as numbers or texts separated by commas; an empty line takes the
default). :func:`ask_each` asks every question through a prompt function, re-asking a question whose
answer does not fit (saying why) up to :data:`ASK_TRIES` times, then ``ask-answer``.

:func:`answer_here` hands the message and questions to the gateway's ``answer`` function (set by the
kernel per cell: Jupyter's ``input_request``), within the call's timeout. When there is none, or it
returns ``None`` (no stdin: nbclient, nbval, papermill), it raises code ``ask`` with the questions in
``details``, which ends the run with result code ``ask`` and the questions as its value
(:func:`ask_error`). :func:`handle`, the gateway's handler for kind ``ask``, runs it in a thread; the
kernel's gateway serving its worker runs it in the kernel's own thread (``Gateway.call_sync``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from typing import Any

from ...bounds import ASK_TRIES
from ..errors import S2OError
from ..run.limits import WATCHDOG, Armed, RunInterrupt, RunTimeout
from ..run.scopes import Secret
from .call import OutsideCall, Question, StreamFn
from .secrets import inert

TYPES = ("text", "number", "bool", "password", "chooseOne", "chooseMany")


#: Asks a person one line: ``(prompt, password)`` → the text typed, or ``None`` when nobody can answer.
Prompt = Callable[[str, bool], "str | None"]

_YES, _NO = ("y", "yes", "true", "1"), ("n", "no", "false", "0")


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def check_answer(question: Question, value: Any) -> Any:
    """``value`` when it answers ``question`` (see the module doc); ``ValueError`` with the reason otherwise."""
    kind, options = question["type"], question.get("options") or []
    if kind in ("text", "password") and type(value) is str:
        return value
    if kind == "password" and type(value) is Secret:  # an answer held as a secret already
        return value
    if kind == "number" and _is_number(value):
        return value
    if kind == "bool" and type(value) is bool:
        return value
    if kind == "chooseOne" and value in options and type(value) is not bool:
        return value
    if kind == "chooseMany" and type(value) is list and all(v in options for v in value):
        return value
    wanted = {"text": "text", "password": "text", "number": "a number", "bool": "true or false",
              "chooseOne": f"one of {options}", "chooseMany": f"a list of some of {options}"}[kind]
    raise ValueError(f"the answer to '{question['name']}' must be {wanted}")


def _choice(options: list[Any], word: str) -> Any:
    word = word.strip()
    for option in options:
        if str(option) == word:
            return option
    if word.isdigit() and 1 <= int(word) <= len(options):
        return options[int(word) - 1]
    raise ValueError(f"{word!r} is not one of the options: answer with its number (1 to {len(options)}) or its text")


def read_answer(question: Question, text: str) -> Any:
    """The value a typed line gives ``question`` (see the module doc); ``ValueError`` with the reason."""
    kind, options = question["type"], question.get("options") or []
    if not text.strip() and kind != "text":
        if question.get("default") is not None:
            return check_answer(question, question["default"])
        raise ValueError("an answer is needed")
    if kind in ("text", "password"):
        return text if text or question.get("default") is None else check_answer(question, question["default"])
    if kind == "number":
        try:
            number: float = int(text) if text.strip().lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise ValueError(f"{text.strip()!r} is not a number") from None
        return check_answer(question, number)
    if kind == "bool":
        word = text.strip().lower()
        if word in _YES or word in _NO:
            return word in _YES
        raise ValueError("answer yes or no")
    if kind == "chooseOne":
        return _choice(options, text)
    return [_choice(options, part) for part in text.split(",") if part.strip()]


def prompt_text(question: Question) -> str:
    """What a person is asked for one question: its label (or name), the options numbered, the default."""
    label = question.get("label") or question["name"]
    lines = [str(label)]
    options = question.get("options") or []
    if question["type"] in ("chooseOne", "chooseMany"):
        lines += [f"  {i}. {option}" for i, option in enumerate(options, 1)]
        lines.append("  (numbers or texts, separated by commas)" if question["type"] == "chooseMany"
                     else "  (its number or its text)")
    elif question["type"] == "bool":
        lines[0] += " (yes/no)"
    if question.get("default") is not None and question["type"] != "password":
        lines[-1] += f" [default: {question['default']}]"
    return "\n".join(lines) + ": "


def ask_each(message: str, questions: list[Question], prompt: Prompt) -> dict[str, Any] | None:
    """Ask every question through ``prompt`` (the message before the first); the answers by name, or ``None``
    when ``prompt`` cannot ask. A question answered badly :data:`ASK_TRIES` times is ``ask-answer``."""
    answers: dict[str, Any] = {}
    head = f"{message}\n" if message else ""
    for question in questions:
        reason = ""
        for _ in range(ASK_TRIES):
            text = prompt(head + reason + prompt_text(question), question["type"] == "password")
            if text is None:
                return None
            head = ""
            try:
                answers[question["name"]] = read_answer(question, text)
                break
            except ValueError as exc:
                reason = f"{exc}.\n"
        else:
            raise S2OError("ask-answer", f"no fitting answer to '{question['name']}' after {ASK_TRIES} tries: "
                           f"{reason.strip()}")
    return answers


def ask_error(message: str, questions: list[Question], path: str | None = None) -> S2OError:
    """Code ``ask``: nobody can answer here; ``details`` hold the message and the questions."""
    names = ", ".join(q["name"] for q in questions)
    return S2OError("ask", f"the run waits for a person's answers to {names}: this front end cannot ask "
                    "(no stdin, as under nbval, nbconvert and papermill); give them as inputs "
                    '(%sys {"inputs": {...}} in a notebook, inputs= to run_fragment) and run again', path=path,
                    details={"message": message, "questions": questions})


def check_fields(fields: Any) -> tuple[str, list[Question]]:
    """``(message, questions)`` of an ``ask`` call's fields; ``ask-answer`` for another shape (the fields
    may come from an untrusted worker)."""
    message = fields.get("message") if type(fields) is dict else None
    questions = fields.get("inputs") if type(fields) is dict else None
    if type(message) is not str or type(questions) is not list or not all(
            type(q) is dict and type(q.get("name")) is str and q.get("type") in TYPES for q in questions):
        raise S2OError("ask-answer", "an ask call's fields are {message, inputs: [{name, type, …}]}")
    return message, questions


def answer_here(gateway: Any, request: OutsideCall, armed: list[Armed] | None = None) -> dict[str, Any]:
    """Ask the call's questions through the gateway's ``answer`` function, in the calling thread, within
    ``request.timeout`` seconds (the run's time limit covers the wait for a person: past it the
    watchdog stops a prompt still waiting, ``timedOut``); the answers by input name, checked.

    Secrets in the message and questions show as ``***`` (a person is never shown one). A ``password``
    answer is kept by the gateway and answered with its placeholder (``Gateway.hold_answer``). Raises ``ask``
    when nobody can answer, ``ask-answer`` for answers that do not fit. ``armed`` receives the
    watchdog's token, so that a caller in another thread can stop the prompt (:func:`handle`).
    """
    message, questions = check_fields(gateway.masker.value(request.fields))
    answer = getattr(gateway, "answer", None)
    if answer is None:
        raise ask_error(message, questions, request.path)
    token = WATCHDOG.arm(request.timeout)
    if armed is not None:
        armed.append(token)
    try:
        answers = answer(message, questions)
    except RunTimeout:
        raise S2OError("timedOut", f"nobody answered within {request.timeout:g} s, what was left of the run's "
                       "time limit", path=request.path) from None
    except RunInterrupt:
        raise S2OError("stopped", "the ask was stopped", path=request.path) from None
    finally:
        WATCHDOG.disarm(token)
    if answers is None:
        raise ask_error(message, questions, request.path)
    if type(answers) is not dict:
        raise S2OError("ask-answer", "the answers are not an object", path=request.path)
    answers = inert(answers)  # typed text never holds a secret's placeholder (secrets.inert)
    try:
        checked = {q["name"]: check_answer(q, answers.get(q["name"])) for q in questions}
    except ValueError as exc:
        raise S2OError("ask-answer", str(exc), path=request.path) from None
    for q in questions:  # a password answer stays here; the run gets its placeholder (SPEC 7.1)
        if q["type"] == "password":
            checked[q["name"]] = gateway.hold_answer(q["name"], checked[q["name"]])
    return checked


async def handle(gateway: Any, profile: Any, request: OutsideCall, on_stream: StreamFn | None) -> Any:
    """The gateway's handler for kind ``ask`` on its loop: :func:`answer_here` in a thread, so the loop
    keeps serving other calls; when the call is cancelled (the run stopped or timed out), the prompt is
    stopped too and its thread waited for, so no prompt outlives its call. (A gateway called
    synchronously, as the kernel's is for its worker, asks in the calling thread instead, where an
    interrupt reaches the prompt itself: ``Gateway.call_sync``.)"""
    armed: list[Armed] = []
    future = asyncio.get_running_loop().run_in_executor(None, answer_here, gateway, request, armed)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        for token in armed:
            WATCHDOG.interrupt(token)
        with contextlib.suppress(BaseException):
            await future
        raise
