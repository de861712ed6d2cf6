"""The shown trace (SPEC 14, issue 33): ``kernel/trace_view`` on traces the engine made (a replayed run, a run
whose values try to be html), without a kernel.

``--times`` shows each span's duration, a replayed call's as recorded in the cassette; without it nothing of
time or replay shows, so the same run shows the same text and html live and replayed. Values that look like
html are text in the html view; the html has nothing but ``details``, ``summary`` and ``div`` (and ``open``).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.engine import Engine, Session, make_settings
from s2o_kernel.kernel import trace_view

FRAGMENT = [{"db": {"profile": "demo", "sql": "SELECT id FROM orders WHERE id < 3"}},
            {"llm": {"profile": "scripted", "input": "Hello"}}]


@pytest.fixture
def recorded(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Path]:
    """A run recorded into a cassette, and the same run replayed from it."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    cassette = tmp_path / "v.cassette.json"

    def run(mode: str) -> Any:
        return Session(Engine(make_settings({"replay": {"mode": mode, "cassette": str(cassette)}}))).run_fragment(
            FRAGMENT)
    return run("record"), run("replay"), cassette


def test_times_are_shown_only_when_asked_and_a_replayed_call_shows_its_recorded_time(
        recorded: tuple[Any, Any, Path]) -> None:
    live, replayed, cassette = recorded
    assert live.code == replayed.code == "success"
    assert trace_view.bundle(live.trace) == trace_view.bundle(replayed.trace)  # the same shown, live or replayed
    timed = trace_view.bundle(replayed.trace, times=True)["text/plain"].splitlines()
    entries = json.loads(cassette.read_text())["entries"]
    db_line = next(line for line in timed if line.strip().startswith("db demo"))
    assert db_line.endswith(f"· {entries[0]['duration'] * 1000:.1f} ms (replayed; as recorded)"), db_line
    assert all(" ms" in line for line in timed if " · " in line)
    live_timed = trace_view.bundle(live.trace, times=True)["text/plain"]
    assert "replayed" not in live_timed and "replayed" not in "".join(trace_view.bundle(replayed.trace).values())


def test_values_that_look_like_html_are_text_in_the_html_view() -> None:
    session = Session(Engine(make_settings({})))
    run = session.run_fragment([{"var": {"x": "{ '<script>alert(1)</script><img src=x onerror=alert(2)>' }",
                                         "y": "{ '</summary></details><b style=\"color:red\">bold</b>' }"}}])
    assert run.code == "success", run.error
    html = trace_view.bundle(run.trace)["text/html"]
    parser = Tags()
    parser.feed(html)
    assert parser.tags == {"details", "summary", "div"} and parser.attributes == set()  # nothing is open here
    assert "x = '<script>alert(1)</script><img src=x onerror=alert(2)>'" in parser.text
    assert """y = '</summary></details><b style="color:red">bold</b>'""" in parser.text


class Tags(HTMLParser):
    """Every tag and attribute name in html, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text += data


def test_an_error_shows_once_where_it_happened_and_the_chain_above_it_is_marked() -> None:
    run = Session(Engine(make_settings({}))).run_fragment({"functions": {
        "main": {"commands": [{"call": {"function": "a"}}]},
        "a": {"commands": [{"call": {"function": "b"}}]},
        "b": {"commands": [{"var": {"x": "{ 1 / 0 }"}}]}}})
    text = trace_view.bundle(run.trace)["text/plain"]
    assert text.count("error runtime at functions.b.commands[0].var.x: ZeroDivisionError") == 1
    assert text.count("✗ runtime") == 5  # call, function a, call, function b, var
    assert text.splitlines()[0] == "run (agent) · ✗ errorInAgent"


def test_a_shown_trace_stops_at_its_bound_and_says_how_many_spans_it_left_out() -> None:
    session = Session(Engine(make_settings({"limits": {"definition_length": 200_000}})))
    run = session.run_fragment([{"var": {f"v{i}": "{ 'x' * 150 }" for i in range(30)}} for i in range(200)])
    assert run.code == "success", run.error
    shown = trace_view.bundle(run.trace)
    last = shown["text/plain"].splitlines()[-1]
    assert last.startswith("… ") and last.endswith(" more spans not shown here: %trace save FILE writes the whole trace")
    assert len(shown["text/plain"]) < 300_000 and len(shown["text/html"]) < 2_000_000
    assert "more spans not shown here" in shown["text/html"]
