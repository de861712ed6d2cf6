"""What a failed expression reports: Python exceptions and limits mapped to coded errors (SPEC 5, 6).

One home for the mapping every run path uses (:meth:`.execution.Execution.map_error` calls
:func:`map_error`): Python exceptions become ``runtime`` (message starting with the exception's type
name, secret values scrubbed, the failing operation's line and column), the limits become ``timedOut``,
``stopped`` or ``memory-limit``, and ``result`` / ``exc`` read where nothing set them are ``not-set``.
"""

from __future__ import annotations

import asyncio
import linecache
import os
import sysconfig
import time
import types
from typing import TYPE_CHECKING, Any

from ...bounds import MAX_USER_FRAMES, QUOTE
from ..errors import S2OError
from ..language.compiled import FILENAME, Compiled
from ..policy.values import error_message, runtime_error
from .limits import RunInterrupt, RunTimeout

if TYPE_CHECKING:
    from .engine import Engine

#: The folder of this package (``…/s2o_kernel/``): its frames are never the user's code.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
#: Where frames are not the user's own code (:func:`user_frames`): no file (``<s2o>``), this package, the standard
#: library and the installed packages (``sysconfig``'s ``stdlib``, ``platstdlib``, ``purelib``, ``platlib``).
_NOT_YOURS: tuple[str, ...] = ("<", _PACKAGE, *sorted({
    os.path.join(form(path), "") for key, path in sysconfig.get_paths().items()
    if key in ("stdlib", "platstdlib", "purelib", "platlib") for form in (os.path.abspath, os.path.realpath)}))
#: The ``stopped`` message of an interrupted run.
INTERRUPTED = "the run was interrupted; the session keeps its variables"


def position(tb: types.TracebackType | None) -> tuple[int | None, int | None]:
    """Line (1-based) and column (0-based) of the innermost operation of a compiled expression in ``tb``
    (a frame whose code has :data:`FILENAME`); ``(None, None)`` when no frame of ``tb`` is one."""
    found: tuple[int | None, int | None] = (None, None)
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == FILENAME:
            try:
                positions = list(code.co_positions())
                line, _end, col, _ecol = positions[tb.tb_lasti // 2]
                found = (line, col)
            except (IndexError, ValueError):
                found = (tb.tb_lineno, None)
        tb = tb.tb_next
    return found


def user_frames(tb: types.TracebackType | None) -> list[dict[str, Any]]:
    """The frames of the host's own code in ``tb`` below the compiled expression's frame: what an allowlisted
    function (the user's ``fetch_weather``) ran when it raised, as Python's traceback shows it, outermost first:
    ``[{"file", "line", "function", "text"}]``, at most :data:`MAX_USER_FRAMES` (the innermost), ``text`` the
    stripped source line (``""`` when unknown, at most :data:`QUOTE` characters). The user's own code is any file
    outside this package (its guards and wrappers), Python's standard library and the installed packages
    (:data:`_NOT_YOURS`): an allowlisted ``json.loads`` that raises shows no frame of ``json``, as an engine
    frame is never shown (SPEC 9); nor does a code object with no file (``<s2o>``, ``<frozen …>``)."""
    frames: list[dict[str, Any]] = []
    below = False
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == FILENAME:
            below, frames = True, []  # only what the innermost expression's call ran
        elif below and not code.co_filename.startswith(_NOT_YOURS):
            line = tb.tb_lineno
            text = linecache.getline(code.co_filename, line).strip() if line else ""
            frames.append({"file": code.co_filename, "line": line or 0, "function": code.co_name,
                           "text": text[:QUOTE]})
        tb = tb.tb_next
    return frames[-MAX_USER_FRAMES:]


def timeout_error(engine: Engine, compiled: Compiled | None) -> S2OError:
    """The ``timedOut`` error naming ``limits.time`` (or the definition's ``bounds.time``)."""
    return S2OError("timedOut", engine.time_limit_text(), source=compiled.source if compiled else None)


def map_error(exc: BaseException, engine: Engine, compiled: Compiled, start: float) -> S2OError:
    """``exc``, raised while running ``compiled`` (begun at ``start``, ``time.monotonic()`` seconds) under
    ``engine``'s settings, as an :class:`S2OError` of stage ``run`` (unless it is a validation error) with
    the failing operation's position, the expression's source, secrets redacted and no traceback."""
    line, col = position(exc.__traceback__)
    if line is None and compiled.call_at is not None:  # raised by a call awaited for you (SPEC 6, 11)
        line, col = compiled.call_at
    err = _coded(exc, engine, compiled, start)
    if err.stage != "validate":
        err.stage = "run"
    if err.line is None and line is not None:
        err.line, err.col = line, col
    err.source = err.source or compiled.source
    err.message = engine.settings.redact(err.message)
    if not isinstance(exc, S2OError) and err.code == "runtime":
        frames = user_frames(exc.__traceback__)
        if frames:
            for frame in frames:
                frame["text"] = engine.settings.redact(frame["text"])
            err.details = {**(err.details or {}), "frames": frames}
    err.__traceback__ = None
    err.__cause__ = None
    err.__context__ = None
    return err


def _coded(exc: BaseException, engine: Engine, compiled: Compiled, start: float) -> S2OError:
    if isinstance(exc, S2OError):
        return exc
    if isinstance(exc, RunTimeout):
        return timeout_error(engine, compiled)
    if isinstance(exc, (RunInterrupt, KeyboardInterrupt, asyncio.CancelledError)):
        return S2OError("stopped", INTERRUPTED)
    if isinstance(exc, TimeoutError) and time.monotonic() - start >= engine.settings.limits.time - 0.05:
        return timeout_error(engine, compiled)
    if isinstance(exc, NameError) and exc.name in ("result", "exc"):
        return S2OError("not-set", f"'{exc.name}' has not been set: "
                        + ("no command has produced a result yet" if exc.name == "result"
                           else "exc exists only inside an onError block"))
    if isinstance(exc, MemoryError):
        return S2OError("memory-limit", engine.out_of_memory_text())
    if isinstance(exc, RecursionError):
        return S2OError("runtime", "RecursionError: the value is nested too deeply", python_type="RecursionError")
    if isinstance(exc, Exception):
        return runtime_error(exc)
    return S2OError("unexpected", error_message(exc))
