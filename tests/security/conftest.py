"""A real `peloton up` with authentication on, its users, and clients acting as each of them.

The users file is the README's example cut down: a read-only default user,
two developers (alice, bob) who may create jobs only in /dev, run tasks as
no named user and change only their own jobs, an administrator (root role),
an agent identity, and Aurora permissions for alice's role.  Passwords are
hashed with a small scrypt cost so the tests stay quick (the format and the
code path are the production ones).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from peloton.api.client import PelotonClient
from peloton.common.auth.passwords import hash_password
from tests.harness.cluster import UpCluster

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw", "agent-1": "agent-pw",
             "agent-2": "agent2-pw"}
JOB_SERVICES = ["peloton.api.v0.job.JobManager", "peloton.api.v0.task.TaskManager",
                "peloton.api.v0.update.svc.UpdateService",
                "peloton.api.v1alpha.job.stateless.svc.JobService",
                "peloton.api.v1alpha.pod.svc.PodService"]
READS = [f"{s}:{m}" for s in JOB_SERVICES for m in ("Get*", "List*", "Query*", "Browse*")]
#: Our extensions: capacity (reads; the web UI's overview), cron (templates are job creates).
CAPACITY = ["pelotonpy.ext.capacity.HostCapacityService:*",
            "pelotonpy.ext.capacity.PoolStatusService:*"]
CRON = "pelotonpy.api.cron.CronService"


def users_doc() -> dict[str, object]:
    """The users file of these tests."""
    def user(name: str, role: str) -> dict[str, str]:
        return {"username": name, "role": role,
                "password_hash": hash_password(PASSWORDS[name], log_n=10)}

    return {
        "users": [{"role": "reader"}, user("alice", "dev"), user("bob", "dev"),
                  user("admin", "root"), user("agent-1", "agent"), user("agent-2", "agent")],
        "roles": [
            {"role": "reader", "accept": [*READS, "peloton.api.v0.respool.ResourceManager:Lookup*",
                                          "peloton.api.v0.respool.ResourceManager:Get*",
                                       "peloton.api.v0.respool.ResourceManager:Query",
                                          "peloton.api.v0.host.svc.HostService:Query*",
                                          *CAPACITY, f"{CRON}:Get*", f"{CRON}:List*",
                                          "thrift.ReadOnlyScheduler:*"],
             "reject": ["peloton.api.v1alpha.job.stateless.svc.JobService:GetJobCache"]},
            {"role": "dev", "accept": [*(f"{s}:*" for s in JOB_SERVICES), *READS[:0],
                                       "peloton.api.v0.respool.ResourceManager:Lookup*",
                                       "peloton.api.v0.respool.ResourceManager:Get*",
                                       "peloton.api.v0.respool.ResourceManager:Query",
                                       "peloton.api.v0.host.svc.HostService:Query*",
                                       *CAPACITY, f"{CRON}:*",
                                       "thrift.ReadOnlyScheduler:*",
                                       "thrift.AuroraSchedulerManager:*:alice"],
             "pools": ["/dev", "/AuroraBridge"], "owners": ["self"]},
            {"role": "root", "accept": ["*"]},
            {"role": "agent", "accept": ["pelotonpy.internal.agent.AgentRegistry:*"]},
        ],
    }


@dataclass
class SecureCluster:
    """The cluster, its users file and what `peloton up` printed."""

    up: UpCluster
    users_file: Path

    def client(self, user: str | None = None, password: str | None = None) -> PelotonClient:
        """A client calling as `user` (None: no credentials, the default user)."""
        headers = {}
        if user is not None:
            headers = {"username": user, "password": password or PASSWORDS[user]}
        up = self.up
        return PelotonClient(f"127.0.0.1:{up.jobmgr_port}", f"127.0.0.1:{up.resmgr_port}",
                             f"127.0.0.1:{up.hostmgr_port}", caller="peloton-security",
                             timeout=20.0, headers=headers)

    @property
    def data(self) -> Path:
        return self.up.base / "data"

    def agent_address(self) -> str:
        """host:port of the local agent's AgentService (from `peloton up`'s output)."""
        match = re.search(r"agent\s+\S+ gRPC (\S+)", self.up.log())
        assert match, self.up.log()
        return match.group(1)

    def audit(self) -> list[dict[str, str]]:
        """The audit log's records."""
        import json

        path = self.data / "audit.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def write_users(base: Path) -> Path:
    path = base / "users.yaml"
    path.write_text(yaml.safe_dump(users_doc()))
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """`peloton up --auth users.yaml` with one local agent, for a whole test module."""
    base = tmp_path_factory.mktemp("secure")
    users = write_users(base)
    cluster = UpCluster(base, agents=1, extra=["--auth", str(users)]).start()
    admin = SecureCluster(cluster, users).client("admin")
    try:
        for name in ("dev", "prod"):
            pool = base / f"{name}.pool.yaml"
            pool.write_text(POOL.format(name=name))
            cluster.cli("--basicAuthConfig", str(_basic(base, "admin")), "respool", "create",
                        f"/{name}", str(pool))
        yield SecureCluster(cluster, users)
    finally:
        admin.close()
        cluster.close()


def _basic(base: Path, user: str) -> Path:
    path = base / f"{user}.auth.yaml"
    path.write_text(yaml.safe_dump({"username": user, "password": PASSWORDS[user]}))
    return path


POOL = """\
name: {name}
owningteam: security
description: "a pool of the security tests"
resources:
- kind: cpu
  reservation: 0
  limit: 100
  share: 1
- kind: memory
  reservation: 0
  limit: 100000
  share: 1
- kind: disk
  reservation: 0
  limit: 1000000
  share: 1
- kind: gpu
  reservation: 0
  limit: 0
  share: 1
policy: 1
"""
