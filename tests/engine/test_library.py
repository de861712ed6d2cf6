"""The engine used as a library (issue 11): settings from a dict, fragments given as text, the guide.

``make_settings(dict)`` merges over the embedded default as a settings file does; ``bare_settings``
starts from SPEC 10's bare defaults (the conformance runner's, SPEC 11). The library example
of the guide (docs/library.md) is run as a program and its printed lines compared with the ones it shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from s2o_kernel.engine import (
    Engine,
    IsolatedSession,
    S2OError,
    Session,
    bare_settings,
    default_settings,
    load_settings,
    make_settings,
    read_toml,
)

ROOT = Path(__file__).resolve().parents[2]


def test_make_settings_merges_over_the_embedded_default() -> None:
    default = default_settings()
    settings = make_settings({"limits": {"time": 1}, "rules": {"operators": {"<<": "off"}}})
    assert settings.allowlist == default.allowlist and "len" in settings.allowlist.split()
    assert settings.limits.time == 1 and settings.limits.loop_iterations == default.limits.loop_iterations
    assert settings.rules.operators == {**default.rules.operators, "<<": "off"}  # merged key by key
    assert settings.profiles == default.profiles
    assert make_settings({}) == default
    assert make_settings({"allowlist": ""}).allowlist == ""
    Session(Engine(make_settings({"limits": {"time": 1}}))).evaluate("len([1, 2])")


def test_bare_settings_start_from_nothing() -> None:
    settings = bare_settings({"limits": {"time": 1}})
    assert settings.allowlist == "" and settings.limits.time == 1
    assert settings.rules.operators == {}  # every operator on, none rewritten
    with pytest.raises(S2OError) as exc:
        Session(Engine(settings)).evaluate("len([1, 2])")
    assert exc.value.code == "unknown-name"
    assert bare_settings(default_settings().to_dict()) == default_settings()


def test_a_dict_and_a_settings_file_give_the_same_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("S2O_SECRET_")]:
        monkeypatch.delenv(name)
    path = tmp_path / "s2o.toml"
    path.write_text('[limits]\ntime = 2\n\n[rules.operators]\n"**" = "on"\n\n[const]\nvat = 0.25\n')
    assert load_settings(path) == make_settings(read_toml(path))
    assert load_settings(path).allowlist == default_settings().allowlist


@pytest.mark.parametrize("bad", ["not an object", ["a"], None])
def test_make_settings_refuses_what_is_not_an_object(bad: object) -> None:
    for build in (make_settings, bare_settings):
        with pytest.raises(S2OError) as exc:
            build(bad)  # type: ignore[arg-type]
        assert (exc.value.code, exc.value.stage) == ("settings", "load")


@pytest.mark.parametrize("text", ['{"var": {"x": 1}}', b'{"var": {"x": 1}}'])
def test_run_fragment_given_json_text_says_to_parse_it(text: str | bytes) -> None:
    session = Session(Engine(make_settings({})))
    run = session.run_fragment(text)
    assert run.code == "errorInAgent" and run.error is not None and run.error.code == "fragment"
    assert "pass the parsed value" in run.error.message and "json.loads" in run.error.message
    assert session.locals == {}
    assert session.run_fragment({"var": {"x": 1}}).code == "success" and session.locals == {"x": 1}


def test_run_fragment_given_json_text_in_the_worker() -> None:
    session = IsolatedSession(make_settings({}))
    try:
        run = session.run_fragment('{"var": {"x": 1}}')
        assert run.error is not None and run.error.code == "fragment" and "json.loads" in run.error.message
    finally:
        session.close()


def test_the_guides_library_examples_print_what_the_guide_shows() -> None:
    page = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    found = re.findall(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", page, re.DOTALL)
    assert len(found) == 2, "the guide's library page lost an example or its printed lines"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("S2O_CONFIG", None)
    for code, shown in found:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == shown
