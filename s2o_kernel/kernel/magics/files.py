"""Files that magics read and write (``%run``, ``%config``, ``%state``), relative to the kernel's working directory.

Every failure is ``S2OError("magic")`` naming the file and the working directory; a file that is
not valid JSON is ``S2OError("syntax")`` with its line and column (SPEC 9.1).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument


def resolve(path: str) -> str:
    """``path`` (``~`` expanded) relative to the kernel's working directory."""
    return os.path.join(os.getcwd(), os.path.expanduser(path))


def cannot(verb: str, path: str, exc: OSError) -> S2OError:
    """``magic``: cannot VERB PATH: reason (with the kernel's working directory)."""
    reason = exc.strerror or type(exc).__name__
    return S2OError("magic", f"cannot {verb} {path}: {reason} (the kernel's working directory is {os.getcwd()})")


def read_text(path: str) -> str:
    """The UTF-8 text of ``path``."""
    try:
        with open(resolve(path), encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise S2OError("magic", f"cannot read {path}: it is not UTF-8 text") from None
    except OSError as exc:
        raise cannot("read", path, exc) from None


def read_json(path: str) -> Any:
    """The JSON value in ``path``; ``syntax`` (with line and column) when it is not JSON."""
    return parse_json_argument(read_text(path), path)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, all or nothing (a temporary file, then a rename)."""
    target = resolve(path)
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise cannot("write", path, exc) from None
