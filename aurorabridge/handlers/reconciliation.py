"""Task reconciliation triggers (AuroraAdmin): triggerImplicit/ExplicitTaskReconciliation.

Aurora asks Mesos to re-report task states: implicitly (an empty list: every
task Mesos knows) or explicitly (the scheduler's active tasks, in batches of
`batchSize`).  Here both map onto the host manager's reconciliation with the
host backends (its Reconcile call, which every backend implements: the local
agents, Mesos, the simulated hosts):

* implicit -> reconcile every run on every host;
* explicit -> reconcile the launched runs of the bridge's jobs (their pod ids,
  which are the host-level run ids), `batchSize` per call (all in one call
  when unset), as Aurora's scheduler sends its tasks assigned to an agent.

Answers arrive asynchronously as status updates; launched runs no host knows
end LOST.  A task never launched (PENDING, placed, reserved) is not asked
about, so it stays as it is; the job and resource managers also drop a LOST
about a run never launched (peloton.core.lifecycle.task_transitions.NOT_LAUNCHED).
"""

from __future__ import annotations

from typing import Any

from aurorabridge.fanout import fanout
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.handlers.jobs import query_pods
from aurorabridge.ptoa.states import LAUNCHED_POD_STATES
from aurorabridge.responses import ok
from peloton.core.errors import InvalidArgument


def trigger_implicit(ctx: BridgeContext, args: Any) -> Any:
    ctx.port.reconcile_tasks(None)
    return ok()


def trigger_explicit(ctx: BridgeContext, args: Any) -> Any:
    settings = args.settings
    if settings is None:
        raise InvalidArgument("reconciliation settings are required", field="settings")
    batch = settings.batchSize
    if batch is not None and batch <= 0:
        raise InvalidArgument("Batch size must be greater than zero.", field="settings.batchSize")
    job_ids = [s.job_id.value for s in ctx.directory.query()]
    pods = fanout(lambda job_id: query_pods(ctx, job_id, summary_only=True), job_ids, ctx.handlers.workers)
    runs = sorted(p.status.pod_id.value for ps in pods for p in ps
                  if p.status.pod_id.value and p.status.state in LAUNCHED_POD_STATES)
    size = batch or len(runs) or 1
    for start in range(0, len(runs), size):
        ctx.port.reconcile_tasks(runs[start:start + size])
    return ok()


HANDLERS: dict[str, HandlerFn] = {
    "triggerImplicitTaskReconciliation": trigger_implicit,
    "triggerExplicitTaskReconciliation": trigger_explicit,
}
