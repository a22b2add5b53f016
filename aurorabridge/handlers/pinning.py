"""Updates limited to some instances (JobUpdateSettings.updateOnlyTheseInstances).

Peloton updates a whole job to a new JobSpec; Aurora can update a subset.
The subset is expressed with per-instance specs (JobSpec.instance_spec), as
Peloton's bridge did:

* instances outside the scope keep the spec they run now;
* in-scope instances whose spec changes get the new default spec;
* in-scope instances whose spec does not change but which are not running
  (killed, failed) get the new spec plus a fresh `aurora_bridge_update`
  label, which forces Peloton to start them again (Aurora's update restarts
  them too);
* new instances (beyond the current count) are always created, in scope or
  not (Aurora would reject such an update; Peloton's bridge created them).

Spec equality ignores the `aurora_bridge_update` label and pod names, and compares
specs as the v0 config Peloton stores (see `comparable`).
"""

from __future__ import annotations

import uuid
from typing import Any

from aurorabridge import labels
from aurorabridge.handlers.context import BridgeContext, Job
from aurorabridge.handlers.jobs import query_pods
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


def _with_update_label(spec: Any) -> Any:
    copy = pod_pb2.PodSpec()
    copy.CopyFrom(spec)
    kept = [lab for lab in copy.labels if lab.key != labels.UPDATE_KEY]
    del copy.labels[:]
    copy.labels.extend([*kept, labels.label(labels.UPDATE_KEY, str(uuid.uuid4()))])
    return copy


def pinned_spec(ctx: BridgeContext, job: Job, new_spec: Any, scope: list[tuple[int, int]]) -> Any:
    """`new_spec` with instance specs limiting the update to `scope` (inclusive ranges)."""
    in_scope = {i for first, last in scope for i in range(first, last + 1)}
    current: dict[int, tuple[Any, int]] = {}
    for pod in query_pods(ctx, job.job_id):
        instance = basics.instance_of(pod.spec.pod_name.value)
        if instance >= 0:
            spec = pod_pb2.PodSpec()
            spec.CopyFrom(pod.spec)
            spec.ClearField("pod_name")
            current[instance] = (spec, pod.status.state)
    target = comparable(new_spec.default_spec)
    out = stateless_pb2.JobSpec()
    out.CopyFrom(new_spec)
    for i in range(new_spec.instance_count):
        if i not in current:
            continue
        spec, state = current[i]
        unchanged = comparable(spec) == target
        if i not in in_scope:
            if not unchanged:
                out.instance_spec[i].CopyFrom(spec)
        elif unchanged and state in TERMINAL_POD_STATES:
            out.instance_spec[i].CopyFrom(_with_update_label(new_spec.default_spec))
    return out
