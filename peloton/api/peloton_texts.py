"""Peloton's error texts, for answers a Peloton client must see exactly as Peloton sends them.

Clients match on gRPC codes and message texts, so where Peloton's handlers
(uber/peloton pkg/jobmgr/*svc, pkg/resmgr/respool/respoolsvc,
pkg/hostmgr/hostsvc) answer a case with a fixed text, the servicers here
use the same text, kept in this one module.  Peloton builds some texts
from Go values; those are rebuilt the same way:

* a YARPC error put into a response body (`err.Error()`) reads
  `code:<yarpc code> message:<text>` (`yarpc_text`);
* a proto message formatted with `%v` reads `value:"<id>" ` (Go's compact
  text form, with its trailing space; `go_id`).

Texts Peloton takes from a lower layer (the database, its config
validator) are ours; see the README's compatibility notes.
"""

from __future__ import annotations

# -- resource pools a job may use (jobsvc and stateless handler, validateResourcePool) --------
POOL_ID_NULL = "resource pool ID is null"
POOL_NOT_FOUND = "resource pool not found"
POOL_IS_ROOT = "cannot submit jobs to the `root` resource pool"
POOL_NOT_LEAF = "cannot submit jobs to a non leaf resource pool"

# -- v0 ResourceManager (pkg/resmgr/respool/respoolsvc/handler.go) --------------------------
RESPOOL_NOT_LEAF = "resource pool is not leaf"
RESPOOL_BUSY = "resource pool is busy"
RESPOOL_NOT_DELETED = "resource pool could not be deleted"

# -- v0 JobManager (pkg/jobmgr/jobsvc/handler.go) ---------------------------------------------
JOB_ID_NOT_UUID = "JobID must be valid UUID"
JOB_NOT_FOUND = "job not found"
JOB_NOT_IN_CACHE = "Job not found in cache"
JOB_UPDATE_BATCH_ONLY = "job update is only supported for batch jobs"
INVALID_CONFIG_VERSION = "invalid job configuration version"
INCORRECT_TIME_RANGE = "Incorrect timerange"
NIL_TIMESTAMP = "timestamp: nil Timestamp"


def job_runtime_not_found(job_id: str) -> str:
    """Peloton's storage text for a job without a runtime (an unknown job)."""
    return f"Job runtime not found {job_id}"


def job_not_terminal(state: str) -> str:
    """Delete of a job that is not terminal (INTERNAL in Peloton)."""
    return f"Job is not in a terminal state: {state}"


def job_terminal(state: str) -> str:
    """v0 Update of a terminal job (Peloton writes no space after the colon)."""
    return f"Job is in a terminal state:{state}"


def service_only(workflow: str) -> str:
    """RESTART / START / STOP of a job that is not a service."""
    return f"{workflow} supported only for service jobs"


def added_instances(count: int) -> str:
    """v0 Update's reply message."""
    return f"added {count} instances"


# -- VolumeService (pkg/jobmgr/volumesvc/handler.go, before Peloton deleted it) ----------------
VOLUME_NOT_FOUND = "volume not found"
VOLUME_IN_USE = "volume is being used"
VOLUME_UPDATE_FAILED = "failed to update volume goalstate"


# -- v0 TaskManager (pkg/jobmgr/tasksvc/handler.go) -------------------------------------------
TASK_NOT_IN_CACHE = "Task not found in cache"
TASKS_NOT_FOUND = "tasks not found"
TERMINATED_JOB_START = "cannot start tasks in a terminated job"

# -- v0 UpdateService (pkg/jobmgr/updatesvc/handler.go) ---------------------------------------
UPDATE_JOB_ID_NOT_UUID = "JobID must be of UUID format"
IN_PLACE_UNSUPPORTED = "in-place update is not supported yet"
UPDATE_SERVICE_ONLY = "job must be of type service"
NO_UPDATE_ID = "no update ID provided"
NO_JOB_ID = "no job ID provided"
UPDATE_NOT_FOUND = "update not found"
PARTIALLY_CREATED = "cannot update partially created job"
JOB_TYPE_IMMUTABLE = "job type is immutable"
POOL_IMMUTABLE = "resource pool identifier is immutable"
MISSING_CHANGELOG = "missing changelog in job configuration"

# -- v1alpha JobService (pkg/jobmgr/jobsvc/stateless/handler.go) ------------------------------
V1_JOB_ID_NOT_UUID = "jobID is not valid UUID"
V1_JOB_NOT_STOPPED = "job is not stopped"
V1_JOB_NOT_IN_CACHE = "job not found in cache"
V1_NO_JOB_ID = "no job id provided"
V1_WORKFLOW_EVENTS_ID = "job ID must be of UUID format"
V1_NO_WORKFLOW = "job runtime does not have workflow"
#: The cached job has no current workflow to pause, resume or abort (cached/job.go).
NO_WORKFLOW_FOUND = "no workflow found"


# -- v1alpha PodService (pkg/jobmgr/podsvc/handler.go) ----------------------------------------
POD_NAME_INVALID = "invalid pod name"
POD_NOT_RUN = "pod has not been run"
TERMINATED_JOB_POD_START = "cannot start pod in terminated job"

# -- v0 HostService (pkg/hostmgr/hostsvc/handler.go, host/drainer/drainer.go) --------------
NOT_A_PELOTON_AGENT = "host is not a Peloton agent"
HOST_NOT_DOWN = "Host is not DOWN"
HOST_POOLS_OFF = "host pools not enabled"


def host_info_not_found(hostname: str) -> str:
    """CompleteMaintenance of a host Peloton has no record of."""
    return f"host info not found {hostname}"


def multierr_text(texts_: list[str]) -> str:
    """Several Go errors joined as go.uber.org/multierr prints them."""
    return "; ".join(texts_)


# -- WatchService and AdminService -------------------------------------------------------------
WATCH_ID_INVALID = "invalid watch id"
WATCH_TYPE_UNSUPPORTED = "not supported watch type"


def yarpc_text(code: str, message: str) -> str:
    """A YARPC error as Go prints it (`err.Error()`), e.g. `code:not-found message:...`."""
    return f"code:{code} message:{message}"


def go_id(value: str) -> str:
    """A Peloton id message formatted with Go's `%v` (compact text, trailing space)."""
    return f'value:"{value}" '
