"""The status stream: order, offsets, per-consumer acknowledgement, backend acks, dedupe, bounds,
member consumers (all-active job managers)."""

from __future__ import annotations

from collections.abc import Callable

import gevent

from peloton.common.clock import FakeClock
from peloton.core.ports import member_consumer
from peloton.core.states import TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.config import HostManagerConfig
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import CONFIG, rid, spec

S = TaskState


def test_events_come_in_order_with_increasing_offsets(hm: HostManager, backend: FakeBackend) -> None:
    hm.launch("h1", [spec(0), spec(1)])
    for state in (S.STARTING, S.RUNNING, S.SUCCEEDED):
        backend.report(rid(0), state)
    backend.report(rid(1), S.FAILED, exit_code=2, message="exited with code 2")
    stream = hm.subscribe("jobmgr")
    first = stream.poll(2, 0)
    rest = stream.poll(100, 0)  # continues after what was returned, before any ack
    events = first + rest
    assert [(e.run_id, e.state) for e in events] == [
        (rid(0), S.STARTING), (rid(0), S.RUNNING), (rid(0), S.SUCCEEDED), (rid(1), S.FAILED)]
    assert [e.offset for e in events] == [1, 2, 3, 4]
    assert events[-1].exit_code == 2 and events[-1].hostname == "h1"
    assert events[-1].agent_id == "agent-h1" and events[-1].message == "exited with code 2"
    assert stream.poll(100, 0) == []


def test_every_consumer_reads_the_same_events_in_any_batching(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    # Over gRPC each event is encoded once for all consumers: the second consumer, reading
    # in other batches, must see exactly what the first did (long messages included).
    hm = make_hm(HostManagerConfig(consumers=("jobmgr", "resmgr"), recovery_grace=0.0))
    long = "x" * 300 + "é" * 9000  # lengths of two and three varint bytes
    for i, message in enumerate(["", "short", long, "done"]):
        backend.report(rid(i), S.FAILED, "h1", exit_code=i, message=message)
    jobmgr, resmgr = hm.subscribe("jobmgr"), hm.subscribe("resmgr")
    first = jobmgr.poll(10, 0)
    second = resmgr.poll(1, 0) + resmgr.poll(2, 0) + resmgr.poll(10, 0)
    assert first == second
    assert [(e.offset, e.message, e.exit_code) for e in first] == [
        (1, "", 0), (2, "short", 1), (3, long, 2), (4, "done", 3)]


def test_unacknowledged_events_are_delivered_again_to_a_new_subscription(
        hm: HostManager, backend: FakeBackend) -> None:
    for state in (S.STARTING, S.RUNNING, S.SUCCEEDED):
        backend.report(rid(0), state, "h1")
    stream = hm.subscribe("jobmgr")
    assert len(stream.poll(10, 0)) == 3
    stream.acknowledge(1)
    again = hm.subscribe("jobmgr")  # e.g. the job manager restarted
    assert [e.offset for e in again.poll(10, 0)] == [2, 3]


def test_the_backend_is_acknowledged_only_after_every_consumer(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(HostManagerConfig(consumers=("jobmgr", "resmgr"), recovery_grace=0.0))
    updates = [backend.report(rid(0), s, "h1") for s in (S.STARTING, S.RUNNING, S.SUCCEEDED)]
    jobmgr = hm.subscribe("jobmgr")
    jobmgr.poll(10, 0)
    jobmgr.acknowledge(3)
    hm.settle()
    assert backend.acked == []  # resmgr has not subscribed, let alone acknowledged
    resmgr = hm.subscribe("resmgr")
    assert len(resmgr.poll(10, 0)) == 3
    resmgr.acknowledge(2)
    hm.settle()
    assert backend.acked == updates[:2]
    resmgr.acknowledge(3)
    hm.settle()
    assert backend.acked == updates and backend.unacked == {}
    assert len(hm.events) == 0


def test_redelivered_updates_are_not_streamed_twice(hm: HostManager, backend: FakeBackend) -> None:
    hm.launch("h1", [spec(0)])
    backend.report(rid(0), S.RUNNING)
    backend.report(rid(0), S.SUCCEEDED)
    backend.redeliver()  # at-least-once: the backend sends them again
    stream = hm.subscribe("jobmgr")
    events = stream.poll(10, 0)
    assert [e.state for e in events] == [S.RUNNING, S.SUCCEEDED]
    stream.acknowledge(events[-1].offset)
    hm.settle()
    assert len(backend.acked) == 2
    # Re-delivered after our acknowledgement (it crossed ours): acknowledged again, not streamed.
    late = backend.acked[-1]
    backend.unacked[late.uuid] = late
    backend.redeliver()
    hm.settle()
    assert backend.unacked == {} and stream.poll(10, 0) == []


def test_a_late_report_of_an_ended_run_does_not_book_it_again(
        hm: HostManager, backend: FakeBackend) -> None:
    hm.launch("h1", [spec(0, cpu=4)])
    running = backend.report(rid(0), S.RUNNING)
    backend.report(rid(0), S.SUCCEEDED)
    backend.listener.status_update(running.__class__(  # type: ignore[union-attr]
        "late", running.run_id, S.RUNNING, "h1", "agent-h1", 0.0))
    assert rid(0) not in hm.registry.runs and hm.launch("h1", [spec(1, cpu=4)]) == []


def test_a_full_buffer_refuses_updates_until_consumers_catch_up(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(HostManagerConfig(consumers=("jobmgr",), event_buffer_size=2, recovery_grace=0.0))
    hm.launch("h1", [spec(0, cpu=4)])
    backend.report(rid(0), S.STARTING)
    backend.report(rid(0), S.RUNNING)
    backend.report(rid(0), S.SUCCEEDED)  # refused: not streamed, not applied
    assert len(hm.events) == 2 and rid(0) in hm.registry.runs
    assert hm.launch("h1", [spec(1, cpu=1)])[0].reason.startswith("no room")
    stream = hm.subscribe("jobmgr")
    stream.acknowledge(stream.poll(10, 0)[-1].offset)
    hm.settle()
    backend.redeliver()  # the backend never saw an ack for the refused one: it comes again
    assert [e.state for e in stream.poll(10, 0)] == [S.SUCCEEDED]
    assert rid(0) not in hm.registry.runs and hm.launch("h1", [spec(1, cpu=1)]) == []


def test_a_consumer_joining_late_sees_what_is_still_buffered(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(HostManagerConfig(consumers=(), recovery_grace=0.0))
    backend.report(rid(0), S.RUNNING, "h1")
    backend.report(rid(0), S.KILLED, "h1")
    hm.settle()
    assert backend.acked == []  # no consumer yet: nothing is acknowledged
    stream = hm.subscribe("observer")
    assert [e.offset for e in stream.poll(10, 0)] == [1, 2]
    stream.acknowledge(99)  # beyond the head: clamped
    hm.settle()
    assert len(backend.acked) == 2


def test_poll_waits_for_the_next_event(hm: HostManager, backend: FakeBackend, wire: str) -> None:
    stream = hm.subscribe("jobmgr")
    assert stream.poll(10, 0.01) == []
    producer = gevent.spawn_later(0.01, backend.report, rid(0), S.RUNNING, "h1")
    events = stream.poll(10, 10.0)  # returns as soon as the event arrives
    producer.join(5)
    assert [e.run_id for e in events] == [rid(0)]


def test_many_events_are_trimmed_and_acked_in_order(hm: HostManager, backend: FakeBackend) -> None:
    assert CONFIG.consumers == ("jobmgr",)
    stream = hm.subscribe("jobmgr")
    seen: list[int] = []
    for i in range(3000):
        backend.report(rid(i), S.RUNNING, "h1")
        if i % 500 == 499:
            batch = stream.poll(400, 0) + stream.poll(400, 0)
            seen.extend(e.offset for e in batch)
            stream.acknowledge(batch[-1].offset)
    hm.settle()
    assert seen == list(range(1, 3001))
    assert [u.run_id for u in backend.acked] == [rid(i) for i in range(3000)]


def test_each_member_of_a_group_reads_every_event_and_trimming_waits_for_all(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    # All-active job managers: each member reads the whole stream as "jobmgr@<member>".
    hm = make_hm(HostManagerConfig(consumers=("jobmgr", "resmgr"), recovery_grace=0.0))
    updates = [backend.report(rid(0), s, "h1") for s in (S.STARTING, S.RUNNING, S.SUCCEEDED)]
    resmgr = hm.subscribe("resmgr")
    resmgr.acknowledge(resmgr.poll(10, 0)[-1].offset)
    hm.settle()
    assert backend.acked == []  # the job managers' placeholder holds until a member reads
    a, b = hm.subscribe(member_consumer("jobmgr", "a")), hm.subscribe("jobmgr@b")
    assert [e.offset for e in a.poll(10, 0)] == [e.offset for e in b.poll(10, 0)] == [1, 2, 3]
    a.acknowledge(3)
    hm.settle()
    assert backend.acked == []  # b has not acknowledged anything
    b.acknowledge(2)
    hm.settle()
    assert backend.acked == updates[:2]
    b.acknowledge(3)
    hm.settle()
    assert backend.acked == updates


def test_a_silent_member_is_forgotten_and_the_last_one_leaves_its_place_to_the_next(
        make_hm: Callable[..., HostManager], backend: FakeBackend, clock: FakeClock) -> None:
    hm = make_hm(HostManagerConfig(consumers=("jobmgr", "resmgr"), recovery_grace=0.0,
                                   member_idle_timeout=30.0))
    resmgr = hm.subscribe("resmgr")
    a, b = hm.subscribe("jobmgr@a"), hm.subscribe("jobmgr@b")
    first = [backend.report(rid(0), s, "h1") for s in (S.STARTING, S.RUNNING)]
    for stream in (resmgr, a, b):
        stream.poll(10, 0)
    resmgr.acknowledge(2)
    a.acknowledge(2)
    hm.settle()
    assert backend.acked == []  # b is silent (killed -9), but not for long enough yet

    clock.advance(20)
    a.poll(10, 0)  # a keeps itself known by polling, even with nothing to acknowledge
    clock.advance(20)
    a.acknowledge(2)  # b has been silent for 40 s: no longer waited for
    hm.settle()
    assert backend.acked == first

    # a goes silent too: the group's placeholder takes its place at a's offset, so events
    # after it wait for the next member, who reads them.
    later = [backend.report(rid(1), s, "h1") for s in (S.STARTING, S.RUNNING)]
    clock.advance(40)
    resmgr.acknowledge(resmgr.poll(10, 0)[-1].offset)
    hm.settle()
    assert backend.acked == first
    c = hm.subscribe("jobmgr@c")
    events = c.poll(10, 0)
    assert [e.offset for e in events] == [3, 4]
    c.acknowledge(4)
    hm.settle()
    assert backend.acked == first + later


def test_a_reconciled_runs_repeated_report_is_streamed_again_for_a_member_that_skipped_it(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    # A member read a run's end and skipped it (another member owned the run, then died
    # unacknowledged); taking the run over it reconciles, and the host re-reports the same
    # update (same uuid).  Dropped as a duplicate, the run would never end for the member.
    hm = make_hm(HostManagerConfig(consumers=("jobmgr",), recovery_grace=0.0))
    survivor, dead = hm.subscribe("jobmgr@a"), hm.subscribe("jobmgr@b")
    dead.poll(10, 0)  # registered, then never acknowledges (killed)
    ended = backend.report(rid(0), S.KILLED, "h1")
    survivor.acknowledge(survivor.poll(10, 0)[-1].offset)  # skipped: not its run yet
    backend.listener.status_update(ended)  # type: ignore[union-attr]  # a plain re-send
    assert survivor.poll(10, 0) == []
    hm.reconcile([rid(0)])
    backend.listener.status_update(ended)  # type: ignore[union-attr]  # the re-report
    again = survivor.poll(10, 0)
    assert [(e.run_id, e.state) for e in again] == [(rid(0), S.KILLED)]
    backend.listener.status_update(ended)  # type: ignore[union-attr]  # only once
    assert survivor.poll(10, 0) == []


def test_a_forgotten_ended_runs_lost_report_is_answered_with_how_it_ended(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    # A graceful handover: the leaving member let the partition go, the next one had not
    # taken it yet, and both skipped and acknowledged the run's end; the backend, acked,
    # forgot the run.  The new owner's reconcile gets LOST from no host, but the run
    # ended: the stream answers with the end it trimmed, and acks the LOST.
    hm = make_hm(HostManagerConfig(consumers=("jobmgr",), recovery_grace=0.0))
    leaving, taking = hm.subscribe("jobmgr@a"), hm.subscribe("jobmgr@b")
    for stream in (leaving, taking):
        assert stream.poll(10, 0) == []  # registered
    ended = backend.report(rid(0), S.KILLED, "h1")
    for stream in (leaving, taking):  # both skip it: neither owns the run now
        stream.acknowledge(stream.poll(10, 0)[-1].offset)
    hm.settle()
    assert backend.acked == [ended]  # trimmed and acknowledged: the backend forgets it

    lost = _lost_on_no_host(backend, rid(0), "lost-1")  # the takeover's reconcile
    again = taking.poll(10, 0)
    assert [(e.run_id, e.state) for e in again] == [(rid(0), S.KILLED)]
    hm.settle()
    assert lost in backend.acked  # the stale LOST is not re-delivered for ever
    _lost_on_no_host(backend, rid(0), "lost-1")  # re-sent while the answer is unread
    assert [e.state for e in leaving.poll(10, 0)] == [S.KILLED]  # streamed once
    # A run never seen ending is LOST as reported, and so is one lost on a known host.
    _lost_on_no_host(backend, rid(1), "lost-2")
    backend.report(rid(2), S.RUNNING, "h1")
    backend.report(rid(2), S.LOST, "h1")
    assert [(e.run_id, e.state) for e in taking.poll(10, 0)] == [
        (rid(1), S.LOST), (rid(2), S.RUNNING), (rid(2), S.LOST)]


def _lost_on_no_host(backend: FakeBackend, run_id: str, uuid: str) -> StatusUpdate:
    """What a backend reports for a run no host knows (hostname empty)."""
    update = StatusUpdate(uuid, run_id, S.LOST, "", "", 0.0)
    backend.listener.status_update(update)  # type: ignore[union-attr]
    return update
