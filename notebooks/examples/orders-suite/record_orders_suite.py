"""Record the orders suite's cassette: ``python notebooks/examples/orders-suite/record_orders_suite.py``.

The orders agent (``agent.json``) runs once for each order the suite's cases replay (7 and 3), on the
embedded default's offline profiles (the scripted ``orders`` model, the ``echo`` API), in record mode;
``orders.cassette.json`` beside this file then holds every call, and the suite runs offline:
``python -m s2o_kernel.batch notebooks/examples/orders-suite/agent.json notebooks/examples/orders-suite/``.
"""

from __future__ import annotations

import json
from pathlib import Path

from s2o_kernel.engine import Engine, Session, make_settings

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    agent = json.loads((HERE / "agent.json").read_text())
    cassette = HERE / "orders.cassette.json"
    cassette.unlink(missing_ok=True)
    session = Session(Engine(make_settings({"replay": {"mode": "record", "cassette": str(cassette)}})))
    for order in (7, 3):
        session.reset()
        run = session.run_fragment(agent, inputs={"order_id": order})
        print(order, run.code, run.value)
