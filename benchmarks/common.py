"""The interface every benchmark section implements, and the shared measuring method (issue 12).

A *section* is a module ``benchmarks/<name>.py`` with

* ``measure(quick: bool) -> list[Figure]`` — run the section's cases, each against its floor
  measured in the same run, and return one :class:`Figure` per (case, tool);
* ``TARGETS: list[Target]`` — the issue-12 targets the section answers for; each computes its
  observed value from the section's figures, so the table can print met / missed.

The method is the one of ``../shared/notes/perf-anchors.md``: tools interleaved in shuffled order
within each round, each round's sample divided by the floor's sample of the same round (a *paired
ratio*, so a burst of load during one round cancels out), the median over rounds reported, and
geometric means over the cases every tool ran. Ratios are the figures; absolute times are printed
for reading only.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass
class Figure:
    """One measured value and its ratio to the floor measured in the same run.

    Attributes:
        section: the section name (``engine``, ``fragments``, ``kernel``, ``scale``).
        case: what was measured (``arith``, ``for-10000``, ``start``…).
        tool: who did it (``s2o``, ``simpleeval``, ``floor``…); the floor itself appears with ratio 1.0.
        value: the measured value (median), in ``unit``.
        unit: ``ns``, ``µs``, ``s``, ``MiB``, ``runs/s``…
        floor: the name of the tool this figure is divided by (``""`` when the figure has no floor).
        ratio: ``value / floor value``, median of paired per-round ratios where rounds exist;
            ``math.nan`` when the tool could not run the case (``note`` says why).
        note: free text (``n/a: FeatureNotAvailable``, ``† list form``, ``TODO``…).
    """

    section: str
    case: str
    tool: str
    value: float
    unit: str
    floor: str
    ratio: float
    note: str = ""


@dataclass
class Target:
    """One issue-12 target, answered from a section's figures.

    Attributes:
        section: the section whose figures decide it.
        name: short key (``hot-geomean``).
        description: the target as the issue words it (``hot ≤ 1.10× precompiled eval``).
        limit: the bound, in ``unit``.
        observed_fn: computes the observed value from the section's figures; ``None`` when it could not
            be measured in this run (the table prints ``—``).
        unit: ``×`` (a ratio), ``µs``, ``MiB``, ``%``.
        higher_is_better: ``True`` for targets of the form ``≥ limit`` (a speed-up).
    """

    section: str
    name: str
    description: str
    limit: float
    observed_fn: Callable[[list[Figure]], float | None]
    unit: str = "×"
    higher_is_better: bool = False

    def verdict(self, figures: list[Figure]) -> tuple[float | None, str]:
        """``(observed, 'met' | 'missed' | '—')`` for ``figures`` (all sections' figures may be passed)."""
        observed = self.observed_fn([f for f in figures if f.section == self.section])
        if observed is None or math.isnan(observed):
            return None, "—"
        ok = observed >= self.limit if self.higher_is_better else observed <= self.limit
        return observed, "met" if ok else "missed"


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of positive ``values`` (``nan`` when there are none)."""
    logs = [math.log(v) for v in values if v > 0 and not math.isnan(v)]
    return math.exp(statistics.fmean(logs)) if logs else math.nan


def ratio_of(figures: Sequence[Figure], case: str, tool: str) -> float:
    """The ratio of the figure for ``(case, tool)``, ``nan`` when absent."""
    for f in figures:
        if f.case == case and f.tool == tool:
            return f.ratio
    return math.nan


def calibrate(fn: Callable[[int], float], budget: float) -> int:
    """Smallest power-of-two loop count ``n`` for which ``fn(n)`` (seconds for ``n`` calls) takes ≥ ``budget`` s."""
    n = 1
    while fn(n) < budget and n < 1 << 30:
        n *= 2
    return n


def loop_timer(call: Callable[[], object]) -> Callable[[int], float]:
    """A timer ``n -> seconds`` for ``n`` calls of ``call`` in a plain loop."""
    def run(n: int) -> float:
        rng = range(n)
        t0 = time.perf_counter()
        for _ in rng:
            call()
        return time.perf_counter() - t0
    return run


def interleaved(timers: dict[str, Callable[[int], float]], floor: str, rounds: int, budget: float,
                *, seed: int = 12) -> dict[str, tuple[float, float]]:
    """Time every tool in ``timers`` per round in shuffled order; return ``tool -> (median s/call, ratio)``.

    ``timers[tool](n)`` returns the seconds ``n`` calls take. Each tool's ``n`` is calibrated once so a
    sample takes about ``budget`` seconds; then ``rounds`` rounds are taken, every tool one sample per
    round in a shuffled order; the ratio is the median over rounds of ``sample(tool) / sample(floor)``
    (paired). GC stays enabled, as in the anchors.
    """
    counts = {tool: calibrate(t, budget) for tool, t in timers.items()}
    samples: dict[str, list[float]] = {tool: [] for tool in timers}
    rng = random.Random(seed)
    order = list(timers)
    for _ in range(rounds):
        rng.shuffle(order)
        for tool in order:
            n = counts[tool]
            samples[tool].append(timers[tool](n) / n)
    base = samples[floor]
    return {tool: (statistics.median(s), statistics.median(a / b for a, b in zip(s, base, strict=True)))
            for tool, s in samples.items()}


def collect() -> None:
    """A full garbage collection, between cases (never inside a timed loop)."""
    gc.collect()


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    """What the figures were measured on: CPU model, cores, Python version, OS, date (UTC) and load."""
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return {
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": f"{platform.system()} {platform.release()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": load,
    }
