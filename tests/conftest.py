"""Shared fixtures: engines and sessions built from settings dicts."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from s2o_kernel.engine import Engine, Session, bare_settings, default_settings

HELPERS_DIR = Path(__file__).parent / "conformance"
#: Helpers shared by the test groups (engine/, kernel/, security/, conformance/): the kernel harness,
#: the containment judge, host objects for the reach tests, the confinement probe.
SUPPORT_DIR = Path(__file__).parent / "support"
for _folder in (HELPERS_DIR, SUPPORT_DIR):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

#: Kernels and engines started by the tests keep their compiled expressions in a folder of this run's,
#: never in the user's cache (``s2o_kernel/engine/codecache.py``).
CODE_CACHE = tempfile.mkdtemp(prefix="s2o-code-cache-")
os.environ["S2O_CODE_CACHE"] = CODE_CACHE


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(CODE_CACHE, ignore_errors=True)


def make_session(**settings) -> Session:
    """A fresh session on settings given as SPEC-10 keyword arguments (allowlist defaults to empty)."""
    settings.setdefault("allowlist", "")
    return Session(Engine(bare_settings(settings)))


@pytest.fixture
def session_factory():
    return make_session


@pytest.fixture
def teaching():
    """A session on the embedded default configuration."""
    return Session(Engine(default_settings()))


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster on 127.0.0.1 for the session (``tests/support/postgres.py``); fails,
    never skips, when the server binaries are missing (naming scripts/install-system-deps.sh)."""
    from postgres import PostgresCluster

    cluster = PostgresCluster()
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def http_server():
    """A real HTTP server on 127.0.0.1, port chosen by the OS (``tests/support/http_fixture.py``)."""
    from http_fixture import HttpServer

    server = HttpServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """``S2O_DATA_DIR`` in a fresh folder: the demo database is made there on first use."""
    monkeypatch.setenv("S2O_DATA_DIR", str(tmp_path / "s2o-data"))
    return tmp_path / "s2o-data"
@pytest.fixture(scope="session", autouse=True)
def _history_file(tmp_path_factory: pytest.TempPathFactory):
    """Kernels started by the tests keep their history in a file of their own, not the user's."""
    import os

    from s2o_kernel.kernel.history import HISTORY_ENV

    saved = os.environ.get(HISTORY_ENV)
    os.environ[HISTORY_ENV] = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    yield
    if saved is None:
        os.environ.pop(HISTORY_ENV, None)
    else:
        os.environ[HISTORY_ENV] = saved
