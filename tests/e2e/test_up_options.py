"""`peloton up` options that reach past the core daemons (issues 22 item 4 and 23 item 11).

- `--host 0.0.0.0 --insecure` starts every front, the Aurora bridge included (it used not to
  be told `--insecure` and refused to serve a non-loopback address without authentication);
- `--agent-attributes [I:]K=V` gives the local agents host attributes that placement
  constraints match: a job constrained to `zone=west` runs only on the agent that has it;
- `--aurora-unfit-jobs refuse` gives the Aurora endpoint Peloton's rule for a job no host could
  hold (refused at create; the default, Aurora's, queues it: tests/e2e/test_gorealis.py);
- `--aurora-watch-time peloton` and `--aurora-concurrent-updates replace` give it Peloton's
  bridge's update rules: minWaitInInstanceRunningMs ignored, a second startJobUpdate replaces
  the running one (the defaults, Aurora's: tests/e2e/test_gorealis.py, test_aurora_client.py).

One cluster serves both: two agents, one in each zone, bound to every address.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import host_label, write_job, write_pool
from tests.e2e.test_aurora_client import request, status, task_config
from tests.e2e.test_batch_jobs import create
from tests.harness.aurora_apache_client import connect, generate
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
S = task_pb2.TaskState


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    base = tmp_path_factory.mktemp("up-options")
    cluster = UpCluster(base, agents=2, extra=[
        "--host", "0.0.0.0", "--insecure",
        "--agent-cpus", "1", "--agent-mem-mb", "1024", "--agent-disk-mb", "10000",
        "--agent-attributes", "rack=r1", "--agent-attributes", "0:zone=east",
        "--agent-attributes", "1:zone=west", "--aurora-unfit-jobs", "refuse",
        "--aurora-watch-time", "peloton", "--aurora-concurrent-updates", "replace"]).start()
    try:
        cluster.cli("respool", "create", "/zones", str(write_pool(base, "zones", cpu_limit=2)))
        yield cluster
    finally:
        cluster.close()



def test_up_on_every_address_with_insecure_serves_the_aurora_bridge(up: UpCluster) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", up.aurora_port, timeout=10)
    conn.request("GET", "/health")
    reply = conn.getresponse()
    assert (reply.status, reply.read()) == (200, b"OK")
    conn.close()
    assert f"aurora bridge HTTP http://0.0.0.0:{up.aurora_port}/api" in up.log()


def test_agent_attributes_are_host_labels_that_constraints_place_on(up: UpCluster,
                                                                     tmp_path: Path) -> None:
    hosts = {h.hostname: {lb.key: lb.value for lb in h.labels}
             for h in up.client.query_hosts().host_infos}
    assert hosts["localhost-0"]["zone"] == "east" and hosts["localhost-1"]["zone"] == "west"
    assert hosts["localhost-0"]["rack"] == hosts["localhost-1"]["rack"] == "r1"
    for zone, host in (("west", "localhost-1"), ("east", "localhost-0")):
        job_id = create(up, "/zones", write_job(tmp_path, f"in-{zone}", "sleep 300", count=2,
                                                cpu=0.1, mem=16, extra=host_label("zone", zone)))

        def placed(job_id: str = job_id) -> list[str] | None:
            tasks = up.client.list_tasks(job_id).result.value
            if len(tasks) == 2 and all(t.runtime.state == S.RUNNING for t in tasks.values()):
                return [tasks[i].runtime.host for i in range(2)]
            return None

        assert eventually(placed, 90, f"the {zone} job RUNNING") == [host, host]
        up.cli("job", "stop", job_id)


def test_aurora_unfit_jobs_refuse_gives_pelotons_rule(up: UpCluster, tmp_path: Path) -> None:
    module, t = generate(tmp_path / "aurora-client")
    client = connect(module, f"http://127.0.0.1:{up.aurora_port}/api", "binary")
    try:
        task = task_config(t, "too-big", "sleep 1000")
        task.resources = [t.Resource(numCpus=500), t.Resource(ramMb=32), t.Resource(diskMb=16)]
        resp = client.createJob(t.JobConfiguration(key=task.job, owner=task.owner,
                                                   instanceCount=1, taskConfig=task))
        assert resp.responseCode == t.ResponseCode.INVALID_REQUEST, resp.details
        text = " ".join(d.message for d in resp.details or [])
        assert "500 cpu" in text and "can never run" in text, text
    finally:
        client._iprot.trans.close()


def test_aurora_update_rules_of_pelotons_bridge(up: UpCluster, tmp_path: Path) -> None:
    module, t = generate(tmp_path / "aurora-client")
    client = connect(module, f"http://127.0.0.1:{up.aurora_port}/api", "binary")
    U = t.JobUpdateStatus
    try:
        # A ten-minute watch time, ignored: the deploy rolls forward once the task runs.
        watched = request(t, task_config(t, "pelotons-rules", "sleep 1000"), 1,
                          watch_ms=600_000)
        resp = client.startJobUpdate(watched, "deploy")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        first = resp.result.startJobUpdateResult.key
        eventually(lambda: status(client, first) == U.ROLLED_FORWARD, 90, "rolled forward")
        second = client.startJobUpdate(
            request(t, task_config(t, "pelotons-rules", "sleep 1001"), 1, pulse_ms=600_000),
            "v2")
        assert second.responseCode == t.ResponseCode.OK, second.details
        # Started while the second one is active (awaiting its first pulse): it replaces it
        # instead of being refused.
        third = client.startJobUpdate(
            request(t, task_config(t, "pelotons-rules", "sleep 1002"), 1, watch_ms=600_000), "v3")
        assert third.responseCode == t.ResponseCode.OK, third.details
        last = third.result.startJobUpdateResult.key
        eventually(lambda: status(client, last) == U.ROLLED_FORWARD, 90, "v3 rolled forward")
        assert status(client, second.result.startJobUpdateResult.key) == U.ABORTED
        client.killTasks(t.JobKey(role="www", environment="devel", name="pelotons-rules"),
                         None, "done")
    finally:
        client._iprot.trans.close()
