"""A real, throw-away PostgreSQL server for tests and benchmarks.

`PostgresServer` runs Debian's PostgreSQL (any version under
/usr/lib/postgresql/*/bin) from a fresh data directory in /tmp: initdb
with trust authentication, then `pg_ctl start` on 127.0.0.1 and a free
port, with the socket in the data directory so nothing touches the
system cluster.  `initdb` refuses to run as root, so as root every
server command runs as the `postgres` user (runuser), and the data
directory is created for that user.  It is stopped by the PID in
postmaster.pid (SIGINT = PostgreSQL's "fast" shutdown, SIGKILL if it
will not go) and the directory removed.

`durable=False` (the test default) turns fsync off: tests want speed and
never survive a power cut; benchmarks use the durable default.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.harness.procs import free_port, wait_for


def bin_dir() -> Path:
    """The newest installed PostgreSQL's bin directory (FileNotFoundError if none)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[3]) if Path(p).parts[3].isdigit() else 0)
    if not found:
        raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql, "
                                "or run `make system-packages`)")
    return Path(found[-1]).parent


class PostgresServer:
    """One PostgreSQL server on 127.0.0.1, owned by this process."""

    def __init__(self, *, durable: bool = False) -> None:
        self.bin = bin_dir()
        self.durable = durable
        self.port = 0
        self.pid: int | None = None
        self.datadir: Path | None = None
        self._as_root = os.geteuid() == 0

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> PostgresServer:
        """initdb, start, and wait until the server accepts connections."""
        self.datadir = Path(tempfile.mkdtemp(prefix="peloton-pg-", dir="/tmp"))
        if self._as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.datadir, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.datadir), "--auth=trust", "-U", "postgres",
                  "-E", "UTF8", "--locale=C", "--no-sync")
        self.port = free_port()
        self._launch()
        return self

    def restart(self) -> None:
        """Start the server again on the same data directory and port (after `kill`)."""
        assert self.datadir is not None and self.pid is None, "restart needs a killed server"
        for stale in ("postmaster.pid", f".s.PGSQL.{self.port}", f".s.PGSQL.{self.port}.lock"):
            (self.datadir / stale).unlink(missing_ok=True)
        self._launch()

    def _launch(self) -> None:
        assert self.datadir is not None
        options = [f"-p {self.port}", "-c listen_addresses=127.0.0.1",
                   f"-c unix_socket_directories={self.datadir}", "-c max_connections=60"]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run("pg_ctl", "start", "-w", "-t", "30", "-D", str(self.datadir),
                  "-l", str(self.datadir / "server.log"), "-o", " ".join(options))
        pid_file = self.datadir / "postmaster.pid"
        self.pid = int(pid_file.read_text().splitlines()[0])
        wait_for(self._accepts, 30, f"PostgreSQL on 127.0.0.1:{self.port}")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20) -> None:
        """Stop the server by PID and remove its data directory.  Idempotent."""
        if self.pid is not None:
            self.kill(sig, timeout)
        if self.datadir is not None:
            shutil.rmtree(self.datadir, ignore_errors=True)
            self.datadir = None

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 20) -> None:
        """Signal the postmaster (default: SIGKILL, a crash) and wait until it is gone."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        children = _children(pid)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        # Backends of a killed postmaster exit by themselves once they notice; until they
        # have, they hold its shared memory and a restart would be refused.
        wait_for(lambda: not any(_alive(c) for c in children), timeout,
                 f"backends of PostgreSQL {pid} to exit")

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- databases ---------------------------------------------------------
    def url(self, dbname: str = "postgres") -> str:
        """A store URL for one database of this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string for one database of this server."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname} connect_timeout=5"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database (optionally as a copy of `template`) and return its URL."""
        tmpl = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{tmpl}')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting its sessions."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # -- helpers -----------------------------------------------------------
    def _accepts(self) -> bool:
        try:
            with psycopg.connect(self.dsn()) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        result = subprocess.run(cmd, cwd="/tmp", capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            log = ""
            if self.datadir is not None and (self.datadir / "server.log").exists():
                log = (self.datadir / "server.log").read_text()[-2000:]
            raise RuntimeError(f"{tool} failed ({result.returncode}): "
                               f"{result.stderr.strip()[-2000:]} {log}")


def _children(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (the postmaster's backends and workers)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().split(")")[-1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (already exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
