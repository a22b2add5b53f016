"""A newer update aborts the older one; in-place updates put pods back on their previous hosts."""

from __future__ import annotations

from typing import Any

from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.core.model.resources import Resources
from tests.fakes.hostmgr import Booking
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    RUNNING,
    Releaser,
    create,
    get,
    in_flight,
    job_id,
    pods,
    service_spec,
    version,
    wait_running,
    wait_workflow,
)
from tests.unit.jobmgr_servicers.placing import CorePlacement


def _replace(c: Cluster, jid: str, spec: stateless_pb2.JobSpec, ver: str, **update: Any) -> str:
    resp = c.jobs.ReplaceJob(svc.ReplaceJobRequest(
        job_id=job_id(jid), version=version(ver), spec=spec,
        update_spec=stateless_pb2.UpdateSpec(**update)), timeout=10)
    return str(resp.version.value)


def _ready(c: Cluster, n: int) -> tuple[str, str]:
    jid = create(c, service_spec(n)).job_id.value
    wait_running(c, jid, n)
    wait_workflow(c, jid, "WORKFLOW_STATE_SUCCEEDED")
    return jid, str(get(c, jid).job_info.status.version.value)


def _workflows(c: Cluster, jid: str) -> list[Any]:
    """The job's workflows, newest first."""
    return list(c.jobs.ListJobWorkflows(svc.ListJobWorkflowsRequest(job_id=job_id(jid)),
                                        timeout=10).workflow_infos)


def _state(info: Any) -> str:
    return stateless_pb2.WorkflowState.Name(info.status.state)


def test_a_newer_update_aborts_the_active_one_and_proceeds(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 3)
    held = Releaser(cluster)
    ver = _replace(cluster, jid, service_spec(3, tag="v2"), ver, batch_size=1)
    assert cluster.until(lambda: in_flight(cluster, jid, 2), "the first update in flight") == [0]
    assert _state(_workflows(cluster, jid)[0]) == "WORKFLOW_STATE_ROLLING_FORWARD"

    _replace(cluster, jid, service_spec(3, tag="v3"), ver, batch_size=3)
    newer, older = _workflows(cluster, jid)[:2]  # then the create workflow
    assert _state(older) == "WORKFLOW_STATE_ABORTED"
    assert older.status.version.value.startswith("2-")
    assert newer.status.version.value.startswith("3-")
    assert _state(newer) in ("WORKFLOW_STATE_INITIALIZED", "WORKFLOW_STATE_ROLLING_FORWARD")
    # The newer workflow drives every instance (a batch of 3), the older one none any more.
    def all_moving() -> list[int] | None:
        flight = in_flight(cluster, jid, 3)
        return flight if len(flight) == 3 else None

    assert sorted(cluster.until(all_moving, "all three instances moving to config 3")) == [0, 1, 2]
    held.stop()
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    running = wait_running(cluster, jid, 3, config=3)
    assert len(running) == 3
    assert {p.spec.containers[0].entrypoint.value for p in pods(cluster, jid)} == \
        {"serve --tag v3"}
    newer, older = _workflows(cluster, jid)[:2]
    assert _state(older) == "WORKFLOW_STATE_ABORTED"  # it stays aborted; nothing revives it
    assert _state(newer) == "WORKFLOW_STATE_SUCCEEDED"
    assert newer.status.num_instances_completed == 3


def _hosts(c: Cluster, jid: str) -> dict[int, str]:
    return {i: p.status.host for i, p in enumerate(pods(c, jid, summary_only=True))}


def _rolled(c: Cluster, jid: str, config: int) -> dict[int, str] | None:
    found = [p for p in pods(c, jid, summary_only=True)
             if p.status.state == RUNNING and p.status.version.value == f"{config}-0-0"]
    return _hosts(c, jid) if len(found) == 3 else None


def test_in_place_update_keeps_each_pod_on_its_host_where_it_still_fits(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 3)
    before = _hosts(cluster, jid)
    assert len(set(before.values())) == 3, before
    CorePlacement(cluster)

    def setup() -> None:
        # A big empty host: spreading would put every new run there.
        cluster.hosts.add_host("host-big", cpu=256, mem=262144)
        # Instance 2's host fills up: once its run stops, its 0.1 cpu no longer fits.
        full = cluster.hosts.hosts[before[2]]
        free = full.offer().available
        full.bookings["filler"] = Booking("filler", Resources(free.cpu + 0.05, 0, 0, 0),
                                          False, (), ())

    setup()
    ver = _replace(cluster, jid, service_spec(3, tag="v2"), ver, batch_size=3, in_place=True)
    after = cluster.until(lambda: _rolled(cluster, jid, 2), "3 pods running config 2")
    assert after[0] == before[0] and after[1] == before[1], (before, after)
    assert after[2] == "host-big", "a host that no longer fits is not waited for"
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")

    # The same setup without in_place moves pods to the emptiest host: the preference above
    # is what kept them (so the assertions above can fail).
    ver = str(get(cluster, jid).job_info.status.version.value)
    _replace(cluster, jid, service_spec(3, tag="v3"), ver, batch_size=3)
    moved = cluster.until(lambda: _rolled(cluster, jid, 3), "3 pods running config 3")
    assert set(moved.values()) == {"host-big"}, moved
