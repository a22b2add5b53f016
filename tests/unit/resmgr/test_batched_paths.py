"""The batched hot paths do what the one-value paths do.

Status events are applied a polled batch at a time (`apply_events`): each task ends as
its events, applied in order, say.  The replies of DequeueGangs and GetPlacements (and the
requests of EnqueueGangs and SetPlacements) are written into their repeated fields in place
(`gangs_into`, `placements_into`, `rm_tasks_into`): the same bytes go on the wire as
message by message.
"""

from __future__ import annotations

from peloton.api.convert.private_sched import (
    NeedsTable,
    gang_from_pb,
    gang_to_pb,
    gangs_into,
    needs_from_pb,
    placement_from_pb,
    placement_to_pb,
    placements_into,
    rm_task_from_pb,
    rm_task_to_pb,
    rm_tasks_into,
)
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2 as pb
from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import PlacedTask, Placement, PlacementGang
from peloton.core.placement.request import GangRequest, PlacementNeeds, Strategy, TaskRequest
from peloton.core.ports import HostEvent
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.transitions import apply_events
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    job_id,
    make_pool,
    make_rm,
    place_all,
    singles,
    tasks,
)

S = TaskState


def _launching(store: Store, hostmgr: FakeHostManager, clock: FakeClock,
               ts: list[RmTask]) -> tuple[ResourceManager, str]:
    """A resource manager with `ts` placed, then all but the last three taken for launch
    (LAUNCHING); the last three stay PLACED."""
    rm = make_rm(store, hostmgr, clock)
    pool = make_pool(rm, "a", cpu=(0, 16))
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    assert len(place_all(rm, hostmgr)) == len(ts)
    assert sum(len(p.tasks) for p in rm.get_placements(len(ts) - 3, 0)) == len(ts) - 3
    return rm, pool


def test_a_batch_of_events_ends_each_task_as_its_events_say(
        store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    ts = tasks(8)
    run = [str(t.task_id.run(1)) for t in ts]

    def ev(i: int, state: TaskState, host: str = "") -> HostEvent:
        return HostEvent(0, run[i], state, host, "agent-0", 1.0)

    rm, pool = _launching(store, hostmgr, clock, ts)
    book = rm.book
    assert len(book.timeouts) == 5  # the five LAUNCHING runs
    events = [
        ev(0, S.STARTING), ev(0, S.RUNNING), ev(0, S.SUCCEEDED),  # the whole life in a batch
        ev(1, S.STARTING, "host-1"),                              # LAUNCHING -> LAUNCHED
        ev(2, S.RUNNING, "host-9"),                               # RUNNING without STARTING
        ev(3, S.LOST),                                            # LAUNCHING, lost
        ev(4, S.FAILED), ev(4, S.RUNNING),                        # ended; a late event after
        ev(5, S.RUNNING),                                         # PLACED: it started anyway
        ev(6, S.LOST),                                            # PLACED, LOST: no host had it
        HostEvent(0, str(ts[7].task_id.run(2)), S.FAILED, "h", "a", 1.0),  # another run
        HostEvent(0, "not-a-run-id", S.FAILED, "h", "a", 1.0),
        HostEvent(0, str(RunId(job_id(), 0, 1)), S.SUCCEEDED, "h", "a", 1.0),  # untracked
    ]
    assert apply_events(book, events, 5.0) is True
    recs = [book.tracker.get(t.task_id) for t in ts]
    assert [None if r is None else (r.state, r.start_time) for r in recs] == [
        None, (S.LAUNCHED, 0.0), (S.RUNNING, 5.0), None, None, (S.RUNNING, 5.0),
        (S.PLACED, 0.0), (S.PLACED, 0.0)]
    assert book.hosts == {ts[1].task_id: "host-1", ts[2].task_id: "host-9",
                          ts[5].task_id: "host-1", ts[6].task_id: "host-1",
                          ts[7].task_id: "host-1"}  # placed four a host
    assert len(book.timeouts) == 0  # launched, running or gone: no launch timeout left
    assert rm.pools.get(pool).allocation.cpu == 5
    # Nothing freed: RUNNING after STARTING only moves the run on.
    assert apply_events(book, [ev(1, S.RUNNING)], 6.0) is False
    rec = book.tracker.get(ts[1].task_id)
    assert rec is not None and rec.state is S.RUNNING


def _requests() -> list[TaskRequest]:
    plain = PlacementNeeds(Resources(0.5, 64, 64))
    rich = PlacementNeeds(Resources(1, 2, 3, 1), 2, True,
                          LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1),
                          Strategy.SPREAD)
    job = job_id()
    return [TaskRequest(TaskId(job, 0), plain),
            TaskRequest(TaskId(job, 1), rich, (Label("team", "x"), Label("tier", "")), "h1", True),
            TaskRequest(TaskId(job, 2**31), rich, (), "h2", False),
            TaskRequest(TaskId(job, 3), plain)]


def test_gangs_written_in_place_are_the_messages_gang_to_pb_writes() -> None:
    reqs = _requests()
    gangs = [PlacementGang(GangRequest((reqs[0],)), (3,), "pool-a"),
             PlacementGang(GangRequest(tuple(reqs[1:])), (1, 2, 7), "pool-b")]
    table = NeedsTable()
    one_by_one = pb.DequeueGangsResponse(gangs=[gang_to_pb(g, table) for g in gangs],
                                         needs=table.messages)
    table = NeedsTable()
    in_place = pb.DequeueGangsResponse()
    gangs_into(in_place.gangs, gangs, table)
    in_place.needs.extend(table.messages)
    assert in_place.SerializeToString() == one_by_one.SerializeToString()
    wire = pb.DequeueGangsResponse.FromString(in_place.SerializeToString())
    needs = needs_from_pb(wire.needs)
    assert len(needs) == 2
    back = [gang_from_pb(g, needs) for g in wire.gangs]
    assert back == gangs
    assert back[1].gang.tasks[0].needs is back[1].gang.tasks[1].needs


def test_tasks_written_in_place_are_the_messages_rm_task_to_pb_writes() -> None:
    reqs = _requests()
    ts = [RmTask(reqs[0]), RmTask(reqs[1], run_id=4, priority=7, preemptible=False,
                                  controller=True), RmTask(reqs[2], 2), RmTask(reqs[3])]
    table = NeedsTable()
    one_by_one = pb.EnqueueGangsRequest(pool_id="p")
    for gang in (ts[:1], ts[1:]):
        one_by_one.gangs.add().tasks.extend(rm_task_to_pb(t, table) for t in gang)
    one_by_one.needs.extend(table.messages)
    table = NeedsTable()
    in_place = pb.EnqueueGangsRequest(pool_id="p")
    for gang in (ts[:1], ts[1:]):
        rm_tasks_into(in_place.gangs.add().tasks, gang, table)
    in_place.needs.extend(table.messages)
    assert in_place.SerializeToString() == one_by_one.SerializeToString()
    wire = pb.EnqueueGangsRequest.FromString(in_place.SerializeToString())
    needs = needs_from_pb(wire.needs)
    decoded = [rm_task_from_pb(m, needs) for g in wire.gangs for m in g.tasks]
    assert decoded == ts
    # The resource manager holds every pending task: the tasks of one job share one copy
    # of its id, not one string each read from the message.
    by_job: dict[str, set[int]] = {}
    for t in decoded:
        by_job.setdefault(t.task_id.job_id, set()).add(id(t.task_id.job_id))
    assert len(decoded) > len(by_job) and all(len(ids) == 1 for ids in by_job.values())


def test_placements_written_in_place_are_the_messages_placement_to_pb_writes() -> None:
    job = job_id()
    placements = [Placement("h1", "agent-1", (PlacedTask(TaskId(job, 0), 1, (31000, 31001)),
                                              PlacedTask(TaskId(job, 5), 2))),
                  Placement("h2", "", ())]
    one_by_one = pb.GetPlacementsResponse(placements=[placement_to_pb(p) for p in placements])
    in_place = pb.GetPlacementsResponse()
    placements_into(in_place.placements, placements)
    assert in_place.SerializeToString() == one_by_one.SerializeToString()
    wire = pb.GetPlacementsResponse.FromString(in_place.SerializeToString())
    back = [placement_from_pb(m) for m in wire.placements]
    assert back == placements
    assert type(back[0].tasks[0].task_id) is TaskId
