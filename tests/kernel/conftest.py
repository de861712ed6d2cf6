"""Fixtures shared by the kernel tests that start real kernels: a kernelspec and a working directory.

Both are module-scoped, so each test module's kernel gets its own (a kernel keeps files of its working
directory between cells: ``%run``, ``%state``, ``%config``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_harness import install_spec


@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prefix with the ``s2o-test`` kernelspec installed (this checkout's package)."""
    return install_spec(tmp_path_factory.mktemp("prefix"))


@pytest.fixture(scope="module")
def kernel_cwd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working directory of the module's kernel (files for %run, %state, %config)."""
    return tmp_path_factory.mktemp("cwd")
