"""Recovered runs <-> pelotonpy.internal.resmgr.RecoverRunsRequest: a restart's hand-back.

A job manager restart hands every run it has back to the resource manager (a million at
Peloton's scale).  One message per run (RecoverTasksRequest) made the encoding and the
parsing cost more than the booking itself, so this encoding groups the runs of one job
that share everything but their instance, run and host (pool, state, placement needs,
labels, desired host, priority, flags): each group is one template task and three packed
columns, and the needs and host names are tables shared by the whole call.

Grouping is by object identity of the needs and the labels (what a job's runs share,
sched.py and recovery.py) plus the plain fields, so runs that merely look alike may land
in different groups; that costs size, never meaning.  The receiver rebuilds one
`RecoveredRun` per run, sharing one needs object per table entry and one labels tuple
per group.
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.api.convert.private_sched import (
    NeedsTable,
    enum_from_pb,
    needs_from_pb,
    rm_task_from_pb,
    rm_task_to_pb,
)
from peloton.api.gen.pelotonpy.internal.resmgr import resmgr_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.model.evolve import constructor
from peloton.core.model.ids import TaskId
from peloton.core.placement.request import TaskRequest
from peloton.core.ports import RecoveredRun
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState

#: Built once per run on the receiving side (a million in a big restart).
_recovered_run = constructor(RecoveredRun)
_rm_task = constructor(RmTask)
_task_request = constructor(TaskRequest)


def recovered_runs_to_pb(runs: Sequence[RecoveredRun]) -> pb.RecoverRunsRequest:
    """Runs -> one RecoverRunsRequest (groups in first-seen order, runs in order within)."""
    table = NeedsTable()
    hosts: dict[str, int] = {}
    groups: dict[tuple[object, ...], tuple[RecoveredRun, list[int], list[int], list[int]]] = {}
    for run in runs:
        task = run.task
        req = task.request
        key = (run.pool_id, run.state, req.task_id.job_id, id(req.needs), id(req.labels),
               req.desired_host, req.desired_host_only, task.priority, task.preemptible,
               task.controller)
        group = groups.get(key)
        if group is None:
            group = groups[key] = (run, [], [], [])
        group[1].append(req.task_id.instance)
        group[2].append(task.run_id)
        host = hosts.get(run.hostname)
        if host is None:
            host = hosts[run.hostname] = len(hosts)
        group[3].append(host)
    request = pb.RecoverRunsRequest()
    for first, instances, run_ids, on in groups.values():
        request.groups.add(pool_id=first.pool_id, state=first.state.value,
                           template=rm_task_to_pb(first.task, table), instances=instances,
                           run_ids=run_ids, hosts=on)
    request.needs.extend(table.messages)
    request.hosts.extend(hosts)
    return request


def recovered_runs_count(m: pb.RecoverRunsRequest) -> int:
    """The runs a request holds (what a receiver's per-call limit counts)."""
    return sum(len(g.instances) for g in m.groups)


def recovered_runs_from_pb(m: pb.RecoverRunsRequest) -> list[RecoveredRun]:
    """Message -> one RecoveredRun per run; InvalidArgument for columns of unequal length
    or an index outside its table."""
    needs = needs_from_pb(m.needs)
    hosts = list(m.hosts)
    out: list[RecoveredRun] = []
    for g in m.groups:
        template = rm_task_from_pb(g.template, needs)
        state = enum_from_pb(TaskState, g.state, "state")
        if not len(g.instances) == len(g.run_ids) == len(g.hosts):
            raise InvalidArgument(f"pool {g.pool_id}: {len(g.instances)} instances, "
                                  f"{len(g.run_ids)} run ids and {len(g.hosts)} hosts",
                                  field="groups")
        if g.hosts and max(g.hosts) >= len(hosts):
            raise InvalidArgument(f"pool {g.pool_id}: host index {max(g.hosts)} outside a "
                                  f"table of {len(hosts)}", field="hosts")
        req = template.request
        job_id, task_needs, labels = req.task_id.job_id, req.needs, req.labels
        desired, only = req.desired_host, req.desired_host_only
        priority, preemptible, controller = (template.priority, template.preemptible,
                                             template.controller)
        pool_id = g.pool_id
        out.extend(
            _recovered_run(pool_id, _rm_task(
                _task_request(TaskId(job_id, instance), task_needs, labels, desired, only),
                run_id, priority, preemptible, controller), state, hosts[host])
            for instance, run_id, host in zip(g.instances, g.run_ids, g.hosts, strict=True))
    return out
