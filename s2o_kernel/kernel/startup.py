"""Create the engine session the kernel runs cells in (Jupyter-free).

Settings come from the engine's ``load_settings()`` (``$S2O_CONFIG``, else
``./s2o.toml``, else the embedded default). When they cannot be loaded or
used, the kernel does not crash: it starts with the embedded default settings
and the first cell reports the load error (:attr:`Startup.pending_error`).
When not even the default works, :attr:`Startup.session` is ``None`` and
every cell reports :attr:`Startup.startup_error`.

Cells run contained by default (SPEC 12, ``docs/design.md``): in the
engine's supervised worker process (``IsolatedSession``, whose ``on_print``
hands what evaluated code prints to the cell), so C-level loops
and memory bombs are stopped too; values that are not JSON come back as their
``repr``. ``S2O_KERNEL_ISOLATED=0`` (or ``false``/``no``/``off``) in the
kernel's environment, e.g. ``python -m s2o_kernel install --env
S2O_KERNEL_ISOLATED 0``, runs cells in the kernel process instead: for
debugging only, without the memory cap and the kill-and-restart. When the
worker cannot be started at all, the kernel falls back to the in-process
session and says so on the first cell. The worker is a fork of the kernel
process (``IsolatedSession(fork=True)``): it shares the kernel's pages and
skips a second interpreter's start (``docs/performance.md``, "Kernel").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from s2o_kernel import engine
from s2o_kernel.engine import ErrorGroup, S2OError, Settings
from s2o_kernel.kernel.contract import SessionLike

#: Environment variable: cells run in the engine's supervised worker process
#: (``IsolatedSession``, SPEC 12) unless it is ``0``, ``false``, ``no`` or ``off``.
ISOLATE_ENV = "S2O_KERNEL_ISOLATED"


@dataclass
class Startup:
    """What :func:`start_session` made.

    ``session``: the session cells run in, ``None`` when not even the default settings work.
    ``pending_error``: the settings' load error, reported on the first cell (the session then
    runs on the embedded default). ``startup_error``: why there is no session.
    ``settings_source``: where the settings came from. ``warnings``: shown on the first cell.
    """

    session: SessionLike | None
    pending_error: BaseException | None = None
    startup_error: BaseException | None = None
    settings_source: str | None = None
    warnings: list[str] = field(default_factory=list)


def isolation_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True unless ``S2O_KERNEL_ISOLATED`` turns containment off (the default is on)."""
    value = (os.environ if environ is None else environ).get(ISOLATE_ENV, "")
    return not engine.switched_off(value)


def make_session(settings: Settings, warnings: list[str] | None = None) -> SessionLike:
    """An ``IsolatedSession`` (the default) or, when turned off, ``Session(Engine(settings))``.

    The warnings of the settings (and, when the worker cannot be started, a
    warning saying so: the in-process session is used then) are added to
    ``warnings``. Raises the engine's ``S2OError`` (stage ``load``) for
    settings it refuses. Either way compiled expressions are kept in the user's
    code cache (``engine.default_cache()``; ``S2O_CODE_CACHE=off`` turns it off).
    """
    found: list[str] = []
    if isolation_requested():
        try:
            isolated = engine.IsolatedSession(settings, fork=True, code_cache=engine.default_cache())
        except S2OError as exc:
            if exc.stage == "load":  # refused settings: the same in-process
                raise
            problem = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # the worker could not be started: fall back
            problem = f"{type(exc).__name__}: {exc}"
        else:
            if warnings is not None:
                warnings.extend(isolated.warnings)
            return isolated
        found.append(
            f"the containment worker could not be started ({problem}); cells run in the "
            "kernel process, where C-level loops and memory bombs are not stopped"
        )
    in_process = engine.Session(engine.Engine(settings, code_cache=engine.default_cache()))
    if warnings is not None:
        warnings.extend([*found, *in_process.warnings])
    return in_process


def _settings_source() -> str:
    named = os.environ.get("S2O_CONFIG")
    if named:
        return f"S2O_CONFIG={named}"
    if os.path.isfile("s2o.toml"):
        return os.path.abspath("s2o.toml")
    return "the embedded default settings"


def _packaged_default() -> Settings:
    """The embedded default file loaded as a settings file (environment secrets added)."""
    return engine.load_settings(str(resources.files("s2o_kernel.engine").joinpath("default.toml")))


#: Settings to fall back on, tried in order: the embedded default with the environment's secrets,
#: then without them.
_DEFAULTS: tuple[Callable[[], Settings], ...] = (_packaged_default, engine.default_settings)


def _wrap_load_error(exc: BaseException, source: str) -> S2OError:
    """The first cell's error when the settings could not be used (the kernel runs on the default)."""
    code, message, details = "settings", f"{type(exc).__name__}: {exc}", None
    if isinstance(exc, S2OError):
        code, message, details = exc.code, exc.message, exc.details
    err = S2OError(
        code,
        f"{message} (settings from {source}; the kernel started with the embedded default settings instead)",
        stage="load",
        details=details,
    )
    for sub in exc.errors if isinstance(exc, ErrorGroup) else []:
        err.add_note(f"  {sub.code}: {sub.message}")
    err.add_note(
        "Fix the settings file and restart the kernel; this cell was not run. "
        "Later cells run with the default settings."
    )
    return err


#: Set by Jupyter's server in a kernel's environment: the path of the notebook that started it.
SESSION_ENV = "JPY_SESSION_NAME"


def notebook_cassette(environ: Mapping[str, str] | None = None) -> Path | None:
    """The cassette beside the notebook this kernel runs (SPEC 13), or ``None`` when the kernel does not
    know the notebook (no ``JPY_SESSION_NAME``: nbclient, nbval, papermill, the console). A relative
    path is the server's; the kernel runs in the notebook's folder, so its name is taken there."""
    name = (os.environ if environ is None else environ).get(SESSION_ENV, "")
    if not name.endswith(".ipynb"):
        return None
    path = Path(name)
    return engine.cassette_for(path if path.is_absolute() else Path.cwd() / path.name)


def notebook_replay(settings: Settings, environ: Mapping[str, str] | None = None) -> Settings:
    """``settings`` with the notebook's cassette (:func:`notebook_cassette`) when they name none and one
    is wanted (SPEC 13): the file exists (its mode ``replay`` unless the settings name another), or a mode
    is asked for (the settings or ``S2O_REPLAY``). Otherwise ``settings`` unchanged."""
    env = os.environ if environ is None else environ
    found = notebook_cassette(env)
    replay = settings.replay
    if found is None or replay.cassette or not (found.exists() or replay.mode != "off" or env.get(engine.REPLAY_ENV)):
        return settings
    data = settings.to_dict()
    data["replay"] = {"mode": replay.mode if replay.mode != "off" else "replay", "cassette": str(found)}
    return engine.bare_settings(data)


def start_session(logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None) -> Startup:
    """Load settings and create the session; never raises.

    Settings come from ``engine.load_settings()``; when they cannot be used the
    session runs on the embedded default and the load error waits for the
    first cell; when not even that works there is no session.
    """
    log = logger or logging.getLogger(__name__)
    source = _settings_source()
    pending: BaseException | None = None
    try:
        warnings: list[str] = []
        session = make_session(notebook_replay(engine.load_settings()), warnings)
        return Startup(session, settings_source=source, warnings=warnings)
    except BaseException as exc:  # the kernel must start whatever the settings do
        if isinstance(exc, S2OError):  # a coded error says what is wrong; the first cell explains it
            log.warning("s2o: settings from %s could not be used (%s); the embedded default is used",
                        source, exc)
        else:  # not coded: a fault of the kernel, with its traceback
            log.error("s2o: settings from %s could not be used: %s", source, exc, exc_info=exc)
        pending = _wrap_load_error(exc, source)

    last: BaseException | None = None
    for loader in _DEFAULTS:
        warnings = []
        try:
            session = make_session(loader(), warnings)
        except BaseException as exc:  # the kernel must start whatever the settings do
            last = exc
            continue
        return Startup(session, pending_error=pending, settings_source="default", warnings=warnings)
    log.error("s2o: even the embedded default settings could not be used", exc_info=last)
    return Startup(None, startup_error=last or pending)
