"""Files the kernel writes beside a target never follow a link another local user planted (issue 30,
"Notation and files").

``%state save FILE`` wrote ``FILE.tmp-<pid>`` with ``open(..., "w")`` and renamed it over ``FILE``: a
link planted at that predictable name (a shared folder, ``/tmp``) made the kernel write the state into
the link's target, or create the target when the link dangled, and the link then took ``FILE``'s
place. The demo database was made the same way (``.demo-<pid>.sqlite`` in the data directory). Both
now write a new file under a random name made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (mode 0600) and
rename it in place. The tests plant links at the old names, at names made predictable on purpose
(the random source patched), and at the target itself, and check that every link's target is
untouched and that saving still works.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from fake_session import API, FakeSession

from s2o_kernel.engine.outside import db
from s2o_kernel.kernel.magics import files
from s2o_kernel.kernel.runner import CellRunner

TOKEN = "0123456789abcdef" * 2
VICTIM = "another user's file\n"


def _victims(tmp_path: Path) -> tuple[Path, Path]:
    """A file of someone else's and a path where nothing is yet (a dangling link's target)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text(VICTIM)
    return victim, outside / "created-by-the-kernel"


def _plant(folder: Path, names: list[str], victim: Path, dangling: Path) -> dict[Path, Path]:
    """Links at each name: odd ones to ``victim``, even ones dangling; name → target."""
    links = {}
    for i, name in enumerate(names):
        link, target = folder / name, (victim if i % 2 else dangling)
        link.symlink_to(target)
        links[link] = target
    return links


def _untouched(links: dict[Path, Path], victim: Path, dangling: Path) -> None:
    assert victim.read_text() == VICTIM and not dangling.exists() and not os.path.lexists(dangling)
    for link, target in links.items():
        assert link.is_symlink() and os.readlink(link) == str(target), link


def _runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CellRunner, FakeSession, Path]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    session = FakeSession()
    session.agent_vars.update(token="s3cret", visits=3)
    session.conv_vars["turns"] = [1, 2]
    return CellRunner(session, API), session, work


def _saved(path: Path) -> None:
    assert json.loads(path.read_text()) == {"agent": {"token": "s3cret", "visits": 3}, "conv": {"turns": [1, 2]}}
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600


def test_state_save_follows_no_link_at_the_names_it_used_to_write(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    runner, _, work = _runner(tmp_path, monkeypatch)
    victim, dangling = _victims(tmp_path)
    names = [f"state.json.tmp-{os.getpid()}", f"state.json.tmp-{os.getpid() + 1}", "state.json.tmp",
             ".state.json.tmp", "state.json~", "state.json.new"]
    links = _plant(work, names, victim, dangling)
    out = runner.run("%state save state.json")
    assert out.ok, out.error
    _saved(work / "state.json")
    _untouched(links, victim, dangling)
    assert sorted(p.name for p in work.iterdir()) == sorted([*names, "state.json"])  # no temporary file left


def test_a_link_at_a_name_made_predictable_is_refused_not_followed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With the random source patched the name is known in advance: the file is then not made at all
    (``O_EXCL | O_NOFOLLOW``), and the planted link and its target stay as they were."""
    runner, _, work = _runner(tmp_path, monkeypatch)
    victim, dangling = _victims(tmp_path)
    monkeypatch.setattr(files.secrets, "token_hex", lambda n=None: TOKEN)
    for target in (victim, dangling):
        (work / f".state.json.{TOKEN}.tmp").unlink(missing_ok=True)
        links = _plant(work, [f".state.json.{TOKEN}.tmp"], target, target)
        out = runner.run("%state save state.json")
        assert out.error is not None and out.error.ename == "magic" and "state.json" in out.error.evalue
        _untouched(links, victim, dangling)
        assert not (work / "state.json").exists()


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, session, work = _runner(tmp_path, monkeypatch)
    victim, dangling = _victims(tmp_path)
    (work / "state.json").symlink_to(victim)
    out = runner.run("%state save state.json")
    assert out.ok, out.error
    _saved(work / "state.json")
    assert victim.read_text() == VICTIM and not dangling.exists()
    session.reset()
    assert runner.run("%state load state.json").ok and session.agent_vars == {"token": "s3cret", "visits": 3}


def test_saving_again_replaces_the_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, session, work = _runner(tmp_path, monkeypatch)
    for visits in range(3):
        session.agent_vars["visits"] = visits
        assert runner.run("%state save state.json").ok
        assert json.loads((work / "state.json").read_text())["agent"]["visits"] == visits
    assert [p.name for p in work.iterdir()] == ["state.json"]


def test_the_demo_database_follows_no_planted_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv(db.DATA_DIR_ENV, str(data))
    victim, dangling = _victims(tmp_path)
    names = [f".demo-{os.getpid()}.sqlite", f".demo-{os.getpid()}.sqlite-journal"]
    links = _plant(data, names, victim, dangling)
    path = db.demo_database()
    assert path == data / "demo.sqlite" and path.read_bytes().startswith(b"SQLite format 3\0")
    _untouched(links, victim, dangling)
    assert sorted(p.name for p in data.iterdir()) == sorted([*names, "demo.sqlite"])
