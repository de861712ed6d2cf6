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
session and says so on the first cell.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from s2o_kernel.kernel.render import CellError, is_coded


#: Environment variable: cells run in the engine's supervised worker process
#: (``IsolatedSession``, SPEC 12) unless it is ``0``, ``false``, ``no`` or ``off``.
ISOLATE_ENV = "S2O_KERNEL_ISOLATED"
_OFF = ("0", "false", "no", "off")


@dataclass
class Startup:
    session: Any
    api: Any
    pending_error: BaseException | None = None
    startup_error: BaseException | None = None
    settings_source: str | None = None
    warnings: list[str] = field(default_factory=list)


def isolation_requested(environ: Any = None) -> bool:
    """True unless ``S2O_KERNEL_ISOLATED`` turns containment off (the default is on)."""
    value = (os.environ if environ is None else environ).get(ISOLATE_ENV, "")
    return value.strip().lower() not in _OFF


def make_session(api: Any, settings: Any, warnings: list[str] | None = None) -> Any:
    """An ``IsolatedSession`` (the default) or, when turned off, ``Session(Engine(settings))``.

    When the worker cannot be started (anything but settings refused at
    load), the in-process session is used and a warning is added to
    ``warnings``.
    """
    if isolation_requested():
        isolated = getattr(api, "IsolatedSession", None)
        if isolated is not None:
            try:
                return isolated(settings)
            except BaseException as exc:  # noqa: BLE001
                refused = is_coded(exc) and getattr(exc, "stage", None) == "load"
                if refused or isinstance(exc, KeyboardInterrupt):
                    raise
                problem = f"{type(exc).__name__}: {exc}"
        else:
            problem = "the engine has no IsolatedSession"
        if warnings is not None:
            warnings.append(
                f"the containment worker could not be started ({problem}); cells run in the "
                "kernel process, where C-level loops and memory bombs are not stopped"
            )
    return api.Session(api.Engine(settings))


def session_warnings(session: Any) -> list[str]:
    """Warnings of the settings a session started with (``engine.warnings`` or ``warnings``)."""
    for owner in (getattr(session, "engine", None), session):
        warnings = getattr(owner, "warnings", None)
        if isinstance(warnings, (list, tuple)):
            return [str(w) for w in warnings]
    return []


def _settings_source() -> str:
    named = os.environ.get("S2O_CONFIG")
    if named:
        return f"S2O_CONFIG={named}"
    if os.path.isfile("s2o.toml"):
        return os.path.abspath("s2o.toml")
    return "the embedded default settings"


def _default_loaders(api: Any) -> list[Callable[[], Any]]:
    loaders: list[Callable[[], Any]] = []

    def packaged_default() -> Any:
        from importlib import resources

        path = resources.files("s2o_kernel.engine").joinpath("default.toml")
        return api.load_settings(str(path))

    loaders.append(packaged_default)
    default_settings = getattr(api, "default_settings", None)
    if default_settings is None:
        try:
            from s2o_kernel.engine.settings import default_settings  # type: ignore[no-redef]
        except Exception:
            default_settings = None
    if default_settings is not None:
        loaders.append(default_settings)
    return loaders


def _wrap_load_error(exc: BaseException, source: str) -> CellError:
    if is_coded(exc):
        code = str(exc.code)  # type: ignore[attr-defined]
        message = str(exc.message)  # type: ignore[attr-defined]
    else:
        code = "settings"
        message = f"{type(exc).__name__}: {exc}"
    err = CellError(
        code,
        f"{message} (settings from {source}; the kernel started with the embedded "
        "default settings instead)",
        stage="load",
        details=getattr(exc, "details", None),
    )
    for sub in getattr(exc, "errors", None) or []:
        if is_coded(sub):
            err.add_note(f"  {sub.code}: {sub.message}")
    err.add_note(
        "Fix the settings file and restart the kernel; this cell was not run. "
        "Later cells run with the default settings."
    )
    return err


def start_session(logger: logging.Logger | logging.LoggerAdapter[Any] | None = None) -> Startup:
    """Import the engine, load settings and create the session; never raises."""
    log = logger or logging.getLogger(__name__)
    try:
        import s2o_kernel.engine as api
    except BaseException as exc:  # noqa: BLE001 - the kernel must still start
        log.error("s2o: the engine could not be imported", exc_info=exc)
        return Startup(None, None, startup_error=exc)

    source = _settings_source()
    pending: BaseException | None = None
    try:
        settings = api.load_settings()
        fallback: list[str] = []
        session = make_session(api, settings, fallback)
        return Startup(
            session, api, settings_source=source, warnings=fallback + session_warnings(session)
        )
    except BaseException as exc:  # noqa: BLE001
        log.error("s2o: settings from %s could not be used: %s", source, exc, exc_info=exc)
        pending = _wrap_load_error(exc, source)

    last: BaseException | None = None
    for loader in _default_loaders(api):
        fallback = []
        try:
            session = make_session(api, loader(), fallback)
        except BaseException as exc:  # noqa: BLE001
            last = exc
            continue
        return Startup(
            session,
            api,
            pending_error=pending,
            settings_source="default",
            warnings=fallback + session_warnings(session),
        )
    log.error("s2o: even the embedded default settings could not be used", exc_info=last)
    return Startup(None, api, startup_error=last or pending)
