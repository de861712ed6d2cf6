"""``ask`` and ``llm`` through real kernels (SPEC 7.1, 9), contained (the default) and in-process.

``ask`` asks each input with Jupyter's ``input_request`` when the ``execute_request`` allows stdin (the
test answers on the stdin channel, as a front end does); without stdin the cell fails at once with
``ename`` ``ask`` (never a hang). ``llm`` with ``streamOutput`` shows the model's text as ``stdout``
stream messages while the cell runs, before its reply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import MODES, collect_iopub, execute, running_kernel, shell_reply

ASK = json.dumps([
    {"ask": {"message": "About your order", "inputs": [
        {"name": "order_id", "label": "Which order?"},
        {"name": "quantity", "type": "number"},
        {"name": "colour", "type": "chooseOne", "options": ["red", "green"]},
        {"name": "pin", "type": "password"},
    ]}},
    {"var": {"answers": "{result}", "order": "{sys.inputs['order_id']}"}},
])

CONFIG = """
[profiles.llm.talker]
adapter = "scripted"
script = [{text = "Hello from the scripted model, word by word."}]
"""


@pytest.fixture(scope="module", params=list(MODES))
def manager_and_client(request: pytest.FixtureRequest, kernels_dir: Path, http_server: Any,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cwd = tmp_path_factory.mktemp("cwd-llm-ask")
    (cwd / "s2o.toml").write_text(CONFIG + f'\n[profiles.api.local]\nurl = "{http_server.url}"\nallow_path = true\nallow_headers = true\n')
    with running_kernel(kernels_dir, cwd, env={"S2O_KERNEL_ISOLATED": MODES[request.param]}) as (km, client):
        yield km, client


@pytest.fixture
def kc(manager_and_client: Any) -> Any:
    return manager_and_client[1]


def test_ask_through_input_requests(kc: Any) -> None:
    msg_id = kc.execute(ASK, allow_stdin=True)
    prompts = []
    for typed in ["A-1001", "lots", "3", "5", "green", "1234"]:
        request = kc.get_stdin_msg(timeout=20)
        assert request["msg_type"] == "input_request"
        prompts.append(request["content"])
        kc.input(typed)
    reply = shell_reply(kc, msg_id)["content"]
    assert reply["status"] == "ok", reply
    collect_iopub(kc, msg_id)
    texts = [p["prompt"] for p in prompts]
    assert texts[0] == "About your order\n[agent] Which order?: "
    assert texts[1] == "[agent] quantity: "
    assert texts[2] == "'lots' is not a number.\n[agent] quantity: "  # re-asked, saying why
    assert texts[3] == "colour\n  1. red\n  2. green\n[agent]   (its number or its text): "
    assert texts[4].startswith("'5' is not one of the options")  # re-asked
    assert [p["password"] for p in prompts] == [False, False, False, False, False, True]
    reply, outputs = execute(kc, "[answers, order]")
    data = next(m["content"]["data"] for m in outputs if m["msg_type"] == "execute_result")
    assert "'order_id': 'A-1001'" in data["text/plain"] and "'quantity': 3" in data["text/plain"]
    assert "'colour': 'green'" in data["text/plain"] and "'A-1001'" in data["text/plain"]


def test_a_password_answer_is_held_as_a_secret(kc: Any, http_server: Any) -> None:
    """Issue 31 item 9: a ``password`` answer is typed hidden and then shown nowhere (``result``,
    ``sys.inputs``, a ``log``, an ``output``, ``%vars``, a server's echo of it), yet an ``api`` call gets its
    text where an f-string put it."""
    login = json.dumps([
        {"ask": {"inputs": [{"name": "user"}, {"name": "pin", "type": "password"}]}},
        {"var": {"answers": "{ result }", "given": "{ sys.inputs }"}},
        {"log": "{ sys.inputs['pin'] }"},
        {"output": "{ f'pin {sys.inputs[\"pin\"]} set' }"},
        {"api": {"profile": "local", "path": "/whoami",
                 "headers": {"Authorization": "{ f'Basic {sys.inputs[\"pin\"]}' }"}}},
        {"var": {"echoed": "{ result }"}}])
    msg_id = kc.execute(login, allow_stdin=True)
    kc.get_stdin_msg(timeout=20)
    kc.input("ada")
    request = kc.get_stdin_msg(timeout=20)
    assert request["content"]["password"] is True
    kc.input("pin-7731")
    reply = shell_reply(kc, msg_id)["content"]
    assert reply["status"] == "ok", reply
    shown = json.dumps([m["content"] for m in collect_iopub(kc, msg_id)])
    assert "pin *** set" in shown and "<secret pin>" in shown
    assert http_server.requests[-1][2]["Authorization"] == "Basic pin-7731"  # the server got the text
    for cell in ("[answers, given, echoed]", "%vars", "%sys"):
        reply, outputs = execute(kc, cell)
        assert reply["status"] == "ok", (cell, reply)
        text = json.dumps([m["content"] for m in outputs])
        assert "pin-7731" not in text, (cell, text)
        if cell != "%sys":
            assert "<secret pin>" in text, (cell, text)
        if cell.startswith("["):
            assert "'auth': 'Basic ***'" in text  # the server's echo of it, masked


def test_an_ask_cannot_pass_for_the_kernels_own_secret_prompt(kc: Any) -> None:
    """Red team 3: an agent's ``ask`` (a ``%run`` of an untrusted definition) could ask with exactly the text
    of ``%secret``'s prompt, hidden typing included, and keep the key a person typed. The line a person
    types an ask's answer on always starts with ``[agent] ``; a line break, carriage return or escape
    sequence in the run's text cannot move it away (they are shown escaped or start a line above)."""
    spoof = json.dumps([{"ask": {"message": "", "inputs": [
        {"name": "k", "type": "password", "label": "Value of the secret OPENAI_KEY"},
        {"name": "j", "type": "password", "label": "x\n\n\rValue of the secret OPENAI_KEY"},
        {"name": "m", "type": "text", "label": "x\x1b[2K\x1b[1GValue of the secret OPENAI_KEY"}]}}])
    msg_id = kc.execute(spoof, allow_stdin=True)
    shown = []
    for _ in range(3):
        request = kc.get_stdin_msg(timeout=20)
        shown.append(request["content"]["prompt"])
        kc.input("typed")
    assert shell_reply(kc, msg_id)["content"]["status"] == "ok"
    collect_iopub(kc, msg_id)
    for prompt in shown:
        assert prompt.rsplit("\n", 1)[-1].startswith("[agent] "), prompt
        assert "\r" not in prompt and "\x1b" not in prompt, prompt
    msg_id = kc.execute("%secret SPOOF_CHECK", allow_stdin=True)
    assert kc.get_stdin_msg(timeout=20)["content"]["prompt"] == "Value of the secret SPOOF_CHECK: "
    kc.input("tok")
    assert shell_reply(kc, msg_id)["content"]["status"] == "ok"
    collect_iopub(kc, msg_id)


def test_ask_without_stdin_is_an_error_named_ask_not_a_hang(kc: Any) -> None:
    reply, outputs = execute(kc, ASK, allow_stdin=False, timeout=20)
    assert reply["status"] == "error"
    assert reply["ename"] == "ask"
    assert "order_id, quantity, colour, pin" in reply["evalue"]
    assert next(m for m in outputs if m["msg_type"] == "error")["content"]["ename"] == "ask"
    # the answers given as inputs let the same cell run without asking
    execute(kc, '%sys {"inputs": {"order_id": "B-2", "quantity": 1, "colour": "red", "pin": "0"}}')
    try:
        reply, _ = execute(kc, ASK, allow_stdin=False)
        assert reply["status"] == "ok", reply
    finally:
        execute(kc, '%sys {"inputs": {}}')


def test_an_unanswered_prompt_ends_at_the_time_limit_and_the_next_prompt_works(kc: Any) -> None:
    execute(kc, '%limits {"time": 2}')
    try:
        msg_id = kc.execute(ASK, allow_stdin=True)
        assert kc.get_stdin_msg(timeout=20)["msg_type"] == "input_request"  # never answered
        reply = shell_reply(kc, msg_id, timeout=20)["content"]
        collect_iopub(kc, msg_id)
        assert (reply["status"], reply["ename"]) == ("error", "timedOut")
    finally:
        execute(kc, '%limits {"time": 30}')
    # no prompt outlived the cell: the next input request gets its own reply
    msg_id = kc.execute("%secret LATER_TOKEN", allow_stdin=True)
    assert kc.get_stdin_msg(timeout=20)["content"]["password"] is True
    kc.input("tok-later-1")
    assert shell_reply(kc, msg_id)["content"]["status"] == "ok"
    collect_iopub(kc, msg_id)


def test_an_interrupt_while_asking_stops_the_cell_and_keeps_the_session(manager_and_client: Any) -> None:
    km, kc = manager_and_client
    execute(kc, '{"var": {"kept": 41}}')
    msg_id = kc.execute(ASK, allow_stdin=True)
    assert kc.get_stdin_msg(timeout=20)["msg_type"] == "input_request"
    km.interrupt_kernel()
    reply = shell_reply(kc, msg_id, timeout=20)["content"]
    collect_iopub(kc, msg_id)
    assert (reply["status"], reply["ename"]) == ("error", "stopped")
    _, outputs = execute(kc, "kept + 1")
    assert next(m for m in outputs if m["msg_type"] == "execute_result")["content"]["data"]["text/plain"] == "42"


def test_streamed_model_text_arrives_as_stdout_before_the_reply(kc: Any) -> None:
    msg_id = kc.execute(json.dumps({"llm": {"profile": "talker", "input": "hi", "streamOutput": True}}))
    msgs = collect_iopub(kc, msg_id)
    streams = [m["content"] for m in msgs if m["msg_type"] == "stream"]
    assert all(s["name"] == "stdout" for s in streams)
    assert len(streams) > 1  # chunks, as they came
    assert "".join(s["text"] for s in streams) == "Hello from the scripted model, word by word."
    assert shell_reply(kc, msg_id)["content"]["status"] == "ok"


KEY = "sk-kernel-7d1e93ab"


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[Any]:
    from fake_llm import FakeLLM

    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def openai_kc(kernels_dir: Path, tmp_path_factory: pytest.TempPathFactory, fake_llm: Any) -> Iterator[Any]:
    """A contained kernel whose ``gpt`` profile talks to the fake server with a key from the environment."""
    cwd = tmp_path_factory.mktemp("cwd-openai")
    (cwd / "s2o.toml").write_text(f"""
[profiles.llm.gpt]
adapter = "openai"
model = "fake-model"
url = "{fake_llm.url}"
key = "{{ sys.secret['OPENAI_KEY'] }}"
price_input = 2.0
price_output = 8.0
""")
    with running_kernel(kernels_dir, cwd, env={"S2O_KERNEL_ISOLATED": "", "S2O_SECRET_OPENAI_KEY": KEY}) as (_km, client):
        yield client


def test_an_openai_profile_through_the_kernel_never_shows_its_key(openai_kc: Any, fake_llm: Any) -> None:
    fake_llm.replies = [{"text": f"streamed, with the key {KEY} in it", "usage": (10, 10)},
                        {"status": 401, "body": f"bad key {KEY}"}]
    reply, outputs = execute(openai_kc, json.dumps([
        {"llm": {"profile": "gpt", "input": "hi", "streamOutput": True}}, {"return": "{result}"}]))
    assert reply["status"] == "ok", reply
    streamed = "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream")
    assert streamed == "streamed, with the key *** in it"
    assert {k.lower(): v for k, v in fake_llm.requests[-1]["headers"].items()}["authorization"] == f"Bearer {KEY}"
    failed, outputs2 = execute(openai_kc, json.dumps({"llm": {"profile": "gpt", "input": "again"}}))
    assert failed["status"] == "error" and failed["ename"].startswith("llm-"), failed
    assert "(the run's result code: callFailed)" in failed["traceback"][-1]
    assert "401" in failed["evalue"] and "***" in failed["evalue"]
    shown = json.dumps([reply, outputs, failed, outputs2], default=str)
    assert KEY not in shown
