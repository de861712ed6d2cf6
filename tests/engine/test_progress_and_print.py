"""The engine's side of issue 11: a run's loop counts (``engine/run/progress.py``) and the granted ``print``
(``guards.guarded_print``), in-process."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, default_settings, make_settings
from s2o_kernel.engine.run.progress import RunProgress


def test_loop_passes_are_counted_per_run(session_factory: Any) -> None:
    s = session_factory(allowlist="range\nlist")
    assert (s.progress.passes, s.progress.longest) == (0, 0)
    run = s.run_fragment({"for": {"item": "i", "in": "{ list(range(3)) }", "commands": [
        {"for": {"item": "j", "in": "{ list(range(5)) }", "commands": []}}]}})
    assert run.code == "success", run.error
    assert (s.progress.passes, s.progress.longest) == (3 + 3 * 5, 5)
    s.run_fragment({"while": {"condition": "{ False }", "commands": []}})  # a new run starts from nothing
    assert (s.progress.passes, s.progress.longest) == (0, 0)
    run = s.run_fragment({"while": {"condition": "{ True }", "commands": []}})
    assert run.error is not None and run.error.code == "loop-limit"
    assert s.progress.longest == s.settings.limits.loop_iterations  # the pass past the limit never starts


def test_progress_is_readable_from_another_thread_while_a_run_goes_on() -> None:
    s = Session(Engine(make_settings({"allowlist": "s2o_kernel.examples.slow_answer as slow_answer"})))
    seen: list[int] = []
    started = threading.Event()

    def watch() -> None:
        started.wait(5)
        for _ in range(200):
            seen.append(s.progress.passes)
            if s.progress.passes >= 3:
                return
            threading.Event().wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started.set()
    run = s.run_fragment({"for": {"item": "i", "in": "{ [1, 2, 3, 4] }",
                                  "commands": [{"var": {"w": "{ await slow_answer(0.05) }"}}]}})
    watcher.join(10)
    assert run.code == "success", run.error
    assert seen == sorted(seen) and 0 < max(seen) <= 4


def test_report_shape() -> None:
    p = RunProgress()
    p.note_pass(1)
    p.note_pass(2)
    assert p.report(2.5, 30, 100) == {"elapsed": 2.5, "time_limit": 30.0, "passes": 2, "longest": 2,
                                      "loop_limit": 100}
    assert type(p.report(2, 30, 100)["elapsed"]) is float


def test_print_is_in_the_default_allowlist_and_writes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    s = Session(Engine(default_settings()))
    assert s.evaluate("print('a', 1, [2], sep='-', end='!')") is None
    assert capsys.readouterr().out == "a-1-[2]!"


@pytest.mark.parametrize(("expr", "code"), [
    ("print('x', file=None)", "runtime"),  # no file: a run writes to its cell only
    ("print('x', flush=True)", "runtime"),
    ("print('x', sep=1)", "runtime"),
    ("print('x', end=b'')", "runtime"),
    ("print(sys.secret['KEY'])", "not-allowed"),  # a secret refuses to become text
])  # fmt: skip
def test_print_refuses_other_files_odd_separators_and_secrets(
    expr: str, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = Session(Engine(default_settings().model_copy(update={"secrets": {"KEY": "sk-42-secret"}})))
    with pytest.raises(S2OError) as info:
        s.evaluate(expr)
    assert info.value.code == code, info.value
    assert "sk-42-secret" not in capsys.readouterr().out + info.value.message


PRINTING = [{"var": {"x": "{ print('hello', 1) }"}}, {"output": "between"},
            {"parallel": [{"var": {"y": "{ print('from a task') }"}}]},
            {"return": "{ print('bye', end='!') }"}]


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_a_runs_printed_text_is_in_its_run_result_or_goes_to_on_print(
        isolated: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31 item 12: a library caller gets a run's printed text in ``RunResult.printed`` in a session as
    in the worker, and nothing of it on the process's own stdout; with ``on_print`` the sink alone gets it,
    as it comes; an expression outside a run still prints to stdout."""
    from s2o_kernel.engine import IsolatedSession

    session = IsolatedSession(default_settings()) if isolated else Session(Engine(default_settings()))
    try:
        run = session.run_fragment(PRINTING)
        assert run.code == "success", run.error
        assert run.printed == "hello 1\nfrom a task\nbye!"
        assert run.outputs == [{"type": "text", "text": "between"}]
        got: list[str] = []
        run = session.run_fragment(PRINTING, on_print=got.append)
        assert run.printed == "" and "".join(got) == "hello 1\nfrom a task\nbye!"
        failed = session.run_fragment([{"var": {"x": "{ print('before') }"}}, {"fail": "no"}])
        assert failed.code == "failCommand" and failed.printed == "before\n"
        assert capsys.readouterr().out == ""
    finally:
        if isolated:
            session.close()
