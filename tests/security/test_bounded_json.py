"""JSON read within budgets (issue 30; ``s2o_kernel/engine/run/bounded_json.py``, SPEC 7.1, 12).

:func:`loads` is what stands between a sender the kernel's process does not trust (its worker) and ``json.loads``,
which builds whatever a text describes. These tests hold it to its contract by value, not by path:

* for any JSON text (generated values written compactly, with spaces or indented; strings full of commas, brackets,
  quotes and escapes, which are where its counting could go wrong), it gives what ``json.loads`` gives when the text
  is within both budgets, and otherwise refuses it with the right error, exactly at the budget: ``too-deep`` only
  for a value nested deeper than ``depth``, the caller's code only for one of more than ``items`` values;
* for any text at all (cut short, garbled) it raises ``ValueError`` or a budget's error, never anything else (no
  ``RecursionError``);
* the texts that made the kernel's process take gigabytes are refused quickly (what that costs in memory is
  measured on a real pipe, with the containment bound: ``tests/security/test_hostile_worker.py``).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s2o_kernel.engine import S2OError
from s2o_kernel.engine.run.bounded_json import loads

CODE = "worker-protocol"
#: Text made to fool a counter: every character JSON gives a meaning to outside strings, and escapes.
TRICKY = st.text(alphabet=st.sampled_from(list('[]{},:"\\ \n\tab\u00e9\u2028\U0001f600')), max_size=12)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                    st.floats(allow_nan=False, allow_infinity=False), TRICKY)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TRICKY, inner, max_size=5),
                      max_leaves=60)
WRITINGS = st.sampled_from([{}, {"separators": (",", ":")}, {"indent": 1}, {"ensure_ascii": False}])


def values_of(value: Any) -> int:
    """How many JSON values ``value`` is: itself and, for a list or an object, each of its values'."""
    if isinstance(value, list):
        return 1 + sum(values_of(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(values_of(v) for v in value.values())
    return 1


def depth_of(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (``[]`` is 1, a scalar 0)."""
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=VALUES, writing=WRITINGS, items=st.integers(1, 80), depth=st.integers(1, 8))
def test_it_reads_what_json_reads_within_the_budgets_and_refuses_exactly_past_them(
        value: Any, writing: dict[str, Any], items: int, depth: int) -> None:
    text = json.dumps(value, **writing)
    values, levels = values_of(value), depth_of(value)
    try:
        got = loads(text, items=items, depth=depth, code=CODE)
    except S2OError as exc:
        if exc.code == "too-deep":
            assert levels > depth, (text, depth)
        else:
            assert exc.code == CODE and values > items, (text, items)
        return
    assert values <= items and levels <= depth, (text, items, depth)
    assert json.dumps(got, sort_keys=True) == json.dumps(json.loads(text), sort_keys=True)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=VALUES, cut=st.integers(0, 400), noise=st.text(alphabet='[]{},:"\\ 0ae', max_size=6))
def test_any_text_is_json_a_budget_s_error_or_value_error(value: Any, cut: int, noise: str) -> None:
    text = json.dumps(value)
    text = text[:cut] + noise + text[cut:]
    with contextlib.suppress(ValueError, S2OError):  # anything else fails the test
        loads(text, items=30, depth=4, code=CODE)


@pytest.mark.parametrize(("text", "items", "depth", "expected"), [
    ('"[[[[,,,,]]]]"', 1, 0, "[[[[,,,,]]]]"),  # brackets and commas in a string are text
    ('["[]", "{}", "]", "[" ]', 5, 1, ["[]", "{}", "]", "["]),
    ('{"a\\"[": [ ] , "b": { }}', 3, 2, {'a"[': [], "b": {}}),  # escaped quote, spaces in empty containers
    ("[" * 208 + "]" * 208, 208, 208, None),  # exactly at the depth
    ("[" + ",".join(["[]"] * 99) + "]", 100, 2, None),  # exactly at the values
    ('{"repr": "' + "[1, " * 50_000 + '", "json": [' + ",".join(["[]"] * 1000) + "]}", 1100, 3, None),
])
def test_the_edges(text: str, items: int, depth: int, expected: Any) -> None:
    got = loads(text, items=items, depth=depth, code=CODE)
    assert got == (json.loads(text) if expected is None else expected)


@pytest.mark.parametrize(("text", "code"), [
    ("[" * 209 + "]" * 209, "too-deep"),
    ("[" * 60_000, "too-deep"),  # never closed: refused for its depth, never a RecursionError
    ('{"a": ' + "[" * 5_000 + "]" * 5_000 + "}", "too-deep"),
    ('{"a": "]]]", "b": ' + "[" * 2_000 + "]" * 2_000 + "}", "too-deep"),  # strings: read by the scanner
    ("[" + ",".join(["[]"] * 100_000) + "]", CODE),  # one value past
    ('["' + '", "'.join(["x"] * 100_000) + '"]', CODE),
])
def test_past_a_budget_the_error_is_coded(text: str, code: str) -> None:
    with pytest.raises(S2OError) as exc:
        loads(text, items=100_000, depth=208, code=CODE, what="a message")
    assert exc.value.code == code and "a message" in exc.value.message


#: The amplifying texts of issue 30, each about 15 MiB: lists by the million, the same with strings between (where
#: the cheap counts cannot tell structure from text), and one-key objects.
AMPLIFYING = {
    "lists": "[" + "[]," * (5 << 20) + "[]]",
    "lists and strings": "[" + '[],"",' * (5 << 19) + "[]]",
    "objects": "[" + '{"k":{}},' * (15 << 17) + "{}]",
}


@pytest.mark.parametrize("name", AMPLIFYING)
def test_amplifying_text_is_refused_quickly(name: str) -> None:
    """``json.loads`` builds ~30 times these texts' size (1.6 GB for 60 MiB of ``[[],…]``, in 22 s); refused at
    the worker's budget of 131,072 values, in at most a second or so on a loaded machine: the slow path reads no
    more than the budget's values, one by one. (What the reading costs the kernel's process in memory is measured
    on a real pipe: ``test_hostile_worker.py``.)"""
    text = AMPLIFYING[name]
    start = time.monotonic()
    with pytest.raises(S2OError) as exc:
        loads(text, items=131_072, depth=208, code=CODE)
    assert exc.value.code == CODE
    assert time.monotonic() - start < 3
