"""The wheel ships the kernelspec twice: as shared data for Jupyter and inside the package for the installer.

``pip install`` registers the kernel from ``share/jupyter/kernels/s2o`` (the wheel's shared data,
mapped from the top-level ``kernelspec/`` folder); ``python -m s2o_kernel install`` reads its copy
inside the package (``s2o_kernel/kernel/kernelspec``), so it works from an installed wheel, not
only from a checkout. The wheel is built with ``pip wheel`` as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC_FILES = {"kernel.json", "logo-32x32.png", "logo-64x64.png", "logo-svg.svg"}

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(ROOT), "-w", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("s2o_kernel-*.whl")
    return built


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def test_wheel_holds_the_kernelspec_as_shared_data_and_in_the_package(wheel: Path) -> None:
    names = _names(wheel)
    data = {n.rpartition("/")[2] for n in names if "/data/share/jupyter/kernels/s2o/" in n}
    assert data == SPEC_FILES
    packaged = {n.rpartition("/")[2] for n in names if n.startswith("s2o_kernel/kernel/kernelspec/")}
    assert packaged == SPEC_FILES
    assert not any("resources/kernelspec" in n for n in names)
    with zipfile.ZipFile(wheel) as zf:
        shipped = json.loads(zf.read("s2o_kernel/kernel/kernelspec/kernel.json"))
    assert shipped == json.loads((ROOT / "kernelspec" / "kernel.json").read_text())


def test_installer_works_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # The installed package first on the path; its dependencies from this environment. The
    # working directory is not the checkout, so the checkout's kernelspec/ cannot be found.
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [sys.executable, "-c", "import s2o_kernel.kernel.install as i; print(i.__file__); print(i.resource_dir())"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    module_file, spec_dir = where.stdout.split()
    assert Path(module_file).is_relative_to(target) and Path(spec_dir).is_relative_to(target), where.stdout
    prefix = tmp_path / "prefix"
    proc = subprocess.run(
        [sys.executable, "-m", "s2o_kernel", "install", "--prefix", str(prefix), "--name", "s2o-wheel"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    installed = prefix / "share" / "jupyter" / "kernels" / "s2o-wheel"
    assert {p.name for p in installed.iterdir()} == SPEC_FILES
    assert json.loads((installed / "kernel.json").read_text())["argv"][0] == os.path.abspath(sys.executable)
