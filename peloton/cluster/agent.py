"""`peloton agent` as a process: build the agent from command-line values, run until a signal.

Lives here, beside `peloton up`, because the CLI may reach daemons only
through peloton.cluster (see the import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

import logging
import math
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from peloton.agent.app import AgentApp
from peloton.agent.config import AgentConfig, parse_label, parse_ports
from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import Resources


def build_config(*, work_dir: str, name: str | None, hostmgr: str, host: str, port: int,
                 cpus: float, mem_mb: float, disk_mb: float, gpus: float, ports: str,
                 labels: Sequence[str], zk_servers: Sequence[str] = (),
                 zk_root: str = "/peloton", revocable_cpus: float = 0.0,
                 slack_from_usage: bool = False, enforce_fd_limit: bool = False,
                 orphan_secs: float = 3600.0) -> AgentConfig:
    """An AgentConfig from CLI values; raises InvalidArgument on a bad port range or label."""
    if not (math.isfinite(revocable_cpus) and revocable_cpus >= 0):
        raise InvalidArgument(f"--revocable-cpus must be >= 0, got {revocable_cpus}",
                              field="revocable_cpus")
    return AgentConfig(
        revocable_cpus=revocable_cpus, slack_from_usage=slack_from_usage,
        enforce_fd_limit=enforce_fd_limit, orphan_secs=orphan_secs,
        work_dir=Path(work_dir).resolve(), hostmgr=hostmgr, host=host, port=port,
        zk_servers=tuple(zk_servers), zk_root=zk_root,
        resources=Resources(cpu=cpus, mem_mb=mem_mb, disk_mb=disk_mb, gpu=gpus),
        ports=parse_ports(ports), labels=tuple(parse_label(lb) for lb in labels),
        name=name or socket.gethostname())


def run(config: AgentConfig, *, kill_tasks_on_exit: bool = False) -> None:
    """Start the agent, print its address, stop on SIGINT/SIGTERM (tasks keep running by default)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
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
