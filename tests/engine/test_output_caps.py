"""Output caps (SPEC 12) and output parts in the engine and its worker (issue 8).

A run's ``output`` parts are capped: ``limits.output_part_bytes`` per part, ``limits.output_parts``
and ``limits.output_bytes`` per run; past a cap the run stops with ``output-limit``, which
``onError`` does not handle. With an output sink the parts go to the sink alone (nothing keeps
them); the worker sends each as an event and its reply never carries them again. Image parts are
``image/png`` or ``image/jpeg`` only (SPEC 9). Settings files are never quoted in errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.engine import (
    Engine,
    IsolatedSession,
    S2OError,
    Session,
    bare_settings,
    default_settings,
    make_settings,
    read_toml,
)
from s2o_kernel.engine import settings as settings_module
from s2o_kernel.engine.run.budget import OutputBudget, part_bytes
from s2o_kernel.engine.settings import MAX_OUTPUT_PART

pytestmark = pytest.mark.timeout(120)


def settings_with(**limits: Any) -> Any:
    return make_settings({"limits": limits})


def loop(n: int, text: str) -> dict[str, Any]:
    return {"for": {"item": "i", "in": f"{{ range({n}) }}", "commands": [{"output": f"{{ {text} }}"}]}}


# -- the budget ------------------------------------------------------------------------------------


def test_part_bytes_counts_utf8_bytes_of_the_content_only() -> None:
    assert part_bytes({"type": "text", "text": "abc"}) == 3
    assert part_bytes({"type": "text", "text": "é€😀"}) == 2 + 3 + 4
    assert part_bytes({"type": "text", "text": "\udc80"}) == 3  # a lone surrogate counts as it would be written
    assert part_bytes({"type": "image", "data": "aGk=", "mime": "image/jpeg"}) == 4
    assert part_bytes({"type": "html", "html": "<b>", "extra": 5}) == 3  # only exact str fields count


def test_the_budget_allows_up_to_each_cap_and_counts_nothing_it_refuses() -> None:
    budget = OutputBudget(part_bytes=10, parts=3, total_bytes=25)
    budget.charge({"type": "text", "text": "x" * 10})  # exactly the part cap
    with pytest.raises(S2OError) as exc:
        budget.charge({"type": "text", "text": "x" * 11})
    assert exc.value.code == "output-limit" and "limits.output_part_bytes = 10" in exc.value.message
    budget.charge({"type": "text", "text": "x" * 10})
    with pytest.raises(S2OError) as exc:
        budget.charge({"type": "text", "text": "x" * 6})  # 26 > 25
    assert "limits.output_bytes = 25" in exc.value.message
    assert (budget.count, budget.used) == (2, 20)
    budget.charge({"type": "text", "text": "x" * 5})  # exactly the total cap
    with pytest.raises(S2OError) as exc:
        budget.charge({"type": "text", "text": ""})
    assert "limits.output_parts = 3" in exc.value.message
    assert (budget.count, budget.used) == (3, 25)


def test_output_limits_are_settings_with_spec_defaults() -> None:
    limits = bare_settings({}).limits
    assert (limits.output_part_bytes, limits.output_parts, limits.output_bytes) == (1 << 20, 1000, 16 << 20)
    assert default_settings().limits == limits
    for bad in ({"output_parts": 0}, {"output_bytes": 0}, {"output_part_bytes": 0},
                {"output_part_bytes": MAX_OUTPUT_PART + 1}, {"output_parts": "5"}):
        with pytest.raises(S2OError) as exc:
            bare_settings({"limits": bad})
        assert exc.value.code == "settings" and exc.value.path == f"limits.{next(iter(bad))}"


# -- in-process --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("limits", "fragment", "kept", "named"), [
    ({"output_part_bytes": 100}, loop(3, "'x' * 101"), 0, "limits.output_part_bytes = 100"),
    ({"output_parts": 4}, loop(9, "str(i)"), 4, "limits.output_parts = 4"),
    ({"output_bytes": 250}, loop(9, "'x' * 100"), 2, "limits.output_bytes = 250"),
], ids=["part-bytes", "parts", "total-bytes"])
def test_past_a_cap_the_run_stops_with_output_limit(limits: dict[str, int], fragment: dict[str, Any], kept: int,
                                                    named: str) -> None:
    session = Session(Engine(settings_with(**limits)))
    handled = [{"var": {"agent.before": 1}}, {**fragment, "onError": [{"var": {"agent.handled": True}}]},
               {"var": {"agent.after": 1}}]
    run = session.run_fragment(handled)
    assert (run.code, run.error.code if run.error else None) == ("errorInAgent", "output-limit")
    assert named in run.error.message and run.error.path == "[1].for.commands[0].output"
    assert len(run.outputs) == kept
    assert session.agent_vars == {"before": 1}  # not handled by onError; the run ended there
    assert session.evaluate("1 + 1") == 2


def test_with_a_sink_the_parts_go_to_the_sink_alone() -> None:
    session = Session(Engine(default_settings()))
    got: list[dict[str, Any]] = []
    run = session.run_fragment(loop(3, "str(i)"), on_output=got.append)
    assert run.code == "success" and run.outputs == []
    assert got == [{"type": "text", "text": t} for t in "012"]
    run = session.run_fragment(loop(2, "str(i)"))
    assert run.outputs == [{"type": "text", "text": t} for t in "01"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"image": "aGk=", "mime": "text/html"}, "mime must be image/png or image/jpeg, got 'text/html'"),
    ({"image": "aGk=", "mime": "image/svg+xml"}, "got 'image/svg+xml'"),
    ({"image": "aGk=", "mime": ["image/png"]}, "got ['image/png']"),
    ({"text": "hi", "mime": "image/png"}, "mime goes with an image part only"),
    ({"html": "<b>hi</b>", "mime": "text/html"}, "mime goes with an image part only"),
])
def test_an_output_naming_another_mime_type_is_refused_at_validation(fields: dict[str, Any], message: str) -> None:
    session = Session(Engine(default_settings()))
    got: list[dict[str, Any]] = []
    run = session.run_fragment([{"output": "first"}, {"output": fields}], on_output=got.append)
    assert run.error is not None and (run.error.code, run.error.stage) == ("fragment", "validate")
    assert message in run.error.message and run.error.path == "[1].output.mime"
    assert got == []


def test_image_parts_are_png_by_default_or_jpeg() -> None:
    run = Session(Engine(default_settings())).run_fragment(
        [{"output": {"image": "aGk="}}, {"output": {"image": "aGk=", "mime": "image/jpeg"}}])
    assert run.outputs == [{"type": "image", "data": "aGk=", "mime": "image/png"},
                           {"type": "image", "data": "aGk=", "mime": "image/jpeg"}]


# -- through the worker ----------------------------------------------------------------------------


@pytest.fixture
def isolated() -> Iterator[IsolatedSession]:
    session = IsolatedSession(settings_with(output_parts=5, output_bytes=1 << 30))
    try:
        yield session
    finally:
        session.close()


def test_the_worker_stops_a_run_at_a_cap_and_stays_usable(isolated: IsolatedSession) -> None:
    got: list[dict[str, Any]] = []
    run = isolated.run_fragment(loop(9, "str(i)"), on_output=got.append)
    assert (run.code, run.error.code if run.error else None) == ("errorInAgent", "output-limit")
    assert "limits.output_parts = 5" in run.error.message
    assert got == [{"type": "text", "text": str(i)} for i in range(5)] and run.outputs == []
    assert isolated.restarts == 0 and isolated.evaluate("1 + 1") == 2


def test_the_worker_reply_never_carries_the_parts_again(isolated: IsolatedSession) -> None:
    """Issue 8: the worker died serialising a reply that carried every part a second time."""
    isolated.update_settings({"limits": {"output_parts": 1000}})
    sizes: list[int] = []
    run = isolated.run_fragment(loop(80, "'x' * 1000000"), on_output=lambda part: sizes.append(len(part["text"])))
    assert (run.code, run.error) == ("success", None)  # 80 MB of parts: over the 64 MiB message cap in one reply
    assert sizes == [1_000_000] * 80 and run.outputs == []
    assert isolated.restarts == 0


def test_without_a_sink_the_parts_come_back_in_the_result(isolated: IsolatedSession) -> None:
    run = isolated.run_fragment(loop(3, "str(i)"))
    assert run.outputs == [{"type": "text", "text": t} for t in "012"]
    run = isolated.run_fragment(loop(9, "str(i)"))
    assert run.error is not None and run.error.code == "output-limit" and len(run.outputs) == 5


def test_a_worker_that_sends_parts_past_the_caps_is_restarted() -> None:
    """The parent charges the parts it receives too: a worker past the caps is not trusted."""
    settings = bare_settings({"allowlist": "os\nlen", "allow_unsafe_entries": True,
                              "limits": {"time": 5, "output_parts": 2}})
    session = IsolatedSession(settings)  # request 1 is init, so the next request is 2
    try:
        event = json.dumps({"id": 2, "event": "output", "part": {"type": "text", "text": "forged"}}) + "\n"
        got: list[dict[str, Any]] = []
        run = session.run_fragment({"var": {"n": f"{{ os.write(1, {(event * 3).encode()!r}) }}"}},
                                   on_output=got.append)
        assert run.error is not None and run.error.code == "worker-protocol", run.error
        assert "past the run's output caps" in run.error.message and "limits.output_parts = 2" in run.error.message
        assert len(got) == 2 and session.restarts == 1
        assert session.evaluate("len('abc')") == 3
    finally:
        session.close()


# -- printed text and log lines (red-team finding: they bypassed the caps) ---------------------------


def test_printed_text_counts_against_the_runs_output_bytes_in_the_worker() -> None:
    """A comprehension of prints sent 1.8 GB of ``stdout`` to the front end in 20 s, past every cap: what a
    run prints (guarded ``print`` or host code) counts against ``limits.output_bytes`` in the worker."""
    session = IsolatedSession(settings_with(output_bytes=1 << 20))
    printed: list[str] = []
    session.on_print = printed.append
    try:
        with pytest.raises(S2OError) as exc:
            session.evaluate("len([print('x' * 100000) for i in range(50)])")
        assert exc.value.code == "output-limit" and "limits.output_bytes = 1048576" in exc.value.message
        assert sum(len(t) for t in printed) <= 1 << 20
        run = session.run_fragment(loop(50, "print('y' * 100000)"))
        assert run.error is not None and run.error.code == "output-limit"
        assert session.restarts == 0 and session.evaluate("1 + 1") == 2
        printed.clear()
        session.evaluate("print('fits')")  # each run has its own budget
        assert printed == ["fits\n"]
    finally:
        session.close()


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_log_lines_count_against_the_runs_output_bytes(isolated: bool) -> None:
    """``log`` lines were kept without bound for the whole run (in memory, then in the worker's reply)."""
    settings = settings_with(output_bytes=250)
    session: Any = IsolatedSession(settings) if isolated else Session(Engine(settings))
    try:
        fragment = [{"var": {"agent.before": 1}},
                    {"for": {"item": "i", "in": "{ range(9) }", "commands": [{"log": "{ 'z' * 100 }"}]},
                     "onError": [{"var": {"agent.handled": True}}]}]
        run = session.run_fragment(fragment)
        assert (run.code, run.error.code if run.error else None) == ("errorInAgent", "output-limit")
        assert "limits.output_bytes = 250" in run.error.message
        assert session.agent_vars == {"before": 1}
        assert session.evaluate("1 + 1") == 2
    finally:
        if isolated:
            session.close()


def test_a_worker_that_prints_past_the_caps_is_restarted() -> None:
    """The parent counts printed text too: a worker past ``limits.output_bytes`` is not trusted."""
    settings = bare_settings({"allowlist": "os\nlen", "allow_unsafe_entries": True,
                              "limits": {"time": 5, "output_bytes": 1000}})
    session = IsolatedSession(settings)  # request 1 is init, so the next request is 2
    printed: list[str] = []
    session.on_print = printed.append
    try:
        event = json.dumps({"id": 2, "event": "print", "text": "p" * 600}) + "\n"
        with pytest.raises(S2OError) as exc:
            session.evaluate(f"os.write(1, {(event * 3).encode()!r})")
        assert exc.value.code == "worker-protocol" and "limits.output_bytes = 1000" in exc.value.message
        assert sum(len(t) for t in printed) <= 1000 and session.restarts == 1
        assert session.evaluate("len('abc')") == 3
    finally:
        session.close()


# -- settings files are never quoted ---------------------------------------------------------------


SECRET = "admin:$6$hunter2"


@pytest.mark.parametrize(("text", "message"), [
    (f"{SECRET}\n", "is not valid TOML: a syntax error (line 1, column 6)"),
    ("[hunter2]\n[hunter2]\n", "is not valid TOML: a syntax error (line 2, column 9)"),
    ('a = "hunter2\x01"\n', "is not valid TOML: a syntax error (line 1, column 13)"),
    ("a = 1\na = 2\n", "is not valid TOML: Cannot overwrite a value (line 2, column 6)"),
    ('a = ["hunter2",\n', "is not valid TOML: Invalid value (line 2, column 1)"),  # at its end: where it ends
    ('a = 1\nb = "hunter2', "is not valid TOML: Unterminated string (line 2, column 13)"),
])
def test_a_settings_file_that_is_not_toml_is_not_quoted(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(S2OError) as exc:
        read_toml(path)
    assert (exc.value.code, exc.value.stage) == ("settings", "load")
    assert exc.value.message == f"{path} {message}"  # nothing of the file's text
    assert exc.value.source is None


def test_a_settings_file_that_is_not_utf8_or_too_large_is_refused(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(b'a = "\xff\xfe"\n')
    with pytest.raises(S2OError) as exc:
        read_toml(path)
    assert exc.value.code == "settings" and "not UTF-8" in exc.value.message
    monkeypatch.setattr(settings_module, "MAX_SETTINGS_FILE", 10)
    path.write_text("a = 1\nb = 2\n")
    with pytest.raises(S2OError) as exc:
        read_toml(path)
    assert exc.value.code == "settings" and "too large" in exc.value.message


def test_a_streamed_reply_past_the_caps_in_the_worker_is_the_runs_output_limit() -> None:
    """A model's streamed text is made into parts by the kernel's process (the gateway), not by the worker:
    past ``limits.output_parts`` it ends the run with ``output-limit``, as in-process, and is not blamed on the
    worker (``worker-protocol``, which restarts it)."""
    from s2o_kernel.engine import IsolatedSession, make_settings

    data = {"limits": {"output_parts": 5}, "profiles": {"llm": {"talk": {
        "adapter": "scripted", "model": "s", "script": [{"text": " ".join(["word"] * 40)}]}}}}
    fragment = [{"llm": {"profile": "talk", "input": "hi", "streamOutput": True}}]
    with IsolatedSession(make_settings(data)) as session:
        run = session.run_fragment(fragment)
        assert (run.code, run.error.code) == ("errorInAgent", "output-limit"), run.error
        assert len(run.outputs) == 5 and session.restarts == 0
        assert session.run_fragment({"return": "{ 1 + 1 }"}).value == 2
