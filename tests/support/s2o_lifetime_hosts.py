"""Host async functions for the run-lifetime tests: work that goes on unless the run cancels it.

``burn`` keeps a CPU busy for seconds while yielding to the event loop; ``fail`` raises after a moment;
``spawn`` starts ``burn`` as a task and returns at once; ``stubborn`` swallows its cancellation. A run
that ends must take them with it.
"""

from __future__ import annotations

import asyncio
import time

_STARTED: list[asyncio.Future[None]] = []


async def burn() -> int:
    """About 10 s of CPU in small steps, yielding between them; returns the number of steps."""
    steps = 0
    for _ in range(2000):
        sum(range(20_000))
        steps += 1
        await asyncio.sleep(0)
    return steps


async def fail() -> None:
    """Raises ``ValueError`` after 50 ms."""
    await asyncio.sleep(0.05)
    raise ValueError("boom")


async def spawn() -> str:
    """Starts ``burn`` as a task of its own and returns before it ends."""
    _STARTED.append(asyncio.ensure_future(burn()))
    return "started"


def pair() -> tuple[object, object]:
    """A sync host function that hands out two coroutines: ``fail()`` and ``burn()`` (for ``gather``)."""
    return fail(), burn()


async def stubborn() -> str:
    """Swallows every cancellation for 30 s (a retry loop catching too much), then returns."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            continue
    return "late"
