"""The Aurora endpoint with authentication on, through an independent Apache Thrift client.

HTTP Basic (what gorealis' BasicAuth option and the Aurora client with a
netrc send) maps onto the cluster's users; Aurora's permissions decide per
method and job (`thrift.AuroraSchedulerManager:<method>:<role>:<env>:<name>`);
refusals are AUTH_FAILED Responses with Aurora's wording; oversized input is
INVALID_REQUEST naming the field; every change is audited.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness.aurora_apache_client import connect, generate
from tests.harness.cluster import eventually
from tests.security.conftest import PASSWORDS, SecureCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return generate(tmp_path_factory.mktemp("aurora-client"))


@pytest.fixture
def as_user(secure: SecureCluster, apache: tuple[Any, Any]) -> Iterator[Any]:
    admin, _ = apache
    opened: list[Any] = []

    def client(user: str | None, password: str | None = None, protocol: str = "json") -> Any:
        c = connect(admin, f"http://127.0.0.1:{secure.up.aurora_port}/api", protocol)
        if user is not None:
            secret = base64.b64encode(f"{user}:{password or PASSWORDS[user]}".encode()).decode()
            headers = {"Authorization": f"Basic {secret}"}
            if protocol == "binary":
                headers |= {"Content-Type": "application/vnd.apache.thrift.binary",
                            "Accept": "application/vnd.apache.thrift.binary"}
            c._iprot.trans.setCustomHeaders(headers)
        opened.append(c)
        return c

    yield client


def task(t: Any, role: str, name: str, metadata: int = 0) -> Any:
    data = json.dumps({"task": {"name": name, "processes": [
        {"name": "main", "cmdline": "echo hello from aurora; sleep 60", "final": False}]}})
    return t.TaskConfig(
        job=t.JobKey(role=role, environment="devel", name=name), owner=t.Identity(user=role),
        isService=True, priority=0, maxTaskFailures=1, production=False, tier="preemptible",
        resources=[t.Resource(numCpus=0.1), t.Resource(ramMb=32), t.Resource(diskMb=16)],
        executorConfig=t.ExecutorConfig(name="AuroraExecutor", data=data),
        metadata=[t.Metadata(key=f"k{i}", value="v" * 100) for i in range(metadata)],
        container=t.Container(mesos=t.MesosContainer()))


def job(t: Any, role: str, name: str, metadata: int = 0) -> Any:
    return t.JobConfiguration(key=t.JobKey(role=role, environment="devel", name=name),
                              owner=t.Identity(user=role), taskConfig=task(t, role, name, metadata),
                              instanceCount=1)


@pytest.mark.parametrize("protocol", ["json", "binary"])
def test_aurora_callers_are_authenticated_and_authorized_per_role(
        secure: SecureCluster, apache: tuple[Any, Any], as_user: Any, protocol: str) -> None:
    _, t = apache
    name = f"hello-{protocol}"
    anonymous = as_user(None, protocol=protocol)
    refused = anonymous.createJob(job(t, "alice", name))
    assert refused.responseCode == t.ResponseCode.AUTH_FAILED
    assert "Subject (default user) is not permitted to thrift.AuroraSchedulerManager:createJob:" \
           f"alice:devel:{name}" in refused.details[0].message
    wrong = as_user("alice", "not-her-password", protocol).createJob(job(t, "alice", name))
    assert wrong.responseCode == t.ResponseCode.AUTH_FAILED
    assert "invalid username/password" in wrong.details[0].message
    alice = as_user("alice", protocol=protocol)
    other_role = alice.createJob(job(t, "bob", name))
    assert other_role.responseCode == t.ResponseCode.AUTH_FAILED
    assert "Subject alice is not permitted" in other_role.details[0].message
    created = alice.createJob(job(t, "alice", name))
    assert created.responseCode == t.ResponseCode.OK, created.details
    key = t.JobKey(role="alice", environment="devel", name=name)
    # Reading needs no credentials (the default user may read, as in Aurora).
    eventually(lambda: anonymous.getTasksWithoutConfigs(t.TaskQuery(jobKeys=[key]))
               .result.scheduleStatusResult.tasks, 60, "the task to show up")
    kill = anonymous.killTasks(key, None, "by anyone")
    assert kill.responseCode == t.ResponseCode.AUTH_FAILED
    assert alice.killTasks(key, None, "done").responseCode == t.ResponseCode.OK
    records = [r for r in secure.audit() if r["front"] == "aurora"]
    assert any(r["who"] == "alice" and r["what"] == "createJob" and r["result"] == "OK"
               for r in records)
    assert any(r["what"] == "killTasks" and r["result"].startswith("AUTH_FAILED") for r in records)


def test_oversized_aurora_input_is_invalid_request_naming_the_field(
        secure: SecureCluster, apache: tuple[Any, Any], as_user: Any) -> None:
    _, t = apache
    alice = as_user("alice")
    many = alice.createJob(job(t, "alice", "many-metadata", metadata=20_000))
    assert many.responseCode == t.ResponseCode.INVALID_REQUEST
    assert "description.taskConfig.metadata: 20,000 entries is more than the maximum of 128" \
        in many.details[0].message
    long_key = job(t, "alice", "x" * 300)
    long_key.taskConfig.job.name = "x" * 300
    answer = alice.createJob(long_key)
    assert answer.responseCode == t.ResponseCode.INVALID_REQUEST
    assert "300 characters is more than the maximum of 256" in answer.details[0].message
