"""A worker's scratch folder never outlives its parent for good (SPEC 12; :mod:`~s2o_kernel.engine.worker.scratch`).

The confined worker cannot remove its own scratch folder; its parent does when the worker ends. A parent
killed outright (a kernel shut down with ``now=True``, ``SIGKILL``, an out-of-memory kill) used to leave
its empty ``s2o-worker-*`` folder in the temporary folder for good: 155 of them had piled up on one
development machine. Now the next parent to start sweeps every folder whose lock no living process holds,
and never one whose owner lives, nor anything a folder's name only points at.

Each test runs real parents (a Python process holding an ``IsolatedSession``) with ``TMPDIR`` set to the
test's own folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from s2o_kernel.engine.worker import scratch

PARENT = """
import sys
from s2o_kernel.engine import IsolatedSession, default_settings
session = IsolatedSession(default_settings(), fork=sys.argv[1] == "fork")
assert session.evaluate("1 + 1") == 2
print("ready", flush=True)
if sys.stdin.readline().strip() == "close":
    session.close()
print("done", flush=True)
"""


class Parent:
    """A process holding an ``IsolatedSession`` with its temporary folder in ``tmp``."""

    def __init__(self, tmp: Path, mode: str) -> None:
        env = {**os.environ, "TMPDIR": str(tmp)}
        self.proc = subprocess.Popen([sys.executable, "-c", PARENT, mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "done\n"
        assert self.proc.wait(timeout=30) == 0

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def parents(tmp_path: Path) -> Iterator[list[Parent]]:
    started: list[Parent] = []
    yield started
    for parent in started:
        if parent.proc.poll() is None:
            parent.kill()


def leftovers(tmp: Path) -> set[str]:
    return {p.name for p in tmp.iterdir() if p.name.startswith(scratch.PREFIX)}


@pytest.mark.parametrize("mode", ["fork", "exec"])
def test_the_folder_of_a_killed_parent_is_swept_by_the_next_one(tmp_path: Path, parents: list[Parent],
                                                                 mode: str) -> None:
    parents.append(Parent(tmp_path, mode))
    (folder,) = {name for name in leftovers(tmp_path) if not name.endswith(scratch.LOCK_SUFFIX)}
    assert leftovers(tmp_path) == {folder, folder + scratch.LOCK_SUFFIX}
    parents[0].kill()
    assert leftovers(tmp_path) == {folder, folder + scratch.LOCK_SUFFIX}  # nobody removed it: the parent was killed
    parents.append(Parent(tmp_path, mode))
    now = leftovers(tmp_path)
    assert folder not in now and folder + scratch.LOCK_SUFFIX not in now and len(now) == 2  # the new one's own
    parents[1].close()
    assert leftovers(tmp_path) == set()


def test_the_folder_of_a_living_parent_is_never_swept(tmp_path: Path, parents: list[Parent]) -> None:
    parents.append(Parent(tmp_path, "fork"))
    before = leftovers(tmp_path)
    assert scratch.sweep(str(tmp_path)) == []
    assert leftovers(tmp_path) == before and len(before) == 2
    parents.append(Parent(tmp_path, "fork"))  # a second kernel starting sweeps too
    assert before < leftovers(tmp_path)
    parents[0].close()
    parents[1].close()
    assert leftovers(tmp_path) == set()


def test_a_sweep_removes_only_real_folders_and_follows_no_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "s2o-worker-link").symlink_to(elsewhere, target_is_directory=True)
    (tmp / "s2o-worker-link.lock").write_text("")
    (tmp / "s2o-worker-linked-lock").mkdir()
    (tmp / "s2o-worker-linked-lock.lock").symlink_to(elsewhere / "keep.txt")
    (tmp / "s2o-worker-stale").mkdir()
    (tmp / "s2o-worker-stale" / "sub").mkdir()
    (tmp / "s2o-worker-stale" / "sub" / "out").symlink_to(elsewhere, target_is_directory=True)
    (tmp / "s2o-worker-stale.lock").write_text("")
    (tmp / "s2o-worker-old").mkdir()  # no lock file: made before locks, or by a worker started on its own

    assert scratch.sweep(str(tmp)) == [str(tmp / "s2o-worker-stale")]
    assert (elsewhere / "keep.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp.iterdir()) == [
        "s2o-worker-link", "s2o-worker-linked-lock", "s2o-worker-linked-lock.lock", "s2o-worker-old"]


def test_a_made_folder_is_held_until_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    made = scratch.make()
    assert Path(made.path).is_dir() and Path(made.path + scratch.LOCK_SUFFIX).is_file()
    assert scratch.sweep(str(tmp_path)) == []  # held by this process: another descriptor cannot lock it
    made.remove()
    made.remove()
    assert list(tmp_path.iterdir()) == []
