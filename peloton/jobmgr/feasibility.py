"""Refuse a job whose tasks could never run, at create and on update (one call from the ops).

The judgement is the core's (peloton/core/feasibility.py); this asks the
resource manager whether the pool's limits could ever admit the job's
largest gang (`validate_pool` with the need) and the host manager what
every host could hold (`host_shapes`).  A job labelled
`peloton/queue-anyway=true` (on the job or a task; Aurora Metadata works
too) is only checked for a valid pool and queued: hosts may join later, a
limit may be raised.
"""

from __future__ import annotations

from peloton.core.errors import InvalidArgument
from peloton.core.feasibility import (
    QUEUE_ANYWAY,
    admission_need,
    job_asks_to_queue,
    job_never_fits,
)
from peloton.core.model.job import JobSpec
from peloton.core.ports import HostManagerPort, ResourceManagerPort

#: What every refusal adds, so the user knows the way out.
HINT = (f"Ask for less, or label the job {QUEUE_ANYWAY}=true (peloton job create "
        "--queue-anyway) to queue it until a host that can hold it joins.")


def refuse_if_never_runs(resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                         spec: JobSpec) -> None:
    """Validate the job's pool; unless it asks to be queued anyway, raise InvalidArgument
    naming the resource and the largest host when no UP host or pool limit could ever
    hold its tasks."""
    if job_asks_to_queue(spec):
        resmgr.validate_pool(spec.respool_id)
        return
    try:
        resmgr.validate_pool(spec.respool_id, admission_need(spec))
    except InvalidArgument as exc:
        if (exc.field or "").startswith("resources."):
            raise InvalidArgument(f"{exc.message}. {HINT}", field=exc.field) from None
        raise
    why = job_never_fits(spec, hostmgr.host_shapes())
    if why is not None:
        raise InvalidArgument(f"the job can never run: {why.message}. {HINT}", field=why.field)
