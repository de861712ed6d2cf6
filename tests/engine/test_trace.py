"""The run trace (SPEC 14, issue 33) as the engine records it, in-process and through the worker.

What a run's ``RunResult.trace`` holds: a span per command with its path, the expressions it evaluated
and the variables it bound; loop passes numbered (the first ones kept, the rest counted); ``call`` and
``parallel`` nested; outside calls with profile, request, response, tokens, price and replay; model turns
and tool calls inside their ``llm`` span; failures where they happened, agreeing with the error's chain of
calls. Secrets appear nowhere in it; keeping it changes nothing a run shows (also the property in
``test_sync_properties.py``); a worker's trace is checked like every message it sends.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.fragments import ORDERS_AGENT  # the orders agent of notebooks/outside-world.ipynb
from s2o_kernel.bounds import TRACE_CHARS, TRACE_PASSES, TRACE_SPANS, TRACE_TEXT_CHARS, TRACE_VALUE_CHARS
from s2o_kernel.engine import Engine, IsolatedSession, Session, default_settings, make_settings
from s2o_kernel.engine.commands import loops
from s2o_kernel.engine.fragments import trace as trace_module


@pytest.fixture(params=["in-process", "worker"])
def session(request: pytest.FixtureRequest) -> Any:
    """A session on the embedded default settings, in-process or in the worker."""
    s = IsolatedSession(default_settings()) if request.param == "worker" else Session(Engine(default_settings()))
    yield s
    if request.param == "worker":
        s.close()


def spans(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every span below ``node`` (itself first), depth first."""
    out, stack = [], [node]
    while stack:
        span = stack.pop()
        out.append(span)
        stack.extend(reversed(span["spans"]))
    return out


def shape(node: dict[str, Any]) -> list[Any]:
    """``[kind, name, outcome, [children…]]``: what a test compares of a tree."""
    return [node["kind"], node["name"], node["outcome"], [shape(c) for c in node["spans"]]]


def without_times(value: Any) -> Any:
    """The trace with its times (start, duration, recorded) and replay flags left out."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in ("start", "duration", "recorded", "replayed", "started")}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def test_the_orders_agent_traces_its_model_turns_and_the_tool_call_inside_the_llm_span(session: Any) -> None:
    run = session.run_fragment(ORDERS_AGENT)
    assert run.code == "success", run.error
    trace = run.trace
    assert (trace["schema"], trace["version"], trace["code"]) == ("s2o-trace", 1, "success")
    root = trace["root"]
    assert (root["kind"], root["name"], root["outcome"]) == ("run", "agent", "ok")
    assert shape(root) == ["run", "agent", "ok", [
        ["command", "llm", "ok", [
            ["outside", "llm", "ok", []],
            ["tool", "get_order", "ok", [
                ["command", "api", "ok", [["outside", "api", "ok", []]]],
                ["command", "return", "ok", []]]],
            ["outside", "llm", "ok", []]]],
        ["command", "return", "ok", []]]]
    llm = root["spans"][0]
    assert llm["path"] == "functions.main.commands[0].llm"
    first, tool, second = llm["spans"]
    assert (first["turn"], second["turn"]) == (1, 2)
    assert first["profile"] == "orders" and first["response"] == "tool calls: get_order(order_id=7)"
    assert first["request"].startswith("2 messages, last user: 'Where is my order 7?'; tools: get_order")
    assert first["tokens"] == {"input": 35, "output": 6} and second["tokens"] == {"input": 57, "output": 21}
    assert first["price"] > 0 and second["price"] > 0 and first["replayed"] is False
    assert second["response"].startswith("text: 'Order 7 has shipped")
    assert (tool["call_id"], tool["path"], tool["fields"]) == ("call_0", "functions.get_order", {"args.order_id": "7"})
    api = tool["spans"][0]
    assert api["fields"] == {"path": "'/orders/7'"} and api["spans"][0]["request"] == "GET /orders/7"
    assert api["spans"][0]["profile"] == "echo" and "'/orders/7'" in api["spans"][0]["response"]
    assert tool["spans"][1]["fields"] == {"value": api["spans"][0]["response"]}  # what the tool gave the model
    for span in spans(root):  # every span has its offset and duration inside its parent's
        for child in span["spans"]:
            assert span["start"] <= child["start"] and child["start"] + child["duration"] <= \
                span["start"] + span["duration"] + 1e-5


def test_a_loop_keeps_its_first_passes_numbered_and_counts_the_rest(session: Any) -> None:
    run = session.run_fragment([{"var": {"total": 0}},
                                {"for": {"item": "n", "in": "{ list(range(35)) }",
                                         "commands": {"var": {"total": "{ total + n }"}}}},
                                {"return": "{ total }"}])
    assert run.value == sum(range(35)), run.error
    loop = run.trace["root"]["spans"][1]
    assert (loop["name"], loop["passes"], loop["hidden"]) == ("for", 35, {"passes": 35 - TRACE_PASSES})
    assert [p["name"] for p in loop["spans"]] == [f"pass {i}" for i in range(1, TRACE_PASSES + 1)]
    assert [p["pass"] for p in loop["spans"]] == list(range(1, TRACE_PASSES + 1))
    third = loop["spans"][2]
    assert third["wrote"] == {"n": "2"}  # the loop's item in its pass
    assert (third["spans"][0]["path"], third["spans"][0]["fields"]) == ("[1].for.commands.var", {"total": "3"})
    assert loop["fields"] == {"in": shown(list(range(35)))}


def shown(value: Any) -> str:
    return trace_module.shown(value, TRACE_VALUE_CHARS)


def test_outside_calls_in_passes_not_kept_still_count_their_calls_tokens_and_price(
        session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fragment = [{"var": {"said": []}}, {"while": {"condition": "{ len(said) < 23 }", "commands": [
        {"llm": {"profile": "scripted", "input": "Hi"}}, {"var": {"said": "{ said + [result] }"}}]}}]
    run = session.run_fragment(fragment)
    assert run.code == "success", run.error
    loop = run.trace["root"]["spans"][1]
    kept = [s for s in spans(loop) if s["kind"] == "outside"]
    assert len(kept) == TRACE_PASSES and loop["passes"] == 23
    monkeypatch.setattr(loops, "TRACE_PASSES", 100)  # the same run with every pass kept (in-process, where the
    reference = Session(Engine(default_settings())).run_fragment(fragment)  # patch holds): the last three's sums
    every = [s for s in spans(reference.trace["root"]) if s["kind"] == "outside"][-3:]
    sums = {"input_tokens": sum(s["tokens"]["input"] for s in every),
            "output_tokens": sum(s["tokens"]["output"] for s in every), "price": sum(s["price"] for s in every)}
    assert sums["input_tokens"] > 0 and sums["price"] == 0  # the scripted model's turns are free: no price shown
    assert loop["hidden"] == {"passes": 3, "calls": 3, "input_tokens": sums["input_tokens"],
                              "output_tokens": sums["output_tokens"]}


def test_a_failure_three_calls_deep_is_open_at_its_span_and_its_chain_agrees_with_the_error(session: Any) -> None:
    agent = {"functions": {
        "main": {"commands": [{"call": {"function": "a"}}]},
        "a": {"commands": [{"call": {"function": "b"}}]},
        "b": {"commands": [{"call": {"function": "c", "args": {"k": 0}}}]},
        "c": {"args": {"k": "int"}, "commands": [{"var": {"x": "{ 1 / k }"}}]}}}
    run = session.run_fragment(agent)
    assert (run.code, run.error.code) == ("errorInAgent", "runtime")
    root = run.trace["root"]
    assert (root["outcome"], root["error"]["code"], root["error"]["path"]) == ("errorInAgent", "runtime",
                                                                               "functions.c.commands[0].var.x")
    chain, node = [], root
    while node["spans"]:
        node = node["spans"][-1]
        chain.append((node["kind"], node["name"], node["path"], node["outcome"]))
    assert chain == [
        ("command", "call", "functions.main.commands[0].call", "runtime"),
        ("function", "a", "functions.a", "runtime"),
        ("command", "call", "functions.a.commands[0].call", "runtime"),
        ("function", "b", "functions.b", "runtime"),
        ("command", "call", "functions.b.commands[0].call", "runtime"),
        ("function", "c", "functions.c", "runtime"),
        ("command", "var", "functions.c.commands[0].var", "runtime")]
    failing = node
    assert failing["error"] == {"code": "runtime", "message": run.error.message, "path": run.error.path}
    call_sites = [site.split(" ")[0] for site in run.error.details["calls"]]  # the error's chain: the same calls
    assert call_sites == [path for kind, _, path, _ in chain if kind == "command" and path.endswith(".call")]


def test_parallel_branches_nest_their_commands_under_their_own_branch(session: Any) -> None:
    run = session.run_fragment([{"parallel": [
        [{"api": {"profile": "echo", "path": "/a"}}, {"var": {"a": "{ result['path'] }"}}],
        [{"api": {"profile": "echo", "path": "/b"}}, {"var": {"b": "{ result['path'] }"}}]]},
        {"return": "{ [a, b] }"}])
    assert run.value == ["/a", "/b"], run.error
    parallel = run.trace["root"]["spans"][0]
    assert [(b["kind"], b["name"], b["path"], b["branch"]) for b in parallel["spans"]] == [
        ("branch", "branch 0", "[0].parallel[0]", 0), ("branch", "branch 1", "[0].parallel[1]", 1)]
    for branch, letter in zip(parallel["spans"], "ab", strict=True):
        assert [(c["name"], c["path"]) for c in branch["spans"]] == [
            ("api", f"{branch['path']}[0].api"), ("var", f"{branch['path']}[1].var")]
        assert branch["spans"][0]["spans"][0]["request"] == f"GET /{letter}"
        assert branch["spans"][1]["fields"] == {letter: repr(f"/{letter}")}


def test_a_handled_failure_shows_its_code_and_what_handled_it(session: Any) -> None:
    run = session.run_fragment({"functions": {
        "boom": {"commands": [{"var": {"x": "{ 1 / 0 }"}}]},
        "main": {"commands": [
            {"var": {"x": "{ 1 / 0 }"}, "onError": [{"var": {"caught": "{ exc.code }"}}]},
            {"call": {"function": "boom", "outputPath": "†local.ok || †local.failed"}},
            {"return": "{ [caught, failed['code']] }"}]}}})
    assert run.value == ["runtime", "runtime"], run.error
    first, second, _ = run.trace["root"]["spans"]
    assert (first["outcome"], first["handled"], first["error"]["code"]) == ("runtime", "onError", "runtime")
    assert [c["name"] for c in first["spans"]] == ["var"]  # the handler's command, inside the failed one
    assert (second["outcome"], second["handled"]) == ("runtime", "outputPath")
    assert second["spans"][0]["kind"] == "function" and second["spans"][0]["outcome"] == "runtime"
    assert list(second["wrote"]) == ["local.failed"]  # the outputPath alternative it wrote
    assert second["wrote"]["local.failed"].startswith("{'code': 'runtime', 'message': 'ZeroDivisionError")


def test_a_secret_appears_nowhere_in_a_trace(http_server: Any) -> None:
    secret = "sk-trace-5e1b9d"
    data = {"secrets": {"TOK": secret},
            "profiles": {"api": {"crm": {"url": http_server.url, "allow_path": True, "allow_headers": True}}}}
    for isolated in (False, True):
        s = IsolatedSession(make_settings(data)) if isolated else Session(Engine(make_settings(data)))
        try:
            run = s.run_fragment([
                {"var": {"tok": "{ sys.secret['TOK'] }", "text": "{ f'key={sys.secret[\"TOK\"]}' }"}},
                {"api": {"profile": "crm", "path": "/whoami",
                         "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOK\"]}' }"}}},
                {"var": {"echoed": "{ result }"}},
                {"return": "{ [tok, text] }"}])
        finally:
            if isolated:
                s.close()
        assert run.code == "success", run.error
        text = json.dumps(run.trace)
        assert secret not in text and secret[3:-3] not in text
        assert "***" in text or "<secret TOK>" in text


def test_a_recorded_and_a_replayed_run_trace_the_same_but_for_times_and_replay(
        http_server: Any, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    cassette = tmp_path / "t.cassette.json"
    fragment = [{"api": {"profile": "crm", "path": "/json/orders"}},
                {"db": {"profile": "demo", "sql": "SELECT id FROM orders WHERE id < 3"}},
                {"llm": {"profile": "scripted", "input": "Hello"}}]

    def run(mode: str) -> Any:
        data = {"replay": {"mode": mode, "cassette": str(cassette)},
                "profiles": {"api": {"crm": {"url": http_server.url, "allow_path": True}}}}
        return Session(Engine(make_settings(data))).run_fragment(fragment)
    live, replayed = run("record"), run("replay")
    assert live.code == replayed.code == "success", (live.error, replayed.error)
    assert without_times(live.trace) == without_times(replayed.trace)
    outside = [s for s in spans(replayed.trace["root"]) if s["kind"] == "outside"]
    assert [s["name"] for s in outside] == ["api", "db", "llm"]
    assert all(s["replayed"] is True and s["recorded"] >= 0 for s in outside)
    assert not any(s["replayed"] for s in spans(live.trace["root"]) if s["kind"] == "outside")
    assert outside[1]["response"].startswith("2 rows, first {'id': 1}")


def test_a_run_stopped_by_its_time_limit_keeps_the_trace_up_to_where_it_stopped() -> None:
    s = Session(Engine(make_settings({"limits": {"time": 0.3, "loop_iterations": 10**9}})))
    run = s.run_fragment([{"var": {"k": 0}}, {"while": {"condition": "{ True }", "commands": {"var": {"k": "{ k + 1 }"}}}}])
    assert run.code == "timedOut"
    root = run.trace["root"]
    assert root["outcome"] == "timedOut" and root["spans"][1]["outcome"] == "timedOut"
    assert root["spans"][1]["passes"] > TRACE_PASSES


def test_values_are_shown_cut_and_in_bounded_time() -> None:
    s = Session(Engine(default_settings()))
    started = time.perf_counter()
    run = s.run_fragment([{"var": {"big": "{ [[1, 2, 3, 4, 5, 6, 7, 8]] * 2000000 }", "long": "{ 'x' * 100000 }"}}])
    assert run.code == "success", run.error
    fields = run.trace["root"]["spans"][0]["fields"]
    assert len(fields["big"]) <= TRACE_VALUE_CHARS and fields["big"].startswith("[[1, 2, 3, 4, 5, 6, 7, 8], [1, ")
    assert fields["big"].endswith("…")
    assert len(fields["long"]) <= TRACE_VALUE_CHARS and fields["long"].endswith("…")
    assert time.perf_counter() - started < 5  # a walk over two million items would not be bounded


def test_a_run_keeps_at_most_its_bound_of_spans_and_counts_the_rest() -> None:
    s = Session(Engine(make_settings({"limits": {"definition_length": 200_000}})))
    run = s.run_fragment([{"var": {"x": i}} for i in range(TRACE_SPANS + 50)])
    assert run.code == "success", run.error
    assert len(spans(run.trace["root"])) == TRACE_SPANS
    assert run.trace["root"]["dropped"] == 51  # the run's span is one of the kept


def test_keeping_no_trace_gives_none_and_the_same_run() -> None:
    s = Session(Engine(default_settings()))
    traced = s.run_fragment(ORDERS_AGENT)
    s.keep_trace = False
    s.llm_messages = []
    bare = s.run_fragment(ORDERS_AGENT)
    assert bare.trace is None and (bare.code, bare.value) == (traced.code, traced.value)


def test_two_runs_of_the_same_fragment_trace_the_same_but_for_times(session: Any) -> None:
    first = session.run_fragment(ORDERS_AGENT)
    session.reset()
    second = session.run_fragment(ORDERS_AGENT)
    assert without_times(first.trace) == without_times(second.trace)


# -- the flat form, as a worker sends it ---------------------------------------------------------------

def flat_of(run: Any) -> dict[str, Any]:
    return trace_module.flatten(run.trace)


def test_the_flat_form_nests_back_into_the_same_trace() -> None:
    run = Session(Engine(default_settings())).run_fragment(ORDERS_AGENT)
    flat = flat_of(run)
    assert trace_module.nest(trace_module.check(flat)) == json.loads(json.dumps(run.trace))


@pytest.mark.parametrize("lie", [
    lambda f: f.update(schema="other"),
    lambda f: f.update(version=2),
    lambda f: f["spans"][1].update(parent=5),
    lambda f: f["spans"][0].update(parent=0),
    lambda f: f["spans"][1].update(kind="exec"),
    lambda f: f["spans"][1].update(script="<script>"),
    lambda f: f["spans"][1].update(duration=float("nan")),
    lambda f: f["spans"][1].update(start=-1),
    lambda f: f["spans"][1].update(name=["not text"]),
    lambda f: f["spans"][1].update(path="p" * 100_000),
    lambda f: f["spans"][1].update(fields={str(i): "v" for i in range(1000)}),
    lambda f: f["spans"][1].update(tokens={"input": 1, "secret": 2}),
    lambda f: f["spans"][1].update(error={"code": "x"}),
    lambda f: f["spans"][1].update(replayed="yes"),
    lambda f: f["spans"][1].update(passes=-1),
    lambda f: f.update(spans=f["spans"] * (TRACE_SPANS // len(f["spans"]) + 2)),
    lambda f: f.update(spans=[]),
], ids=["schema", "version", "parent-after", "root-parent", "kind", "unknown-key", "nan", "negative", "name-type",
        "long-path", "many-fields", "token-keys", "error-shape", "bool-type", "count", "too-many", "no-spans"])
def test_a_trace_that_is_not_of_the_schema_is_refused(lie: Any) -> None:
    flat = flat_of(Session(Engine(default_settings())).run_fragment(ORDERS_AGENT))
    lie(flat)
    with pytest.raises(ValueError):
        trace_module.check(flat)


def test_a_worker_that_sends_a_bad_trace_is_a_protocol_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from s2o_kernel.engine.worker import wire

    run = Session(Engine(default_settings())).run_fragment({"return": 1})
    encoded = wire.encode_run(run)
    encoded["trace"]["spans"][0]["parent"] = 3
    with pytest.raises(Exception) as raised:
        wire.decode_run(encoded)
    assert getattr(raised.value, "code", None) == wire.FAULT_CODE


# -- every text of a trace bounded and UTF-8, whatever the fragment ----------------------------------------------

def test_a_lone_surrogate_in_a_name_or_a_value_is_escaped_everywhere_a_trace_goes(session: Any) -> None:
    run = session.run_fragment([{"var": {"d": {"\ud800k": "{ 1 }"}, "s": "{ 'x\\udc80y' }"}}])
    assert run.code == "success", run.error
    text = json.dumps(run.trace, ensure_ascii=False)
    text.encode("utf-8")  # nothing a front end, nh3 or protobuf cannot carry
    fields = run.trace["root"]["spans"][0]["fields"]
    assert "d.\\ud800k" in fields and fields["s"] == "'x\\udc80y'"
    from s2o_kernel.engine import trace_to_protobuf
    assert trace_to_protobuf(run.trace)


def test_long_names_and_targets_are_cut_and_a_worker_run_still_succeeds(session: Any) -> None:
    long_key, long_target = "k" * 9000, "y" * 9000
    run = session.run_fragment([{"var": {"keep": 42}}, {"var": {"d": {long_key: "{ 1 }"}}},
                                {"api": {"profile": "echo", "path": "/x", "outputPath": f"†agent.{long_target}"}},
                                {"return": "{ keep }"}])
    assert (run.code, run.value) == ("success", 42), run.error
    names = [name for span in spans(run.trace["root"]) for key in ("fields", "wrote")
             for name in span.get(key, {})]
    assert names and all(len(name) <= TRACE_TEXT_CHARS for name in names)


def test_counts_of_passes_not_kept_stay_within_what_a_reader_takes() -> None:
    settings = {"profiles": {"llm": {"huge": {"adapter": "scripted", "model": "m", "script": [
        {"text": "hi", "input_tokens": 2**52, "output_tokens": 1}]}}}}
    fragment = [{"for": {"item": "i", "in": "{ range(23) }", "commands": {"llm": {"profile": "huge", "input": "x"}}}}]
    s = IsolatedSession(make_settings(settings))
    try:
        run = s.run_fragment(fragment)
    finally:
        s.close()
    assert run.code == "success", run.error
    assert run.trace["root"]["spans"][0]["hidden"]["input_tokens"] == 2**53 - 1  # three passes' sum, held below 2**53


def test_a_trace_is_bounded_in_characters_whatever_the_fragment(session: Any) -> None:
    keys = {("&" * 440) + str(i): "{ 1 }" for i in range(40)}
    inner = {"for": {"item": "c", "in": "{ range(20) }", "commands": {"var": {"d": keys}}}}
    middle = {"for": {"item": "b", "in": "{ range(20) }", "commands": inner}}
    run = session.run_fragment({"for": {"item": "a", "in": "{ range(20) }", "commands": middle}})
    assert run.code == "success", run.error
    written = json.dumps(run.trace, ensure_ascii=False)
    assert len(written) < TRACE_CHARS + TRACE_SPANS * 400  # the text budget and each span's fixed keys
    assert run.trace["root"]["dropped"] > 0  # spans past the budget counted, not kept


def test_a_secret_placeholder_cut_in_a_request_shows_as_the_secret_name(http_server: Any) -> None:
    data = {"secrets": {"TOK": "sk-placeholder-9f1e"},
            "profiles": {"api": {"crm": {"url": http_server.url, "allow_path": True}}}}
    for prefix in (120, 140, 150):
        run = Session(Engine(make_settings(data))).run_fragment(
            [{"api": {"profile": "crm", "path": "{ f'/json/" + "a" * prefix + "{sys.secret[\"TOK\"]}' }"}}])
        assert run.code == "success", run.error
        text = json.dumps(run.trace, ensure_ascii=False)
        assert "s2o-secret" not in text and "\u2063" not in text and "sk-placeholder" not in text
        assert "<secret TOK>" in text or text.count("a" * 100) >= 1


def test_a_loop_stopped_at_its_limit_counts_the_passes_it_made() -> None:
    s = Session(Engine(make_settings({"limits": {"loop_iterations": 30}})))
    run = s.run_fragment({"while": {"condition": "{ True }", "commands": {"var": {"x": 1}}}})
    assert run.error.code == "loop-limit"
    assert run.trace["root"]["spans"][0]["passes"] == 30
