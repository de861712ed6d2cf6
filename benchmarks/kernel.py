"""The kernel section: start, round trip and idle memory against ipykernel and the wrapper floor (issue 12).

Method (``../shared/notes/jupyter-kernel-field-notes.md`` section 8): three kernels (``s2o``,
``python3`` — ipykernel's IPython kernel — and ``floor``, a minimal ``Kernel`` subclass returning a
constant; see :mod:`benchmarks.jupyter`), each started by ``jupyter_client`` from a temporary
kernelspec. In every round the kernels take turns in a shuffled order, one alive at a time; each

1. **start**: seconds from ``start_kernel`` to the first ``kernel_info_reply``;
2. **first-cell**: seconds from ``start_kernel`` to the reply of the first ``1 + 1`` (for s2o this
   includes waiting for its worker, which starts in the background);
3. **round-trip**: after a few warm-up cells, ``N`` executions of ``1 + 1`` with ``store_history``
   on, each timed from ``execute_request`` to having both the reply and IOPub ``idle``; the round's
   median;
4. **memory**: after one second idle, RSS, PSS and USS of the kernel and every process below it.

Ratios are paired per round (this kernel's round value / the floor's in the same round), the median
over rounds reported; memory is also reported as the median per-round difference to the floor (the
target is in MiB above the floor). Full run: 10 rounds × 50 cells (500 round trips per kernel).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time

from .common import Figure, Target
from .jupyter import KERNELS, execute, kernelspecs, memory, start

SECTION = "kernel"
FLOOR = "floor"
WARMUP = 5
SETTLE = 1.0
CODE = "1 + 1"


def _case_value(figures: list[Figure], case: str, tool: str = "s2o") -> float | None:
    for f in figures:
        if f.case == case and f.tool == tool:
            return f.ratio if f.floor else f.value
    return None


TARGETS = [
    Target(SECTION, "kernel-start", "kernel start (to kernel_info_reply) ≤ 1.1× the floor", 1.1,
           lambda figs: _case_value(figs, "start")),
    Target(SECTION, "kernel-round-trip", "round trip of 1 + 1 (history on, worker in place) ≤ 1.1× the floor",
           1.1, lambda figs: _case_value(figs, "round-trip")),
    Target(SECTION, "kernel-memory", "kernel + worker PSS ≤ floor + 15 MiB", 15.0,
           lambda figs: _case_value(figs, "memory/pss-above-floor"), unit="MiB"),
]


def _one(kernels: object, name: str, cells: int, cwd: str) -> dict[str, float]:
    """One kernel's turn in a round: the values of every case."""
    t0 = time.perf_counter()
    running = start(kernels, name, cwd)  # type: ignore[arg-type]
    try:
        _, first = execute(running.client, CODE)
        first_cell = time.perf_counter() - t0
        if first.get("status") != "ok" or first.get("result") != "2":
            raise RuntimeError(f"{name}: 1 + 1 gave {first}")
        for _ in range(WARMUP):
            execute(running.client, CODE)
        times = [execute(running.client, CODE)[0] for _ in range(cells)]
        time.sleep(SETTLE)
        mem = memory(running.pid)
    finally:
        running.stop()
    return {"start": running.start, "first-cell": first_cell, "round-trip": statistics.median(times) * 1e3,
            "memory/rss": mem["rss"], "memory/pss": mem["pss"], "memory/uss": mem["uss"],
            "processes": mem["processes"]}


UNITS = {"start": "s", "first-cell": "s", "round-trip": "ms", "memory/rss": "MiB", "memory/pss": "MiB",
         "memory/uss": "MiB"}


def run_rounds(rounds: int, cells: int, seed: int = 12) -> dict[str, list[dict[str, float]]]:
    """``kernel name → one dict of case values per round`` (kernels shuffled within each round)."""
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in KERNELS}
    rng = random.Random(seed)
    order = list(KERNELS)
    with kernelspecs() as kernels, tempfile.TemporaryDirectory(prefix="s2o-bench-cwd-") as cwd:
        for _ in range(rounds):
            rng.shuffle(order)
            for name in order:
                samples[name].append(_one(kernels, name, cells, cwd))
    return samples


def figures_of(samples: dict[str, list[dict[str, float]]]) -> list[Figure]:
    """Figures from per-round samples: medians, paired ratios to the floor, memory above the floor."""
    base = samples[FLOOR]
    figures: list[Figure] = []
    for name, rows in samples.items():
        procs = statistics.median(r["processes"] for r in rows)
        for case, unit in UNITS.items():
            value = statistics.median(r[case] for r in rows)
            ratio = statistics.median(r[case] / b[case] for r, b in zip(rows, base, strict=True))
            note = f"{procs:g} processes" if case == "memory/pss" else ""
            figures.append(Figure(SECTION, case, name, value, unit, FLOOR, ratio, note))
        above = statistics.median(r["memory/pss"] - b["memory/pss"] for r, b in zip(rows, base, strict=True))
        figures.append(Figure(SECTION, "memory/pss-above-floor", name, above, "MiB", "", float("nan")))
    return figures


def measure(quick: bool) -> list[Figure]:
    """Run the rounds (quick: 3 rounds × 20 cells; full: 10 × 50) and return the figures."""
    rounds, cells = (3, 20) if quick else (10, 50)
    return figures_of(run_rounds(rounds, cells))
