"""``%trace`` through real kernels, both modes (SPEC 14, issue 33).

After the orders agent the ``llm`` span holds the model's turns, with tokens and price, and the
``get_order`` tool call holds its ``api`` span; after a loop the passes are numbered; after a failure
three calls deep the failing span is open and marked, and so is every span on its way up (the chain);
after a ``parallel`` each branch holds its own commands. The html is nested ``<details>`` (parsed here
with the standard library's HTML parser) with nothing but what nh3 keeps; the shown trace is the same in
a new kernel (stable, so nbval can compare it); ``--times`` adds durations; ``%trace on`` shows the trace
after each run; ``save`` and ``otlp`` write files; a secret the session holds is in none of them.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import MODES, execute, result_data, running_kernel

pytestmark = pytest.mark.timeout(240)

SECRET = "sk-kernel-trace-77aa31"

ORDERS = json.dumps({"functions": {
    "get_order": {"args": {"order_id": "int"},
                  "commands": [{"api": {"profile": "echo", "path": "{ f'/orders/{order_id}' }"}},
                               {"return": "{ result }"}]},
    "main": {"commands": [{"llm": {"profile": "orders", "prompt": "demo", "input": "Where is my order 7?",
                                   "functions": ["get_order"]}},
                          {"return": "{ result }"}]}}})

LOOP = json.dumps([{"var": {"total": 0}},
                   {"for": {"item": "n", "in": "{ list(range(25)) }", "commands": {"var": {"total": "{ total + n }"}}}},
                   {"return": "{ total }"}])

DEEP = json.dumps({"functions": {
    "main": {"commands": [{"var": {"start": 1}}, {"call": {"function": "a"}}]},
    "a": {"commands": [{"call": {"function": "b"}}]},
    "b": {"commands": [{"call": {"function": "c", "args": {"k": 0}}}]},
    "c": {"args": {"k": "int"}, "commands": [{"var": {"x": "{ 1 / k }"}}]}}})

PARALLEL = json.dumps([{"parallel": [[{"var": {"a": 1}}, {"var": {"a2": "{ a + 1 }"}}],
                                     [{"var": {"b": 2}}]]}, {"return": "{ [a2, b] }"}])

SECRETIVE = json.dumps([{"var": {"tok": "{ sys.secret['TOK'] }", "shown": "{ f'key={sys.secret[\"TOK\"]}' }"}},
                        {"api": {"profile": "crm", "path": "/whoami",
                                 "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOK\"]}' }"}}},
                        {"return": "{ shown }"}])


class Tree(HTMLParser):
    """The ``<details>`` tree of a shown trace: each node ``{"open", "summary", "children"}``; every tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.root: dict[str, Any] = {"children": []}
        self.stack = [self.root]
        self.tags: set[str] = set()
        self.in_summary = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "details":
            node = {"open": any(name == "open" for name, _ in attrs), "summary": "", "children": []}
            self.stack[-1]["children"].append(node)
            self.stack.append(node)
        elif tag == "summary":
            self.in_summary = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.stack.pop()
        elif tag == "summary":
            self.in_summary = False

    def handle_data(self, data: str) -> None:
        if self.in_summary:
            self.stack[-1]["summary"] += data


def tree_of(html: str) -> dict[str, Any]:
    parser = Tree()
    parser.feed(html)
    assert parser.tags <= {"details", "summary", "div"}, parser.tags
    [run] = parser.root["children"]
    return run


def shown(kc: Any, code: str = "%trace") -> dict[str, str]:
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", reply
    return result_data(outputs)


def run_cell(kc: Any, code: str, status: str = "ok") -> dict[str, Any]:
    reply, _ = execute(kc, code)
    assert reply["status"] == status, reply
    return reply


@pytest.fixture(params=list(MODES))
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    return {"S2O_KERNEL_ISOLATED": MODES[request.param], "CI": "", "S2O_REPLAY": "", "S2O_SECRET_TOK": SECRET}


def test_trace_after_the_orders_agent_a_loop_a_deep_failure_and_parallel(
        env: dict[str, str], kernels_dir: Path, tmp_path: Path) -> None:
    with running_kernel(kernels_dir, tmp_path, env=env) as (_km, kc):
        reply, _ = execute(kc, "%trace")
        assert (reply["status"], reply["ename"]) == ("error", "trace")
        run_cell(kc, ORDERS)
        orders = shown(kc)
        text = orders["text/plain"]
        assert text.splitlines()[0] == "run (agent) · ok · 119 tokens (92 in, 27 out) · $0.000500"
        run = tree_of(orders["text/html"])
        [llm, ret] = run["children"]
        assert ret["summary"] == "return · functions.main.commands[1].return · ok"
        assert llm["summary"] == "llm · functions.main.commands[0].llm · ok · 119 tokens (92 in, 27 out) · $0.000500"
        assert [c["summary"] for c in llm["children"]] == [
            "llm orders, turn 1 · ok · 41 tokens (35 in, 6 out) · $0.000148",
            "tool get_order (call call_0) · functions.get_order · ok",
            "llm orders, turn 2 · ok · 78 tokens (57 in, 21 out) · $0.000353"]
        tool = llm["children"][1]
        assert [c["summary"] for c in tool["children"]] == [
            "api · functions.get_order.commands[0].api · ok", "return · functions.get_order.commands[1].return · ok"]
        assert tool["children"][0]["children"][0]["summary"] == "api echo · ok"
        assert "          → GET /orders/7" in text.splitlines()
        assert not any(node["open"] for node in walk(run))  # nothing failed: everything collapsed

        run_cell(kc, LOOP)
        loop = tree_of(shown(kc)["text/html"])["children"][1]
        assert loop["summary"] == "for · [1].for · ok · 25 passes"
        assert [c["summary"] for c in loop["children"]] == [f"pass {i} · ok" for i in range(1, 21)]
        assert "passes 21–25 counted, not shown" in shown(kc)["text/plain"]

        run_cell(kc, DEEP, status="error")
        deep = shown(kc)
        run = tree_of(deep["text/html"])
        assert run["open"] and run["summary"] == "run (agent) · ✗ errorInAgent"
        chain, node = [], run
        while node["children"]:
            node = node["children"][-1]
            chain.append((node["open"], node["summary"]))
        assert chain == [
            (True, "call · functions.main.commands[1].call · ✗ runtime"),
            (True, "function a · functions.a · ✗ runtime"),
            (True, "call · functions.a.commands[0].call · ✗ runtime"),
            (True, "function b · functions.b · ✗ runtime"),
            (True, "call · functions.b.commands[0].call · ✗ runtime"),
            (True, "function c · functions.c · ✗ runtime"),
            (True, "var · functions.c.commands[0].var · ✗ runtime")]
        assert not run["children"][0]["open"]  # the var that succeeded stays collapsed
        assert "error runtime at functions.c.commands[0].var.x: ZeroDivisionError: division by zero" in deep["text/plain"]

        run_cell(kc, PARALLEL)
        parallel = tree_of(shown(kc)["text/html"])["children"][0]
        assert [(b["summary"], [c["summary"] for c in b["children"]]) for b in parallel["children"]] == [
            ("branch 0 · [0].parallel[0] · ok", ["var · [0].parallel[0][0].var · ok", "var · [0].parallel[0][1].var · ok"]),
            ("branch 1 · [0].parallel[1] · ok", ["var · [0].parallel[1][0].var · ok"])]

        run_cell(kc, "%reset")  # a new conversation, as the first run had
        run_cell(kc, ORDERS)
        again = shown(kc)
        timed = shown(kc, "%trace --times")
        assert again == orders  # the same run shows the same trace: no times, no ids
        assert timed["text/plain"] != orders["text/plain"] and " ms" in timed["text/plain"].splitlines()[0]
    with running_kernel(kernels_dir, tmp_path, env=env) as (_km, kc):  # a new kernel: the same output
        run_cell(kc, ORDERS)
        assert shown(kc) == orders


def walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n["children"])
    return out


def test_trace_on_save_and_otlp_and_no_secret_anywhere(env: dict[str, str], kernels_dir: Path, tmp_path: Path,
                                                       http_server: Any) -> None:
    """The api call sends the secret to a real server, which answers with it (``/whoami``): masked on return."""
    (tmp_path / "s2o.toml").write_text(f'[profiles.api.crm]\nurl = "{http_server.url}"\nallow_path = true\n'
                                       'allow_headers = true\n')
    with running_kernel(kernels_dir, tmp_path, env=env) as (_km, kc):
        reply, outputs = execute(kc, "%trace on")
        assert reply["status"] == "ok" and outputs == []
        reply, outputs = execute(kc, SECRETIVE)
        assert reply["status"] == "ok", reply
        displayed = [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]
        assert len(displayed) == 1 and displayed[0]["text/plain"].startswith("run (commands) · ok")
        reply, outputs = execute(kc, "%trace save run.trace.json")
        assert reply["status"] == "ok", reply
        assert "Wrote the trace of the last run (5 spans) to run.trace.json." in outputs[0]["content"]["text"]
        run_cell(kc, "%trace otlp run.otlp.json")
        shown_now = shown(kc)
        run_cell(kc, "%trace off")
        reply, outputs = execute(kc, '{"return": 1}')
        assert [m["msg_type"] for m in outputs] == ["execute_result"]
        reply, _ = execute(kc, "%trace otlp")
        assert (reply["status"], reply["ename"]) == ("error", "magic")
    saved = (tmp_path / "run.trace.json").read_text()
    otlp = (tmp_path / "run.otlp.json").read_text()
    for text in (saved, otlp, shown_now["text/plain"], shown_now["text/html"], displayed[0]["text/html"]):
        assert SECRET not in text and SECRET[3:-3] not in text
    trace = json.loads(saved)
    assert (trace["schema"], trace["version"], trace["code"]) == ("s2o-trace", 1, "success")
    api = trace["root"]["spans"][1]["spans"][0]
    assert api["request"] == "GET /whoami" and api["response"] == "{'auth': 'Bearer ***'}"
    assert http_server.requests[-1][2]["Authorization"] == f"Bearer {SECRET}"  # the server did get it
    names = [s["name"] for s in json.loads(otlp)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert names[0] == "invoke_agent commands" and "api crm" in names
