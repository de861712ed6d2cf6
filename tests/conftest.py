"""Shared fixtures: engines and sessions built from settings dicts."""

from __future__ import annotations

import gc
import os
import shutil
import signal
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
#: never in the user's cache (``s2o_kernel/engine/run/codecache.py``).
CODE_CACHE = tempfile.mkdtemp(prefix="s2o-code-cache-")
os.environ["S2O_CODE_CACHE"] = CODE_CACHE

#: Python bytecode of the interpreters the tests start (kernels, containment workers, the CLIs under test, xdist's
#: workers) when the environment says not to write any (``PYTHONDONTWRITEBYTECODE``, set on the CI machine). They
#: run this checkout's ``s2o_kernel``, which has no ``.pyc`` beside it, so each compiled the whole package from
#: source again (0.1 s of every containment worker's start: 30 s of the isolated conformance run's 130). With
#: ``PYTHONPYCACHEPREFIX`` in a folder of this run's, each module is compiled once per run, and nothing is written
#: in the tree, as the setting wants. The first pytest process makes the folder and removes it; its xdist workers
#: inherit it. Nothing changes when the environment writes bytecode anyway or names its own prefix.
PYCACHE: str | None = None
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    PYCACHE = tempfile.mkdtemp(prefix="s2o-test-pycache-")
    os.environ["PYTHONPYCACHEPREFIX"] = PYCACHE
    del os.environ["PYTHONDONTWRITEBYTECODE"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(CODE_CACHE, ignore_errors=True)
    if PYCACHE is not None:
        shutil.rmtree(PYCACHE, ignore_errors=True)


#: The modules that take longest, longest first (about 200, 110, 60 and 30 to 20 s each on two workers of a 2-core
#: machine, docs/performance.md, "The test suite's time"). The README's test command runs the suite on two xdist
#: workers with ``--dist loadscope``: every module (every notebook) runs whole on one worker, and the workers take
#: modules in collection order as they finish. These are collected first, so that no long module starts last and
#: keeps one worker busy while the other has nothing left; every other module keeps its place after them.
LONGEST_FIRST = (
    "tests/conformance/test_conformance_isolated.py",
    "tests/security/test_adversarial.py",
    "tests/security/test_kernel_adversarial.py",
    "tests/browser/test_jupyterlab.py",
    "tests/kernel/test_nbval_diffs.py",
    "tests/security/test_fuzz.py",
    "tests/engine/test_worker.py",
    "tests/kernel/test_console_pty.py",
    "tests/kernel/test_protocol.py",
    "tests/engine/test_interrupts.py",
    "tests/engine/test_sync_commands.py",
)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Take Hypothesis's garbage-collector callback out after each test.

    Once a property test has run in a process, Hypothesis keeps a Python function in ``gc.callbacks`` (to time
    collections) for the rest of the process. An exception sent to the main thread from outside (the watchdog's
    time limit or interrupt, a SIGINT) that arrives while a collection runs it is printed as "Exception ignored
    in gc_callback" and lost, so a test whose run must be interrupted sees it go on to its time limit: 7 of 40
    such interrupts were lost with the callback in place, none without. Which tests ran before which in one
    process decided it (tests/security/test_hot_path_redteam.py's SIGINT test failed in every run on two xdist
    workers). Hypothesis adds its callback again when a property test next asks for the time."""
    junkdrawer = sys.modules.get("hypothesis.internal.conjecture.junkdrawer")
    if junkdrawer is not None and getattr(junkdrawer, "_gc_initialized", False):
        gc.callbacks[:] = [cb for cb in gc.callbacks if getattr(cb, "__module__", None) != junkdrawer.__name__]
        junkdrawer._gc_initialized = False


def pytest_configure(config: pytest.Config) -> None:
    # Tests send SIGINT to this process (``_thread.interrupt_main``, ``signal.pthread_kill``) and need Python's
    # handler. A shell starts a background job (``cmd &``, nohup) with SIGINT ignored, Python then leaves it
    # ignored, and xdist's workers inherit that: such a test saw nothing arrive. Runs in every xdist worker too.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # xdist's loadscope hands modules out largest first by *number of tests* unless told not to; here that puts
    # the longest modules (a few tests each) last. Collection order, with LONGEST_FIRST leading, is the order wanted.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Collect the modules of :data:`LONGEST_FIRST` first, in its order; the sort is stable, so every module keeps
    its tests in their order and the other modules keep theirs."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}

    def place(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(config.rootpath).as_posix(), len(rank))
        except ValueError:  # outside the rootdir
            return len(rank)

    items.sort(key=place)


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
