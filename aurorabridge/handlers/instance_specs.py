"""Which instances an Aurora update touches, expressed as Peloton per-instance specs.

Peloton updates a whole job to a new JobSpec and restarts the instances whose
spec changes (compared, per instance, with the spec each one runs); Aurora
updates exactly the instances whose config differs from their active task, and
only those in `updateOnlyTheseInstances` when set.  `update_job_spec` builds the
JobSpec that makes the first do the second, as Peloton's bridge did
(createJobSpecForUpdate), for every update:

* instances outside the scope keep the spec they run now (their pod spec, with
  the update label an earlier update gave them);
* in-scope instances whose spec changes get the new default spec;
* in-scope instances whose spec does not change but which are not running
  (killed, failed, or the whole job killed) get the new spec plus a fresh
  `aurora_bridge_update` label, which makes Peloton start them again (Aurora
  has no active task there, so its update creates one);
* in-scope running instances whose spec does not change keep the spec they
  run, label and all, so a redeploy of the same config touches nothing even
  after a label forced a restart earlier;
* new instances (beyond the current count) are always created, in scope or not
  (Aurora would reject such an update; Peloton's bridge created them).

When every instance simply takes the new default, no per-instance spec is
sent.  Spec equality ignores the `aurora_bridge_update` label and pod names, and
compares specs as the v0 config Peloton stores (see `comparable`).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from aurorabridge import labels
from aurorabridge.handlers.context import BridgeContext, Job
from aurorabridge.ptoa import basics
from aurorabridge.ptoa.states import TERMINAL_POD_STATES
from peloton.api.convert.v0_v1 import pod_spec_to_v0
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2


def comparable(spec: Any) -> bytes:
    """Serialized spec without pod name and update label, for equality checks.

    Compared as the v0 TaskConfig Peloton stores: a spec read back from Peloton carries
    the raw Mesos messages next to their pod spelling (command and entrypoint, ...),
    one the bridge builds only the pod spelling, and both convert to the same config.
    """
    copy = pod_pb2.PodSpec()
    copy.CopyFrom(spec)
    copy.ClearField("pod_name")
    kept = [lab for lab in copy.labels if lab.key != labels.UPDATE_KEY]
    del copy.labels[:]
    copy.labels.extend(kept)
    return bytes(pod_spec_to_v0(copy).SerializeToString(deterministic=True))


def _labelled(spec: Any) -> bool:
    return any(lab.key == labels.UPDATE_KEY for lab in spec.labels)


def _with_update_label(spec: Any) -> Any:
    copy = pod_pb2.PodSpec()
    copy.CopyFrom(spec)
    kept = [lab for lab in copy.labels if lab.key != labels.UPDATE_KEY]
    del copy.labels[:]
    copy.labels.extend([*kept, labels.label(labels.UPDATE_KEY, str(uuid.uuid4()))])
    return copy


def current_pods(ctx: BridgeContext, job: Job) -> dict[int, tuple[Any, int]]:
    """instance -> (the pod spec it runs, without its name; its pod state)."""
    current: dict[int, tuple[Any, int]] = {}
    for pod in ctx.port.query_pods(job.job_id, pod_pb2.QuerySpec()).pods:
        instance = basics.instance_of(pod.spec.pod_name.value)
        if instance >= 0:
            spec = pod_pb2.PodSpec()
            spec.CopyFrom(pod.spec)
            spec.ClearField("pod_name")
            current[instance] = (spec, pod.status.state)
    return current


def update_job_spec(ctx: BridgeContext, job: Job, new_spec: Any,
                    scope: Collection[int] | None = None) -> Any:
    """`new_spec` with the instance specs that make Peloton touch exactly what Aurora would
    (`scope`: the pinned instances; None: all of them)."""
    current = current_pods(ctx, job)
    target = comparable(new_spec.default_spec)
    out = stateless_pb2.JobSpec()
    out.CopyFrom(new_spec)
    out.ClearField("instance_spec")
    for i in range(new_spec.instance_count):
        if i not in current:
            continue
        spec, state = current[i]
        unchanged = comparable(spec) == target
        if scope is not None and i not in scope:
            # Kept exactly, update label included: a label an earlier update put there to
            # start the instance is part of its spec, and dropping it would restart it.
            if not unchanged or _labelled(spec):
                out.instance_spec[i].CopyFrom(spec)
        elif unchanged and state in TERMINAL_POD_STATES:
            out.instance_spec[i].CopyFrom(_with_update_label(new_spec.default_spec))
        elif unchanged and _labelled(spec):
            out.instance_spec[i].CopyFrom(spec)
    return out
