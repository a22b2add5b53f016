"""RecoverRuns' grouped encoding (peloton/api/convert/private_recover.py): every run comes
back as it was sent, a job's runs share their needs and labels on the receiving side, and a
malformed request is refused naming its field."""

from __future__ import annotations

import pytest

from peloton.api.convert.private_recover import (
    recovered_runs_count,
    recovered_runs_from_pb,
    recovered_runs_to_pb,
)
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.placement.request import PlacementNeeds, Strategy, TaskRequest
from peloton.core.ports import RecoveredRun
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState

S = TaskState
JOB_A = "6d1b7c0e-0000-4000-8000-00000000000a"
JOB_B = "6d1b7c0e-0000-4000-8000-00000000000b"


def runs() -> list[RecoveredRun]:
    """Two jobs' runs as a restarted job manager hands them back: a job's runs share
    needs and labels; states, hosts, desired hosts and run ids vary."""
    needs_a = PlacementNeeds(Resources(0.5, 64), ports=1)
    needs_b = PlacementNeeds(Resources(2, 512, 10, 1), revocable=True, strategy=Strategy.SPREAD,
                             constraint=LabelConstraint(LabelKind.TASK, Condition.LESS_THAN,
                                                        Label("job", JOB_B), 1))
    labels_a: tuple[Label, ...] = (Label("team", "a"),)
    out = [RecoveredRun("pool-a", RmTask(TaskRequest(TaskId(JOB_A, i), needs_a, labels_a), i + 1,
                                         3, True, False), S.RUNNING, f"host-{i % 2}")
           for i in range(5)]
    out.append(RecoveredRun("pool-a", RmTask(TaskRequest(TaskId(JOB_A, 5), needs_a, labels_a),
                                             1, 3, True, False), S.LAUNCHED, "host-0"))
    out.append(RecoveredRun("pool-a", RmTask(TaskRequest(TaskId(JOB_A, 6), needs_a, labels_a,
                                                         "host-9", True), 2, 3, True, False),
                            S.RUNNING, "host-9"))
    out += [RecoveredRun("pool-b", RmTask(TaskRequest(TaskId(JOB_B, i), needs_b), 7, 0, False,
                                          True), S.KILLING, "host-1") for i in range(3)]
    out.append(RecoveredRun("pool-b", RmTask(TaskRequest(TaskId(JOB_B, 3), needs_b), 1),
                            S.LAUNCHING))  # placed, on no host yet
    return out


def test_every_run_comes_back_as_it_was_sent() -> None:
    sent = runs()
    msg = pb.RecoverRunsRequest.FromString(recovered_runs_to_pb(sent).SerializeToString())
    assert recovered_runs_count(msg) == len(sent)
    got = recovered_runs_from_pb(msg)
    key = lambda r: r.task.task_id  # noqa: E731 - groups may reorder runs
    assert sorted(got, key=key) == sorted(sent, key=key)


def test_the_needs_and_hosts_travel_once_per_call_and_are_shared_again() -> None:
    msg = recovered_runs_to_pb(runs())
    # Job A: RUNNING, LAUNCHED and the one with a desired host; job B: KILLING, LAUNCHING.
    assert len(msg.groups) == 5
    assert len(msg.needs) == 2
    assert sorted(msg.hosts) == ["", "host-0", "host-1", "host-9"]
    got = recovered_runs_from_pb(msg)
    a = [r.task.request for r in got if r.task.task_id.job_id == JOB_A]
    assert len({id(r.needs) for r in a}) == 1 and len({id(r.labels) for r in a[:5]}) == 1


def test_no_runs_is_an_empty_request() -> None:
    msg = recovered_runs_to_pb([])
    assert recovered_runs_count(msg) == 0 and recovered_runs_from_pb(msg) == []


@pytest.mark.parametrize("field", ["run_ids", "hosts"])
def test_columns_of_unequal_length_are_refused(field: str) -> None:
    msg = recovered_runs_to_pb(runs())
    getattr(msg.groups[0], field).append(0)
    with pytest.raises(InvalidArgument, match="instances") as err:
        recovered_runs_from_pb(msg)
    assert err.value.field == "groups"


def test_a_host_outside_the_table_is_refused() -> None:
    msg = recovered_runs_to_pb(runs())
    msg.groups[0].hosts[0] = len(msg.hosts)
    with pytest.raises(InvalidArgument, match="host index") as err:
        recovered_runs_from_pb(msg)
    assert err.value.field == "hosts"


def test_needs_outside_the_table_and_unknown_states_are_refused() -> None:
    msg = recovered_runs_to_pb(runs())
    msg.groups[0].template.request.needs = len(msg.needs)
    with pytest.raises(InvalidArgument, match="needs index"):
        recovered_runs_from_pb(msg)
    msg = recovered_runs_to_pb(runs())
    msg.groups[0].state = "DREAMING"
    with pytest.raises(InvalidArgument, match="DREAMING"):
        recovered_runs_from_pb(msg)
