"""Which member answers a call (servicers/forwarding.py): the job a request is about, one
hop, waiting for a partition between owners, ids that need no forwarding, and, under
authentication, the owner authorizing the original caller (basic auth and mutual TLS).
The servers of each test are started through the `served` fixture (served.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import grpc
import pytest

from peloton.api.auth_grpc import current_principal
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
from peloton.api.gen.pelotonpy.api.cron import cron_pb2
from peloton.api.grpc_server import GrpcServer
from peloton.common.auth import Principal
from peloton.common.auth.authenticator import CALLER_KEY
from peloton.common.leader import LeaderId
from peloton.common.member_directory import MemberDirectory
from peloton.common.tls import TlsFiles
from peloton.core.errors import NotFound, Unavailable
from peloton.core.model.ids import new_id
from peloton.core.partitions import partition_of
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.servicers.forwarding import (
    FORWARDED_KEY,
    NOT_OWNER_KEY,
    MemberForwarder,
    job_of,
    update_job_from,
)
from peloton.storage.leader_store import FencedOut
from tests.unit.common.fake_zk import FakeZk
from tests.unit.jobmgr_servicers.served import Served, basic, make_certs, security

# Fixed, not drawn: it is in the parametrized tests' ids, which every pytest process of a
# `make test` run must collect alike (scripts/pytest_shards.py checks each ran once).
JOB = "5c0f2a6e-8a37-4c3e-9d2b-0a1e7f3b9c41"
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
    # a schedule is routed by its name (its partition is the name's)
    (cron_pb2.ScheduleCronJobRequest(job=cron_pb2.CronJob(name="nightly")), "nightly"),
    (cron_pb2.DescheduleCronJobRequest(name="nightly"), "nightly"),
    (cron_pb2.StartCronJobRequest(name="nightly"), "nightly"),
    (cron_pb2.StartCronJobRequest(), None),
    (cron_pb2.GetCronJobRequest(name="nightly"), None),  # a read: the store, anywhere
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

        self.trailers: tuple[tuple[str, str], ...] = ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def set_trailing_metadata(self, trailers: tuple[tuple[str, str], ...]) -> None:
        self.trailers = trailers

    def time_remaining(self) -> float | None:
        return 5.0


class Owners:
    """Owner lookups answering `answers` in turn (the last one for ever); records how it
    was asked."""

    def __init__(self, *answers: str | None, on_lookup: Any = None) -> None:
        self.answers = list(answers)
        self.on_lookup = on_lookup
        self.asked: list[bool] = []  # `fresh` of each lookup
        self.forgotten: list[str] = []

    def address_of(self, job_id: str, fresh: bool = False) -> str | None:
        self.asked.append(fresh)
        if self.on_lookup is not None:
            self.on_lookup(job_id)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def forget(self, job_id: str) -> None:
        self.forgotten.append(job_id)


def forwarder(drives: set[str], owners: list[str | None]) -> MemberForwarder:
    """A forwarder whose owner lookups answer `owners` in turn (the last one for ever)."""
    return MemberForwarder(drives.__contains__, Owners(*owners), update_job, wait=0.2,
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
    assert ctx.trailers == ((NOT_OWNER_KEY, JOB),)  # refused before any work: safe to retry


def test_a_partition_between_owners_is_waited_for_then_refused() -> None:
    ctx: Any = Context()
    request = job_pb2.GetRequest(id=v0.JobID(value=JOB))
    with pytest.raises(Unavailable, match="changing over"):
        forwarder(set(), [None]).forward("peloton.api.v0.job.JobManager/Get", request, ctx)
    # The partition comes to this member while the call waits: it is answered here.
    drives: set[str] = set()
    owners = Owners(None, on_lookup=drives.add)
    fw = MemberForwarder(drives.__contains__, owners, update_job, wait=5.0,
                         sleep=lambda _s: None)
    assert fw.forward("peloton.api.v0.job.JobManager/Get", request, ctx) is None
    assert fw.forwarded == 0


def test_a_call_waiting_for_an_owner_reads_zookeeper_at_once_then_every_half_second() -> None:
    owners = Owners(None, None, None, "127.0.0.1:1")
    fw = MemberForwarder(lambda _job: False, owners, update_job, wait=5.0,
                         sleep=lambda _s: None)
    assert fw._await_owner(JOB) == "127.0.0.1:1"
    # The first look from memory, then ZooKeeper, then memory (watched) within 0.5 s.
    assert owners.asked == [False, True, False, False]
    slow = Owners(None, None, None, "127.0.0.1:1")
    waits = iter([0.0, 0.6, 0.0])  # the fake sleep moves a clock the forwarder reads
    clock = [100.0]
    fw = MemberForwarder(lambda _job: False, slow, update_job, wait=5.0,
                         sleep=lambda _s: clock.__setitem__(0, clock[0] + next(waits)))
    with patch("peloton.jobmgr.servicers.forwarding.time.monotonic", lambda: clock[0]):
        assert fw._await_owner(JOB, fresh=True) == "127.0.0.1:1"
    assert slow.asked == [True, False, True, False]  # fresh again once 0.5 s went by


def test_an_unreachable_owner_answers_with_its_status() -> None:
    aborted: list[tuple[grpc.StatusCode, str]] = []

    class Aborting(Context):
        def set_trailing_metadata(self, metadata: Any) -> None:
            pass

        def abort(self, code: grpc.StatusCode, details: str) -> None:
            aborted.append((code, details))
            raise Exception(details)

    owners = Owners("127.0.0.1:1")  # nothing listens there
    fw = MemberForwarder(lambda _job: False, owners, update_job)
    ctx: Any = Aborting()
    with pytest.raises(Exception):  # noqa: B017  (context.abort raises a bare Exception)
        fw.forward("peloton.api.v0.job.JobManager/Get",
                   job_pb2.GetRequest(id=v0.JobID(value=JOB)), ctx)
    assert fw.forwarded == 1 and aborted[0][0] is grpc.StatusCode.UNAVAILABLE
    assert fw.retried == 0  # it may have been delivered: not sent again
    assert owners.forgotten == [JOB]  # the next look reads ZooKeeper
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
@pytest.fixture
def served() -> Iterator[Served]:
    """Servers, forwarders and channels a test starts, all closed when it ends."""
    started = Served()
    yield started
    started.close()


class Owner(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """What the owning member answers (names itself in every reply); records who each call
    was served as (`current_principal()`: None without authentication) and its metadata."""

    def __init__(self) -> None:
        self.callers: list[Principal | None] = []
        self.metadata: list[dict[str, str]] = []

    def GetJob(self, request: Any, context: Any) -> Any:
        self._record(context)
        if request.job_id.value != JOB:
            raise NotFound("job not found", field="job_id")
        reply = stateless_svc_pb2.GetJobResponse()
        reply.job_info.spec.name = "from the owner"
        return reply

    def ListPods(self, request: Any, context: Any) -> Any:
        self._record(context)
        for i in range(3):
            yield stateless_svc_pb2.ListPodsResponse(pods=[pod_pb2.PodSummary(
                pod_name=v1.PodName(value=f"{JOB}-{i}"))])

    def _record(self, context: Any) -> None:
        self.callers.append(current_principal())
        self.metadata.append({k: v for k, v in context.invocation_metadata()})


class NotOwner(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """A member that must never answer itself: every call is about the owner's job."""

    def GetJob(self, request: Any, context: Any) -> Any:
        raise AssertionError("answered by a member that does not drive the job")

    def ListPods(self, request: Any, context: Any) -> Any:
        raise AssertionError("answered by a member that does not drive the job")


def jobs(channel: grpc.Channel) -> Any:
    return stateless_svc_pb2_grpc.JobServiceStub(channel)


def get_job(job_id: str = JOB) -> Any:
    return stateless_svc_pb2.GetJobRequest(job_id=v1.JobID(value=job_id))


def list_pods(stub: Any, **kwargs: Any) -> list[str]:
    return [p.pod_name.value for r in stub.ListPods(
        stateless_svc_pb2.ListPodsRequest(job_id=v1.JobID(value=JOB)), timeout=10, **kwargs)
        for p in r.pods]


def serve(served: Served, servicer: Any, forward: MemberForwarder | None = None,
          **kwargs: Any) -> GrpcServer:
    return served.server(stateless_svc_pb2_grpc.add_JobServiceServicer_to_server, servicer,
                         forward=forward, **kwargs)


def test_a_member_relays_the_owners_replies_and_errors(served: Served) -> None:
    owner = serve(served, Owner())
    fw = served.forwarder(lambda _job: False, Owners(f"127.0.0.1:{owner.port}"), update_job)
    stub = jobs(served.channel(serve(served, NotOwner(), fw)))
    assert stub.GetJob(get_job(), timeout=10).job_info.spec.name == "from the owner"
    assert list_pods(stub) == [f"{JOB}-{i}" for i in range(3)]
    with pytest.raises(grpc.RpcError) as err:  # the owner's status and error field
        stub.GetJob(get_job(new_id()), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert ("peloton-error-field", "job_id") in tuple(err.value.trailing_metadata())
    assert fw.forwarded == 3


# -- a stale owner cache (MemberDirectory over a fake ZooKeeper) ------------------------------
class Stale(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """A member that still believes it owns the job's partition after it moved: its write
    is refused by the partition fence, as the store would refuse it."""

    def GetJob(self, request: Any, context: Any) -> Any:
        raise FencedOut("partition 1 was claimed by a newer owner")


def stale_directory(old: int, new: int, job: str) -> tuple[FakeZk, MemberDirectory]:
    """A directory whose entry for `job`'s partition names the member at port `old` while
    ZooKeeper already names the one at `new` (the watch delivery runs behind)."""
    zk = FakeZk()
    members, partitions = "/p/jobmanager/members", "/p/jobmanager/partitions"
    zk.ensure_path(members)
    for name, port in (("old", old), ("new", new), ("me", 1)):
        zk.create(f"{members}/{name}", LeaderId(name, "127.0.0.1", 1, port).to_json())
    zk.create(f"{partitions}/{partition_of(job, 8)}", b"old")
    directory = MemberDirectory(zk, members, partitions, 8, "me")
    directory.start()
    assert directory.address_of(job) == f"127.0.0.1:{old}"
    zk.hold()
    zk.delete(f"{partitions}/{partition_of(job, 8)}")
    zk.create(f"{partitions}/{partition_of(job, 8)}", b"new")
    assert directory.address_of(job) == f"127.0.0.1:{old}"  # stale
    return zk, directory


def moved_to_owner(served: Served, old: Any) -> tuple[MemberForwarder, Any]:
    """A member whose directory names the member serving `old` as the owner, while the one
    serving Owner() already is: its forwarder and a stub to it."""
    owner = serve(served, Owner())
    stale = serve(served, old, served.forwarder(lambda _job: isinstance(old, Stale),
                                                Owners(None), update_job))
    _, directory = stale_directory(stale.port, owner.port, JOB)
    fw = served.forwarder(lambda _job: False, directory, update_job)
    return fw, jobs(served.channel(serve(served, NotOwner(), fw)))


def test_a_stale_owner_entry_costs_one_more_hop_never_a_wrong_answer(served: Served) -> None:
    # The member the cache names no longer drives the job: it refuses the forwarded call
    # (NOT_OWNER) before its servicer runs.
    fw, stub = moved_to_owner(served, NotOwner())
    assert stub.GetJob(get_job(), timeout=10).job_info.spec.name == "from the owner"
    assert (fw.forwarded, fw.retried) == (2, 1)
    # The owner read afresh is kept: the next calls go straight to it.
    assert list_pods(stub) == [f"{JOB}-{i}" for i in range(3)]
    assert (fw.forwarded, fw.retried) == (3, 1)


def test_a_streamed_call_to_a_stale_owner_is_sent_once_more(served: Served) -> None:
    fw, stub = moved_to_owner(served, NotOwner())
    assert list_pods(stub) == [f"{JOB}-{i}" for i in range(3)]
    assert (fw.forwarded, fw.retried) == (2, 1)


def test_a_stale_owners_fenced_refusal_is_relayed_and_the_next_call_finds_the_owner(
        served: Served) -> None:
    # The member the cache names still believes it owns the partition: it runs the call,
    # and its partition fence refuses the write.  The call may have done part of its work
    # there, so it is not sent again: the caller gets the retryable refusal.
    fw, stub = moved_to_owner(served, Stale())
    with pytest.raises(grpc.RpcError) as err:
        stub.GetJob(get_job(), timeout=10)
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "newer owner" in (err.value.details() or "")
    assert not any(k == NOT_OWNER_KEY for k, _ in err.value.trailing_metadata() or ())
    assert (fw.forwarded, fw.retried) == (1, 0)
    # The refusal dropped the entry: the caller's retry reads ZooKeeper, reaches the owner.
    assert stub.GetJob(get_job(), timeout=10).job_info.spec.name == "from the owner"
    assert (fw.forwarded, fw.retried) == (2, 0)


# -- a create on a member holding no partition ----------------------------------------------
class Creator(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """The owner: records the ids of the jobs it was asked to create."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def CreateJob(self, request: Any, context: Any) -> Any:
        self.created.append(request.job_id.value)
        return stateless_svc_pb2.CreateJobResponse(job_id=request.job_id)


class Refuses(stateless_svc_pb2_grpc.JobServiceServicer):  # type: ignore[misc]
    """A member holding no partition: it could not write a job it created itself."""

    def CreateJob(self, request: Any, context: Any) -> Any:
        raise AssertionError("created by a member holding no partition")


def test_a_create_on_a_member_holding_nothing_goes_to_the_owner_of_its_new_id(
        served: Served) -> None:
    owner_servicer = Creator()
    owner = serve(served, owner_servicer)
    drawn = new_id()
    fw = served.forwarder(lambda _job: False, Owners(f"127.0.0.1:{owner.port}"), update_job,
                          holds_none=lambda: True, draw=lambda: drawn)
    stub = jobs(served.channel(serve(served, Refuses(), fw)))
    got = stub.CreateJob(stateless_svc_pb2.CreateJobRequest(), timeout=10)
    assert got.job_id.value == drawn
    assert owner_servicer.created == [drawn]
    assert fw.forwarded == 1


def test_a_create_without_an_id_is_answered_by_a_member_holding_partitions() -> None:
    fw = MemberForwarder(lambda _job: False, Owners("127.0.0.1:1"), update_job,
                         holds_none=lambda: False)
    request = job_pb2.CreateRequest()
    assert fw.forward("peloton.api.v0.job.JobManager/Create", request, Context()) is None
    assert not request.HasField("id") and fw.forwarded == 0


# -- under authentication: the owner authorizes the original caller ---------------------------
def members(served: Served, *, tls: TlsFiles | None = None,
            internal: bool = True) -> tuple[Owner, GrpcServer, GrpcServer]:
    """An owner and a member forwarding to it, both checking callers against served.users()
    (the member calling as the internal user when `internal`; under TLS with `tls`, the
    certificate of both): (the owner's servicer, the owner, the member)."""
    owner_servicer = Owner()
    owner = serve(served, owner_servicer, security=security(tls, internal=internal))
    sec = security(tls, internal=internal)
    fw = served.forwarder(lambda _job: False, Owners(f"127.0.0.1:{owner.port}"), update_job,
                          connect=lambda address: served.channel(address, tls),
                          identity=sec.internal)
    return owner_servicer, owner, serve(served, NotOwner(), fw, security=sec)


def seen(principal: Principal | None) -> tuple[str, str, str]:
    assert principal is not None
    return principal.name, principal.role.name, principal.method


def test_with_basic_auth_the_owner_serves_the_caller_and_never_sees_her_password(
        served: Served) -> None:
    owner_servicer, _, member = members(served)
    stub = jobs(served.channel(member))
    stub.GetJob(get_job(), timeout=10, metadata=basic("alice"))
    assert list_pods(stub, metadata=basic("alice")) == [f"{JOB}-{i}" for i in range(3)]
    assert [seen(p) for p in owner_servicer.callers] == [("alice", "dev", "forwarded")] * 2
    for metadata in owner_servicer.metadata:  # the member's identity, naming her
        assert (metadata["username"], metadata[CALLER_KEY]) == ("peloton", "alice")
        assert "alice-pw" not in metadata.values()


def test_with_basic_auth_and_no_internal_identity_the_caller_proves_herself_to_the_owner(
        served: Served) -> None:
    # No internal password configured: the member has no identity of its own to present,
    # so the caller's credentials go on (as before relaying named callers) and the owner
    # checks them itself; the name the member adds is not believed from her.
    owner_servicer, _, member = members(served, internal=False)
    jobs(served.channel(member)).GetJob(get_job(), timeout=10, metadata=basic("alice"))
    assert [seen(p) for p in owner_servicer.callers] == [("alice", "dev", "password")]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TlsFiles]:
    """Certificates of the members (`peloton`: the internal user, as daemons would have
    one) and of the callers alice and bob."""
    base: Path = tmp_path_factory.mktemp("certs")
    return make_certs(base, "peloton", "alice", "bob")


def test_under_mutual_tls_the_owner_serves_the_caller_not_the_members_certificate(
        served: Served, certs: dict[str, TlsFiles]) -> None:
    # The member presents its own certificate to the owner (the internal user's) and has no
    # internal password: the certificate is its identity, and it names the caller.
    owner_servicer, _, member = members(served, tls=certs["peloton"], internal=False)
    stub = jobs(served.channel(member, certs["alice"]))
    stub.GetJob(get_job(), timeout=10)
    assert list_pods(stub) == [f"{JOB}-{i}" for i in range(3)]
    assert [seen(p) for p in owner_servicer.callers] == [("alice", "dev", "forwarded")] * 2


def test_a_client_naming_another_caller_gains_nothing(served: Served,
                                                      certs: dict[str, TlsFiles]) -> None:
    owner_servicer, owner, member = members(served, tls=certs["peloton"], internal=False)
    forged = ((CALLER_KEY, "admin"),)
    for target in (owner, member):  # straight to the owner, and through a member
        stub = jobs(served.channel(target, certs["bob"]))
        with pytest.raises(grpc.RpcError) as err:  # bob's own rights: GetJob only
            list_pods(stub, metadata=forged)
        assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "bob is not permitted to call ListPods" in (err.value.details() or "")
        stub.GetJob(get_job(), timeout=10, metadata=forged)
    # Served as bob both times: by his certificate, and as named by the member (which
    # dropped his forged name).
    assert [seen(p) for p in owner_servicer.callers] == [("bob", "reader", "certificate"),
                                                         ("bob", "reader", "forwarded")]
    # And with basic auth, the forged name from a client with a password is ignored too.
    stub = jobs(served.channel(owner, certs["alice"]))
    stub.GetJob(get_job(), timeout=10, metadata=(*basic("bob"), *forged))
    assert seen(owner_servicer.callers[-1]) == ("bob", "reader", "password")
