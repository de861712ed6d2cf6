"""A case's run held against its expectations (SPEC 15): the outcome and what differed.

:func:`judge` gives ``(outcome, diff)``: ``pass``; ``fail`` when an expectation is not met (``diff`` lists
each, in words); ``error`` when the case could not be run as written (its settings or cassette refused
before the run: nothing of the agent ran). A run that ends on a limit, on a killed worker or on an error
is a ``fail`` (with its code) unless the case expects that code. With neither ``code`` nor ``error``
expected, a case expects ``success``.
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.engine import RunResult, as_json

from .cases import Expect

#: Outcomes of a case.
PASS, FAIL, ERROR = "pass", "fail", "error"


def judge(expect: Expect, run: RunResult, seconds: float) -> tuple[str, list[str]]:
    """``(outcome, diff)`` of ``run`` (which took ``seconds``) against ``expect`` (see the module doc)."""
    diff: list[str] = []
    given = expect.model_fields_set
    code = expect.code if expect.code is not None else ("success" if expect.error is None else None)
    if code is not None and run.code != code:
        diff.append(f"code: expected {code}, got {run.code}" + _error_text(run))
    if expect.error is not None and (run.error is None or run.error.code != expect.error):
        diff.append(f"error: expected {expect.error}, got {run.error.code if run.error else 'none'}")
    value = as_json(run.value)
    if "value" in given and value != expect.value:
        diff.append(f"value: expected {_short(expect.value)}, got {_short(value)}")
    if "value_contains" in given and not contains(value, expect.value_contains):
        diff.append(f"value_contains: {_short(expect.value_contains)} is not in {_short(value)}")
    shown = output_text(run)
    for text in expect.outputs_contain:
        if text not in shown:
            diff.append(f"outputs_contain: {text!r} is not in the output")
    cost = run_cost(run.trace)
    if expect.max_cost is not None and cost > expect.max_cost:
        diff.append(f"max_cost: the run cost ${cost:.6f}, more than ${expect.max_cost:.6f}")
    if expect.max_time is not None and seconds > expect.max_time:
        diff.append(f"max_time: the run took {seconds:.3f} s, more than {expect.max_time:g} s")
    return (FAIL if diff else PASS), diff


def contains(value: Any, part: Any) -> bool:
    """Whether every part of ``part`` is in ``value`` (SPEC 15 ``value_contains``): an object's keys each in the
    value's object with a value that contains the part's; a list's items each contained by some item of the
    value's list; a text in a text as a substring; anything else equal."""
    if isinstance(part, dict):
        return isinstance(value, dict) and all(k in value and contains(value[k], v) for k, v in part.items())
    if isinstance(part, list):
        return isinstance(value, list) and all(any(contains(item, p) for item in value) for p in part)
    if isinstance(part, str) and isinstance(value, str):
        return part in value
    return bool(value == part and type(value) is type(part))


def output_text(run: RunResult) -> str:
    """Everything the run showed, as text: its output parts' text (an html part's too), its log lines and what
    it printed."""
    parts = [str(p.get("text") or p.get("html") or "") for p in run.outputs if isinstance(p, dict)]
    return "\n".join([*parts, *run.logs, run.printed])


def run_cost(trace: dict[str, Any] | None) -> float:
    """US dollars the run's model calls cost, from its trace (the passes a loop counted but did not keep too)."""
    if trace is None:
        return 0.0
    total, stack = 0.0, [trace["root"]]
    while stack:
        span = stack.pop()
        total += span.get("price", 0.0) + (span.get("hidden") or {}).get("price", 0.0)
        stack.extend(span["spans"])
    return total


def _error_text(run: RunResult) -> str:
    return f" ({run.error.code}: {run.error.message[:200]})" if run.error is not None else ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"
