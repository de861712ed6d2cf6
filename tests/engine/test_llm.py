"""The ``llm`` command (SPEC 7.1) through an in-process session and its gateway: the ``openai`` adapter
against a real fake chat-completions server on 127.0.0.1 (SSE streaming, tool calls), the ``scripted``
adapter, spend and ``cost-limit``, the conversation's messages, and ``bounds`` of agent definitions."""

from __future__ import annotations

import json
import math

import pytest
from fake_llm import FakeLLM

from s2o_kernel.bounds import MAX_LLM_TURNS
from s2o_kernel.engine import Engine, Session, make_settings
from s2o_kernel.engine.commands.llm import tool_schema
from s2o_kernel.engine.fragments.tree import Function

KEY = "sk-test-4f9a1c77e2"

ORDERS = {
    "get_order": {"args": {"order_id": "str"},
                  "commands": [{"return": '{ {"id": order_id, "status": "shipped", "items": 2} }'}]},
}


def _session(fake: FakeLLM | None = None, *, script=None, limits=None, allowlist: str = "") -> Session:
    profiles: dict = {"llm": {}, "prompt": {"support": {"text": "You answer questions about orders."}}}
    if fake is not None:
        profiles["llm"]["gpt"] = {"adapter": "openai", "model": "fake-model", "url": fake.url,
                                  "key": "{ sys.secret['OPENAI_KEY'] }", "price_input": 2.0, "price_output": 8.0}
    profiles["llm"]["scripted"] = {"adapter": "scripted", "script": script or [], "price_input": 1.0,
                                   "price_output": 1.0}
    return Session(Engine(make_settings({"allowlist": allowlist, "profiles": profiles, "limits": limits or {},
                                         "secrets": {"OPENAI_KEY": KEY}})))


def _agent(llm: dict, *, bounds: dict | None = None, then: list | None = None) -> dict:
    fragment: dict = {"functions": {**ORDERS, "main": {"commands": [{"llm": llm}, *(then or [])]}}}
    if bounds is not None:
        fragment["bounds"] = bounds
    return fragment


def _shown(run) -> str:
    """Everything a run shows: value, outputs, logs and error text."""
    return json.dumps([repr(run.value), run.outputs, run.logs, str(run.error), run.error and run.error.details],
                      default=repr)


@pytest.fixture
def fake():
    with FakeLLM() as server:
        yield server


def test_text_reply_is_the_result_and_costs_the_tokens_times_the_prices(fake):
    s = _session(fake)
    fake.replies = [{"text": "Order A-1 has shipped.", "usage": (1000, 500)}]
    run = s.run_fragment([{"llm": {"profile": "gpt", "prompt": "support", "input": "Where is A-1?"}},
                          {"var": {"answer": "{result}"}}])
    assert run.code == "success", run.error
    assert s.locals["answer"] == "Order A-1 has shipped."
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["model"] == "fake-model"
    assert sent["body"]["messages"] == [{"role": "system", "content": "You answer questions about orders."},
                                        {"role": "user", "content": "Where is A-1?"}]
    assert {k.lower(): v for k, v in sent["headers"].items()}["authorization"] == f"Bearer {KEY}"
    assert KEY not in _shown(run)


def test_streamed_reply_arrives_as_text_parts_in_order(fake):
    s = _session(fake)
    fake.replies = [{"text": "one two three four", "usage": (5, 4)}]
    run = s.run_fragment({"llm": {"profile": "gpt", "input": "count", "streamOutput": True}})
    assert run.code == "success", run.error
    assert [p["text"] for p in run.outputs] == ["one ", "two ", "three ", "four"]
    assert all(p["type"] == "text" for p in run.outputs)
    assert s.evaluate("result") == "one two three four"
    assert fake.requests[0]["body"]["stream"] is True


def test_tool_call_round_trip_runs_the_agents_function_and_hands_back_its_value(fake):
    s = _session(fake)
    fake.replies = [{"calls": [("get_order", {"order_id": "A-1"})], "usage": (50, 10)},
                    {"text": "A-1 has shipped with 2 items.", "usage": (80, 9)}]
    run = s.run_fragment(_agent({"profile": "gpt", "input": "Where is A-1?", "functions": ["get_order"]},
                                then=[{"return": "{result}"}]))
    assert run.code == "success", run.error
    assert run.value == "A-1 has shipped with 2 items."
    first, second = (r["body"] for r in fake.requests)
    assert first["tools"] == [{"type": "function", "function": {
        "name": "get_order", "description": "the agent's function get_order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {"name": "get_order", "arguments": '{"order_id": "A-1"}'}
    assert tool == {"role": "tool", "tool_call_id": "call_0",
                    "content": json.dumps({"id": "A-1", "status": "shipped", "items": 2})}


def test_server_error_is_llm_failed_and_ends_the_run_with_call_failed(fake):
    s = _session(fake)
    fake.replies = [{"status": 500, "body": "the model is overloaded"}]
    run = s.run_fragment({"llm": {"profile": "gpt", "input": "hi"}})
    assert run.code == "callFailed"
    assert run.error.code == "llm-failed"
    assert "500" in run.error.message and "overloaded" in run.error.message
    assert run.error.path == "llm"


def test_on_error_handles_llm_failed_with_its_own_code(fake):
    s = _session(fake)
    fake.replies = [{"status": 503, "body": "down"}]
    run = s.run_fragment([{"llm": {"profile": "gpt", "input": "hi"},
                           "onError": {"var": {"failure": "{exc.code}"}}}])
    assert run.code == "success", run.error
    assert s.locals["failure"] == "llm-failed"


def test_a_key_the_server_echoes_back_never_shows(fake):
    s = _session(fake)
    fake.replies = [{"status": 401, "body": f"invalid key {KEY}"}]
    run = s.run_fragment({"llm": {"profile": "gpt", "input": "hi"}})
    assert run.error.code == "llm-failed"
    assert KEY not in _shown(run) and "***" in run.error.message
    fake.replies = [{"text": f"your key is {KEY}", "usage": (1, 1)}]
    run = s.run_fragment({"llm": {"profile": "gpt", "input": "hi", "streamOutput": True}})
    assert run.code == "success"
    assert KEY not in _shown(run)


def test_cost_limit_stops_the_run_naming_spend_and_bound_and_keeps_the_conversation(fake):
    s = _session(fake, limits={"llm_cost": 0.01})
    fake.replies = [{"text": "expensive", "usage": (4000, 1000)}]  # 4000*2/1e6 + 1000*8/1e6 = $0.016
    run = s.run_fragment([{"var": {"before": 1}},
                          {"llm": {"profile": "gpt", "input": "hi"}, "onError": {"var": {"handled": True}}}])
    assert run.code == "errorInAgent"
    assert run.error.code == "cost-limit"
    assert run.error.message == "the run's LLM spend $0.016 passed the cost limit (limits.llm_cost = $0.01)"
    assert "handled" not in s.locals  # a limit is not handled by onError
    assert s.llm_messages == []  # the failing command left the conversation as it was


def test_spend_adds_up_over_the_turns_of_one_run(fake):
    s = _session(fake, limits={"llm_cost": 0.02})
    fake.replies = [{"text": "a", "usage": (3000, 0)}, {"text": "b", "usage": (3000, 0)},
                    {"text": "c", "usage": (3000, 0)}, {"text": "d", "usage": (3000, 0)}]
    run = s.run_fragment([{"llm": {"profile": "gpt", "input": "1"}}, {"llm": {"profile": "gpt", "input": "2"}},
                          {"llm": {"profile": "gpt", "input": "3"}}, {"llm": {"profile": "gpt", "input": "4"}}])
    assert run.error.code == "cost-limit"
    assert "$0.024" in run.error.message
    assert len(fake.requests) == 4
    assert run.error.path == "[3].llm"


def test_bounds_cost_replaces_the_limit_for_a_definition(fake):
    s = _session(fake, limits={"llm_cost": 100})
    fake.replies = [{"text": "a", "usage": (1000, 0)}]
    run = s.run_fragment(_agent({"profile": "gpt", "input": "hi"}, bounds={"cost": 0.001}))
    assert run.error.code == "cost-limit"
    assert "(bounds.cost = $0.001)" in run.error.message
    assert s.settings.limits.llm_cost == 100  # only that run was bounded


def test_the_conversation_is_kept_across_runs_and_reset_clears_it(fake):
    s = _session(fake)
    fake.replies = [{"text": "Hello Ada", "usage": (1, 1)}, {"text": "You are Ada", "usage": (1, 1)},
                    {"text": "Who?", "usage": (1, 1)}]
    s.run_fragment({"llm": {"profile": "gpt", "input": "I am Ada"}})
    s.run_fragment({"llm": {"profile": "gpt", "input": "Who am I?"}})
    assert [m["content"] for m in fake.requests[1]["body"]["messages"]] == [
        "I am Ada", "Hello Ada", "Who am I?"]
    s.reset()
    s.run_fragment({"llm": {"profile": "gpt", "input": "Who am I?"}})
    assert [m["content"] for m in fake.requests[2]["body"]["messages"]] == ["Who am I?"]


def test_input_defaults_to_sys_query(fake):
    s = _session(fake)
    fake.replies = [{"text": "ok", "usage": (1, 1)}]
    run = s.run_fragment({"llm": {"profile": "gpt"}}, inputs={"query": "What is new?"})
    assert run.code == "success", run.error
    assert fake.requests[0]["body"]["messages"][-1] == {"role": "user", "content": "What is new?"}


def test_a_tool_the_model_was_not_offered_is_llm_failed(fake):
    s = _session(fake)
    fake.replies = [{"calls": [("delete_everything", {})], "usage": (1, 1)}]
    run = s.run_fragment(_agent({"profile": "gpt", "input": "x", "functions": ["get_order"]}))
    assert run.error.code == "llm-failed"
    assert "'delete_everything', which is not among the functions offered (get_order)" in run.error.message


def test_tool_arguments_of_the_wrong_type_are_argument_errors(fake):
    s = _session(fake)
    fake.replies = [{"calls": [("get_order", {"order_id": 7})], "usage": (1, 1)}]
    run = s.run_fragment(_agent({"profile": "gpt", "input": "x", "functions": ["get_order"]}))
    assert run.error.code == "argument"
    assert run.error.message == "order_id is expected to be str, got int"


# -- the scripted adapter ------------------------------------------------------------------------------

def test_scripted_turns_call_then_text_and_count_one_token_per_four_characters():
    script = [{"call": "get_order", "args": {"order_id": "A-1"}}, {"text": "Shipped!"}]
    s = _session(script=script, limits={"llm_cost": 1e-9})
    run = s.run_fragment(_agent({"profile": "scripted", "input": "Where?", "functions": ["get_order"]}))
    # the first turn: input "Where?" (6 chars → 2 tokens), output get_order{"order_id": "A-1"} (27 → 7)
    assert run.error.code == "cost-limit"
    assert run.error.details["spend"] == pytest.approx((2 + 7) / 1e6)
    s = _session(script=script)
    run = s.run_fragment(_agent({"profile": "scripted", "input": "Where?", "functions": ["get_order"]},
                                then=[{"return": "{result}"}]))
    assert run.value == "Shipped!"


def test_scripted_token_counts_given_in_the_script_are_used():
    s = _session(script=[{"text": "hi", "input_tokens": 1_000_000, "output_tokens": 0}], limits={"llm_cost": 0.5})
    run = s.run_fragment({"llm": {"profile": "scripted", "input": "x"}})
    assert run.error.code == "cost-limit"
    assert run.error.details == {"spend": 1.0, "bound": 0.5}


def test_scripted_script_wraps_and_reset_starts_it_over():
    s = _session(script=[{"text": "first"}, {"text": "second"}])
    ask = {"llm": {"profile": "scripted", "input": "x"}}
    values = [(s.run_fragment(ask), s.evaluate("result"))[1] for _ in range(3)]
    assert values == ["first", "second", "first"]
    s.reset()
    s.run_fragment(ask)
    assert s.evaluate("result") == "first"


def test_scripted_with_no_script_echoes_the_input():
    s = _session()
    s.run_fragment({"llm": {"profile": "scripted", "input": "hello"}})
    assert s.evaluate("result") == "You said: hello"


def test_a_model_that_only_calls_tools_stops_after_the_turn_bound():
    s = _session(script=[{"call": "get_order", "args": {"order_id": "A-1"}}])
    run = s.run_fragment(_agent({"profile": "scripted", "input": "x", "functions": ["get_order"]}))
    assert run.error.code == "llm-turns"
    assert f"at most {MAX_LLM_TURNS} model turns" in run.error.message


# -- validation ----------------------------------------------------------------------------------------

def test_unknown_profiles_and_functions_are_refused_before_anything_runs(fake):
    s = _session(fake)
    run = s.run_fragment(_agent({"profile": "nope", "prompt": "nada", "input": "x", "functions": ["missing"]}))
    codes = {(e.code, e.path) for e in run.error.errors}
    assert codes == {("unknown-profile", "functions.main.commands[0].llm.profile"),
                     ("unknown-profile", "functions.main.commands[0].llm.prompt"),
                     ("unknown-function", "functions.main.commands[0].llm.functions[0]")}
    messages = {e.path.rsplit(".", 1)[1]: e.message for e in run.error.errors if e.code == "unknown-profile"}
    assert messages == {"profile": "there is no llm profile named 'nope' (profiles.llm: gpt, orders, scripted)",
                        "prompt": "there is no prompt profile named 'nada' (profiles.prompt: demo, support)"}
    assert fake.requests == []


def test_a_profile_reading_a_missing_secret_is_refused_before_anything_runs(fake):
    s = _session(fake)
    s.update_settings({"profiles": {"llm": {"nokey": {"adapter": "openai", "url": fake.url,
                                                      "key": "{ sys.secret['ABSENT'] }"}}}})
    run = s.run_fragment({"llm": {"profile": "nokey", "input": "hi"}})
    assert (run.error.code, run.error.path, run.error.stage) == ("missing-secret", "llm.profile", "validate")
    assert "ABSENT" in run.error.message
    assert fake.requests == []


def test_wrong_field_types_are_fragment_errors_with_their_path():
    s = _session()
    run = s.run_fragment({"llm": {"profile": "scripted", "streamOutput": "yes", "temperature": 1}})
    assert {(e.code, e.path) for e in run.error.errors} == {("fragment", "llm.streamOutput"),
                                                            ("fragment", "llm.temperature")}


def test_tool_schemas_map_the_spec_types_to_json_schema():
    fn = Function("f", {"a": "str", "b": "int", "c": "float", "d": "bool", "e": "list", "g": "dict", "h": "any"},
                  {"h": None}, [], None, "functions.f")
    schema = tool_schema(fn)["parameters"]
    assert schema["properties"] == {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "number"},
                                    "d": {"type": "boolean"}, "e": {"type": "array"}, "g": {"type": "object"},
                                    "h": {}}
    assert schema["required"] == ["a", "b", "c", "d", "e", "g"]


# -- bounds --------------------------------------------------------------------------------------------

def test_bounds_time_replaces_limits_time_both_ways():
    allow = "s2o_kernel.examples.slow_answer as slow_answer"
    s = _session(allowlist=allow, limits={"time": 0.5})
    longer = {"functions": {"main": {"commands": [{"return": "{slow_answer(1.0)}"}]}}, "bounds": {"time": 5}}
    run = s.run_fragment(longer)
    assert run.code == "success", run.error
    assert run.value == "done"
    s = _session(allowlist=allow, limits={"time": 30})
    shorter = {"functions": {"main": {"commands": [{"return": "{slow_answer(5)}"}]}}, "bounds": {"time": 0.3}}
    run = s.run_fragment(shorter)
    assert run.code == "timedOut"
    assert run.error.message == "the run took longer than the time limit (bounds.time = 0.3 s)"
    assert s.settings.limits.time == 30
    assert s.evaluate("1 + 1") == 2


@pytest.mark.parametrize(("bounds", "path", "message"), [
    ({"tim": 3}, "bounds.tim", "unknown bound 'tim'; bounds are time (seconds) and cost (US dollars)"),
    ({"time": "3"}, "bounds.time", "bounds.time is expected to be a number, got str"),
    ({"time": 0}, "bounds.time", "bounds.time must be greater than 0"),
    ({"cost": -1}, "bounds.cost", "bounds.cost must be 0 or more"),
    ({"cost": True}, "bounds.cost", "bounds.cost is expected to be a number, got bool"),
    ([1], "bounds", 'bounds is expected to be an object such as {"time": 10, "cost": 0.05}'),
])
def test_bad_bounds_are_refused_with_their_path(bounds, path, message):
    s = _session()
    run = s.run_fragment({"functions": {"main": {"commands": [{"var": {"x": 1}}]}}, "bounds": bounds})
    assert (run.error.code, run.error.path, run.error.message) == ("fragment", path, message)
    assert run.error.stage == "validate"
    assert "x" not in s.locals


def test_token_rule_rounds_up():
    from s2o_kernel.engine.outside.adapters.base import count_tokens

    assert [count_tokens("a" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert count_tokens("x" * 401) == math.ceil(401 / 4)


def test_a_secret_split_over_streamed_chunks_is_masked_whole():
    from s2o_kernel.engine.outside.llm import MaskedStream
    from s2o_kernel.engine.outside.secrets import Masker

    got: list[dict] = []
    stream = MaskedStream(Masker([KEY, "other-secret"]), got.append)
    for chunk in ["my key is sk-te", "st-4f9a", "1c77e2 and sk-", "nothing else, other-"]:
        stream({"type": "text", "text": chunk, "stream": "llm"})
    stream.flush()
    text = "".join(p["text"] for p in got)
    assert text == "my key is *** and sk-nothing else, other-"
    assert all("sk-te" not in p["text"] for p in got)


def test_through_the_confined_worker_the_parent_makes_the_calls(fake):
    """The worker holds no key and cannot connect: each model turn is made by the parent's gateway; tool
    calls run in the worker; streamed text and the spend come back; the key shows nowhere."""
    from s2o_kernel.engine import IsolatedSession

    profiles = {"llm": {"gpt": {"adapter": "openai", "model": "m", "url": fake.url,
                                "key": "{ sys.secret['OPENAI_KEY'] }", "price_input": 2.0, "price_output": 8.0}}}
    s = IsolatedSession(make_settings({"allowlist": "", "profiles": profiles, "secrets": {"OPENAI_KEY": KEY},
                                       "limits": {"llm_cost": 0.01}}))
    try:
        fake.replies = [{"calls": [("get_order", {"order_id": "A-1"})], "usage": (10, 5)},
                        {"text": f"Shipped. (key {KEY})", "usage": (20, 5)}]
        parts: list[dict] = []
        run = s.run_fragment(_agent({"profile": "gpt", "input": "Where is A-1?", "functions": ["get_order"],
                                     "streamOutput": True}, then=[{"return": "{result}"}]), on_output=parts.append)
        assert run.code == "success", run.error
        assert run.value == "Shipped. (key ***)"
        assert "".join(p["text"] for p in parts) == "Shipped. (key ***)"
        assert json.loads(fake.requests[1]["body"]["messages"][-1]["content"])["status"] == "shipped"
        assert {k.lower(): v for k, v in fake.requests[0]["headers"].items()}["authorization"] == f"Bearer {KEY}"
        fake.replies = [{"text": "again", "usage": (3000, 1000)}]  # $0.014 > $0.01
        run = s.run_fragment({"llm": {"profile": "gpt", "input": "and now?"}})
        assert run.error.code == "cost-limit"
        # the conversation (kept in the worker) was sent: the first run's four messages, then the input
        assert len(fake.requests[2]["body"]["messages"]) == 5
        assert KEY not in _shown(run)
    finally:
        s.close()


def test_a_server_that_sends_no_usage_is_counted_by_the_four_characters_rule(fake):
    s = _session(fake, limits={"llm_cost": 1e-9})
    fake.replies = [{"text": "x" * 40}]  # no usage chunk
    run = s.run_fragment({"llm": {"profile": "gpt", "input": "hi"}})
    assert run.error.code == "cost-limit"
    sent = json.dumps([{"role": "user", "content": "hi"}])
    expected = (math.ceil(len(sent) / 4) * 2.0 + math.ceil(len("x" * 40 + "[]") / 4) * 8.0) / 1e6
    assert run.error.details["spend"] == pytest.approx(expected)


def test_tool_arguments_that_are_not_a_json_object_are_llm_failed(fake):
    s = _session(fake)
    fake.replies = [{"calls": [("get_order", ["A-1"])], "usage": (1, 1)}]
    run = s.run_fragment(_agent({"profile": "gpt", "input": "x", "functions": ["get_order"]}))
    assert run.error.code == "llm-failed"
    assert run.error.message == "the model called 'get_order' with arguments that are not a JSON object"


def test_a_server_that_cannot_be_reached_is_llm_failed():
    with FakeLLM() as gone:
        url = gone.url
    s = Session(Engine(make_settings({"allowlist": "", "profiles": {"llm": {"gone": {
        "adapter": "openai", "model": "m", "url": url}}}})))
    run = s.run_fragment({"llm": {"profile": "gone", "input": "hi"}})
    assert run.code == "callFailed"
    assert run.error.code == "llm-failed"
    assert run.error.message.startswith("could not reach the model server")
