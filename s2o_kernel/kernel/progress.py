"""The progress display of a long run (SPEC 9): one ``display_data`` updated in place.

A run that goes on for two seconds gets reports of how far it has got (the engine's
:mod:`~s2o_kernel.engine.run.progress`, sent by the worker twice a second). :class:`ProgressDisplay`
shows the first as ``display_data`` with a ``display_id`` in ``transient`` and each later one as
``update_display_data`` of that id, so JupyterLab redraws one line. A run that ends sooner sends
no report, so nothing is shown and nothing is stored with the notebook; nor does a headless run
(``allow_stdin`` false: nbclient, nbval, papermill; the runner's ``watched``).

When the run ends, the display is updated to an empty MIME bundle, ``data: {}`` (decided in
``docs/design.md``): the cell's result or error says how it ended, and a final line holding a time
would differ from run to run in a stored notebook. JupyterLab renders an empty bundle as nothing and
saves it as ``{"output_type": "display_data", "data": {}, "metadata": {}}``, an output in which
nbval compares nothing (it skips ``output_type`` and ``metadata`` and compares each MIME type of
``data``), so a notebook saved from JupyterLab after a long run still passes nbval against a
headless run, which shows no progress. (Empty *text* was saved as a ``text/plain`` of ``""``,
which nbval counted as one more output.) ``jupyter console`` prints the first ``display_data`` and ignores
updates, so there a long run leaves its first progress line; after an answered ``ask`` the runner
starts a new display (:meth:`~.runner.CellRunner.note_asked`), so the console prints a line after the
answer too. Nothing here imports Jupyter.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

#: ``publish(msg_type, content)``: sends one IOPub message now.
Publish = Callable[[str, dict[str, Any]], None]


def progress_text(report: dict[str, Any]) -> str:
    """One line for a ``PROGRESS`` report: elapsed time against ``limits.time``, and for a fragment
    that has looped, its loop passes and its longest loop against ``limits.loop_iterations``.

    >>> progress_text({"elapsed": 4.25, "time_limit": 30.0, "passes": 0, "longest": 0, "loop_limit": 10})
    'running for 4.2 s (time limit 30 s)'
    """
    text = f"running for {report['elapsed']:.1f} s (time limit {report['time_limit']:g} s)"
    if report["passes"]:
        text += (f"; {report['passes']:,} loop passes, the longest loop at {report['longest']:,}"
                 f" of {report['loop_limit']:,}")
    return text


class ProgressDisplay:
    """The progress line of the running cell; :meth:`show` for each report, :meth:`end` when the run ends."""

    def __init__(self, publish: Publish) -> None:
        self.publish = publish
        #: The ``display_id`` of the line shown, ``None`` before the first report.
        self.display_id: str | None = None

    def _send(self, msg_type: str, data: dict[str, str]) -> None:
        assert self.display_id is not None
        self.publish(msg_type, {"data": data, "metadata": {}, "transient": {"display_id": self.display_id}})

    def show(self, report: dict[str, Any]) -> None:
        """Show ``report`` (a ``PROGRESS``): a new display the first time, an update after."""
        first = self.display_id is None
        if first:
            self.display_id = f"s2o-progress-{uuid.uuid4().hex}"
        self._send("display_data" if first else "update_display_data", {"text/plain": progress_text(report)})

    def end(self) -> None:
        """Clear the line shown (an update to the empty bundle ``{}``); nothing when none was shown."""
        if self.display_id is not None:
            self._send("update_display_data", {})
            self.display_id = None
