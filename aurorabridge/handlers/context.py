"""What every handler works with: the Peloton port, lookups, caches, settings.

`BridgeContext` is built once, whole, by app.py (the composition root): nothing is
attached to it afterwards; what the pulse timer does is a constructor argument
(`on_pulse_expired`, the updates handlers' `pulse_expired`).  Handlers are
plain functions of (context, decoded args).  The lookups here raise NotFound
with Aurora's wording so handlers stay short.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aurorabridge import opaque_data
from aurorabridge.atop.job_key import JobKey
from aurorabridge.atop.job_spec import job_spec
from aurorabridge.atop.pod_spec import pod_spec
from aurorabridge.config import UNFIT_JOB_RULES, HandlerSettings, ValidationSettings
from aurorabridge.job_directory import JobDirectory
from aurorabridge.ports import PelotonPort
from aurorabridge.ptoa.states import TERMINAL_WORKFLOW_STATES
from aurorabridge.ptoa.task_config import TaskConfigReader
from aurorabridge.pulse import PulseTimer
from aurorabridge.respool_loader import RespoolLoader
from aurorabridge.task_answers import TaskAnswers
from aurorabridge.validation import CheckedTask
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.core.errors import NotFound

HandlerFn = Callable[["BridgeContext", Any], Any]
#: Called by the pulse timer with (context, job id, update id) when an update's pulse
#: deadline passes; idempotent (a stale or finished update is left alone).
PulseAction = Callable[["BridgeContext", str, str], None]


@dataclass(slots=True)
class Job:
    """A resolved job: id, its GetJob response, the current workflow's opaque data."""

    key: JobKey
    job_id: str
    info: svc.GetJobResponse
    data: opaque_data.OpaqueData

    @property
    def spec(self) -> stateless_pb2.JobSpec:
        """The current JobSpec."""
        return self.info.job_info.spec

    @property
    def status(self) -> stateless_pb2.JobStatus:
        """The current JobStatus."""
        return self.info.job_info.status

    @property
    def version(self) -> str:
        """The entity version to send with mutating calls (compare-and-set token)."""
        return str(self.info.job_info.status.version.value)

    @property
    def workflow(self) -> stateless_pb2.WorkflowInfo:
        """The job's latest workflow."""
        return self.info.workflow_info


@dataclass(slots=True)
class BridgeContext:
    """Shared state of all handlers."""

    port: PelotonPort
    respools: RespoolLoader
    handlers: HandlerSettings = field(default_factory=HandlerSettings)
    limits: ValidationSettings = field(default_factory=ValidationSettings)
    reader: TaskConfigReader = field(default_factory=TaskConfigReader)
    #: Converted tasks and replies that task queries reuse (task_answers.py).
    answers: TaskAnswers = field(default_factory=TaskAnswers)
    clock: Callable[[], float] = time.monotonic
    #: How handlers pause between polls (cooperative under gevent's patched time).
    sleep: Callable[[float], None] = time.sleep
    #: Hosts marked by startMaintenance (Peloton has no such stage; see handlers/maintenance.py).
    scheduled_hosts: set[str] = field(default_factory=set)
    #: Pauses an update whose pulses stopped (handlers.updates.pulse_expired); required, so
    #: a context without it cannot be built.
    on_pulse_expired: PulseAction = field(kw_only=True)
    directory: JobDirectory = field(init=False)
    pulses: PulseTimer = field(init=False)

    def __post_init__(self) -> None:
        self.directory = JobDirectory(self.port, self.reader, self.handlers.query_jobs_limit)
        self.pulses = PulseTimer(lambda job_id, update_id: self.on_pulse_expired(self, job_id, update_id),
                                 clock=self.clock)

    def find(self, key: JobKey) -> Job | None:
        """The job named `key` with its current state, or None."""
        job_id = self.directory.job_id(key)
        if job_id is None:
            return None
        info = self.directory.get(job_id)
        if info is None:
            return None
        return Job(key, job_id, info, opaque_data.parse(info.workflow_info.opaque_data.data))

    def active_update(self, job: Job) -> opaque_data.OpaqueData | None:
        """The opaque data of the job's Aurora update if one is in progress."""
        workflow = job.workflow
        if (job.data.update_id and workflow.status.type == stateless_pb2.WORKFLOW_TYPE_UPDATE
                and workflow.status.state not in TERMINAL_WORKFLOW_STATES
                and workflow.status.state != stateless_pb2.WORKFLOW_STATE_INVALID):
            return job.data
        return None

    def job_spec(self, checked: CheckedTask, pool: str = "") -> Any:
        """The Peloton JobSpec of a validated task; `pool` defaults to its role's (made if missing)."""
        pool = pool or self.respools.load(checked.resources.wants_gpu, checked.key.role)
        pod = pod_spec(checked.task, checked.key, checked.resources, self.handlers.thermos_executor_path,
                       user=checked.key.role if self.handlers.run_as_role else "")
        return job_spec(checked.task, checked.key, checked.instance_count, pool, pod,
                        queue_unfit=UNFIT_JOB_RULES[self.handlers.unfit_jobs])

    def require(self, key: JobKey) -> Job:
        """Like find, but NotFound when the job does not exist."""
        job = self.find(key)
        if job is None:
            raise NotFound(f"job {key} does not exist")
        return job
