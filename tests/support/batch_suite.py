"""The batch runner's suite, shared by its tests (tests/batch/; SPEC 15): the orders agent with branches that run past a
limit, its calls recorded into a cassette by a real recording run, and cases of every kind of expectation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from s2o_kernel.engine import Engine, Session, make_settings

AGENT = {"functions": {
    "get_order": {"args": {"order_id": "int"},
                  "commands": [{"api": {"profile": "echo", "path": "{ f'/orders/{order_id}' }"}},
                               {"return": "{ result }"}]},
    "main": {"args": {"order_id": "int"}, "commands": [
        {"if": {"condition": "{ sys.inputs.get('mode') == 'loop' }",
                "then": [{"while": {"condition": "{ True }", "commands": [{"var": {"k": 1}}]}}]}},
        {"if": {"condition": "{ sys.inputs.get('mode') == 'memory' }",
                "then": [{"var": {"big": "{ ['x' * 10 ** 7 + str(i) for i in range(100)] }"}}]}},
        {"if": {"condition": "{ sys.inputs.get('mode') == 'busy' }",
                "then": [{"var": {"k": 0}}, {"while": {"condition": "{ k < 5000 }", "commands": [{"var": {"k": "{ k + 1 }"}}]}}]}},
        {"if": {"condition": "{ sys.inputs.get('mode') == 'slow' }",
                "then": [{"while": {"condition": "{ True }",
                                    "commands": [{"var": {"s": "{ sorted(range(10 ** 6), reverse=True)[0] }"}}]}}]}},
        {"llm": {"profile": "orders", "prompt": "demo", "input": "{ f'Where is my order {order_id}?' }",
                 "functions": ["get_order"]}},
        {"output": "{ result }"},
        {"return": "{ result }"}]}}}

SHIPPED = "Order 7 has shipped"
ANSWER = "Order 7 has shipped: the echo service answered for /orders/7, so it is on its way."
#: id → (case without its id, the outcome expected)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "plain": ({"inputs": {"order_id": 7}}, "pass"),
    "code-pass": ({"inputs": {"order_id": 7}, "expect": {"code": "success"}}, "pass"),
    "code-fail": ({"inputs": {"order_id": 7}, "expect": {"code": "errorInAgent"}}, "fail"),
    "value-pass": ({"inputs": {"order_id": 7}, "expect": {"value": ANSWER}}, "pass"),
    "value-fail": ({"inputs": {"order_id": 3}, "expect": {"value": None}}, "fail"),
    "value-contains-pass": ({"inputs": {"order_id": 7}, "expect": {"value_contains": SHIPPED}}, "pass"),
    "value-contains-fail": ({"inputs": {"order_id": 7}, "expect": {"value_contains": "cancelled"}}, "fail"),
    "error-pass": ({"inputs": {"order_id": 9}, "expect": {"code": "callFailed", "error": "replay-miss"}}, "pass"),
    "error-fail": ({"inputs": {"order_id": 7}, "expect": {"error": "replay-miss"}}, "fail"),
    "outputs-pass": ({"inputs": {"order_id": 3}, "expect": {"outputs_contain": ["has shipped"]}}, "pass"),
    "outputs-fail": ({"inputs": {"order_id": 3}, "expect": {"outputs_contain": ["cancelled"]}}, "fail"),
    "cost-pass": ({"inputs": {"order_id": 7}, "expect": {"max_cost": 1.0}}, "pass"),
    "cost-fail": ({"inputs": {"order_id": 7}, "expect": {"max_cost": 0.000001}}, "fail"),
    "time-pass": ({"inputs": {"order_id": 7}, "expect": {"max_time": 30}}, "pass"),
    "time-fail": ({"inputs": {"order_id": 7}, "expect": {"max_time": 0.000001}}, "fail"),
    "query": ({"inputs": {"order_id": 7}, "query": "hello", "agent": {"seen": 1}, "expect": {}}, "pass"),
    "no-cassette": ({"inputs": {"order_id": 7}, "cassette": None}, "error"),
    "loop-limit": ({"inputs": {"order_id": 7, "mode": "loop"}, "settings": {"limits": {"loop_iterations": 500}}},
                   "fail"),
    "memory": ({"inputs": {"order_id": 7, "mode": "memory"}, "settings": {"limits": {"memory": 300 << 20}}},
               "fail"),
    "slow": ({"inputs": {"order_id": 7, "mode": "slow"}, "settings": {"limits": {"time": 0.5}}}, "fail"),
}


def make_suite(folder: Path) -> Path:
    """``folder`` with ``agent.json``, ``orders.cassette.json`` (recorded now) and ``cases.jsonl``."""
    (folder / "agent.json").write_text(json.dumps(AGENT))
    cassette = folder / "orders.cassette.json"
    held = os.environ.get("S2O_REPLAY")
    os.environ["S2O_REPLAY"] = "record"  # records under CI=true too (which replays only, unless S2O_REPLAY says)
    try:
        recorder = Session(Engine(make_settings({"replay": {"mode": "record", "cassette": str(cassette)}})))
        for order in (7, 3):
            recorder.reset()
            run = recorder.run_fragment(AGENT, inputs={"order_id": order})
            assert run.code == "success", run.error
    finally:
        if held is None:
            os.environ.pop("S2O_REPLAY", None)
        else:
            os.environ["S2O_REPLAY"] = held
    lines = []
    for case_id, (case, _) in CASES.items():
        lines.append(json.dumps({"id": case_id, "cassette": "orders.cassette.json", **case}))
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    return folder


