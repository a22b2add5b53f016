"""A Watch through any member sees every member's changes (servicers/watch_fanin.py): the
receiving member merges the same Watch opened on every live member, over gRPC, following
members that join (read from their start) and leave (read to their clean end); any other
end of a member's stream ends the watch; every member serves it as the original caller.
A Watch of one job, which goes to its owner alone, is test_watch_one_job.py's.  The
members (watch_members.py) are gRPC servers started through the `cluster` fixture (which
stops everything a test started)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import grpc
import pytest

from peloton.common.membership import LEAVE_TIMEOUT
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.servicers.watch import FROM_KEY
from peloton.jobmgr.servicers.watch_fanin import LEAVE_GRACE, LOCAL_KEY, WatchFanIn, leave_grace
from tests.unit.jobmgr_servicers.served import basic, security
from tests.unit.jobmgr_servicers.watch_members import Cluster, broken, clusters, read_until, until


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    yield from clusters()


def test_a_watch_through_one_member_sees_every_members_changes(cluster: Cluster) -> None:
    a, b = cluster.start("a"), cluster.start("b")
    stream = cluster.watch(a)
    first = next(stream)
    assert first.watch_id == "task_a" and not first.pods  # the receiving member's id
    # Sent only once b's stream is open: what b publishes from now on reaches the caller
    # (a client lists after its watch's first answer).
    assert b.publisher.active == 1
    a.publisher.events.put("a-job-0")
    b.publisher.events.put("b-job-0")
    read_until(stream, {"a-job-0", "b-job-0"}, "task_a")
    # One level: each member was asked for its own changes once, and fanned out no more.
    assert [LOCAL_KEY in m for m in a.publisher.opened + b.publisher.opened] == [True, True]
    stream.cancel()
    until(lambda: a.publisher.active == b.publisher.active == 0, "the members' streams to end")


def test_a_watch_whose_member_does_not_answer_at_its_start_is_refused(
        cluster: Cluster) -> None:
    # b is listed but its address accepts connections and never answers: the caller's
    # first response would promise b's changes, so the watch is refused instead.
    cluster.open_timeout = 0.3
    a = cluster.start("a")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    cluster.served.closing(silent)
    cluster.members["b"] = f"127.0.0.1:{silent.getsockname()[1]}"
    with pytest.raises(grpc.RpcError) as err:
        next(cluster.watch(a))
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert err.value.details() == ("the watch streams of job manager members b did not open "
                                   "within 0.3 s; watch again")
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")


def test_members_that_join_and_leave_are_followed(cluster: Cluster) -> None:
    a, b, stream = cluster.watching_b_through_a()
    c = cluster.start("c")  # joins: the directory's listener wakes the merge
    until(lambda: c.publisher.active == 1, "the joiner's stream")
    c.publisher.events.put("c-job-0")
    read_until(stream, {"c-job-0"}, "task_a")
    # A member there at the watch's start is read from then; a joiner from its own start.
    assert FROM_KEY not in b.publisher.opened[0]
    assert c.publisher.opened[0][FROM_KEY] == "start"
    # A graceful leave: its member node goes, it publishes up to its release, then ends
    # its streams cleanly: read to its end, the watch goes on, no reopening.
    cluster.leave(b)
    b.publisher.events.put("b-job-1")
    b.publisher.events.put("leave")
    read_until(stream, {"b-job-1"}, "task_a")
    until(lambda: b.publisher.active == 0, "the leaver's stream to end")
    # Its server stops after its clean end, as a daemon's does (in-flight calls finish: a
    # stop at once could cancel the ended stream before its OK status left): nothing
    # more to read.
    b.stop(grace=2.0)
    cluster.leave(c)
    c.publisher.events.put("leave")
    until(lambda: c.publisher.active == 0, "the second leaver's stream to end")
    a.publisher.events.put("a-job-1")
    read_until(stream, {"a-job-1"}, "task_a")
    assert (len(b.publisher.opened), len(c.publisher.opened)) == (1, 1)
    d = cluster.start("d")  # a joiner after the leaves still gets a stream
    until(lambda: d.publisher.active == 1, "the joiner's stream")
    d.publisher.events.put("d-job-0")
    read_until(stream, {"d-job-0"}, "task_a")


def test_a_leavers_clean_end_seen_before_the_directory_drops_it_is_a_leave(
        cluster: Cluster) -> None:
    # The leaver deleted its member node first, but this merge's directory lags: its clean
    # end alone says it sent everything.  It is not reopened while still listed; once
    # gone and back (the same id restarted), it is read again from its start.
    a, b, stream = cluster.watching_b_through_a()
    b.publisher.events.put("b-job-0")
    b.publisher.events.put("leave")
    read_until(stream, {"b-job-0"}, "task_a")
    until(lambda: b.publisher.active == 0, "the leaver's stream to end")
    for n in range(3):  # the merge looks at the members again and again meanwhile
        cluster.wake()
        a.publisher.events.put(f"a-job-{n}")
        read_until(stream, {f"a-job-{n}"}, "task_a")
    assert len(b.publisher.opened) == 1
    cluster.leave(b)
    a.publisher.events.put("a-job-3")
    read_until(stream, {"a-job-3"}, "task_a")
    cluster.join(b)
    until(lambda: b.publisher.active == 1, "the restarted member's stream")
    assert b.publisher.opened[1][FROM_KEY] == "start"
    b.publisher.events.put("b-job-1")
    read_until(stream, {"b-job-1"}, "task_a")


def test_a_live_members_stream_that_fails_ends_the_watch(cluster: Cluster) -> None:
    # Its changes since the failure would be missed: the caller must list and watch again.
    a, b, stream = cluster.watching_b_through_a()
    b.publisher.events.put("fail")
    broken(stream, "b", "failed (UNAVAILABLE: connection dropped)")
    until(lambda: a.publisher.active == b.publisher.active == 0, "every stream to end")
    assert len(b.publisher.opened) == 1  # not reopened


def test_a_member_whose_stream_fails_after_it_left_the_directory_ends_the_watch(
        cluster: Cluster) -> None:
    # A lost machine: its session expired (its member node gone) before its connection's
    # failure was noticed.  No clean end came, so what it published last may be missing.
    a, b, stream = cluster.watching_b_through_a()
    cluster.leave(b)
    a.publisher.events.put("a-job-0")  # the merge has looked at the members since
    read_until(stream, {"a-job-0"}, "task_a")
    b.stop()
    broken(stream, "b", "failed (")
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")
    assert len(b.publisher.opened) == 1


def test_a_lost_member_whose_stream_hangs_ends_the_watch(cluster: Cluster) -> None:
    # Out of the directory, its stream neither ends cleanly nor fails (the connection of a
    # machine that vanished hangs): after `leave_grace` it is taken for lost.
    cluster.leave_grace = 0.3
    _a, b, stream = cluster.watching_b_through_a()
    cluster.leave(b)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    details = err.value.details()
    assert details.startswith("event overflow: task_a: job manager member b left the members")
    assert "neither ended cleanly nor failed" in details
    assert len(b.publisher.opened) == 1


def test_the_leave_grace_is_as_long_as_the_members_timeouts_say_a_leave_can_take() -> None:
    # A leaver releases its partitions within its stop timeout (what it still holds goes
    # when its session ends), then stops its job manager and ends its streams: the grace
    # is twice that, and follows the members' settings rather than a free constant.
    session, stop = JobManagerConfig().member_session_timeout, LEAVE_TIMEOUT
    assert LEAVE_GRACE == leave_grace(session, stop) == 2 * (stop + session) == 26.0
    assert leave_grace(session, 3 * stop) > leave_grace(session, stop)  # a slower stop
    assert leave_grace(2 * session, stop) > leave_grace(session, stop)  # a longer session
    assert WatchFanIn(dict, "a", "").leave_grace == LEAVE_GRACE


def test_a_leaver_within_its_grace_does_not_end_the_watch(cluster: Cluster) -> None:
    # The same grace, and a leaver whose clean end comes within it (its release and stop
    # take a while): the watch goes on.
    cluster.leave_grace = 1.0
    a, b, stream = cluster.watching_b_through_a()
    cluster.leave(b)
    a.publisher.events.put("a-job-0")
    read_until(stream, {"a-job-0"}, "task_a")
    b.publisher.events.put("b-job-0")
    b.publisher.events.put("leave")
    read_until(stream, {"b-job-0"}, "task_a")
    until(lambda: b.publisher.active == 0, "the leaver's stream to end")
    deadline = time.monotonic() + 2 * cluster.leave_grace
    n = 0
    while time.monotonic() < deadline:  # past the grace, the watch still delivers
        n += 1
        a.publisher.events.put(f"a-job-{n}")
        read_until(stream, {f"a-job-{n}"}, "task_a")


def test_a_killed_member_ends_the_watch(cluster: Cluster) -> None:
    # kill -9: its connections close at once while its member node lives until its session
    # expires; what it published just before may not have arrived.
    a, b, stream = cluster.watching_b_through_a()
    b.stop()
    broken(stream, "b", "failed (")
    del cluster.members["b"]  # its session expires after the watch ended
    cluster.wake()
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")
    assert len(b.publisher.opened) == 1


@pytest.mark.parametrize("listed", [True, False])
def test_a_stream_that_ends_without_the_leave_trailer_ends_the_watch(
        cluster: Cluster, listed: bool) -> None:
    # OK but not a leave's clean end: nothing says everything was sent.
    a, b, stream = cluster.watching_b_through_a()
    if not listed:
        cluster.leave(b)
        a.publisher.events.put("a-job-0")
        read_until(stream, {"a-job-0"}, "task_a")
    b.publisher.events.put("end")
    broken(stream, "b", "ended without the clean end of a leave")
    assert len(b.publisher.opened) == 1


@pytest.mark.parametrize(("whose", "end", "code", "details"), [
    # The member serving the watch stops: the caller watches again through another.
    ("a", "leave", grpc.StatusCode.ABORTED, "event overflow: task_a: job manager member a, "
     "which serves this watch, is leaving; list and watch again through another member"),
    # Another member's overflow: as a local one would.
    ("b", "overflow", grpc.StatusCode.ABORTED, "event overflow: task_a"),
    # What Cancel(task_a) does to a's own stream: every member's stream ends.
    ("a", "cancel", grpc.StatusCode.CANCELLED, "watch cancelled: task_a"),
], ids=["receiving-member-leaves", "other-member-overflows", "cancel-on-receiving-member"])
def test_one_members_end_ends_the_watch_and_every_other_stream(
        cluster: Cluster, whose: str, end: str, code: grpc.StatusCode, details: str) -> None:
    a, b, stream = cluster.watching_b_through_a()
    ending, other = (a, b) if whose == "a" else (b, a)
    ending.publisher.events.put(end)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert (err.value.code(), err.value.details()) == (code, details)
    until(lambda: other.publisher.active == 0, f"{other.name}'s stream to be cancelled")


# -- who the members serve ----------------------------------------------------------------------
def test_every_members_stream_serves_the_original_caller(cluster: Cluster) -> None:
    a = cluster.start("a", security=security())
    b = cluster.start("b", security=security())
    stream = cluster.watch(a, metadata=basic("alice"))
    next(stream)
    until(lambda: b.publisher.active == 1, "b's stream")
    for publisher in (a.publisher, b.publisher):  # the member's identity, naming her
        caller = publisher.callers[0]
        assert caller is not None and (caller.name, caller.method) == ("alice", "forwarded")
        assert publisher.opened[0]["username"] == "peloton"
        assert "alice-pw" not in publisher.opened[0].values()


# -- through the job manager's own watch servicer ---------------------------------------------
def test_through_the_watch_servicer_a_pod_watch_sees_both_members_until_cancelled(
        cluster: Cluster) -> None:
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    assert watch_id.startswith("task_")
    until(lambda: len(b.publisher.watchers) == 1, "b's watcher")
    a.publish("job-a", 0)
    b.publish("job-b", 1)
    read_until(stream, {"job-a-0", "job-b-1"}, watch_id)
    cluster.cancel(a, watch_id)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.CANCELLED
    assert err.value.details() == f"watch cancelled: {watch_id}"
    until(lambda: not a.publisher.watchers and not b.publisher.watchers,
          "every member's watcher to be dropped")


# -- a joiner's changes before its stream opened ----------------------------------------------
def test_a_joiners_changes_before_its_stream_opened_are_not_missed(cluster: Cluster) -> None:
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    c = cluster.start_real("c", join=False)
    # c took partitions and published before this merge heard of it (its directory lags).
    c.publish("job-c", 0)
    c.publish("job-c", 1)
    cluster.join(c)
    until(lambda: len(c.publisher.watchers) == 1, "the joiner's watcher")
    c.publish("job-c", 2)
    b.publish("job-b", 0)
    read_until(stream, {"job-c-0", "job-c-1", "job-c-2", "job-b-0"}, watch_id)


def test_a_joiner_whose_history_is_gone_ends_the_watch(cluster: Cluster) -> None:
    # Heard of too late (its history no longer reaches its start): a gap cannot be ruled
    # out, so the caller lists and watches again rather than missing c's first changes.
    a = cluster.start_real("a")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    c = cluster.start_real("c", join=False)
    c.publish("job-c", 0)
    c.clock.now += 61.0
    cluster.join(c)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    details = err.value.details()
    assert details.startswith(f"event overflow: {watch_id}: the watch stream of job manager "
                              f"member c failed (OUT_OF_RANGE: ")
    until(lambda: not a.publisher.watchers, "a's watcher to be dropped")


def test_through_the_watch_servicer_a_leave_is_read_to_its_end(cluster: Cluster) -> None:
    # watch.py's leave: what b buffered is sent, then its stream ends cleanly; the watch
    # goes on with a, and b's later watches end at once.
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    b.publish("job-b", 0)
    b.publish("job-b", 1)
    cluster.leave(b)
    b.publisher.leave()
    b.publish("job-b", 2)  # nothing is published after a leave
    read_until(stream, {"job-b-0", "job-b-1"}, watch_id)
    until(lambda: not b.publisher.watchers, "b's watcher to end")
    b.stop(grace=2.0)  # as a daemon stops: the ended stream's status is delivered first
    a.publish("job-a", 0)
    seen: set[str] = set()
    for response in stream:
        seen.update(p.pod_name.value for p in response.pods)
        if "job-a-0" in seen:
            break
    assert "job-b-2" not in seen
