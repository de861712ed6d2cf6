"""Small host functions used by the tour notebook and the embedded teaching allowlist.

They stand for "your own code" (SPEC 4): a package of one's own that an
allowlist grants by dotted name. Everything here is offline and
deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

_WEATHER = {"Oslo": 7, "Bergen": 11, "Lima": 19, "Cairo": 31}


async def fetch_weather(city: str) -> dict[str, object]:
    """Pretend HTTP lookup: ``{'city': city, 'celsius': int}`` after a short await.

    Raises ``KeyError`` for a city it does not know.
    """
    await asyncio.sleep(0.01)
    return {"city": city, "celsius": _WEATHER[city]}


async def slow_answer(seconds: float) -> str:
    """Waits ``seconds`` (awaiting, so the time limit can stop it), then returns ``'done'``."""
    await asyncio.sleep(seconds)
    return "done"


def countdown(start: int) -> Iterator[int]:
    """Generator of ``start, start - 1, …, 1``."""
    while start > 0:
        yield start
        start -= 1


def endless() -> Iterator[int]:
    """A generator that never ends: only the run-time limit stops a consumer of it."""
    n = 0
    while True:
        yield n
        n += 1
