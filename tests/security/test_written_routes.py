"""Every route that writes a value out measures it first (red team 2, 2026-12-02; SPEC 9, 12).

After ``written_size`` guarded the result display, the worker's encoding and ``output`` parts, other
routes still wrote a value whose written form never ends (sixty ``x = [x, x]``: 2**60 items) with
``str``/``repr``/``json.dumps`` at C speed, which no time limit interrupts in-process: a ``log`` line,
a ``fail`` message, an ``ask`` message, an ``output`` image, ``print``, the engine's bounded
``safe_repr``/``safe_str`` (reprlib hands a type it does not know to ``repr``), inspecting a local
(shift-tab) and ``%vars``. Each hung the in-process kernel for good. And ``written_size`` itself
listed a container once per holder: ``[y] * n`` with ``y`` nested took time and memory ``n * len(y)``
(n = 10,000: 800 MB; n = 100,000 needs 80 GB).
"""

from __future__ import annotations

import json
import tracemalloc
import types
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_harness import MODES, execute, install_spec, result_data, running_kernel, shell_reply

from s2o_kernel.engine import Engine, Session, default_settings, too_large_text, written_size
from s2o_kernel.engine.policy.values import safe_repr, safe_str
from s2o_kernel.engine.run.introspection import describe

DOUBLE = [{"var": {"x": "{ [1] }"}},
          {"for": {"item": "i", "in": "{ range(60) }", "commands": [{"var": {"x": "{ [x, x] }"}}]}}]
PLACEHOLDER = "<list: too large to show"


def test_a_container_held_many_times_is_listed_once() -> None:
    n = 10_000
    y = [[1], *range(n)]
    held = [y] * n
    tracemalloc.start()
    try:
        size = written_size(held)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > 2_000_000
    assert written_size([y] * 3) == 1 + 3 * (1 + 2 + n)
    assert peak < 50 * 2 ** 20  # before: a copy of y per holder, 800 MB


def _shared_namespace() -> Any:
    x: Any = [1]
    for _ in range(60):
        x = types.SimpleNamespace(a=x, b=x)
    return x


def test_the_bounded_reprs_measure_first() -> None:
    x = _shared_namespace()  # reprlib has no repr_SimpleNamespace: it called repr() on it
    assert safe_repr(x).startswith("<SimpleNamespace: too large to show")
    assert safe_repr([x]).startswith("<list: too large to show")
    assert safe_str(x).startswith("<SimpleNamespace: too large to show")


@pytest.fixture
def session() -> Session:
    s = Session(Engine(default_settings()))
    assert s.run_fragment(DOUBLE).code == "success"
    return s


def test_log_fail_ask_and_print_write_a_placeholder(session: Session) -> None:
    shown = too_large_text(session.locals["x"])
    run = session.run_fragment({"log": "{ x }"})
    assert run.code == "success" and run.logs == [shown]
    run = session.run_fragment({"fail": "{ x }"})
    assert run.error is not None and run.error.message == shown
    run = session.run_fragment({"ask": {"message": "{ x }", "inputs": []}})
    assert run.code != "timedOut"
    run = session.run_fragment({"output": {"image": "{ x }"}})
    assert run.error is not None and "base64" in run.error.message
    assert session.evaluate("print(x, 1)") is None


def test_inspecting_such_a_local_shows_a_placeholder(session: Session) -> None:
    assert describe(session, "x") == f"x: list = {too_large_text(session.locals['x'])}"


@pytest.fixture(scope="module", params=list(MODES))
def kc(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A client of a real kernel of each kind, holding the doubled ``x``."""
    kernels = install_spec(tmp_path_factory.mktemp("prefix"))
    env = {"S2O_KERNEL_ISOLATED": MODES[request.param]}
    with running_kernel(kernels, tmp_path_factory.mktemp("cwd"), env=env) as (_km, client):
        reply, _ = execute(client, json.dumps(DOUBLE))
        assert reply["status"] == "ok", reply
        yield client


def test_vars_and_inspection_in_a_real_kernel(kc: Any) -> None:
    reply, outputs = execute(kc, "%vars", timeout=30)
    assert reply["status"] == "ok", reply
    assert PLACEHOLDER in result_data(outputs)["text/plain"]
    reply = shell_reply(kc, kc.inspect("x", 1), timeout=30)
    assert reply["content"]["status"] == "ok", reply
    assert PLACEHOLDER in reply["content"]["data"]["text/plain"]
    reply, outputs = execute(kc, '{"log": "{ x }"}', timeout=30)
    assert reply["status"] == "ok", reply
    assert any(PLACEHOLDER in o["content"].get("text", "") for o in outputs)
