"""A throwaway JupyterLab server on 127.0.0.1 for the browser test, and the sweep that ends what it started.

``running_lab(base)`` starts ``python -m jupyterlab`` from the current interpreter with every Jupyter
folder inside ``base`` (config, data, runtime, user settings, workspaces, the notebook root), so
nothing of the user's own Jupyter set-up is read or written:

* the kernelspec is installed with this checkout's installer (``kernel_harness.install_spec``) under
  ``base/data``, which is ``JUPYTER_DATA_DIR``, with its own name (``s2o-browser``) so the notebook
  can never start another installed ``s2o``; the kernel runs this checkout's package
  (``kernel_harness.kernel_env`` sets ``PYTHONPATH``);
* the port is chosen by the operating system (``--port=0``) and read back from the server's info
  file ``jpserver-<pid>.json`` in the runtime folder; the server is ready when ``/api/status``
  answers with the token;
* nothing reaches the network: the news feed is off (``LabApp.news_url=None``, which also stops the
  front end asking about news), update checks never run (``NeverCheckForUpdate``), the extension
  manager is read-only; JupyterLab serves its prebuilt front end and builds nothing;
* it runs as root when the CI does (``--allow-root``).

Tear-down (also when the test fails): ``POST /api/shutdown`` (the server shuts its kernels down and
exits), then SIGTERM and SIGKILL to its process group if it lingers. Every process started for the
test carries the environment variable ``MARKER`` with the run's id; ``sweep(run_id)`` finds any that
is still alive (a kernel, its worker, the browser, Playwright's driver), kills it and reports it, so a
test can fail when something would have outlived it. Linux only (``/proc`` through psutil).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil
from kernel_harness import install_spec, kernel_env

#: The environment variable every process of one browser-test run carries: its value is the run's id.
MARKER = "S2O_BROWSER_TEST_RUN"
#: The kernelspec name the test's notebooks ask for.
KERNEL_NAME = "s2o-browser"
#: Seconds for the server to write its info file and answer ``/api/status``.
START_TIMEOUT = 90.0
#: Seconds for the server to stop after ``/api/shutdown`` before it is signalled.
STOP_TIMEOUT = 20.0

#: User settings the server starts with: no notification toasts asking about news or updates.
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab: ``base_url`` (``http://127.0.0.1:PORT/``), its ``token``, its notebook
    ``root`` folder, its ``log`` file (stdout and stderr) and its ``process``."""

    base_url: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen[bytes]

    def url(self, path: str) -> str:
        """The address of ``path`` (e.g. ``lab/tree/x.ipynb``) on this server, with no token."""
        return self.base_url + path.lstrip("/")

    def api(self, path: str, method: str = "GET", timeout: float = 10.0) -> object:
        """Call the REST API at ``path`` with the token; return the decoded JSON answer (None when
        empty). Raises ``urllib.error.URLError`` (or ``HTTPError``) when the server does not answer."""
        request = urllib.request.Request(
            self.url(path),
            method=method,
            headers={"Authorization": f"token {self.token}"},
            data=b"" if method != "GET" else None,
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log, for a failure message; the token shows as
        ``***``."""
        return _log_text(self.log, self.token, lines)


def _log_text(log: Path, token: str, lines: int = 40) -> str:
    """The last ``lines`` lines of ``log`` with ``token`` replaced by ``***`` (the server prints its
    URL with the token)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]).replace(token, "***")


def _folders(base: Path) -> dict[str, Path]:
    folders = {name: base / name for name in ("config", "runtime", "root", "settings", "workspaces")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    # install_spec puts the spec in PREFIX/share/jupyter/kernels: that share/jupyter is the data dir.
    folders["data"] = install_spec(base / "prefix", name=KERNEL_NAME).parent
    for relative, values in USER_SETTINGS.items():
        target = folders["settings"] / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values), encoding="utf-8")
    return folders


def lab_env(folders: dict[str, Path], run_id: str) -> dict[str, str]:
    """The server's environment: this checkout on ``PYTHONPATH``, every Jupyter folder in ``folders``,
    no inherited JupyterLab app dir or extra Jupyter paths, and ``MARKER=run_id``."""
    env = kernel_env()
    for name in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTERLAB_DIR", "JUPYTER_PREFER_ENV_PATH"):
        env.pop(name, None)
    env.update({
        "JUPYTER_CONFIG_DIR": str(folders["config"]),
        "JUPYTER_DATA_DIR": str(folders["data"]),
        "JUPYTER_RUNTIME_DIR": str(folders["runtime"]),
        "JUPYTERLAB_SETTINGS_DIR": str(folders["settings"]),
        "JUPYTERLAB_WORKSPACES_DIR": str(folders["workspaces"]),
        MARKER: run_id,
    })
    return env


def _server_info(runtime: Path, pid: int) -> dict[str, object] | None:
    info = runtime / f"jpserver-{pid}.json"
    try:
        loaded = json.loads(info.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # not written yet, or written half-way
    return loaded if isinstance(loaded, dict) else None


def _wait_ready(process: subprocess.Popen[bytes], runtime: Path, token: str, log: Path) -> str:
    """Wait for the info file and a token-authenticated ``/api/status``; return the base URL."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {process.returncode}:\n{_log_text(log, token)}")
        info = _server_info(runtime, process.pid)
        if info is not None:
            base_url = f"http://127.0.0.1:{info['port']}/"
            request = urllib.request.Request(base_url + "api/status", headers={"Authorization": f"token {token}"})
            with suppress(OSError), urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    return base_url
        time.sleep(0.2)
    raise RuntimeError(f"JupyterLab did not answer within {START_TIMEOUT} s:\n{_log_text(log, token)}")


def _stop(server: LabServer) -> None:
    """Shut the server (and so its kernels) down; signal its process group if it lingers."""
    if server.process.poll() is not None:
        return
    if server.base_url:  # it answered: ask it to shut its kernels down and exit
        with suppress(OSError):
            server.api("api/shutdown", method="POST")
        with suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=STOP_TIMEOUT)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if server.process.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(server.process.pid, sig)
        with suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=10)


@contextmanager
def running_lab(base: Path, run_id: str) -> Iterator[LabServer]:
    """Start JupyterLab with all its folders under ``base`` and ``MARKER=run_id``; stop it on exit.

    Raises ``RuntimeError`` with the server's log when it exits or does not answer within
    ``START_TIMEOUT`` seconds."""
    folders = _folders(base)
    token = secrets.token_hex(24)
    log = base / "jupyterlab.log"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser", "--allow-root",
        "--ip=127.0.0.1", "--port=0", "--port-retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={folders['root']}",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=folders["root"], env=lab_env(folders, run_id),
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )
    server = LabServer("", token, folders["root"], log, process)
    try:
        base_url = _wait_ready(process, folders["runtime"], token, log)
        server = LabServer(base_url, token, folders["root"], log, process)
        yield server
    finally:
        _stop(server)


def marked(run_id: str) -> list[psutil.Process]:
    """The live processes (other than this one) whose environment has ``MARKER=run_id``.

    Processes whose environment cannot be read (gone meanwhile, or not ours) are left out."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter():
        with suppress(psutil.Error):
            if process.pid != os.getpid() and process.environ().get(MARKER) == run_id:
                found.append(process)
    return found


def command_lines(run_id: str) -> list[str]:
    """The command lines of the live processes carrying ``MARKER=run_id`` (see ``marked``)."""
    lines = []
    for process in marked(run_id):
        with suppress(psutil.Error):
            lines.append(" ".join(process.cmdline()))
    return lines


def sweep(run_id: str) -> list[str]:
    """Kill every process that still carries ``MARKER=run_id``; return their pids and command lines
    (``[]`` when nothing outlived the run)."""
    found = marked(run_id)
    described = []
    for process in found:
        with suppress(psutil.Error):
            described.append(f"{process.pid}: {' '.join(process.cmdline())[:200]}")
            process.kill()
    psutil.wait_procs(found, timeout=10)
    return described
