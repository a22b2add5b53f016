"""Which member answers a call (servicers/forwarding.py): the job a request is about, one
hop, waiting for a partition between owners, and ids that need no forwarding."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0 import peloton_pb2 as v0
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import (
    stateless_svc_pb2,
    stateless_svc_pb2_grpc,
)
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.api.grpc_server import GrpcServer
from peloton.api.service_registry import register
from peloton.core.errors import NotFound, Unavailable
from peloton.core.model.ids import new_id
from peloton.core.partitions import partition_of
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.servicers.forwarding import (
    FORWARDED_KEY,
    MemberForwarder,
    job_of,
    update_job_from,
)

JOB = new_id()
UPDATES = {"u-1": JOB}


def update_job(update_id: str) -> str | None:
    return UPDATES.get(update_id)


@pytest.mark.parametrize(("request_", "expected"), [
    (job_pb2.GetRequest(id=v0.JobID(value=JOB)), JOB),
    (job_pb2.CreateRequest(id=v0.JobID(value=JOB)), JOB),
    (job_pb2.CreateRequest(), None),  # a create without an id: answered where it lands
    (job_pb2.QueryRequest(), None),
    (task_pb2.StopRequest(jobId=v0.JobID(value=JOB)), JOB),
    (stateless_svc_pb2.GetJobRequest(job_id=v1.JobID(value=JOB)), JOB),
    (pod_svc_pb2.GetPodRequest(pod_name=v1.PodName(value=f"{JOB}-3")), JOB),
    (pod_svc_pb2.GetPodRequest(pod_name=v1.PodName(value="not-a-pod")), None),
    (update_svc_pb2.PauseUpdateRequest(updateId=v0.UpdateID(value="u-1")), JOB),
    (update_svc_pb2.PauseUpdateRequest(updateId=v0.UpdateID(value="u-2")), None),
])
def test_the_job_a_request_is_about(request_: Any, expected: str | None) -> None:
    assert job_of(request_, update_job) == expected


def test_an_unknown_workflow_is_answered_here() -> None:
    def get_update(update_id: str) -> Any:
        raise NotFound(f"no update {update_id}")

    assert update_job_from(get_update)("u-9") is None


class Context:
    """The part of a grpc.ServicerContext the forwarder reads."""

    def __init__(self, *metadata: tuple[str, str]) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def time_remaining(self) -> float | None:
        return 5.0


def forwarder(drives: set[str], owners: list[str | None]) -> MemberForwarder:
    """A forwarder whose owner lookups answer `owners` in turn (the last one for ever)."""
    def owner(job_id: str) -> str | None:
        return owners.pop(0) if len(owners) > 1 else owners[0]

    return MemberForwarder(drives.__contains__, owner, update_job, wait=0.2,
                           sleep=lambda _s: None)


def test_a_job_driven_here_is_answered_here() -> None:
    fw = forwarder({JOB}, ["127.0.0.1:1"])
    ctx: Any = Context()
    assert fw.forward("peloton.api.v0.job.JobManager/Get",
                      job_pb2.GetRequest(id=v0.JobID(value=JOB)), ctx) is None
    assert fw.forwarded == 0


def test_a_forwarded_call_is_never_forwarded_again() -> None:
    fw = forwarder(set(), ["127.0.0.1:1"])
    ctx: Any = Context((FORWARDED_KEY, "1"))
    with pytest.raises(Unavailable, match="moved while the call was forwarded"):
        fw.forward("peloton.api.v0.job.JobManager/Get",
                   job_pb2.GetRequest(id=v0.JobID(value=JOB)), ctx)
    assert fw.forwarded == 0


def test_a_partition_between_owners_is_waited_for_then_refused() -> None:
    ctx: Any = Context()
    request = job_pb2.GetRequest(id=v0.JobID(value=JOB))
    with pytest.raises(Unavailable, match="changing over"):
        forwarder(set(), [None]).forward("peloton.api.v0.job.JobManager/Get", request, ctx)
    # The partition comes to this member while the call waits: it is answered here.
    drives: set[str] = set()

    def owner(job_id: str) -> str | None:
        drives.add(job_id)
        return None

    fw = MemberForwarder(drives.__contains__, owner, update_job, wait=5.0,
                         sleep=lambda _s: None)
    assert fw.forward("peloton.api.v0.job.JobManager/Get", request, ctx) is None
    assert fw.forwarded == 0


def test_an_unreachable_owner_answers_with_its_status() -> None:
    aborted: list[tuple[grpc.StatusCode, str]] = []

    class Aborting(Context):
        def set_trailing_metadata(self, metadata: Any) -> None:
            pass

        def abort(self, code: grpc.StatusCode, details: str) -> None:
            aborted.append((code, details))
            raise Exception(details)

    fw = forwarder(set(), ["127.0.0.1:1"])  # nothing listens there
    ctx: Any = Aborting()
    with pytest.raises(Exception):  # noqa: B017  (context.abort raises a bare Exception)
        fw.forward("peloton.api.v0.job.JobManager/Get",
                   job_pb2.GetRequest(id=v0.JobID(value=JOB)), ctx)
    assert fw.forwarded == 1 and aborted[0][0] is grpc.StatusCode.UNAVAILABLE
    fw.close()


def test_a_member_draws_new_job_ids_it_drives() -> None:
    some = Ownership(8, {2, 5})
    ids = [some.new_job_id() for _ in range(50)]
    assert {partition_of(j, 8) for j in ids} <= {2, 5}
    assert len(set(ids)) == 50
    assert Ownership(8).new_job_id() != Ownership(8).new_job_id()  # alone: any id


def test_other_message_fields_before_the_job_id_are_passed_over() -> None:
    request = job_pb2.CreateRequest(id=v0.JobID(value=JOB))
    request.config.name = "a job"  # a set message field that names no job
    assert job_of(request, update_job) == JOB
    assert job_of(job_pb2.CreateRequest(config=request.config), update_job) is None


# -- over the wire: a member relays the owner's answers --------------------------------------
class Owner(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """What the owning member answers (names itself in every reply)."""

    def GetJob(self, request: Any, context: Any) -> Any:
        if request.job_id.value != JOB:
            raise NotFound("job not found", field="job_id")
        reply = stateless_svc_pb2.GetJobResponse()
        reply.job_info.spec.name = "from the owner"
        return reply

    def ListPods(self, request: Any, context: Any) -> Any:
        for i in range(3):
            yield stateless_svc_pb2.ListPodsResponse(pods=[pod_pb2.PodSummary(
                pod_name=v1.PodName(value=f"{JOB}-{i}"))])


class NotOwner(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """A member that must never answer itself: every call is about the owner's job."""

    def GetJob(self, request: Any, context: Any) -> Any:
        raise AssertionError("answered by a member that does not drive the job")

    def ListPods(self, request: Any, context: Any) -> Any:
        raise AssertionError("answered by a member that does not drive the job")


def test_a_member_relays_the_owners_replies_and_errors() -> None:
    owner = GrpcServer("127.0.0.1:0")
    register(owner, stateless_svc_pb2_grpc.add_JobServiceServicer_to_server, Owner())
    owner.start()
    fw = MemberForwarder(lambda _job: False, lambda _job: f"127.0.0.1:{owner.port}",
                         update_job)
    member = GrpcServer("127.0.0.1:0")
    register(member, stateless_svc_pb2_grpc.add_JobServiceServicer_to_server, NotOwner(),
             forward=fw)
    member.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{member.port}")
    try:
        stub = stateless_svc_pb2_grpc.JobServiceStub(channel)
        got = stub.GetJob(stateless_svc_pb2.GetJobRequest(job_id=v1.JobID(value=JOB)),
                          timeout=10)
        assert got.job_info.spec.name == "from the owner"
        pods = [p.pod_name.value for r in stub.ListPods(
            stateless_svc_pb2.ListPodsRequest(job_id=v1.JobID(value=JOB)), timeout=10)
            for p in r.pods]
        assert pods == [f"{JOB}-{i}" for i in range(3)]
        with pytest.raises(grpc.RpcError) as err:  # the owner's status and error field
            stub.GetJob(stateless_svc_pb2.GetJobRequest(job_id=v1.JobID(value=new_id())),
                        timeout=10)
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
        assert ("peloton-error-field", "job_id") in tuple(err.value.trailing_metadata())
        assert fw.forwarded == 3
    finally:
        channel.close()
        fw.close()
        member.stop(0)
        owner.stop(0)
