"""The recorder contract: a simulator that breaks it fails loudly, naming what it did wrong."""

from __future__ import annotations

import itertools

import pytest

from peloton.core.model.resources import Resources
from peloton.simulation.cluster import read_cluster
from peloton.simulation.pools import read_pools
from peloton.simulation.recorder import TRANSITIONS, RecordingError, ResultRecorder, TaskPhase
from peloton.simulation.result import TaskEventKind as K
from peloton.simulation.scenario import Scenario
from peloton.simulation.trace import Trace, TraceHeader, TraceJob
from peloton.simulation.whatif import PlanOptions, plan

CLUSTER = "version: 1\nhosts:\n - {group: n, count: 1, resources: {cpu: 4}}\n"
POOLS = "version: 1\npools:\n - name: a\n   resources: [{kind: cpu, reservation: 1, limit: 4}]\n"


def scenario(horizon: float = 100) -> Scenario:
    trace = Trace(TraceHeader(), (TraceJob("j", 10, "/a", 2, Resources(cpu=1), 5),
                                  TraceJob("late", 500, "/a", 1, Resources(cpu=1), 5)))
    base, _ = plan(trace, read_cluster(CLUSTER), read_pools(POOLS), options=PlanOptions(horizon=horizon))
    return base


def test_every_phase_and_event_pair_is_decided() -> None:
    """The table is total in the sense that matters: each pair is allowed or refused, never both."""
    for phase, kind in itertools.product(TaskPhase, K):
        rec = ResultRecorder(scenario())
        # Walk a task to `phase` through allowed events, then try `kind`.
        path = {TaskPhase.NEW: [], TaskPhase.QUEUED: [K.SUBMITTED],
                TaskPhase.RUNNING: [K.SUBMITTED, K.STARTED],
                TaskPhase.FINISHED: [K.SUBMITTED, K.STARTED, K.FINISHED],
                TaskPhase.PENDING_AT_END: [K.SUBMITTED, K.PENDING_AT_END]}[phase]
        for step in path:
            rec.task_event(10, step, "j", 0, reason="r")
        if (phase, kind) in TRANSITIONS:
            rec.task_event(10, kind, "j", 0, reason="r")
        else:
            with pytest.raises(RecordingError, match=f"not allowed while the task is {phase.value}"):
                rec.task_event(10, kind, "j", 0, reason="r")


def test_a_preempted_task_runs_again_and_counts_its_first_start() -> None:
    rec = ResultRecorder(scenario())
    for t, kind in ((10, K.SUBMITTED), (12, K.STARTED), (13, K.PREEMPTED), (20, K.STARTED),
                    (21, K.LOST), (30, K.STARTED), (35, K.FINISHED)):
        rec.task_event(t, kind, "j", 0)
    rec.task_event(35, K.SUBMITTED, "j", 1)
    rec.task_event(40, K.PENDING_AT_END, "j", 1, reason="0 of 1 hosts fit")
    rec.finish(40)
    result = rec.result()
    first, second = result.tasks
    assert (first.first_start, first.finished, first.preemptions, first.lost) == (12, 35, 1, 1)
    assert first.wait == 2
    assert second.wait is None and second.pending_reason == "0 of 1 hosts fit"
    assert [(i.t, i.kind) for i in result.interruptions] == [(13, K.PREEMPTED), (21, K.LOST)]
    # "late" (submit 500) was never submitted: fine, the run ended at 40.
    assert [t.job for t in result.tasks] == ["j", "j"]


@pytest.mark.parametrize(("calls", "message"), [
    ([("event", 10, K.SUBMITTED, "nope", 0, "")], "no job 'nope'"),
    ([("event", 10, K.SUBMITTED, "j", 2, "")], "job j has instances 0..1"),
    ([("event", 9, K.SUBMITTED, "j", 0, "")], "before the job's submit time 10"),
    ([("event", 10, K.SUBMITTED, "j", 0, ""), ("event", 5, K.STARTED, "j", 0, "")], "goes back in time"),
    ([("event", 10, K.SUBMITTED, "j", 0, ""), ("event", 11, K.PENDING_AT_END, "j", 0, "")],
     "needs the scheduler's reason"),
    ([("event", 101, K.SUBMITTED, "j", 0, "")], "outside [0, horizon 100]"),
    ([("pool", 0, "/b")], "unknown pool '/b'"),
    ([("finish", 50)], "job j (submit t=10) was never submitted"),
    ([("event", 10, K.SUBMITTED, "j", 0, ""), ("event", 10, K.SUBMITTED, "j", 1, ""), ("finish", 50)],
     "task j-0 is queued at the end but got no PENDING_AT_END"),
    ([("finish", 5), ("pool", 5, "/a")], "after finish()"),
])
def test_contract_violations_are_refused(calls: list[tuple[object, ...]], message: str) -> None:
    rec = ResultRecorder(scenario())
    with pytest.raises(RecordingError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        for call in calls:
            if call[0] == "event":
                _, t, kind, job, instance, reason = call
                rec.task_event(t, kind, job, instance, reason=reason)  # type: ignore[arg-type]
            elif call[0] == "pool":
                rec.pool_sample(call[1], call[2], demand=Resources(), entitlement=Resources(),  # type: ignore[arg-type]
                                allocation=Resources(), pending=0)
            else:
                rec.finish(call[1])  # type: ignore[arg-type]


def test_no_result_before_finish() -> None:
    with pytest.raises(RecordingError, match="did not call finish"):
        ResultRecorder(scenario()).result()
