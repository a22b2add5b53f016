"""Service discovery end to end (issue 2/6 item 3): `peloton up --zk` and a real ZooKeeper.

An Aurora client finds the scheduler the way clusters.json with `zk` and
`scheduler_zk_path` makes it (the ServerSet at /aurora/scheduler), deploys a service whose
Thermos data has an Announcer, and a caller resolves the service the way a Finagle
ServerSet client does: the `member_` children of `/aurora/<role>/<env>/<job>`, each
node's JSON.  The members follow a rolling update (new runs, new nodes, their new hosts
and ports) and are gone once the job is killed; each announced endpoint really serves
(a web server per instance).  A native Peloton job announces itself with the task label
`peloton/announce`, and Peloton's clients find the daemons' leader nodes.  Every wait polls
with a deadline.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from peloton.api.client_discovery import endpoints_from_zookeeper
from peloton.common.leader import new_client
from peloton.common.serverset import MEMBER_PREFIX, resolve_http_url
from tests.e2e.conftest import write_pool
from tests.harness.aurora_apache_client import connect, generate
from tests.harness.cluster import UpCluster, eventually
from tests.harness.procs import REPO
from tests.harness.zookeeper import serverset_members

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper, pytest.mark.timeout(300)]
RESOURCES = ["--agent-cpus", "2", "--agent-mem-mb", "4096", "--agent-disk-mb", "100000"]
SERVER = "exec python3 -m http.server {{thermos.ports[http]}} --bind 127.0.0.1"

#: The README's example of a native announced job (its path moved under this test's root).
EXAMPLE = REPO / "docs" / "examples" / "announced-service.yaml"


@pytest.fixture(scope="module")
def root() -> str:
    return f"/sd-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, zookeeper: str, root: str) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path_factory.mktemp("discovery-up"), agents=3, extra=[
        *RESOURCES, "--zk", zookeeper, "--zk-root", f"{root}/peloton",
        "--aurora-zk-path", f"{root}/aurora/scheduler",
        "--announcer-serverset-path", f"{root}/aurora"]).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def zk(zookeeper: str) -> Iterator[Any]:
    client = new_client(zookeeper, use_gevent=False)
    client.start(10)
    yield client
    client.stop()
    client.close()


def finagle_resolve(zk: Any, path: str) -> dict[int, dict[str, Any]]:
    """shard -> member JSON plus its node name; every member a ServerSet client sees is ALIVE."""
    members = serverset_members(zk, path, MEMBER_PREFIX)
    assert all(doc["status"] == "ALIVE" for doc in members.values())
    return members


def serves(port: int) -> bool:
    """An endpoint answers HTTP (agents all run on this machine: 127.0.0.1)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def task_config(t: Any, name: str, command: str) -> Any:
    data = json.dumps({"task": {"name": name, "processes": [{"name": "web", "cmdline": command}]},
                       "announce": {"primary_port": "http", "portmap": {"aurora": "http"}}})
    return t.TaskConfig(
        job=t.JobKey(role="www", environment="prod", name=name), owner=t.Identity(user="www"),
        isService=True, priority=0, maxTaskFailures=-1, production=False, tier="preemptible",
        resources=[t.Resource(numCpus=0.1), t.Resource(ramMb=64), t.Resource(diskMb=16),
                   t.Resource(namedPort="http")],
        constraints=[t.Constraint(name="host",
                                  constraint=t.TaskConstraint(limit=t.LimitConstraint(limit=1)))],
        executorConfig=t.ExecutorConfig(name="AuroraExecutor", data=data),
        container=t.Container(mesos=t.MesosContainer()))


def update(t: Any, task: Any) -> Any:
    settings = t.JobUpdateSettings(updateGroupSize=1, maxPerInstanceFailures=0, maxFailedInstances=0,
                                   minWaitInInstanceRunningMs=100, rollbackOnFailure=False,
                                   waitForBatchCompletion=False)
    return t.JobUpdateRequest(taskConfig=task, instanceCount=2, settings=settings, metadata=[])


def running(client: Any, t: Any, key: Any) -> dict[int, tuple[str, int, str]]:
    """instance -> (host, http port, task id) of its RUNNING task, from Aurora's task listing."""
    resp = client.getTasksWithoutConfigs(t.TaskQuery(jobKeys=[key], statuses={t.ScheduleStatus.RUNNING}))
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    return {tk.assignedTask.instanceId: (tk.assignedTask.slaveHost, tk.assignedTask.assignedPorts["http"],
                                         tk.assignedTask.taskId)
            for tk in resp.result.scheduleStatusResult.tasks}


def matches(members: dict[int, dict[str, Any]], tasks: dict[int, tuple[str, int, str]]) -> bool:
    """The members are exactly the tasks' endpoints (primary, http and the aurora alias)."""
    if sorted(members) != sorted(tasks) or not tasks:
        return False
    for instance, (host, port, _) in tasks.items():
        endpoint = {"host": host, "port": port}
        doc = members[instance]
        if doc["serviceEndpoint"] != endpoint or doc["additionalEndpoints"] != \
                {"http": endpoint, "aurora": endpoint}:
            return False
    return True


def status(client: Any, key: Any) -> int:
    resp = client.getJobUpdateDetails(key, None)
    assert resp.responseCode == 1, resp.details
    return int(resp.result.getJobUpdateDetailsResult.detailsList[0].update.summary.state.status)


def test_daemons_and_the_aurora_scheduler_are_found_through_zookeeper(
        up: UpCluster, zk: Any, zookeeper: str, root: str) -> None:
    assert resolve_http_url(zk, f"{root}/aurora/scheduler") == f"http://127.0.0.1:{up.aurora_port}"
    found = endpoints_from_zookeeper([zookeeper], f"{root}/peloton")
    assert (found.jobmgr, found.resmgr, found.hostmgr) == (
        f"127.0.0.1:{up.jobmgr_port}", f"127.0.0.1:{up.resmgr_port}", f"127.0.0.1:{up.hostmgr_port}")
    assert "zookeeper" in up.log() and f"{root}/aurora" in up.log()


def test_an_announced_aurora_service_is_resolved_through_its_serverset(
        up: UpCluster, zk: Any, root: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    admin, t = generate(tmp_path_factory.mktemp("aurora-client"))
    # Aurora's client with `zk` + `scheduler_zk_path`: the scheduler's URL from the ServerSet.
    client = connect(admin, resolve_http_url(zk, f"{root}/aurora/scheduler") + "/api", "binary")
    path = f"{root}/aurora/www/prod/web"
    try:
        resp = client.startJobUpdate(update(t, task_config(t, "web", SERVER)), "deploy")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        key = resp.result.startJobUpdateResult.key
        first = eventually(lambda: len(tasks := running(client, t, key.job)) == 2 and
                           matches(finagle_resolve(zk, path), tasks) and tasks, 90,
                           "a member per RUNNING instance, with its host and port")
        eventually(lambda: all(serves(port) for _, port, _ in first.values()), 30,
                   f"every announced endpoint to serve: {first}")
        before = finagle_resolve(zk, path)
        _, stat = zk.get(f"{path}/{before[0]['node']}")
        assert stat.ephemeralOwner != 0
        # The deploy ends minWaitInInstanceRunningMs after its last instance runs, which on a
        # busy machine can come after its endpoints serve; a second update started before
        # that is refused (INVALID_REQUEST, as on Aurora), so wait as `aurora update wait` would.
        eventually(lambda: status(client, key) == t.JobUpdateStatus.ROLLED_FORWARD, 60,
                   "the deploy ROLLED_FORWARD")

        # A rolling update: every instance gets a new run; the members follow, one by one.
        resp = client.startJobUpdate(update(t, task_config(t, "web", SERVER + " --directory /")),
                                     "roll")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        second = resp.result.startJobUpdateResult.key
        eventually(lambda: status(client, second) == t.JobUpdateStatus.ROLLED_FORWARD, 120,
                   "the rolling update ROLLED_FORWARD")

        def followed() -> dict[int, tuple[str, int, str]] | None:
            tasks = running(client, t, key.job)
            fresh = {i: v for i, v in tasks.items() if v[2] != first.get(i, ("", 0, ""))[2]}
            members = finagle_resolve(zk, path)
            if len(fresh) == 2 and matches(members, fresh) and \
                    not {m["node"] for m in members.values()} & {m["node"] for m in before.values()}:
                return fresh
            return None

        after = eventually(followed, 60, "new members for the new runs, the old ones gone")
        eventually(lambda: all(serves(port) for _, port, _ in after.values()), 30,
                   f"every new endpoint to serve: {after}")

        # Killed: nothing left to resolve.
        assert client.killTasks(key.job, None, "done").responseCode == t.ResponseCode.OK
        eventually(lambda: not finagle_resolve(zk, path), 60, "every member gone after the kill")
    finally:
        client._iprot.trans.close()


def test_a_native_job_announces_itself_with_a_task_label(up: UpCluster, zk: Any, root: str,
                                                          tmp_path: Path) -> None:
    path = f"{root}/services/web"
    spec = tmp_path / "native.yaml"
    spec.write_text(EXAMPLE.read_text().replace("value: /services/web", f"value: {path}"))
    up.cli("respool", "create", "/native", str(write_pool(tmp_path, "native")))
    out = up.cli("job", "stateless", "create", "/native", str(spec), "2").stdout
    job_id = next(w for line in out.splitlines() if "created" in line for w in line.split()
                  if len(w) == 36)
    members = eventually(lambda: len(m := finagle_resolve(zk, path)) == 2 and m, 90,
                         "two members of the native job")
    for doc in members.values():
        assert set(doc["additionalEndpoints"]) == {"http", "aurora"}
    eventually(lambda: all(serves(d["serviceEndpoint"]["port"]) for d in members.values()), 30,
               "the native job's endpoints to serve")
    version = up.client.get_stateless_job(job_id, summary_only=True).summary.status.version.value
    up.cli("job", "stateless", "stop", job_id, version)
    eventually(lambda: not finagle_resolve(zk, path), 60, "members gone once the job is stopped")
