"""`peloton agent` as a process: build the agent from command-line values, run until a signal.

Lives here, beside `peloton up`, because the CLI may reach daemons only
through peloton.cluster (see the import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from peloton.agent.app import AgentApp
from peloton.agent.config import AgentConfig, parse_label, parse_ports
from peloton.agent.remote_volumes import DEFAULT_BUDGET_MB, DEFAULT_MAX_MB
from peloton.common.auth import is_loopback
from peloton.common.auth.tokens import check_private
from peloton.common.shutdown import stop_on_signals
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import Resources


def build_config(*, work_dir: str, name: str | None, hostmgr: str, host: str, port: int,
                 cpus: float, mem_mb: float, disk_mb: float, gpus: float, ports: str,
                 labels: Sequence[str], zk_servers: Sequence[str] = (),
                 zk_root: str = "/peloton", revocable_cpus: float = 0.0,
                 slack_from_usage: bool = False, enforce_fd_limit: bool = False,
                 orphan_secs: float = 3600.0, username: str = "", password_file: str = "",
                 allow_root_tasks: bool = False, task_users: tuple[str, ...] = (),
                 dynamic_uids: str = "70000-79999", insecure: bool = False, tls_cert: str = "",
                 tls_key: str = "", tls_ca: str = "",
                 fetch_max_mb: float = DEFAULT_MAX_MB,
                 fetch_cache_mb: float = DEFAULT_BUDGET_MB) -> AgentConfig:
    """An AgentConfig from CLI values; raises InvalidArgument on a bad port range, label,
    secret file, or a non-loopback address without credentials (unless `insecure`)."""
    if not (math.isfinite(fetch_max_mb) and fetch_max_mb > 0):
        raise InvalidArgument(f"--fetch-max-mb must be > 0, got {fetch_max_mb}",
                              field="fetch_max_mb")
    if not (math.isfinite(fetch_cache_mb) and fetch_cache_mb >= 0):
        raise InvalidArgument(f"--fetch-cache-mb must be >= 0, got {fetch_cache_mb}",
                              field="fetch_cache_mb")
    if not (math.isfinite(revocable_cpus) and revocable_cpus >= 0):
        raise InvalidArgument(f"--revocable-cpus must be >= 0, got {revocable_cpus}",
                              field="revocable_cpus")
    credentials: tuple[tuple[str, str], ...] = ()
    if username or password_file:
        if not (username and password_file):
            raise InvalidArgument("--username and --password-file go together", field="username")
        path = Path(password_file)
        check_private(path)
        credentials = (("username", username), ("password", path.read_text().strip()))
    tls = TlsFiles.from_options(tls_cert, tls_key, tls_ca)
    if not (credentials or tls or insecure or is_loopback(host)):
        raise InvalidArgument(
            f"the agent would serve {host}, reachable from other machines, without credentials: "
            "give --username/--password-file or --tls-*, bind 127.0.0.1, or pass --insecure",
            field="host")
    first, _, last = dynamic_uids.partition("-")
    if not (first.isdigit() and last.isdigit() and 1000 <= int(first) <= int(last) < 2**31):
        raise InvalidArgument(f"--dynamic-uids: expected FIRST-LAST (uids >= 1000), got "
                              f"{dynamic_uids!r}", field="dynamic_uids")
    return AgentConfig(
        revocable_cpus=revocable_cpus, slack_from_usage=slack_from_usage,
        enforce_fd_limit=enforce_fd_limit, orphan_secs=orphan_secs,
        work_dir=Path(work_dir).resolve(), hostmgr=hostmgr, host=host, port=port,
        zk_servers=tuple(zk_servers), zk_root=zk_root,
        resources=Resources(cpu=cpus, mem_mb=mem_mb, disk_mb=disk_mb, gpu=gpus),
        ports=parse_ports(ports), labels=tuple(parse_label(lb) for lb in labels),
        name=name or socket.gethostname(), credentials=credentials, tls=tls,
        allow_root_tasks=allow_root_tasks, task_users=task_users,
        dynamic_uids=(int(first), int(last)), fetch_max_mb=fetch_max_mb,
        fetch_cache_mb=fetch_cache_mb)


def run(config: AgentConfig, *, kill_tasks_on_exit: bool = False) -> None:
    """Start the agent, print its address, stop on SIGINT/SIGTERM (tasks keep running by default)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    stop_on_signals(stop)  # a second signal ends the process at once
    os.umask(0o077)  # the agent's own files are private (tasks get 022 from their supervisor)
    app = AgentApp(config)
    app.start()
    print(f"peloton agent {config.name}: serving on {app.address}, work dir {config.work_dir}, "
          f"host manager {config.hostmgr}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        app.stop(kill_tasks=kill_tasks_on_exit)
        print(f"peloton agent {config.name}: stopped", flush=True)
