"""Converters between Peloton's wire messages (v0, v1alpha) and the core model.

Protobuf objects never enter `peloton.core`; every crossing goes through a
function here, named by direction: `<core thing>_from_v0(msg)` reads a wire
message into core values (validating what the client sent, raising
InvalidArgument that names the offending field), `<core thing>_to_v0(...)`
writes core values into a new wire message.  `v0_v1` converts wire to wire,
for a job stored from one API and read through the other.

Modules, one concept each: `common` (times, labels, ids, entity versions,
stored request documents), `merge` (instance config over default config),
`constraints` (both APIs' constraint trees), `validate` (the job and task
rules both APIs enforce), `mesos_pod` (Mesos messages <-> v1alpha pod
fields), `v0_task` (TaskConfig <-> TaskSpec), `v0_task_runtime` (runtime,
TaskInfo, pod events, task queries), `v0_job`, `v0_respool`, `v0_host`,
`v0_update`, `v1_pod` (PodSpec <-> TaskSpec), `v1_pod_status`, `v1_job`,
`v1_workflow`, `v0_v1`.

Who uses what: a daemon's servicer calls `*_from_v0/_from_v1` on requests
(letting InvalidArgument / Unimplemented through to its one error mapping)
and `*_to_v0/_to_v1` on responses; `v0_job.task_config_for_instance` and
`v1_job.pod_spec_for_instance` answer task / pod Get from the job's stored
document.  `peloton.api.yaml_load` turns the CLI's YAML files into the same
request messages.
"""
