"""A Watch of one job (servicers/watch_fanin.py) is not fanned in: besides the receiving
member's own stream, one stream goes to the job's owner alone and follows it from owner
to owner, reading a new owner from its claim of the job's partition (watch.py's per-claim
history), so nothing it published before the stream opened is missed.  Over gRPC, the
members of watch_members.py, through the `cluster` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.watch import watch_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb
from peloton.core.partitions import partition_of
from peloton.jobmgr.servicers.watch import FROM_KEY
from peloton.jobmgr.servicers.watch_fanin import watched_job
from tests.unit.jobmgr_servicers.watch_members import (
    EVERY_POD,
    JOB,
    ONE_JOB,
    PARTITIONS,
    Cluster,
    aborted,
    broken,
    clusters,
    read_until,
    until,
)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    yield from clusters()


@pytest.mark.parametrize(("request_", "job"), [
    (ONE_JOB, JOB),
    (pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        job_ids=[v1.JobID(value=JOB)])), JOB),
    (EVERY_POD, None),
    (pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter()), None),
    (pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        job_ids=[v1.JobID(value=JOB), v1.JobID(value="job-2")])), None),
    (pb.WatchRequest(), None),
])
def test_the_job_a_watch_is_about(request_: pb.WatchRequest, job: str | None) -> None:
    assert watched_job(request_) == job


def test_a_watch_of_one_job_goes_to_its_owner_alone(cluster: Cluster) -> None:
    cluster.owners[JOB] = "b"
    a, b, c = cluster.start("a"), cluster.start("b"), cluster.start("c")
    stream = cluster.watch(a, ONE_JOB)
    assert next(stream).watch_id == "task_a"  # the receiving member's own stream: its id
    until(lambda: b.publisher.active == 1, "the owner's stream")
    b.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, "task_a")
    cluster.wake()  # a membership change: the merge looks again, and still wants b alone
    b.publisher.events.put(f"{JOB}-1")
    read_until(stream, {f"{JOB}-1"}, "task_a")
    assert (len(a.publisher.opened), len(b.publisher.opened), c.publisher.opened) == (1, 1, [])
    # A Watch of several jobs is still fanned in.
    several = cluster.watch(a, pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        job_ids=[v1.JobID(value=JOB), v1.JobID(value="job-2")])))
    next(several)
    until(lambda: c.publisher.active == 1, "a fan-in over every member")


def test_a_watch_of_one_job_follows_its_owner(cluster: Cluster) -> None:
    _a, b, c, stream, _ = cluster.watching_b_owners_job_through_a()
    # A handover: the partition's node now names c.  The new owner gets a stream; the
    # previous one's is read a moment longer (its last changes), then closed.
    cluster.owners[JOB] = "c"
    cluster.wake()
    until(lambda: c.publisher.active == 1, "the new owner's stream")
    b.publisher.events.put(f"{JOB}-0")  # published just before it let the job go
    c.publisher.events.put(f"{JOB}-1")
    read_until(stream, {f"{JOB}-0", f"{JOB}-1"}, "task_a")
    until(lambda: b.publisher.active == 0, "the previous owner's stream to be closed")
    # The owner leaves gracefully (SIGTERM): its member node goes, it hands the job to b,
    # publishes its last change, then ends its streams cleanly; the next owner gets a
    # stream and the leaver's is read to its end: the watch goes on.
    cluster.owners[JOB] = "b"
    cluster.leave(c)
    until(lambda: b.publisher.active == 1, "the next owner's stream")
    for _ in range(3):  # looked at again and again: a leaver's stream is not closed
        cluster.wake()
        b.publisher.events.put(f"{JOB}-x")
        read_until(stream, {f"{JOB}-x"}, "task_a")
    c.publisher.events.put(f"{JOB}-2")
    c.publisher.events.put("leave")
    read_until(stream, {f"{JOB}-2"}, "task_a")
    until(lambda: c.publisher.active == 0, "the leaver's stream to end")
    c.stop()
    b.publisher.events.put(f"{JOB}-3")
    read_until(stream, {f"{JOB}-3"}, "task_a")
    assert (len(b.publisher.opened), len(c.publisher.opened)) == (2, 1)
    # The owner at the watch's start is read from then; each new owner from its claim.
    assert [m.get(FROM_KEY) for m in b.publisher.opened + c.publisher.opened] == \
        [None, "claim", "claim"]


def test_a_watch_of_one_job_ends_when_its_owner_dies(cluster: Cluster) -> None:
    # Killed, its stream fails while it is still a member (until its session expires): its
    # last changes may be lost, so the watch ends rather than being reopened on the next
    # owner.
    a, b, c, stream, _ = cluster.watching_b_owners_job_through_a()
    b.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, "task_a")
    b.stop()
    broken(stream, "b", "failed (")
    cluster.owners[JOB] = "c"  # its session expires; c takes the job
    del cluster.members["b"]
    cluster.wake()
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")
    assert (len(b.publisher.opened), c.publisher.opened) == (1, [])


def test_a_watch_of_a_job_driven_here_opens_no_remote_stream(cluster: Cluster) -> None:
    cluster.owners[JOB] = "a"
    a, b = cluster.start("a"), cluster.start("b")
    stream = cluster.watch(a, ONE_JOB)
    next(stream)
    a.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, "task_a")
    cluster.wake()
    a.publisher.events.put(f"{JOB}-1")
    read_until(stream, {f"{JOB}-1"}, "task_a")
    assert (len(a.publisher.opened), b.publisher.opened) == (1, [])
    # Between owners (its node gone, no claim yet) nothing is opened either; then b claims it.
    del cluster.owners[JOB]
    cluster.wake()
    a.publisher.events.put(f"{JOB}-2")
    read_until(stream, {f"{JOB}-2"}, "task_a")
    assert b.publisher.opened == []
    cluster.owners[JOB] = "b"
    cluster.wake()
    until(lambda: b.publisher.active == 1, "the new owner's stream")



# -- through the job manager's own watch servicer ---------------------------------------------
def test_through_the_watch_servicer_a_job_watch_follows_its_owner(cluster: Cluster) -> None:
    cluster.owners[JOB] = "b"
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a, ONE_JOB)
    watch_id = next(stream).watch_id
    until(lambda: len(b.publisher.watchers) == 1, "the owner's watcher")
    b.publish(JOB, 0)
    read_until(stream, {f"{JOB}-0"}, watch_id)
    cluster.owners[JOB] = "a"  # the job moves to the receiving member
    cluster.wake()
    until(lambda: not b.publisher.watchers, "the previous owner's watcher to be dropped")
    a.publish(JOB, 1)
    read_until(stream, {f"{JOB}-1"}, watch_id)




# -- a new owner's changes before its stream opened -------------------------------------------
def test_a_new_owner_already_listed_is_read_from_its_claim(cluster: Cluster) -> None:
    # c was a member all along; it claims the job's partition and publishes (its recovery's
    # first changes) before the directory tells this merge of the move: its stream, opened
    # then, replays what it published since the claim.
    _a, b, c, stream, watch_id = cluster.watching_b_owners_job_through_a(real=True)
    b.publish(JOB, 0)
    read_until(stream, {f"{JOB}-0"}, watch_id)
    b.release(JOB)
    c.publish(JOB, 9)  # not c's yet (a stray before its claim): not replayed
    c.claim(JOB, after=cluster.owners.epochs[JOB])  # over from b's claim
    c.publish(JOB, 1)
    c.publish("job-other", 0)  # of the same partition or not, not this watch's job
    cluster.owners[JOB] = "c"
    cluster.wake()
    until(lambda: len(c.publisher.watchers) == 1, "the new owner's watcher")
    c.publish(JOB, 2)
    seen = read_until(stream, {f"{JOB}-2"}, watch_id)
    # c's changes arrive in c's order, its history first: JOB-1 came before JOB-2 or never.
    assert f"{JOB}-1" in seen and f"{JOB}-9" not in seen and "job-other-0" not in seen


def test_a_new_owner_whose_claim_history_is_gone_ends_the_watch(cluster: Cluster) -> None:
    # The move was heard of too late (the new owner's history no longer covers its claim):
    # a gap cannot be ruled out, so the caller lists and watches again.
    a, _b, c, stream, watch_id = cluster.watching_b_owners_job_through_a(real=True)
    c.claim(JOB, after=cluster.owners.epochs[JOB])  # over from b's claim
    c.publish(JOB, 1)
    c.clock.now += 61.0
    cluster.owners[JOB] = "c"
    cluster.wake()
    assert aborted(stream).startswith(
        f"event overflow: {watch_id}: the watch stream of job manager member c failed "
        f"(OUT_OF_RANGE: the changes published since this job manager claimed partition ")
    until(lambda: not a.publisher.watchers and not c.publisher.watchers,
          "the members' watchers to be dropped")


# -- a partition that went away and came back between two looks -------------------------------
def test_a_partition_back_at_its_owner_after_an_unseen_move_ends_the_watch(
        cluster: Cluster) -> None:
    # b -> c -> b between two looks of the merge: the directory shows b again, under a new
    # claim. c drove the job meanwhile and was never read, so the watch ends rather than
    # going on past c's changes.
    a, b, c, stream, watch_id = cluster.watching_b_owners_job_through_a()
    b.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, watch_id)
    c.publisher.events.put(f"{JOB}-1")  # c's, while it drives the job: no stream on c
    cluster.owners.move_through(JOB, via="c", to="b")
    cluster.wake()
    assert aborted(stream) == (
        f"event overflow: {watch_id}: the partition of job {JOB} left job manager member b "
        "and came back to it, so changes made while another member drove the job may be "
        "missing; list and watch again")
    until(lambda: a.publisher.active == 0 and b.publisher.active == 0,
          "the members' streams to be cancelled")
    assert c.publisher.opened == []


def test_a_partition_back_here_after_an_unseen_move_ends_the_watch(cluster: Cluster) -> None:
    # The same when the job is driven by the receiving member itself (a -> c -> a): its
    # own stream never carried c's changes.
    cluster.owners[JOB] = "a"
    a, _c = cluster.start("a"), cluster.start("c")
    stream = cluster.watch(a, ONE_JOB)
    watch_id = next(stream).watch_id
    a.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, watch_id)
    cluster.owners.move_through(JOB, via="c", to="a")
    cluster.wake()
    assert "left job manager member a and came back to it" in aborted(stream)


def test_a_new_owner_that_took_over_from_an_owner_never_read_ends_the_watch(
        cluster: Cluster) -> None:
    # b -> c -> d seen as b -> d: d's claim took over from c's epoch, not from b's (the
    # claim this watch read last), so d refuses the stream it is asked from its claim.
    _a, b, c, stream, watch_id = cluster.watching_b_owners_job_through_a(real=True)
    d = cluster.start_real("d")
    b.publish(JOB, 0)
    read_until(stream, {f"{JOB}-0"}, watch_id)
    read_b = cluster.owners.epochs[JOB]
    cluster.owners.move_through(JOB, via="c", to="d")
    by_c = read_b + 1  # Owners: each claim the next epoch
    c.claim(JOB, after=read_b)
    c.publish(JOB, 1)  # never read by this watch
    c.release(JOB)
    d.claim(JOB, after=by_c)
    cluster.wake()
    assert aborted(stream) == (
        f"event overflow: {watch_id}: the watch stream of job manager member d failed "
        f"(OUT_OF_RANGE: this job manager claimed partition {partition_of(JOB, PARTITIONS)} "
        f"over from epoch {by_c}, not from {read_b} (the claim this watch read last): another "
        "member drove it in between), so changes it published may be missing; list and "
        "watch again")


def test_a_stream_opened_before_the_new_owners_claim_ends_when_the_claim_skips_one(
        cluster: Cluster) -> None:
    # The directory showed d's node before d marked its claim: the stream opens, and d
    # checks the claim when it makes it.
    _a, _b, _c, stream, watch_id = cluster.watching_b_owners_job_through_a(real=True)
    d = cluster.start_real("d")
    read_b = cluster.owners.epochs[JOB]
    cluster.owners.move_through(JOB, via="c", to="d")
    cluster.wake()
    until(lambda: len(d.publisher.watchers) == 1, "the new owner's watcher")
    d.claim(JOB, after=read_b + 1)  # over from c's claim
    assert aborted(stream) == f"event overflow: {watch_id}"


def test_a_new_owner_that_took_over_from_the_owner_read_is_followed(cluster: Cluster) -> None:
    # The same move with no owner between (b -> d): the claim follows b's, the watch goes on.
    _a, b, _c, stream, watch_id = cluster.watching_b_owners_job_through_a(real=True)
    d = cluster.start_real("d")
    read_b = cluster.owners.epochs[JOB]
    b.release(JOB)
    d.claim(JOB, after=read_b)
    d.publish(JOB, 1)  # before the directory showed the move: replayed from the claim
    cluster.owners[JOB] = "d"
    cluster.wake()
    until(lambda: len(d.publisher.watchers) == 1, "the new owner's watcher")
    d.publish(JOB, 2)
    assert {f"{JOB}-1", f"{JOB}-2"} <= set(read_until(stream, {f"{JOB}-2"}, watch_id))


def test_a_job_come_here_through_an_owner_never_read_ends_the_watch(cluster: Cluster) -> None:
    # b -> c -> a seen as b -> a, a serving the watch: a's own claim took over from c's
    # epoch. Checked once a has made the claim the directory shows.
    a, b, _c, stream, watch_id = cluster.watching_b_owners_job_through_a()
    read_b = cluster.owners.epochs[JOB]
    cluster.owners.move_through(JOB, via="c", to="a")
    cluster.wake()
    until(lambda: b.publisher.active == 0, "the previous owner's stream to be closed")
    a.publisher.events.put(f"{JOB}-0")  # not claimed here yet: the watch goes on meanwhile
    read_until(stream, {f"{JOB}-0"}, watch_id)
    cluster.here[("a", JOB)] = (cluster.owners.epochs[JOB], read_b + 1)  # over from c's
    cluster.wake()
    assert aborted(stream) == (
        f"event overflow: {watch_id}: job manager member a claimed the partition of job "
        f"{JOB} over from epoch {read_b + 1}, not from {read_b} (the claim this watch read "
        "last), so changes made while another member drove the job may be missing; list "
        "and watch again")


def test_a_job_come_here_from_the_owner_read_is_followed(cluster: Cluster) -> None:
    a, _b, _c, stream, watch_id = cluster.watching_b_owners_job_through_a()
    read_b = cluster.owners.epochs[JOB]
    cluster.owners[JOB] = "a"
    cluster.here[("a", JOB)] = (cluster.owners.epochs[JOB], read_b)
    for n in range(3):  # looked at again and again: checked once, and it follows
        cluster.wake()
        a.publisher.events.put(f"{JOB}-{n}")
        read_until(stream, {f"{JOB}-{n}"}, watch_id)
