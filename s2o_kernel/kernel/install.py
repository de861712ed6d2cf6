"""Install the s2o kernelspec: ``python -m s2o_kernel install``.

The wheel already ships ``share/jupyter/kernels/s2o`` (argv ``python``), which
is right when Jupyter runs from the same environment. For a Jupyter living in
another environment the spec must name *this* interpreter, so the installer
writes the absolute ``sys.executable`` into ``argv`` (jupyter_client would
otherwise replace a bare ``python`` with its own interpreter, and the kernel
would die with ``No module named s2o_kernel``).

Behaviour follows ``ipykernel.kernelspec``: the spec directory is staged in a
temporary directory and handed to
``jupyter_client.kernelspec.KernelSpecManager.install_kernel_spec``, which
replaces an existing spec of the same name. Without ``--user``,
``--sys-prefix`` or ``--prefix`` the default is ``--user`` for a normal user
and ``--sys-prefix`` for root (as bash_kernel and echo_kernel do).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

KERNEL_NAME = "s2o"
DISPLAY_NAME = "Search2o expressions"

#: Kernel names Jupyter accepts (jupyter_client ``_kernel_name_pat``, lower case).
_NAME_RE = re.compile(r"^[a-z0-9._-]+$")

_LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")


#: The kernelspec folder at the top of a checkout (next to ``s2o_kernel/``).
CHECKOUT_KERNELSPEC = Path(__file__).resolve().parents[2] / "kernelspec"


def resource_dir() -> Path:
    """The kernelspec directory (``kernel.json`` and the three logos) this installation ships.

    An installed wheel holds it inside the package (``s2o_kernel/kernel/kernelspec``, mapped
    there from the top-level ``kernelspec/`` folder when the wheel is built); a checkout (or an
    editable install) reads the top-level ``kernelspec/`` folder.
    """
    packaged = Path(str(resources.files("s2o_kernel.kernel") / "kernelspec"))
    return packaged if (packaged / "kernel.json").is_file() else CHECKOUT_KERNELSPEC


def valid_name(name: str) -> bool:
    """True when ``name`` is a valid kernel name (``^[a-z0-9._-]+$``)."""
    return bool(_NAME_RE.match(name))


def kernel_dict(
    executable: str | None = None,
    display_name: str = DISPLAY_NAME,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The kernel.json content, with an absolute interpreter path in argv."""
    exe = os.path.abspath(executable or sys.executable)
    spec: dict[str, Any] = {
        "argv": [exe, "-m", "s2o_kernel", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "s2o",
        "interrupt_mode": "signal",
        "metadata": {},
    }
    if env:
        spec["env"] = dict(env)
    return spec


def write_kernel_spec(
    path: str | os.PathLike[str] | None = None,
    display_name: str = DISPLAY_NAME,
    env: dict[str, str] | None = None,
    executable: str | None = None,
) -> str:
    """Stage a complete kernelspec directory at ``path`` (a new temp dir by default)."""
    if path is None:
        path = Path(tempfile.mkdtemp(suffix="_kernels")) / KERNEL_NAME
    dest = Path(path)
    dest.mkdir(parents=True, exist_ok=True)
    src = resource_dir()
    for logo in _LOGOS:
        target = dest / logo
        shutil.copyfile(src / logo, target)
        os.chmod(target, 0o644)
    with open(dest / "kernel.json", "w", encoding="utf-8") as fh:
        json.dump(kernel_dict(executable, display_name, env), fh, indent=1)
        fh.write("\n")
    return str(dest)


def install(
    *,
    user: bool = False,
    prefix: str | None = None,
    kernel_name: str = KERNEL_NAME,
    display_name: str | None = None,
    env: dict[str, str] | None = None,
    kernel_spec_manager: Any = None,
) -> str:
    """Install the kernelspec and return the directory it was installed to."""
    from jupyter_client.kernelspec import KernelSpecManager

    kernel_name = kernel_name.lower()
    if not valid_name(kernel_name):
        raise ValueError(
            f"Invalid kernel name {kernel_name!r}: use only letters, digits, '.', '_' and '-'."
        )
    if user and prefix:
        raise ValueError("Choose either --user or --prefix/--sys-prefix, not both.")
    if display_name is None:
        display_name = DISPLAY_NAME if kernel_name == KERNEL_NAME else kernel_name
    ksm = kernel_spec_manager if kernel_spec_manager is not None else KernelSpecManager()
    staging = tempfile.mkdtemp(suffix="_s2o_kernelspec")
    try:
        path = write_kernel_spec(Path(staging) / kernel_name, display_name, env)
        return ksm.install_kernel_spec(path, kernel_name=kernel_name, user=user, prefix=prefix)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _is_root() -> bool:
    try:
        return os.geteuid() == 0
    except AttributeError:  # Windows
        return False


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m s2o_kernel install``."""
    parser = argparse.ArgumentParser(
        prog="python -m s2o_kernel install",
        description="Install the s2o Jupyter kernelspec for this Python interpreter.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--user",
        action="store_true",
        help="install for the current user (default when not root)",
    )
    where.add_argument(
        "--sys-prefix",
        action="store_const",
        const=sys.prefix,
        dest="prefix",
        help=f"install into this environment ({sys.prefix}); default for root",
    )
    where.add_argument(
        "--prefix", type=str, dest="prefix", help="install under PREFIX/share/jupyter/kernels"
    )
    parser.add_argument(
        "--name",
        type=str,
        default=KERNEL_NAME,
        help=f"kernel name (default {KERNEL_NAME!r}; letters, digits, '.', '_', '-')",
    )
    parser.add_argument("--display-name", type=str, default=None, help="name shown in Jupyter")
    parser.add_argument(
        "--env",
        action="append",
        nargs=2,
        metavar=("VAR", "VALUE"),
        default=None,
        help="environment variable for the kernel (e.g. --env S2O_CONFIG /path/s2o.toml)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m s2o_kernel install ...``: install the kernelspec; the exit status (1 when it cannot be written)."""
    parser = build_parser()
    opts = parser.parse_args(sys.argv[1:] if argv is None else argv)
    name = opts.name.lower()
    if not valid_name(name):
        parser.error(f"invalid --name {opts.name!r}: use only letters, digits, '.', '_' and '-'")
    user = opts.user
    prefix = opts.prefix
    if not user and prefix is None:
        if _is_root():
            prefix = sys.prefix
        else:
            user = True
    env = dict(opts.env) if opts.env else None
    try:
        dest = install(
            user=user, prefix=prefix, kernel_name=name, display_name=opts.display_name, env=env
        )
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.errno == errno.EACCES and not user:
            print("Perhaps you want --user or --sys-prefix?", file=sys.stderr)
        return 1
    print(f"Installed kernelspec {name} in {dest}")
    return 0
