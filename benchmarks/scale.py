"""The scale section: long notebooks, a notebook test suite on both cores, memory over many cells (issue 12).

* **notebook-1000**: a notebook of 1,000 cells (``1 + 1``) run by ``nbclient`` from kernel start to the
  last output, for ``s2o``, ``python3`` and ``floor`` (:mod:`benchmarks.jupyter`); rounds interleaved,
  ratio paired per round to the floor.
* **nbval-serial**, **nbval-xdist**: a suite of 20 notebooks (10 cells each, outputs stored by a first
  ``nbclient`` run) checked by ``pytest --nbval``, serially and with ``pytest-xdist -n 2 --dist loadscope``
  (nbval's README requires ``loadscope``: it keeps all cells of one notebook on one xdist worker and
  so in one kernel; xdist's default, ``load``, splits a notebook's cells between the workers, each of
  which then starts its own kernel for it and runs its cells without the cells before them); the
  **speed-up** (serial ÷ parallel, target ≥ 1.8× on 2 cores) for ``s2o`` and, for the machine's own
  ceiling, for ``floor``.
* **memory-growth**: the s2o kernel's PSS (kernel + worker) after 100,000 executions of ``1 + 1``
  (history on) against after 1,000 (target: within 10 %), pipelined so that it takes minutes, not hours;
  also against after 70,000, when ipykernel's own replay protection is full (``growth-after-full``).

Quick mode: 200 cells, one round, 10,000 executions.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .common import Figure, Target
from .jupyter import KERNELS, ROOT, execute_many, kernel_env, kernelspecs, memory, start
from .nbval_clock import CLOCK, notebook_phase

SECTION = "scale"
FLOOR = "floor"
SUITE_NOTEBOOKS = 20
SUITE_CELLS = 10
SETTLE = 1.0
#: Executions after which jupyter_client's ``Session.digest_history`` (2**16 signatures) is full.
DIGEST_FULL = 70_000


def _value(figures: list[Figure], case: str, tool: str = "s2o") -> float | None:
    for f in figures:
        if f.case == case and f.tool == tool:
            return f.value
    return None


TARGETS = [
    Target(SECTION, "nbval-xdist", "nbval suite of 20 notebooks: pytest-xdist -n 2 (loadscope) speed-up ≥ 1.8×", 1.8,
           lambda figs: _value(figs, "nbval/speed-up"), unit="×", higher_is_better=True),
    Target(SECTION, "memory-growth", "kernel memory after 100,000 executions within 10 % of after 1,000", 10.0,
           lambda figs: _value(figs, "memory/growth"), unit="%"),
]


def _notebook(cells: int, kernel: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1 + 1") for _ in range(cells)]
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": kernel}
    return nb


def _run_notebook(kernels: Path, kernel: str, nb: nbformat.NotebookNode, cwd: str) -> float:
    """Seconds ``nbclient`` takes to run ``nb`` on ``kernel``, kernel start included."""
    manager = KernelManager(kernel_name=kernel, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    client = NotebookClient(nb, km=manager, timeout=60, startup_timeout=60,
                            resources={"metadata": {"path": cwd}})
    env = kernel_env()
    t0 = time.perf_counter()
    client.execute(env=env)
    elapsed = time.perf_counter() - t0
    texts = {o["data"]["text/plain"] for c in nb.cells for o in c.outputs if o.get("output_type") == "execute_result"}
    if texts != {"2"}:
        raise RuntimeError(f"{kernel}: the notebook's results were {sorted(texts)[:5]}")
    return elapsed


def notebook_rounds(kernels: Path, cells: int, rounds: int, cwd: str) -> list[Figure]:
    """The long-notebook figures (``notebook-N`` case)."""
    samples: dict[str, list[float]] = {name: [] for name in KERNELS}
    order = list(KERNELS)
    rng = random.Random(12)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            samples[name].append(_run_notebook(kernels, name, _notebook(cells, name), cwd))
    case = f"notebook-{cells}"
    base = samples[FLOOR]
    return [Figure(SECTION, case, name, statistics.median(s), "s", FLOOR,
                   statistics.median(a / b for a, b in zip(s, base, strict=True)),
                   f"{statistics.median(s) / cells * 1e3:.2f} ms/cell")
            for name, s in samples.items()]


def _write_suite(folder: Path, kernels: Path, kernel: str, cwd: str) -> None:
    """20 notebooks with their outputs stored (run once by nbclient), and an empty pytest configuration."""
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    for i in range(SUITE_NOTEBOOKS):
        nb = _notebook(SUITE_CELLS, kernel)
        _run_notebook(kernels, kernel, nb, cwd)
        nbformat.write(nb, folder / f"nb{i:02d}.ipynb")


class SuiteRun(NamedTuple):
    """One ``pytest --nbval`` run of the suite: ``wall`` seconds from start to exit, ``cpu`` seconds (user
    + system) of pytest and all it started and reaped (xdist's workers, the kernels and their workers),
    and ``notebooks`` seconds from the first notebook's kernel start to the last one's stop
    (:func:`benchmarks.nbval_clock.notebook_phase`: without pytest's and xdist's start and exit)."""

    wall: float
    cpu: float
    notebooks: float


def _pytest(folder: Path, kernels: Path, kernel: str, workers: int) -> SuiteRun:
    """One ``pytest --nbval`` run over ``folder`` (``-n workers --dist loadscope`` when more than one)."""
    clock = folder.parent / f"{folder.name}-clock-{workers}.jsonl"
    clock.unlink(missing_ok=True)
    env = kernel_env()
    env["JUPYTER_PATH"] = str(kernels.parent)
    env[CLOCK] = str(clock)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-p", "benchmarks.nbval_clock", "--nbval",
            "--nbval-kernel-name", kernel, "--rootdir", str(folder), "-c", str(folder / "pytest.ini"), str(folder)]
    if workers > 1:
        argv[4:4] = ["-n", str(workers), "--dist", "loadscope"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"nbval on {kernel} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return SuiteRun(elapsed, cpu, notebook_phase(clock))


def _median(runs: list[SuiteRun], field: str) -> float:
    return statistics.median(getattr(run, field) for run in runs)


def _paired(serial: list[SuiteRun], parallel: list[SuiteRun], field: str) -> float:
    """The median over rounds of serial ÷ parallel ``field`` (a speed-up, paired per round)."""
    return statistics.median(getattr(a, field) / getattr(b, field) for a, b in zip(serial, parallel, strict=True))


def suite_rounds(kernels: Path, rounds: int, cwd: str, tmp: Path) -> list[Figure]:
    """The nbval figures: serial and ``-n 2`` times and the speed-up, for s2o and the floor."""
    figures: list[Figure] = []
    names = ["s2o", FLOOR]
    for name in names:
        _write_suite(tmp / f"suite-{name}", kernels, name, cwd)
    serial: dict[str, list[SuiteRun]] = {n: [] for n in names}
    parallel: dict[str, list[SuiteRun]] = {n: [] for n in names}
    rng = random.Random(12)
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            serial[name].append(_pytest(tmp / f"suite-{name}", kernels, name, 1))
            parallel[name].append(_pytest(tmp / f"suite-{name}", kernels, name, 2))
    for name in names:
        s, p = serial[name], parallel[name]
        wall_s, wall_p = _median(s, "wall"), _median(p, "wall")
        cpu_s, cpu_p = _median(s, "cpu"), _median(p, "cpu")
        figures += [Figure(SECTION, "nbval/serial", name, wall_s, "s", "", float("nan"),
                           f"CPU {cpu_s:.1f} s ({cpu_s / wall_s:.2f} cores busy); "
                           f"notebooks {_median(s, 'notebooks'):.1f} s"),
                    Figure(SECTION, "nbval/xdist-2", name, wall_p, "s", "", float("nan"),
                           f"CPU {cpu_p:.1f} s ({cpu_p / wall_p:.2f} cores busy); "
                           f"notebooks {_median(p, 'notebooks'):.1f} s"),
                    Figure(SECTION, "nbval/speed-up", name, _paired(s, p, "wall"), "×", "", float("nan")),
                    Figure(SECTION, "nbval/speed-up-notebooks", name, _paired(s, p, "notebooks"), "×", "",
                           float("nan"), "first kernel start to last kernel stop, without pytest's and xdist's "
                           "start and exit")]
    return figures


def memory_growth(kernels: Path, total: int, cwd: str) -> list[Figure]:
    """PSS (kernel + worker) after 1,000 and after ``total`` executions and the growth in %, for s2o and,
    as the reference, the floor kernel.

    When ``total`` is past :data:`DIGEST_FULL`, PSS is also read there and the growth from there to
    ``total`` reported (``memory/growth-after-full``): by then jupyter_client's replay protection
    (``Session.digest_history``, one signature per message received, at most 2**16, ~9 MiB) is full,
    so what grows after it is that history's culls (a one-time step of ~1.3 MiB, from the allocator
    keeping their peak) and anything unbounded (docs/performance.md, "Memory after 100,000 cells").
    """
    figures: list[Figure] = []
    for name in ("s2o", FLOOR):
        running = start(kernels, name, cwd)
        full: dict[str, float] | None = None
        try:
            execute_many(running.client, "1 + 1", 1_000)
            time.sleep(SETTLE)
            early = memory(running.pid)
            done = 1_000
            if total > DIGEST_FULL:
                execute_many(running.client, "1 + 1", DIGEST_FULL - done)
                done = DIGEST_FULL
                time.sleep(SETTLE)
                full = memory(running.pid)
            execute_many(running.client, "1 + 1", total - done)
            time.sleep(SETTLE)
            late = memory(running.pid)
        finally:
            running.stop()
        growth = (late["pss"] / early["pss"] - 1) * 100
        figures += [Figure(SECTION, "memory/pss-after-1000", name, early["pss"], "MiB", "", float("nan")),
                    Figure(SECTION, f"memory/pss-after-{total}", name, late["pss"], "MiB", "", float("nan")),
                    Figure(SECTION, "memory/growth", name, growth, "%", "", float("nan"))]
        if full is not None:
            figures += [Figure(SECTION, f"memory/pss-after-{DIGEST_FULL}", name, full["pss"], "MiB", "",
                               float("nan")),
                        Figure(SECTION, "memory/growth-after-full", name, (late["pss"] / full["pss"] - 1) * 100,
                               "%", "", float("nan"))]
    return figures


def measure(quick: bool) -> list[Figure]:
    """Run the scale cases (see the module docstring) and return their figures."""
    cells, rounds, total = (200, 1, 10_000) if quick else (1_000, 3, 100_000)
    sys.path.insert(0, str(ROOT))
    with kernelspecs() as kernels, tempfile.TemporaryDirectory(prefix="s2o-bench-scale-") as tmp:
        cwd = str(Path(tmp) / "cwd")
        os.mkdir(cwd)
        figures = notebook_rounds(kernels, cells, rounds, cwd)
        figures += suite_rounds(kernels, 1 if quick else 2, cwd, Path(tmp))
        figures += memory_growth(kernels, total, cwd)
    return figures
