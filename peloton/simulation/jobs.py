"""Trace jobs as the job manager's job specs (the translation a simulator submits).

One trace job becomes one Peloton job of the same type with `instances` identical
tasks: the trace's resources per task, its priority and preemptibility in the
SLA, its constraint on every task.  `one_per_host` becomes what Peloton users
write for it: a task label naming the job, and a TASK constraint allowing fewer
than one task with that label on the host being placed.  The command is never
run (simulated hosts only time the task), so it just names the trace job.

Every job also carries `peloton/queue-anyway=true`: the job manager refuses at create a
job no host or pool limit could ever hold, but a replay must queue what the trace
submitted (a what-if may add the hosts it needs later), and report it as never run with
the resource manager's reason if nothing changes.
"""

from __future__ import annotations

from peloton.core.feasibility import QUEUE_ANYWAY
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Constraint,
    Label,
    LabelConstraint,
    LabelKind,
)
from peloton.core.model.job import JobSpec, SlaSpec
from peloton.core.model.task import CommandSpec, TaskSpec
from peloton.simulation.trace import TraceJob

#: Label key carried by every task of a simulated job (value: the trace job id).
JOB_LABEL = "peloton.sim/job"


def task_constraint(job: TraceJob) -> Constraint | None:
    """The job's constraint, with the one-per-host rule added when asked for."""
    if not job.one_per_host:
        return job.constraint
    spread = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label(JOB_LABEL, job.job), 1)
    if job.constraint is None:
        return spread
    return AndConstraint((job.constraint, spread))


def job_spec_for(job: TraceJob, respool_id: str) -> JobSpec:
    """The JobSpec a simulator creates for `job` in the pool with id `respool_id`."""
    task = TaskSpec(name=job.job, resources=job.resources,
                    command=CommandSpec(value=f"simulated {job.job}"),
                    constraint=task_constraint(job), labels=(Label(JOB_LABEL, job.job),),
                    preemptible=job.preemptible)
    return JobSpec(name=job.job, type=job.type, instance_count=job.instances, default_task=task,
                   respool_id=respool_id, owner="simulation",
                   labels=(Label(JOB_LABEL, job.job), Label(QUEUE_ANYWAY, "true")),
                   sla=SlaSpec(priority=job.priority, preemptible=job.preemptible))
