"""A notebook reopened in a new kernel is hot: the kernel keeps what its worker compiled in the user's code
cache (issue 12; ``s2o_kernel/engine/run/codecache.py``), through real kernels started by ``jupyter_client``.

The first kernel runs three cells and writes their expressions; a second kernel on the same folder runs
the same cells and writes nothing (its worker compiled none of them), then writes a new cell's. A kernel
with ``S2O_CODE_CACHE=off`` writes nothing anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_harness import execute, result_data, running_kernel

pytestmark = pytest.mark.timeout(180)

CELLS = ['{"var": {"price": 4, "quantity": 3}}', "price * quantity", '"{ f\'{price} x {quantity}\' }"']


def _run(kernels_dir: Path, cwd: Path, env: dict[str, str], cells: list[str]) -> list[str]:
    shown = []
    with running_kernel(kernels_dir, cwd, env=env) as (_, kc):
        for cell in cells:
            reply, outputs = execute(kc, cell)
            assert reply["status"] == "ok", reply
            if cell != CELLS[0]:
                shown.append(result_data(outputs)["text/plain"])
    return shown


def _sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.glob("*.s2oc")}


def test_a_second_kernel_finds_what_the_first_compiled(kernels_dir: Path, kernel_cwd: Path, tmp_path: Path) -> None:
    folder = tmp_path / "compiled"
    env = {"S2O_CODE_CACHE": str(folder)}
    first = _run(kernels_dir, kernel_cwd, env, CELLS)
    written = _sizes(folder)
    assert len(written) == 1 and next(iter(written.values())) > 0
    assert oct((folder / "key").stat().st_mode & 0o777) == "0o600"
    assert _run(kernels_dir, kernel_cwd, env, CELLS) == first == ["12", "'4 x 3'"]
    assert _sizes(folder) == written
    assert _run(kernels_dir, kernel_cwd, env, [CELLS[0], "price + quantity"]) == ["7"]
    assert _sizes(folder).keys() == written.keys() and _sizes(folder) != written


def test_a_kernel_with_the_cache_off_writes_nothing(kernels_dir: Path, kernel_cwd: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"S2O_CODE_CACHE": "off", "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    assert _run(kernels_dir, kernel_cwd, env, CELLS) == ["12", "'4 x 3'"]
    assert not (home / ".cache" / "s2o-kernel").exists()
