"""The whole story of why a job's tasks wait, told from the client side (CLI and web UI).

`explain_job` reads what the public API and our capacity extension show
(the job, its tasks with their waiting reasons, its pool's entitlement,
demand and queue, the hosts) and puts it together: a structured
`Explanation` the web UI renders and `lines()` the CLI prints
(`peloton job explain JOB`).  Nothing here decides anything: the reasons
come from the servers (the resource manager's admission and placement
reports, the job manager's own limits and feasibility check).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.pelotonpy.ext import capacity_pb2
from peloton.core import words
from peloton.core.errors import Unimplemented
from peloton.core.model.resources import ResourceKind

_KINDS = (ResourceKind.CPU, ResourceKind.MEMORY, ResourceKind.DISK, ResourceKind.GPU)
_FIELDS = {ResourceKind.CPU: "cpu", ResourceKind.MEMORY: "mem_mb", ResourceKind.DISK: "disk_mb",
           ResourceKind.GPU: "gpu"}
_TERMINAL = {"SUCCEEDED", "FAILED", "KILLED", "LOST", "DELETED"}
#: The queue position in a resource manager reason ("(2nd of 3 queued)").
_POSITION = re.compile(r" \((\d[\d,]*)(?:st|nd|rd|th) of ([\d,]+) queued\)")


def amounts(message: Any, *, skip_zero: bool = True) -> str:
    """An Amounts message in words ("2 cpu, 4 GiB memory")."""
    parts = [words.amount(k, getattr(message, _FIELDS[k])) for k in _KINDS
             if getattr(message, _FIELDS[k]) > 0.0005 or (not skip_zero and k is not
                                                             ResourceKind.GPU)]
    return ", ".join(parts) if parts else "nothing"


def ranges(instances: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(instances):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


@dataclass
class Explanation:
    """What `explain_job` found; every part is plain data (JSON-ready through `as_dict`)."""

    job_id: str
    name: str
    job_type: str
    state: str
    task_states: dict[str, int]
    pool: dict[str, Any] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)
    #: Groups of waiting instances with the same reason, largest first.
    waiting: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The explanation as JSON-ready data."""
        return {"job_id": self.job_id, "name": self.name, "type": self.job_type,
                "state": self.state, "task_states": self.task_states, "pool": self.pool,
                "cluster": self.cluster, "waiting": self.waiting, "lines": self.lines()}

    def lines(self) -> list[str]:
        """The story as lines of text."""
        counts = ", ".join(f"{n} {s}" for s, n in self.task_states.items())
        out = [f"Job {self.job_id} ({self.name}), {self.job_type}, {self.state}: {counts}"]
        pool = self.pool
        if pool:
            out.append(f"Pool {pool['path']}: entitled to {pool['entitlement']} now; "
                       f"allocated {pool['allocation']}; queued demand {pool['demand']}")
            out.append(f"  reservation {pool['reservation']}; limit {pool['limit']}; "
                       f"{words.plural(pool['queued_gangs'], 'gang')} "
                       f"({words.plural(pool['queued_tasks'], 'task')}) queued")
            if pool["limit_above_capacity"]:
                out.append(f"  note: its {', '.join(pool['limit_above_capacity'])} limit is above "
                           "what the cluster has, so it can never use all of it")
            if pool["reserved_for"]:
                out.append(f"  backfill: {pool['reserved_for']} has waited longest and holds a "
                           "reservation; later work starts only if it fits beside it")
        cluster = self.cluster
        if cluster:
            largest = cluster.get("largest")
            line = (f"Cluster: {words.plural(cluster['hosts_up'], 'UP host')} of "
                    f"{cluster['hosts']}; {cluster['total']} in all, {cluster['allocated']} "
                    "allocated on hosts")
            if largest:
                line += f"; largest host {largest['hostname']} ({largest['total']})"
            out.append(line)
        if not self.waiting:
            out.append("No task is waiting.")
        for group in self.waiting:
            label = "instance" if len(group["instances"]) == 1 else "instances"
            out.append(f"Waiting, {label} {ranges(group['instances'])} ({group['state']}):")
            out.append(f"  {group['reason']}")
        return out


def _pool_dict(status: capacity_pb2.PoolStatus) -> dict[str, Any]:
    return {"path": status.path, "entitlement": amounts(status.entitlement),
            "allocation": amounts(status.allocation), "demand": amounts(status.demand),
            "reservation": amounts(status.reservation), "limit": amounts(status.limit),
            "queued_gangs": status.queued_gangs, "queued_tasks": status.queued_tasks,
            "limit_above_capacity": list(status.limit_above_capacity),
            "reserved_for": status.reserved_for}


def _cluster_dict(hosts: capacity_pb2.ListHostCapacityResponse) -> dict[str, Any]:
    up = [h for h in hosts.hosts if h.state == "UP" and h.connected]
    largest = max(up, key=lambda h: (h.total.cpu, h.total.mem_mb, h.hostname), default=None)
    return {"hosts": len(hosts.hosts), "hosts_up": len(up),
            "total": amounts(hosts.cluster_total), "allocated": amounts(hosts.cluster_allocated),
            "largest": None if largest is None else {"hostname": largest.hostname,
                                                     "total": amounts(largest.total)}}


def explain_job(client: PelotonClient, job_id: str, *, info: Any = None,
                tasks: Any = None) -> Explanation:
    """Read the job, its tasks, its pool and the hosts, and put the story together.

    `info` (a v0 JobInfo) and `tasks` (instance -> v0 TaskInfo) save the reads when the
    caller has them already.
    """
    info = info if info is not None else client.get_job(job_id).jobInfo
    runtime = info.runtime
    tasks = tasks if tasks is not None else client.list_tasks(job_id).result.value
    states: dict[str, int] = {}
    groups: dict[tuple[str, str], list[int]] = {}
    places: dict[tuple[str, str], list[int]] = {}
    queued: dict[tuple[str, str], str] = {}
    for inst, task in tasks.items():
        state = task_pb2.TaskState.Name(task.runtime.state)
        states[state] = states.get(state, 0) + 1
        reason = task.runtime.reason
        if reason and state not in _TERMINAL and state != "RUNNING":
            # Tasks that differ only in their queue position tell one story.
            found = _POSITION.search(reason)
            key = (_POSITION.sub(" ()", reason) if found else reason, state)
            groups.setdefault(key, []).append(inst)
            if found:
                places.setdefault(key, []).append(int(found[1].replace(",", "")))
                queued[key] = found[2]
    waiting = []
    for key, insts in sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1]))):
        text, state = key
        if key in places:
            spots = sorted(places[key])
            where = (f"{spots[0]:,} of" if len(spots) == 1 else
                     f"{ranges(spots).replace('-', ' to ')} of")
            text = text.replace(" ()", f" (queue position {where} {queued[key]})", 1)
        waiting.append({"reason": text, "state": state, "instances": sorted(insts)})
    out = Explanation(job_id=job_id, name=info.config.name,
                      job_type=job_pb2.JobType.Name(info.config.type),
                      state=job_pb2.JobState.Name(runtime.state),
                      task_states=dict(sorted(states.items())), waiting=waiting)
    try:
        pools = client.list_pool_status()
        mine = next((p for p in pools.pools if p.pool_id == info.config.respoolID.value), None)
        if mine is not None:
            out.pool = _pool_dict(mine)
        out.cluster = _cluster_dict(client.list_host_capacity())
    except Unimplemented:
        pass  # a cluster without our capacity extension: tasks and reasons only
    return out
