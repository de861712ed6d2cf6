"""The JSON check of agent and conversation variables wrote where every item sits up front (red team 2,
2026-12-02; SPEC 5, 12).

``check_json`` made the text of every item's place (``agent.y['<key>'][i]``) as it went, so a long key over
a long list (``{k: xs}`` with ``k`` of n characters and ``xs`` of n items: a value of 2n) took n * n bytes:
``var agent.y`` with n = 60,000 took 3.5 GB of the in-process kernel, n = 200,000 more memory than the
machine has; ``%state load`` of a 3 MB file alike. A place is now written only for the message, with a
long key cut.
"""

from __future__ import annotations

import tracemalloc

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, default_settings
from s2o_kernel.engine.run.scopes import PLACE_KEY, check_json

N = 20_000


def test_a_long_key_over_a_long_list_is_checked_in_linear_memory() -> None:
    s = Session(Engine(default_settings()))
    tracemalloc.start()
    try:
        run = s.run_fragment([{"var": {"k": f"{{ 'a' * {N} }}", "xs": f"{{ [0] * {N} }}"}},
                              {"var": {"agent.y": "{ {k: xs} }"}}])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.code == "success", run.error
    assert len(s.agent_vars["y"]["a" * N]) == N
    assert peak < 50 * 2 ** 20  # before: N * N bytes of places, 400 MB


def test_the_message_still_names_the_place_with_long_keys_cut() -> None:
    with pytest.raises(S2OError) as err:
        check_json({"cart": [1, {"name": float("nan")}]}, "agent.y")
    assert err.value.message.startswith("agent.y['cart'][1]['name'] is nan")
    with pytest.raises(S2OError) as err:
        check_json({"k" * 1000: [1, {2: 3}]}, "conv.z")
    assert err.value.message.startswith(f"conv.z[{repr('k' * 1000)[:PLACE_KEY]}…][1] has a key of type int")
