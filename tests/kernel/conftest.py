"""Fixtures shared by the kernel tests.

For tests that start real kernels, a kernelspec and a working directory, both module-scoped, so each
test module's kernel gets its own (a kernel keeps files of its working directory between cells:
``%run``, ``%state``, ``%config``). For unit tests of the kernel's own logic, a stand-in session
(``tests/support/fake_session.py``) and a :class:`CellRunner` over it, fresh for each test; a module
that needs another ``session`` or ``runner`` defines its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_session import API, FakeSession
from kernel_harness import install_spec

from s2o_kernel.kernel.runner import CellRunner


@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prefix with the ``s2o-test`` kernelspec installed (this checkout's package)."""
    return install_spec(tmp_path_factory.mktemp("prefix"))


@pytest.fixture(scope="module")
def kernel_cwd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working directory of the module's kernel (files for %run, %state, %config)."""
    return tmp_path_factory.mktemp("cwd")


@pytest.fixture
def session() -> FakeSession:
    """A fresh stand-in session."""
    return FakeSession()


@pytest.fixture
def runner(session: FakeSession) -> CellRunner:
    """A cell runner over the stand-in ``session``."""
    return CellRunner(session, API)
