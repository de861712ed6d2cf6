"""A throwaway PostgreSQL cluster for the db tests, from Debian's server binaries (issue 9).

:class:`PostgresCluster` runs ``initdb`` in a temporary folder, starts ``postgres`` with ``pg_ctl``
listening on 127.0.0.1 on a free port (its unix socket inside the folder too), creates the database
``s2o`` and a superuser ``s2o`` with a password, and stops and removes everything in :meth:`stop`. Each pytest
process (each xdist worker) that asks for the ``postgres`` fixture gets a cluster of its own: its own folder
(``mkdtemp``) and port (another free one when the first is taken before the server binds it).
``initdb`` refuses to run as root, so as root every server command runs as the ``postgres`` user
(Debian's package makes it) through ``runuser``; the folder is handed to that user first.

When the binaries are missing, :func:`find_bin` raises ``RuntimeError`` naming
``scripts/install-system-deps.sh``: the fixture fails, it never skips.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

INSTALL_HINT = ("PostgreSQL's server binaries (initdb, pg_ctl) are missing: run scripts/install-system-deps.sh "
                "(it installs Debian's postgresql package), then the tests again")
PASSWORD = "pg-test-pass-7f3a"
#: Ports tried: the one :func:`free_port` found can be taken before the server binds it (by another xdist
#: worker's cluster, a kernel), and then the next free one is tried.
PORT_ATTEMPTS = 3


def find_bin() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``initdb`` and ``pg_ctl``; ``RuntimeError`` otherwise."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    for initdb in reversed(found):
        folder = Path(initdb).parent
        if (folder / "pg_ctl").is_file():
            return folder
    raise RuntimeError(INSTALL_HINT)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS says is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One running throwaway cluster (see the module doc); :attr:`url` is a SQLAlchemy URL to it."""

    def __init__(self) -> None:
        self.bin = find_bin()
        self.root = Path(tempfile.mkdtemp(prefix="s2o-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres"
            entry = pwd.getpwnam(self._user)
            os.chmod(self.root, 0o755)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.url = f"postgresql://s2o:{PASSWORD}@127.0.0.1:{self.port}/s2o"

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=self.root)

    def _must(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def start(self) -> PostgresCluster:
        """initdb, start, create the role and database; raises ``RuntimeError`` with the server's words."""
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._must("initdb", "-D", str(self.data), "-U", "s2o", "--pwfile", str(pwfile), "-A", "scram-sha-256",
                   "-E", "UTF8", "--no-locale")
        for attempt in range(PORT_ATTEMPTS):
            options = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.root} -F"
            done = self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w",
                             "-t", "60", "start")
            if done.returncode == 0:
                break
            if attempt + 1 < PORT_ATTEMPTS and "already in use" in self._log():
                self.port = free_port()  # taken between free_port() and the server's bind: another test run's
                self.url = f"postgresql://s2o:{PASSWORD}@127.0.0.1:{self.port}/s2o"
                continue
            raise RuntimeError(f"pg_ctl failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n"
                               f"{self._log()[-2000:]}")
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        done = subprocess.run([str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "s2o",
                               "-d", "postgres", "-c", "CREATE DATABASE s2o"], capture_output=True, text=True,
                              env=env, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"CREATE DATABASE failed: {done.stderr.strip()}")
        return self

    def _log(self) -> str:
        """The server's log (``pg_ctl -l``), empty when there is none."""
        try:
            return (self.root / "log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder."""
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
