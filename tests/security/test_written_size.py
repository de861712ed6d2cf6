"""Values whose written form never ends (red team, 2026-12-02): a container held twice is written twice.

Sixty ``var`` commands ``x = [x, x]`` make sixty-one lists whose ``repr`` and JSON have 2**60 items. The
kernel showing ``x`` (in-process) and the worker saving its state (contained) wrote them for good. Now
``written_size`` measures a value first (time linear in its distinct containers), and a value past
``WRITTEN_LIMIT`` shows a placeholder and is not JSON (SPEC 9, 12).
"""

from __future__ import annotations

import collections
import json
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kernel_harness import MODES, execute, install_spec, result_data, running_kernel

from s2o_kernel.engine import (
    WRITTEN_LIMIT,
    Engine,
    Session,
    as_json,
    default_settings,
    too_large_text,
    written_size,
)
from s2o_kernel.engine.worker.wire import encode_value
from s2o_kernel.kernel.render import value_bundle

DOUBLINGS = 60
#: A fragment that doubles ``x`` sixty times, each list holding the previous one twice.
DOUBLE = [{"var": {"x": "{ [1] }"}},
          {"for": {"item": "i", "in": f"{{ range({DOUBLINGS}) }}", "commands": [{"var": {"x": "{ [x, x] }"}}]}}]


def _shared(depth: int) -> list[Any]:
    x: list[Any] = [1]
    for _ in range(depth):
        x = [x, x]
    return x


@pytest.mark.parametrize(("value", "size"), [
    (5, 1), ([], 1), ([1, 2, 3], 4), ({"a": [1, 2]}, 5), ((1, (2, 3)), 5), ({1, 2}, 3),
    (_shared(3), 2 ** 4 - 1 + 2 ** 3), ([[1, 2]] * 3, 10),
])
def test_written_size_counts_every_item_as_written(value: Any, size: int) -> None:
    assert written_size(value) == size  # counted by hand: each container 1, each item (dict keys too) 1


@pytest.mark.timeout(60)  # before, none of these ended
def test_a_shared_value_is_measured_at_once_however_long_it_is_written() -> None:
    x = _shared(DOUBLINGS)
    assert written_size(x) > WRITTEN_LIMIT
    assert as_json(x) is None
    assert value_bundle(x, as_json=as_json) == {"text/plain": f"<list: too large to show, more than {WRITTEN_LIMIT:,} "
                                                               "items written out>"}
    assert encode_value(x) == {"repr": value_bundle(x)["text/plain"], "json": None}


#: Every kind of container whose ``repr`` writes its parts, doubled the same way (the class, not one payload).
DOUBLERS: dict[str, Callable[[Any], Any]] = {
    "tuple": lambda x: (x, x),
    "dict": lambda x: {"a": x, "b": x},
    "deque": lambda x: collections.deque([x, x]),
    "OrderedDict": lambda x: collections.OrderedDict(a=x, b=x),
    "ChainMap": lambda x: collections.ChainMap({"a": x}, {"b": x}),
    "dict values": lambda x: {"a": x, "b": x}.values(),
    "SimpleNamespace": lambda x: types.SimpleNamespace(a=x, b=x),
    "slice": lambda x: slice(x, x),
    "exception": lambda x: ValueError(x, x),
    "list subclass": lambda x: Listed([x, x]),
}


class Listed(list):  # type: ignore[type-arg]
    """A list subclass whose own iteration would not say what it holds."""

    def __iter__(self) -> Iterator[Any]:
        return iter(())


@pytest.mark.parametrize("kind", list(DOUBLERS))
def test_every_container_kind_is_measured(kind: str) -> None:
    x: Any = [1]
    for _ in range(DOUBLINGS):
        x = DOUBLERS[kind](x)
    assert written_size(x) > WRITTEN_LIMIT
    assert value_bundle(x)["text/plain"].startswith(f"<{type(x).__name__}: too large to show")


def test_a_cycle_counts_once_and_subclasses_are_read_through_their_base() -> None:
    y: list[Any] = [1]
    y.append(y)
    assert written_size(y) == 3

    class Endless(list):  # type: ignore[type-arg]
        def __iter__(self) -> Iterator[Any]:
            raise AssertionError("a subclass's __iter__ ran")

    assert written_size(Endless([1, 2])) == 3


def test_a_session_keeps_such_a_value_and_says_it_is_not_json() -> None:
    s = Session(Engine(default_settings()))
    assert s.run_fragment(DOUBLE).code == "success"
    assert s.evaluate("len(x)") == 2
    assert as_json(s.locals["x"]) is None
    parts: list[Any] = []
    run = s.run_fragment({"output": "{ x }"}, on_output=parts.append)  # the part's text, written by the engine
    assert run.code == "success", run.error
    assert parts == [{"type": "text", "text": too_large_text(s.locals["x"])}]


@pytest.fixture(scope="module", params=list(MODES))
def kc(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A client of a real kernel of each kind."""
    kernels = install_spec(tmp_path_factory.mktemp("prefix"))
    env = {"S2O_KERNEL_ISOLATED": MODES[request.param]}
    with running_kernel(kernels, tmp_path_factory.mktemp("cwd"), env=env) as (_km, client):
        yield client


def test_the_kernel_shows_a_placeholder_and_keeps_the_session(kc: Any) -> None:
    reply, _ = execute(kc, json.dumps(DOUBLE))
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "x", timeout=30)
    assert reply["status"] == "ok", reply
    assert result_data(outputs)["text/plain"].startswith("<list: too large to show")
    reply, outputs = execute(kc, "len(x[0][0])")
    assert result_data(outputs)["text/plain"] == "2"
