"""The ``ask`` command (SPEC 7.1) through an in-process session and its gateway: answers from an
``AnswerFn`` land in ``result`` and ``sys.inputs``; with nobody to answer the run ends with code ``ask``
and the questions as its value; answers already in ``sys.inputs`` are used; typed answers are read and
re-asked; the fields are checked at validation."""

from __future__ import annotations

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, make_settings
from s2o_kernel.engine.outside.ask import ask_each, prompt_text, read_answer

INPUTS = [
    {"name": "order_id", "label": "Which order?"},
    {"name": "quantity", "type": "number", "default": 1},
    {"name": "gift", "type": "bool"},
    {"name": "colour", "type": "chooseOne", "options": ["red", "green", "blue"]},
    {"name": "extras", "type": "chooseMany", "options": ["wrap", "card", "ribbon"]},
    {"name": "pin", "type": "password"},
]

ANSWERS = {"order_id": "A-1", "quantity": 3, "gift": True, "colour": "green", "extras": ["wrap", "card"],
           "pin": "1234"}


def _plain(answers: dict) -> dict:
    """``answers`` with the password answer as it shows (a secret is never equal to anything)."""
    return {k: repr(v) if k == "pin" else v for k, v in answers.items()}


SHOWN = {**ANSWERS, "pin": "<secret pin>"}


def _session() -> Session:
    return Session(Engine(make_settings({"allowlist": ""})))


def _ask(message: str = "About your order") -> list[dict]:
    return [{"ask": {"message": message, "inputs": INPUTS}},
            {"var": {"answers": "{result}", "seen": "{sys.inputs['colour']}"}}]


def test_answers_land_in_result_and_sys_inputs():
    s = _session()
    asked: list = []

    def answer(message, questions):
        asked.append((message, questions))
        return dict(ANSWERS)

    s.outside.answer = answer
    run = s.run_fragment(_ask())
    assert run.code == "success", run.error
    assert _plain(s.locals["answers"]) == SHOWN
    assert s.locals["seen"] == "green"
    message, questions = asked[0]
    assert message == "About your order"
    assert questions[0] == {"name": "order_id", "type": "text", "label": "Which order?", "options": None,
                            "default": None}
    assert [q["name"] for q in questions] == [q["name"] for q in INPUTS]


def test_with_nobody_to_answer_the_run_ends_with_code_ask_and_the_questions():
    s = _session()
    run = s.run_fragment([{"var": {"before": 1}}, *_ask()])
    assert run.code == "ask"
    assert run.error.code == "ask"
    assert [q["name"] for q in run.value] == [q["name"] for q in INPUTS]
    assert run.error.details["message"] == "About your order"
    assert "answers" not in s.locals


def test_an_answer_function_that_cannot_ask_also_ends_with_code_ask():
    s = _session()
    s.outside.answer = lambda message, questions: None
    run = s.run_fragment(_ask())
    assert run.code == "ask"


def test_on_error_does_not_handle_ask():
    s = _session()
    run = s.run_fragment([{"ask": {"message": "x", "inputs": [{"name": "a"}]},
                           "onError": {"var": {"handled": True}}}])
    assert run.code == "ask"
    assert "handled" not in s.locals


def test_answers_already_in_sys_inputs_are_used_without_asking():
    s = _session()
    s.outside.answer = lambda message, questions: pytest.fail("nobody should be asked")
    run = s.run_fragment(_ask(), inputs=dict(ANSWERS))
    assert run.code == "success", run.error
    assert _plain(s.locals["answers"]) == SHOWN


def test_only_the_inputs_not_in_sys_inputs_are_asked():
    s = _session()
    asked: list = []

    def answer(message, questions):
        asked.extend(q["name"] for q in questions)
        return {name: ANSWERS[name] for name in asked}

    s.outside.answer = answer
    given = {k: v for k, v in ANSWERS.items() if k not in ("gift", "pin")}
    run = s.run_fragment(_ask(), inputs=given)
    assert run.code == "success", run.error
    assert asked == ["gift", "pin"]
    assert _plain(s.locals["answers"]) == SHOWN
    assert list(s.locals["answers"]) == [q["name"] for q in INPUTS]  # in the order of the inputs


def test_a_password_answer_is_a_secret_whose_text_the_run_never_holds():
    from s2o_kernel.engine.run.scopes import reveal

    s = _session()
    s.outside.answer = lambda message, questions: dict(ANSWERS)
    run = s.run_fragment([*_ask(), {"log": "{ answers['pin'] }"}, {"output": "{ f'pin={sys.inputs[\"pin\"]}' }"},
                          {"return": "{ result }"}])
    assert run.code == "success", run.error
    pin = s.locals["answers"]["pin"]
    assert repr(pin) == "<secret pin>" and "1234" not in reveal(pin)  # the gateway's placeholder
    assert run.logs == ['"<secret pin>"'] and run.outputs == [{"type": "text", "text": "pin=***"}]
    for use in ("{ answers['pin'] == '1234' }", "{ answers['pin'] < 'a' }", "{ f'{answers[\"pin\"]:>9}' }",
                "{ answers['pin'] + '' }"):
        assert s.run_fragment({"return": use}).error.code == "not-allowed", use


def test_an_answer_in_sys_inputs_that_does_not_fit_is_ask_answer():
    s = _session()
    run = s.run_fragment(_ask(), inputs={**ANSWERS, "colour": "purple"})
    assert run.error.code == "ask-answer"
    assert "the answer to 'colour' must be one of ['red', 'green', 'blue']" in run.error.message


def test_an_answer_function_giving_a_wrong_type_is_ask_answer():
    s = _session()
    s.outside.answer = lambda message, questions: {**ANSWERS, "quantity": "three"}
    run = s.run_fragment(_ask())
    assert run.code == "errorInAgent"
    assert run.error.code == "ask-answer"
    assert run.error.message == "the answer to 'quantity' must be a number"


def test_dynamic_message_label_and_options_are_evaluated():
    s = _session()
    got: list = []
    s.outside.answer = lambda message, questions: got.append((message, questions)) or {"pick": "b"}
    run = s.run_fragment([{"var": {"name": "Ada", "choices": ["a", "b"]}},
                          {"ask": {"message": "{ f'Hello {name}' }", "inputs": [
                              {"name": "pick", "type": "chooseOne", "label": "{ name + '?' }",
                               "options": "{choices}"}]}}])
    assert run.code == "success", run.error
    assert got[0][0] == "Hello Ada"
    assert got[0][1][0]["label"] == "Ada?" and got[0][1][0]["options"] == ["a", "b"]


@pytest.mark.parametrize(("inputs", "path", "message"), [
    ([], "ask.inputs", "List should have at least 1 item after validation, not 0"),
    ([{"name": "a", "type": "colour"}], "ask.inputs[0].type", None),
    ([{"name": "a", "type": "chooseOne"}], "ask.inputs[0].options",
     "a chooseOne input needs options (a list of texts or numbers)"),
    ([{"name": "a", "options": ["x"]}], "ask.inputs[0].options", "options are for chooseOne and chooseMany inputs, not text"),
    ([{"name": "a", "type": "chooseMany", "options": []}], "ask.inputs[0].options",
     "options are a non-empty list of texts or numbers"),
    ([{"name": "a", "type": "number", "default": "many"}], "ask.inputs[0].default",
     "the default does not fit: the answer to 'a' must be a number"),
    ([{"name": "a"}, {"name": "a"}], "ask.inputs[1].name", "the input 'a' is asked twice"),
    ([{"name": "_a"}], "ask.inputs[0].name", "names starting with '_' are not allowed: '_a'"),
    ([{"name": "a", "size": 3}], "ask.inputs[0].size", "unknown field 'size'"),
])
def test_bad_inputs_are_refused_at_validation(inputs, path, message):
    s = _session()
    run = s.run_fragment({"ask": {"message": "m", "inputs": inputs}})
    assert run.error.path == path
    assert run.error.stage == "validate"
    if message is not None:
        assert run.error.message == message


# -- reading what a person typed ---------------------------------------------------------------------

@pytest.mark.parametrize(("question", "typed", "value"), [
    ({"name": "q", "type": "text"}, "hello", "hello"),
    ({"name": "q", "type": "number"}, "42", 42),
    ({"name": "q", "type": "number"}, " -2.5 ", -2.5),
    ({"name": "q", "type": "number", "default": 7}, "", 7),
    ({"name": "q", "type": "bool"}, "Yes", True),
    ({"name": "q", "type": "bool"}, "n", False),
    ({"name": "q", "type": "chooseOne", "options": ["red", "green"]}, "2", "green"),
    ({"name": "q", "type": "chooseOne", "options": ["red", "green"]}, "red", "red"),
    ({"name": "q", "type": "chooseMany", "options": ["a", "b", "c"]}, "1, c", ["a", "c"]),
    ({"name": "q", "type": "chooseOne", "options": [10, 20]}, "20", 20),
])
def test_read_answer(question, typed, value):
    assert read_answer(question, typed) == value


@pytest.mark.parametrize(("question", "typed", "reason"), [
    ({"name": "q", "type": "number"}, "lots", "'lots' is not a number"),
    ({"name": "q", "type": "number"}, "nan", "the answer to 'q' must be a number"),
    ({"name": "q", "type": "bool"}, "maybe", "answer yes or no"),
    ({"name": "q", "type": "chooseOne", "options": ["red"]}, "3",
     "'3' is not one of the options: answer with its number (1 to 1) or its text"),
    ({"name": "q", "type": "number"}, "", "an answer is needed"),
])
def test_read_answer_refuses_with_a_reason(question, typed, reason):
    with pytest.raises(ValueError) as info:
        read_answer(question, typed)
    assert str(info.value) == reason


def test_ask_each_re_asks_with_the_reason_then_gives_up_with_ask_answer():
    typed = iter(["lots", "42"])
    prompts: list = []

    def prompt(text, password):
        prompts.append((text, password))
        return next(typed)

    assert ask_each("Hi", [{"name": "n", "type": "number"}], prompt) == {"n": 42}
    assert prompts == [("Hi\nn: ", False), ("'lots' is not a number.\nn: ", False)]
    with pytest.raises(S2OError) as info:
        ask_each("", [{"name": "n", "type": "number"}], lambda text, password: "x")
    assert info.value.code == "ask-answer"


def test_ask_each_hides_passwords_and_stops_when_nobody_can_answer():
    seen: list = []
    answers = ask_each("", [{"name": "pin", "type": "password"}], lambda t, p: seen.append(p) or "1234")
    assert answers == {"pin": "1234"} and seen == [True]
    assert ask_each("", [{"name": "a", "type": "text"}], lambda t, p: None) is None


def test_prompt_text_lists_options_and_default():
    text = prompt_text({"name": "c", "type": "chooseOne", "label": "Colour", "options": ["red", "green"],
                        "default": "red"})
    assert text == "Colour\n  1. red\n  2. green\n  (its number or its text) [default: red]: "
    assert prompt_text({"name": "g", "type": "bool", "label": None}) == "g (yes/no): "


def test_through_the_worker_the_parent_answers_and_no_answer_is_code_ask():
    from s2o_kernel.engine import IsolatedSession

    s = IsolatedSession(make_settings({"allowlist": ""}))
    try:
        run = s.run_fragment(_ask())
        assert run.code == "ask"
        assert [q["name"] for q in run.value] == [q["name"] for q in INPUTS]
        s.outside.answer = lambda message, questions: dict(ANSWERS)
        run = s.run_fragment(_ask())
        assert run.code == "success", run.error
        answers = s.locals["answers"]  # a secret is not JSON: the worker's value comes back as its repr
        assert answers.json is None and "'pin': <secret pin>" in repr(answers) and "1234" not in repr(answers)
        assert s.locals["seen"] == "green"
    finally:
        s.close()
