"""Every branch's error is read: asyncio never logs a branch's exception with the engine's traceback.

The finding (red team, 2026-12-04): when two branches of a ``parallel`` failed in the same step, the
command raised the first and never read the second; asyncio logged "Task exception was never
retrieved" with the engine's frames and host paths when the task was freed.
"""

from __future__ import annotations

import gc
import logging
from typing import Any

import pytest

from s2o_kernel.engine import Engine, Session, default_settings

FRAGMENTS: list[Any] = [
    {"parallel": [[{"fail": "a"}], [{"fail": "b"}]]},
    {"parallel": [[{"var": {"x": "{ 1 / 0 }"}}], [{"fail": "b"}], [{"var": {"y": "{ [][1] }"}}]]},
    {"for": {"item": "i", "in": [1, 2], "commands": [{"parallel": [[{"fail": "a"}], [{"fail": "b"}]]}]}},
]


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_no_branch_error_is_left_unread(fragment: Any, caplog: pytest.LogCaptureFixture) -> None:
    session = Session(Engine(default_settings()))
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run = session.run_fragment(fragment)
        gc.collect()
    assert run.error is not None and run.error.code == "failCommand", run.error
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
