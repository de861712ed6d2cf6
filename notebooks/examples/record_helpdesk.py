"""Record examples/helpdesk.cassette.json, the cassette notebooks/record-replay.ipynb replays (SPEC 13).

Run from the repository's root: ``python notebooks/examples/record_helpdesk.py``. It starts two servers on
127.0.0.1 in place of the real ones examples/helpdesk.toml names (a shop's API, and an OpenAI-compatible
model that calls the agent's ``lookUp`` function and then answers, streamed), points the same profiles at
them, and runs the notebook's calls in ``rewrite`` mode. A cassette holds no URL, so it replays against the
settings' real names; it holds no key either (the one used here is scanned for before the file is written).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fake_llm import FakeLLM  # noqa: E402  (the tests' OpenAI-compatible server)

from s2o_kernel.engine import IsolatedSession, make_settings, read_toml  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDERS = {"2": {"id": 2, "status": "shipped", "carrier": "DHL", "items": 3}}

#: The notebook's calls, as its cells write them.
API_CELL = [{"api": {"profile": "shop", "path": "/orders/2"}}, {"return": "{ result }"}]
AGENT = {"functions": {
    "lookUp": {"args": {"orderId": "int"}, "commands": [
        {"api": {"profile": "shop", "path": "{ f'/orders/{orderId}' }"}},
        {"return": "{ {'status': result['status'], 'carrier': result['carrier']} }"}]},
    "main": {"args": {"orderId": "int"}, "commands": [
        {"llm": {"profile": "assistant", "input": "{ f'Where is my order {orderId}?' }", "functions": ["lookUp"],
                 "streamOutput": True}},
        {"return": "{ result }"}]}}}


class Shop(BaseHTTPRequestHandler):
    """``GET /api/orders/ID``: the order as JSON."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        order = ORDERS.get(self.path.rsplit("/", 1)[-1])
        body = json.dumps(order or {"error": "no such order"}).encode()
        self.send_response(200 if order else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> int:
    """Record the cassette; 0 on success."""
    shop = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=shop.serve_forever, daemon=True).start()
    with FakeLLM() as model:
        model.replies = [{"calls": [("lookUp", {"orderId": 2})], "usage": (92, 14)},
                         {"text": "Your order 2 has shipped with DHL.", "usage": (131, 11)}]
        data = read_toml(HERE / "helpdesk.toml")
        data["profiles"]["api"]["shop"]["url"] = f"http://127.0.0.1:{shop.server_address[1]}/api"
        data["profiles"]["llm"]["assistant"]["url"] = model.url
        data["secrets"] = {"ASSISTANT_KEY": "sk-recording-only-4f1e"}
        data["replay"] = {"mode": "rewrite", "cassette": str(HERE / "helpdesk.cassette.json")}
        with IsolatedSession(make_settings(data)) as session:
            for fragment, inputs in ((API_CELL, None), (AGENT, {"orderId": 2})):
                run = session.run_fragment(fragment, inputs=inputs)
                print(run.code, run.value if run.error is None else run.error)
                if run.code != "success":
                    return 1
    shop.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
