"""A pytest plugin for the nbval suite of :mod:`benchmarks.scale`: when each notebook's run starts and ends.

Loaded with ``-p benchmarks.nbval_clock`` (pytest-xdist passes it on to its workers). For every test
item it appends one JSON line ``[seconds, worker, event]`` to the file named by the environment
variable :data:`CLOCK` (``event`` is ``"setup"`` before an item's set-up, where nbval starts a
notebook's kernel for its first cell, and ``"done"`` after its tear-down, where nbval stops it after
the last); ``seconds`` is ``time.time()``, ``worker`` is xdist's ``PYTEST_XDIST_WORKER`` or
``"main"``. :func:`notebook_phase` reads the file back: the seconds from the first set-up to the last
tear-down, the part of a run in which notebooks run, without pytest's and xdist's own start and exit.
Writes are appends of one short line each (atomic on Linux), so two workers share the file.
Nothing here is collected by the project's tests.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The environment variable naming the file the events go to; no file, no events.
CLOCK = "S2O_BENCH_NBVAL_CLOCK"


def _note(event: str) -> None:
    path = os.environ.get(CLOCK)
    if path:
        line = json.dumps([time.time(), os.environ.get("PYTEST_XDIST_WORKER", "main"), event])
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note the start of ``item``'s set-up (nbval starts a notebook's kernel in its first cell's)."""
    _note("setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Note the end of ``item``'s tear-down (nbval stops the kernel in its last cell's)."""
    yield
    _note("done")


def notebook_phase(path: Path) -> float:
    """Seconds from the first ``setup`` to the last ``done`` in the clock file ``path``.

    Raises ``ValueError`` when the file holds no event of either kind."""
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    starts = [t for t, _, event in events if event == "setup"]
    ends = [t for t, _, event in events if event == "done"]
    if not starts or not ends:
        raise ValueError(f"{path}: no test ran")
    return max(ends) - min(starts)
