"""Unit tests of issue 11's console habits against the stand-in session: ``exit``/``quit``, ``%time``,
``%reset -f``, ``%history`` and the progress display of a long run (``kernel/progress.py``).

The real-kernel side (the reply payload, printed text in order, progress messages, history across
kernels) is in ``test_console_kernel.py``; the terminal in ``test_console_pty.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fake_session import API, FakeSession

from s2o_kernel.kernel import cells
from s2o_kernel.kernel.history import History
from s2o_kernel.kernel.magics.time_magic import format_time
from s2o_kernel.kernel.progress import ProgressDisplay, progress_text
from s2o_kernel.kernel.runner import ASK_EXIT, CellRunner


def streams(outcome: Any, name: str) -> str:
    return "".join(c["text"] for t, c in outcome.outputs if t == "stream" and c["name"] == name)


# -- exit and quit ---------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["exit", "quit", "exit()", "quit()", "  exit  \n", "# bye\nquit"])
def test_exit_asks_the_console_to_exit(runner: CellRunner, session: FakeSession, code: str) -> None:
    assert cells.classify(code).kind == cells.EXIT
    outcome = runner.run(code)
    assert outcome.ok and outcome.outputs == []
    assert outcome.payload == [{"source": "ask_exit", "keepkernel": False}] == [ASK_EXIT]
    assert session.evaluated == []


def test_exit_is_a_variable_when_one_has_that_name(runner: CellRunner, session: FakeSession) -> None:
    session.locals["exit"] = 7
    outcome = runner.run("exit")
    assert outcome.payload == []
    assert [c["data"]["text/plain"] for t, c in outcome.outputs if t == "execute_result"] == ["7"]
    assert runner.run("quit").payload == [ASK_EXIT]  # only the name that is a variable


@pytest.mark.parametrize("code", ["exit(1)", "exited", "exit + 1", "%exit"])
def test_other_cells_that_mention_exit_are_not_exits(code: str) -> None:
    assert cells.classify(code).kind != cells.EXIT


# -- %time -----------------------------------------------------------------------------------

_WALL = re.compile(r"^Wall time: \d+(\.\d+)? (s|ms|µs|ns)\n$")


def test_time_shows_the_wall_time_then_the_value(runner: CellRunner, session: FakeSession) -> None:
    outcome = runner.run("%time 6 * 7")
    assert outcome.ok, outcome.error
    assert [t for t, _ in outcome.outputs] == ["stream", "execute_result"]
    assert _WALL.match(streams(outcome, "stdout"))
    assert outcome.outputs[1][1]["data"]["text/plain"] == "42"
    assert session.evaluated == ["6 * 7"]


def test_time_runs_dynamic_strings_and_fragments(runner: CellRunner, session: FakeSession) -> None:
    outcome = runner.run('%time "{ 2 + 3 }"')
    assert outcome.outputs[-1][1]["data"]["text/plain"] == "5"
    outcome = runner.run('%%time\n[{"var": {"x": 4}}, {"output": "part"}, {"return": 9}]')
    assert outcome.ok, outcome.error
    kinds = [t for t, _ in outcome.outputs]
    assert kinds == ["display_data", "stream", "execute_result"]  # the run's parts, the time, the value
    assert session.locals["x"] == 4


def test_time_of_a_failing_cell_is_its_error_and_no_time(runner: CellRunner) -> None:
    outcome = runner.run("%time x.__class__")
    assert outcome.error is not None and outcome.error.ename == "underscore"
    assert streams(outcome, "stdout") == ""
    outcome = runner.run('%time {"fail": "no"}')
    assert outcome.error is not None and outcome.error.ename == "failCommand"
    assert streams(outcome, "stdout") == ""


@pytest.mark.parametrize("code", ["%time", "%time   ", "%time %vars", "%time len?", "%time # only a comment"])
def test_time_refuses_nothing_magics_and_help(runner: CellRunner, code: str) -> None:
    outcome = runner.run(code)
    assert outcome.error is not None and outcome.error.ename == "magic", code


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0 ns"), (3e-9, "3 ns"), (4.05e-6, "4.05 µs"), (0.00099996, "1 ms"), (0.0123, "12.3 ms"),
     (0.5, "500 ms"), (1.5, "1.5 s"), (59.94, "59.9 s"), (61.25, "1min 1.25s")],
)  # fmt: skip
def test_format_time_writes_three_significant_digits(seconds: float, text: str) -> None:
    assert format_time(seconds) == text


# -- %reset -f -------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["%reset", "%reset -f"])
def test_reset_and_reset_f_clear_the_variables(runner: CellRunner, session: FakeSession, code: str) -> None:
    session.locals["x"] = 1
    session.agent_vars["a"] = 2
    assert runner.run(code).ok
    assert session.locals == {} and session.agent_vars == {}


@pytest.mark.parametrize("code", ["%reset -x", "%reset now", "%reset -f -q"])
def test_reset_refuses_other_arguments_and_keeps_the_variables(
    runner: CellRunner, session: FakeSession, code: str
) -> None:
    session.locals["x"] = 1
    outcome = runner.run(code)
    assert outcome.error is not None and outcome.error.ename == "magic"
    assert "usage: %reset [-f]" in outcome.error.evalue
    assert session.locals == {"x": 1}


# -- %history --------------------------------------------------------------------------------


@pytest.fixture
def history(tmp_path: Any) -> Any:
    h = History(str(tmp_path / "history.sqlite"))
    yield h
    h.close()


def test_history_magic_lists_this_kernels_cells(runner: CellRunner, history: History) -> None:
    runner.history = history
    for line, code in enumerate(["1 + 1", "x = 2", '[{"var": {"a": 1}},\n {"log": "hi"}]', "len('abc')"], 1):
        history.remember(line, code, None)
    assert streams(runner.run("%history"), "stdout") == (
        "    1: 1 + 1\n    2: x = 2\n    3: [{\"var\": {\"a\": 1}},\n        {\"log\": \"hi\"}]\n    4: len('abc')\n")
    assert streams(runner.run("%history -n 2"), "stdout") == (
        "    3: [{\"var\": {\"a\": 1}},\n        {\"log\": \"hi\"}]\n    4: len('abc')\n")
    assert streams(runner.run("%history -n 0"), "stdout") == ""
    assert streams(runner.run("%history -g len"), "stdout") == "    4: len('abc')\n"


def test_history_magic_labels_earlier_sessions(tmp_path: Any, session: FakeSession) -> None:
    path = str(tmp_path / "h.sqlite")
    first = History(path)
    first.remember(1, "len('old')", "3")
    first.remember(2, "len('old')", "3")
    earlier = first.session
    first.close()
    second = History(path)
    try:
        runner = CellRunner(session, API)
        runner.history = second
        second.remember(1, "len('new')", "3")
        # -g: every session, the latest of equal cells only, an earlier session's cell as session/line
        label = f"{earlier}/2".rjust(5)
        assert streams(runner.run("%history -g len(*)"), "stdout") == f"{label}: len('old')\n    1: len('new')\n"
        assert streams(runner.run("%history -g old -n 5"), "stdout") == f"{label}: len('old')\n"
        assert streams(runner.run("%history"), "stdout") == "    1: len('new')\n"
    finally:
        second.close()


@pytest.mark.parametrize("code", ["%history -n -1", "%history -n x", "%history extra", "%history -n 1 -n 2"])
def test_history_magic_refuses_wrong_use(runner: CellRunner, history: History, code: str) -> None:
    runner.history = history
    outcome = runner.run(code)
    assert outcome.error is not None and outcome.error.ename == "magic", code


def test_history_magic_without_a_history(runner: CellRunner) -> None:
    outcome = runner.run("%history")
    assert outcome.error is not None and outcome.error.ename == "magic"
    assert "keeps no history" in outcome.error.evalue


# -- the progress display --------------------------------------------------------------------


def _report(elapsed: float, passes: int = 0, longest: int = 0) -> dict[str, Any]:
    return {"elapsed": elapsed, "time_limit": 30.0, "passes": passes, "longest": longest, "loop_limit": 10000}


def test_progress_text_names_the_limits() -> None:
    assert progress_text(_report(2.04)) == "running for 2.0 s (time limit 30 s)"
    assert progress_text(_report(3.5, 12345, 2345)) == (
        "running for 3.5 s (time limit 30 s); 12,345 loop passes, the longest loop at 2,345 of 10,000")


def test_progress_display_is_one_display_updated_in_place_then_cleared() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    display = ProgressDisplay(lambda t, c: sent.append((t, c)))
    display.end()  # nothing shown: nothing to clear
    assert sent == []
    display.show(_report(2.1))
    display.show(_report(2.6, 5, 5))
    display.end()
    assert [t for t, _ in sent] == ["display_data", "update_display_data", "update_display_data"]
    ids = {c["transient"]["display_id"] for _, c in sent}
    assert len(ids) == 1 and next(iter(ids)).startswith("s2o-progress-")
    assert [c["data"] for _, c in sent] == [
        {"text/plain": progress_text(_report(2.1))}, {"text/plain": progress_text(_report(2.6, 5, 5))}, {}]
    display.show(_report(2.0))  # a new run: a new display
    assert sent[-1][0] == "display_data" and sent[-1][1]["transient"]["display_id"] not in ids


class _Contained(FakeSession):
    """A stand-in contained session whose evaluate reports progress as the worker does."""

    def __init__(self) -> None:
        super().__init__()
        self.on_print: Any = None
        self.on_progress: Any = None
        self.reports: list[dict[str, Any]] = []

    def evaluate(self, expr: str) -> Any:
        for report in self.reports:
            if self.on_progress is not None:
                self.on_progress(report)
        return super().evaluate(expr)

    def close(self) -> None:
        pass


def test_runner_shows_progress_live_and_clears_it_when_the_run_ends() -> None:
    session = _Contained()
    runner = CellRunner(session, API)
    assert session.on_progress is not None
    sent: list[tuple[str, dict[str, Any]]] = []
    runner.publisher = lambda t, c: sent.append((t, c))
    session.reports = [_report(2.2), _report(2.7)]
    outcome = runner.run("1 + 1")
    assert outcome.ok
    assert [t for t, _ in sent] == ["display_data", "update_display_data", "update_display_data"]
    assert sent[-1][1]["data"] == {}  # the empty bundle: nothing shown, nothing nbval compares
    assert [t for t, _ in outcome.outputs] == ["execute_result"]  # the result is not part of the display
    # A silent cell shows no progress, and a quick run (no report) sends nothing.
    sent.clear()
    assert runner.run("1 + 1", silent=True).ok
    session.reports = []
    assert runner.run("1 + 1").ok
    assert sent == []


def test_progress_after_an_answered_ask_is_a_new_display() -> None:
    """``jupyter console`` prints a display's first message only: after the person answered an ``ask``,
    the run's progress starts a new display (shown below the answer) instead of updating one above it."""
    session = _Contained()
    runner = CellRunner(session, API)
    sent: list[tuple[str, dict[str, Any]]] = []
    runner.publisher = lambda t, c: sent.append((t, c))
    reports = iter([_report(2.2), _report(2.7), _report(6.1), _report(6.6)])

    def evaluate(expr: str) -> Any:
        session.on_progress(next(reports))
        session.on_progress(next(reports))
        runner.note_asked()  # the kernel's ask prompt was answered
        session.on_progress(next(reports))
        session.on_progress(next(reports))
        return 2

    session.evaluate = evaluate  # type: ignore[method-assign]
    assert runner.run("1 + 1").ok
    assert [t for t, _ in sent] == ["display_data", "update_display_data", "update_display_data",
                                    "display_data", "update_display_data", "update_display_data"]
    assert [c["data"] for _, c in sent] == [
        {"text/plain": progress_text(_report(2.2))}, {"text/plain": progress_text(_report(2.7))}, {},
        {"text/plain": progress_text(_report(6.1))}, {"text/plain": progress_text(_report(6.6))}, {}]
    first, second = sent[0][1]["transient"]["display_id"], sent[3][1]["transient"]["display_id"]
    assert first != second
    # An ask before any progress changes nothing: the first report is the display's first message.
    sent.clear()
    reports = iter([_report(4.0), _report(4.5)])

    def ask_first(expr: str) -> Any:
        runner.note_asked()
        session.on_progress(next(reports))
        session.on_progress(next(reports))
        return 2

    session.evaluate = ask_first  # type: ignore[method-assign]
    assert runner.run("1 + 1").ok
    assert [t for t, _ in sent] == ["display_data", "update_display_data", "update_display_data"]


def test_a_headless_run_shows_no_progress() -> None:
    """A headless run (``allow_stdin`` false: nbclient, nbval, papermill) keeps no progress display, so its
    stored outputs do not depend on how long the run took."""
    session = _Contained()
    runner = CellRunner(session, API)
    sent: list[tuple[str, dict[str, Any]]] = []
    runner.publisher = lambda t, c: sent.append((t, c))
    runner.watched = False
    session.reports = [_report(2.2), _report(2.7)]
    outcome = runner.run("1 + 1")
    assert outcome.ok and sent == []
    assert [t for t, _ in outcome.outputs] == ["execute_result"]
