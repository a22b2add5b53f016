"""Why each waiting task of a job is not running, for every read that returns tasks.

Peloton filled only the reason of PENDING tasks, and only in task List and
Query (fillReasonForPendingTasksFromResMgr).  Every read here (v0 task Get,
List, Query; v1alpha GetPod, ListPods, QueryPods) carries the reason of
every task that waits, in its runtime's `reason` (and `message`, when the
run has no message of its own):

* queued in the resource manager: its explanation (admission, entitlement,
  reservation, queue position, the last placement report per filter);
* not handed to the resource manager: held by the job's
  maximumRunningInstances, or a stateful task waiting for its host;
* **unplaceable**: no UP host could hold it any more (the cluster shrank,
  or the job was queued anyway), with the check's sentence
  (peloton/core/feasibility.py); hosts are asked once per read, and only
  when some task of the page waits for placement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from peloton.core.feasibility import never_fits
from peloton.core.model.ids import TaskId
from peloton.core.model.job import JobSpec
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import TaskState

S = TaskState
#: States of a run that has not started yet (what "waiting" means here).
WAITING = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING,
                     S.LAUNCHED})
#: Waiting states in which the run has no host yet (so it may be unplaceable).
UNPLACED = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING})
#: Goals under which a waiting task is meant to run (not one being stopped).
_TO_RUN = frozenset({S.RUNNING, S.SUCCEEDED})
_IN_FLIGHT = frozenset({S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING, S.LAUNCHED,
                        S.STARTING, S.RUNNING})


def waiting_reasons(resmgr: ResourceManagerPort, hostmgr: HostManagerPort, job_id: str,
                    rows: Sequence[tuple[int, TaskRuntime]],
                    spec_at: Callable[[int], JobSpec]) -> dict[int, str]:
    """instance -> why it is not running, for the waiting tasks among `rows`."""
    waiting = [(i, rt) for i, rt in rows if rt.state in WAITING and rt.goal_state in _TO_RUN]
    if not waiting:
        return {}
    queued = [TaskId(job_id, i) for i, rt in waiting if rt.state is not S.INITIALIZED]
    from_rm = resmgr.pending_reasons(queued) if queued else {}
    out: dict[int, str] = {}
    specs: dict[int, JobSpec] = {}

    def spec_of(rt: TaskRuntime) -> JobSpec:
        version = rt.config_version or rt.desired_config_version
        if version not in specs:
            specs[version] = spec_at(version)
        return specs[version]

    for inst, rt in waiting:
        why = from_rm.get(TaskId(job_id, inst))
        out[inst] = why or _held_by_job(spec_of(rt), inst, rt, rows)
    unplaced = [(i, rt) for i, rt in waiting if rt.state in UNPLACED]
    if unplaced:
        hosts = hostmgr.host_shapes()
        verdicts: list[tuple[TaskSpec, str | None]] = []
        for inst, rt in unplaced:
            task = spec_of(rt).task_spec(inst)
            verdict = next((v for t, v in verdicts if t == task), "")
            if verdict == "":
                found = never_fits(task, hosts)
                verdict = None if found is None else found.message
                verdicts.append((task, verdict))
            if verdict:
                out[inst] = f"unplaceable: no UP host could hold it now: {verdict}"
    return out


def _held_by_job(spec: JobSpec, inst: int, rt: TaskRuntime,
                 rows: Sequence[tuple[int, TaskRuntime]]) -> str:
    cap = spec.sla.maximum_running_instances
    if cap and rt.state is S.INITIALIZED:
        busy = sum(1 for _, other in rows if other.state in _IN_FLIGHT)
        if busy >= cap:
            return (f"held by the job: at most {cap} of its tasks run at once "
                    f"(maximumRunningInstances), {busy} are in flight")
    if rt.desired_host and spec.task_spec(inst).stateful:
        return f"waiting for its host {rt.desired_host}, which holds its volume"
    if rt.state is S.INITIALIZED:
        return "being handed to the resource manager"
    return "waiting for the resource manager"


def with_reasons(rows: Sequence[tuple[int, TaskRuntime]],
                 reasons: dict[int, str]) -> list[tuple[int, TaskRuntime]]:
    """`rows` with each waiting task's reason (and message, when it has none) filled in."""
    out = []
    for inst, rt in rows:
        why = reasons.get(inst)
        if why:
            rt = dataclasses.replace(rt, reason=why, message=rt.message or why)
        out.append((inst, rt))
    return out
