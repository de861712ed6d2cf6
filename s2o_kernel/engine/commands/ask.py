"""``ask``: pause for a person's answers (SPEC 7, 7.1).

Fields: ``message`` (dynamic text) and ``inputs``, a non-empty list of ``{name, type, label, options,
default}``: ``name`` a variable name (each once), ``type`` one of ``text``, ``number``, ``bool``,
``password``, ``chooseOne``, ``chooseMany`` (default ``text``), ``label`` dynamic text, ``options``
(``chooseOne``/``chooseMany`` only, and required there: a non-empty list of texts or numbers, or a
dynamic value giving one), ``default`` (a literal default is checked against the type at validation).
``result`` is the answers by name (so ``outputPath`` may be given); they are also added to
``sys.inputs`` for the rest of the run. A ``password`` answer is a secret named after its input
(``<secret pw>``): it goes into an f-string for an ``api`` call and is shown nowhere; the gateway holds
its text (SPEC 7.1).

An input already in ``sys.inputs`` (a resumed conversation: the answers came as the run's inputs, e.g.
``%sys {"inputs": {...}}`` in a notebook) is checked and used, not asked again (SPEC 7.1). The others
go out as one outside call of kind ``ask`` (:mod:`..outside.ask`): in an
interactive kernel each is asked through Jupyter's ``input_request``; where nobody can answer, the run
ends with result code ``ask`` and the questions as its value. An answer in ``sys.inputs`` that does not
fit its question is ``ask-answer``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..errors import S2OError
from ..fragments.dataflow import ref_path
from ..fragments.tree import Command
from ..language.dynamic import expression_of
from ..outside.ask import check_answer
from ..policy.written import too_large_text, too_large_to_write
from ..run.scopes import Secret, add_inputs
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel


class InputField(FieldsModel):
    """One input of ``ask``."""

    name: str
    type: Literal["text", "number", "bool", "password", "chooseOne", "chooseMany"] = "text"
    label: Any = None
    options: Any = None
    default: Any = None


class AskFields(FieldsModel):
    """``ask``'s fields."""

    message: Any = ""
    inputs: list[InputField] = Field(min_length=1)


def _literal_options(options: Any) -> bool:
    return isinstance(options, list) and bool(options) and all(
        type(o) in (str, int, float) for o in options)


def _check_input(p: Parser, q: InputField, path: str, known: set[str], seen: set[str]) -> None:
    p.name(q.name, f"{path}.name")
    if q.name in seen:
        p.error("fragment", f"the input '{q.name}' is asked twice", f"{path}.name")
    seen.add(q.name)
    choose = q.type in ("chooseOne", "chooseMany")
    if choose and q.options is None:
        p.error("fragment", f"a {q.type} input needs options (a list of texts or numbers)", f"{path}.options")
    elif not choose and q.options is not None:
        p.error("fragment", f"options are for chooseOne and chooseMany inputs, not {q.type}", f"{path}.options")
    elif choose and not isinstance(q.options, str) and not _literal_options(q.options):
        p.error("fragment", "options are a non-empty list of texts or numbers", f"{path}.options")
    for key in ("label", "options", "default"):
        p.value(getattr(q, key), f"{path}.{key}", known)
    literal_default = q.default is not None and not (isinstance(q.default, str) and expression_of(q.default))
    if literal_default and (not choose or _literal_options(q.options)):
        try:
            check_answer({"name": q.name, "type": q.type, "options": q.options}, q.default)
        except ValueError as exc:
            p.error("fragment", f"the default does not fit: {exc}", f"{path}.default")


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the message and every input (see the module doc)."""
    m = p.model(AskFields, fields, cmd.path)
    if m is None:
        return None
    p.value(m.message, f"{cmd.path}.message", known)
    seen: set[str] = set()
    for i, q in enumerate(m.inputs):
        _check_input(p, q, f"{cmd.path}.inputs[{i}]", known, seen)
    for i, q in enumerate(m.inputs):  # the answers land in sys.inputs for the rest of the run
        p.access("write", ref_path("sys.inputs", (q.name,)), f"{cmd.path}.inputs[{i}].name", "ask")
    cmd.model = m
    return cmd


async def _questions(it: Interpreter, cmd: Command) -> tuple[str, list[dict[str, Any]]]:
    m = cmd.model
    message = await it.value(m.message, f"{cmd.path}.message")
    questions = []
    for i, q in enumerate(m.inputs):
        path = f"{cmd.path}.inputs[{i}]"
        values = {key: await it.value(getattr(q, key), f"{path}.{key}") for key in ("label", "options", "default")}
        if q.type in ("chooseOne", "chooseMany") and not _literal_options(values["options"]):
            raise S2OError("runtime", "TypeError: options are a non-empty list of texts or numbers",
                           path=f"{path}.options")
        questions.append({"name": q.name, "type": q.type, **values})
    if isinstance(message, str):
        return message, questions
    return too_large_text(message) if too_large_to_write(message) else str(message), questions


def _held(question: dict[str, Any], value: Any) -> Any:
    """A ``password`` answer as a :class:`~..run.scopes.Secret` named after its input (its text the
    gateway's placeholder, or the text given in ``sys.inputs``); any other answer as it is."""
    if question["type"] == "password" and type(value) is str:
        return Secret(question["name"], value)
    return value


async def run(it: Interpreter, cmd: Command) -> None:
    """Ask what ``sys.inputs`` does not hold yet; ``result`` and ``sys.inputs`` get the answers."""
    message, questions = await _questions(it, cmd)
    sys_scope = it.session.namespace()["sys"]
    given = sys_scope.inputs
    try:
        answers = {q["name"]: check_answer(q, given[q["name"]]) for q in questions if q["name"] in given}
    except ValueError as exc:
        raise S2OError("ask-answer", f"{exc} (sys.inputs)", path=cmd.path) from None
    unasked = [q for q in questions if q["name"] not in given]
    if unasked:
        answers.update(await it.outside("ask", None, {"message": message, "inputs": unasked}, cmd.path))
    answers = {q["name"]: _held(q, answers[q["name"]]) for q in questions}
    add_inputs(sys_scope, answers)
    it.session.set_result(answers)


ASK = CommandSpec("ask", parse, run, fields=AskFields, produces_result=True)
