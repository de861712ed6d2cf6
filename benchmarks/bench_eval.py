"""Benchmark: s2o evaluation against CPython's own ``eval`` of precompiled code, measured in the same run.

Prints, per expression, the median nanoseconds per evaluation of

* ``raw``: ``eval(code, g)`` with ``code`` compiled once and ``g`` built once
  (the floor of ``../shared/notes/perf-anchors.md``);
* ``session``: ``Session.evaluate(source)`` on the compile cache (hot path);
* ``guarded``: the same with guarded compilation (every value reached through
  an attribute, call, item, operator or iteration checked, as when the
  allowlist grants a host object; SPEC 12);
* ``cold``: ``Engine(...).compile`` of a new source every time + run;
* ``isolated``: ``IsolatedSession.evaluate`` (worker round trip, what the
  kernel pays per cell for containment);

and the ratio of each to ``raw``, with geometric means. Usage::

    python benchmarks/bench_eval.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

from s2o_kernel.engine import Engine, IsolatedSession, Session, bare_settings

DATA = {
    "price": 12.5,
    "quantity": 3,
    "items": [{"name": f"n{i}", "paid": i % 2 == 0, "amount": float(i)} for i in range(100)],
    "numbers": list(range(100)),
    "name": "Ada",
    "city": "Oslo",
    "temperature": 7,
}

SUITE = {
    "arith": "price * quantity",
    "fstring": "f'{city}: {temperature}'",
    "listcomp": "[n * n for n in numbers]",
    "dictcomp": "{i['name']: i['amount'] for i in items}",
    "filtsum": "sum(i['amount'] for i in items if i['paid'])",
    "join": "', '.join(sorted(i['name'] for i in items if i['paid']))",
    "subscr": "items[numbers[42]]['name'][0]",
    "cond": "'hot' if temperature > 25 else ('mild' if temperature > 10 else 'cold')",
    "builtins": "len(numbers) + min(numbers) + max(numbers)",
    "strmeth": "name.upper()",
    "boolean": "(price > 10 and quantity >= 3) or (city == 'Bergen' and not temperature < 0)",
    "nested": "[[r * c for c in numbers[:10]] for r in numbers[:10]]",
}

ALLOW = "len\nmin\nmax\nsum\nsorted"


def _time_per_call(fn, budget: float) -> float:
    """Median ns per call of ``fn`` over 5 samples of about ``budget`` seconds each."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > budget / 5:
            break
        n *= 2
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n * 1e9)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter samples")
    args = parser.parse_args(argv)
    budget = 0.05 if args.quick else 0.25
    settings = bare_settings({"allowlist": ALLOW})
    allow = {n: __builtins__[n] if isinstance(__builtins__, dict) else getattr(__builtins__, n)
             for n in ALLOW.split()}
    g = {"__builtins__": allow, **DATA}
    session = Session(Engine(settings), locals=DATA)
    guarded = Session(Engine(settings, guard=True), locals=DATA)
    iso = IsolatedSession(settings)
    iso.run_fragment({"var": {k: v for k, v in DATA.items()}})
    counter = [0]

    rows = []
    for key, src in SUITE.items():
        code = compile(src, "<raw>", "eval")
        assert eval(code, g) == session.evaluate(src) == iso.evaluate(src), key
        raw = _time_per_call(lambda code=code: eval(code, g), budget)
        hot = _time_per_call(lambda src=src: session.evaluate(src), budget)
        assert guarded.evaluate(src) == session.evaluate(src), key
        reached = _time_per_call(lambda src=src: guarded.evaluate(src), budget)

        def cold(src: str = src) -> None:
            counter[0] += 1
            session.evaluate(f"({src}) if {counter[0]} else None")

        cold_ns = _time_per_call(cold, budget)
        isolated = _time_per_call(lambda src=src: iso.evaluate(src), budget)
        rows.append((key, raw, hot, cold_ns, isolated, reached))
    iso.close()

    print(f"Python {sys.version.split()[0]}; ns per evaluation (median of 5); ratio = / raw eval")
    print(f"{'expr':10} {'raw':>9} {'session':>9} {'×':>6} {'cold':>10} {'×':>7} {'isolated':>10} {'×':>7} "
          f"{'guarded':>9} {'×':>6}")
    for key, raw, hot, cold_ns, isolated, reached in rows:
        print(f"{key:10} {raw:9.0f} {hot:9.0f} {hot / raw:6.2f} {cold_ns:10.0f} {cold_ns / raw:7.1f} "
              f"{isolated:10.0f} {isolated / raw:7.1f} {reached:9.0f} {reached / raw:6.2f}")

    def geo(i):
        return math.exp(statistics.fmean(math.log(r[i] / r[1]) for r in rows))

    print(f"geomean ratio to raw: session ×{geo(2):.2f}, cold ×{geo(3):.1f}, isolated ×{geo(4):.1f}, "
          f"guarded ×{geo(5):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
