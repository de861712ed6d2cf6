"""How far a run has got, for whoever shows it while it runs (SPEC 6's limits): :class:`RunProgress`.

The interpreter counts every pass of a ``for`` or ``while`` loop on the session's
:attr:`~.session.Session.progress` (two integer updates per pass, nothing else), and a
reader in another thread (the worker's progress reporter, :mod:`.worker.server`) reads it
while the run goes on. Reading never changes it and never waits for the run: a reader may see
a count one pass old. :meth:`RunProgress.report` is the JSON a reader sends: the elapsed time
against ``limits.time`` and the loop counts against ``limits.loop_iterations``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunProgress"]


@dataclass(slots=True)
class RunProgress:
    """The loop counts of one fragment run; :meth:`~.session.Session.run_fragment` starts a new one.

    ``passes``: loop passes made so far in the run, every loop together. ``longest``: the most
    passes one execution of one loop has made (the count ``limits.loop_iterations`` bounds; a loop
    inside a loop counts its own passes each time it runs).
    """

    passes: int = 0
    longest: int = 0

    def note_pass(self, count: int) -> None:
        """A loop started its pass number ``count`` (1-based)."""
        self.passes += 1
        self.longest = count if count > self.longest else self.longest  # no max() call: once a pass

    def report(self, elapsed: float, time_limit: float, loop_limit: int) -> dict[str, Any]:
        """``{"elapsed", "time_limit", "passes", "longest", "loop_limit"}``: seconds, seconds and counts."""
        return {"elapsed": float(elapsed), "time_limit": float(time_limit), "passes": int(self.passes),
                "longest": int(self.longest), "loop_limit": int(loop_limit)}
