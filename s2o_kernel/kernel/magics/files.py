"""Files that magics read and write (``%run``, ``%config``, ``%state``), relative to the kernel's working directory.

Every failure is ``S2OError("magic")`` naming the file and the working directory; a file that is
not valid JSON is ``S2OError("syntax")`` with its line and column (SPEC 9.1). A file a magic is
given may be any file the kernel can read (``%run /etc/shadow``), so an error never quotes a file
that is not valid input: it says what is wrong and where, not what the file holds. Files are read
up to :data:`MAX_MAGIC_FILE` bytes, so no file (``/dev/zero``) can fill the kernel process's memory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Any

from s2o_kernel.bounds import MAX_MAGIC_FILE
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
    """The UTF-8 text of ``path``; ``magic`` when it cannot be read, is over :data:`MAX_MAGIC_FILE` bytes
    or is not UTF-8."""
    try:
        with open(resolve(path), "rb") as fh:
            data = fh.read(MAX_MAGIC_FILE + 1)
    except OSError as exc:
        raise cannot("read", path, exc) from None
    if len(data) > MAX_MAGIC_FILE:
        raise S2OError("magic", f"cannot read {path}: it is larger than {MAX_MAGIC_FILE >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise S2OError("magic", f"cannot read {path}: it is not UTF-8 text") from None


def read_json(path: str) -> Any:
    """The JSON value in ``path``; ``syntax`` with its line and column, not quoting the file, when it
    is not JSON."""
    return parse_json_argument(read_text(path), path, quote=False)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, all or nothing; ``magic`` naming the file when it cannot.

    The text goes to a new file beside ``path`` under a random name (:func:`private_file`), which is
    then renamed over ``path``: a reader finds the old file or the whole new one, and no name another
    local user could plant a link at in advance is ever opened. A link at ``path`` itself is replaced,
    never followed (a rename does not follow links). The file is the user's only (mode 0600).
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise S2OError("magic", f"cannot write {path}: the text holds a character UTF-8 cannot carry") from None
    write_bytes(path, data)


def write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` as :func:`write_text` writes text: all or nothing, the user's only."""
    target = resolve(path)
    tmp = ""
    try:
        fd, tmp = private_file(target)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise cannot("write", path, exc) from None


def private_file(target: str) -> tuple[int, str]:
    """A new, empty file in the folder of ``target``, opened for writing: ``(descriptor, path)``.

    Its name is ``target``'s with a random suffix (128 bits from :mod:`secrets`), so nobody can name it
    in advance; it is made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600, so a file or a link
    already there (planted, or by a one-in-2**128 chance) is an error (``FileExistsError``), never
    opened or followed. Raises ``OSError``.
    """
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(16)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(tmp, flags, 0o600), tmp
