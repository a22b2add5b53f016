"""Settings of the Aurora bridge, with defaults matching Peloton's bridge and Aurora's scheduler.

Built by cli/aurorabridge.py from flags (or a YAML file) and handed to
app.AuroraBridge; every other module takes only the fields it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from announcer.config import AnnouncerConfig
from peloton.core.errors import InvalidArgument

DEFAULT_PORT = 5396
#: Aurora's DEFAULT_ALLOWED_JOB_ENVIRONMENTS (its scheduler's `-allowed_job_environments`).
AURORA_ENVIRONMENTS = r"^(prod|devel|test|staging\d*)$"
#: The default rule: any environment that is a good identifier, as Peloton's bridge accepted.
ANY_ENVIRONMENT = ""


@dataclass(frozen=True, slots=True)
class PoolResource:
    """One resource kind of the pool created when the bridge's pool is missing."""

    kind: str
    reservation: float
    limit: float
    share: float = 1.0


#: Peloton's development `default_respool_spec` for /AuroraBridge.
DEFAULT_POOL_RESOURCES = (
    PoolResource("cpu", 12, 12), PoolResource("memory", 6144, 6144),
    PoolResource("disk", 10240, 20480), PoolResource("gpu", 0, 0),
)


@dataclass(frozen=True, slots=True)
class RespoolSettings:
    """Where bridge jobs go, and what to create when the pool is missing."""

    path: str = "/AuroraBridge"
    gpu_path: str = "/GPUAuroraBridge"
    resources: tuple[PoolResource, ...] = DEFAULT_POOL_RESOURCES
    controller_limit_percent: float = 10.0
    slack_limit_percent: float = 30.0
    owning_team: str = "aurorabridge"
    retry_interval_s: float = 1.0
    retry_for_s: float = 10.0


@dataclass(frozen=True, slots=True)
class ValidationSettings:
    """Aurora's scheduler-side limits (ConfigurationManager)."""

    #: Regular expression an environment must match (`re.match`); empty accepts any
    #: (Peloton's bridge); AURORA_ENVIRONMENTS is Aurora's default.
    allowed_environments: str = ANY_ENVIRONMENT
    max_tasks_per_job: int = 4000
    allow_gpus: bool = True


#: `HandlerSettings.unfit_jobs` values -> whether such a job is queued (True) or refused.
UNFIT_JOB_RULES: dict[str, bool] = {"queue": True, "refuse": False}
#: `HandlerSettings.watch_time` values -> whether minWaitInInstanceRunningMs is honoured.
WATCH_TIME_RULES: dict[str, bool] = {"aurora": True, "peloton": False}


@dataclass(frozen=True, slots=True)
class HandlerSettings:
    """Behaviour knobs of the handlers."""

    #: Runs per instance returned by task queries, as Peloton's bridge's `pod_runs_depth`
    #: (1 = current runs only).  Earlier runs cost a GetPod call per instance that has any.
    pod_runs_depth: int = 6
    #: Task queries matching at most this many pods fetch full event history per pod.
    pod_events_max_pods: int = 20
    #: Concurrent Peloton calls per fan-out (GetJob per job, StopPod per instance, ...).
    workers: int = 25
    #: Page size of QueryJobs.
    query_jobs_limit: int = 1000
    #: Workflows fetched per job for update queries.
    updates_limit: int = 10
    #: Wall seconds getPendingReason gives the forecast of each job with pending tasks
    #: (pelotonpy.api.forecast; the reason then carries the estimate); 0 turns it off.
    pending_forecast_wall_s: float = 2.0
    #: createJob answers once the new job's tasks exist (PENDING or later), as Aurora's
    #: createJob stores them before it answers; Peloton creates them a moment later, and
    #: Aurora's client checks for them right after `--wait-until`.  The most seconds it waits.
    create_visible_s: float = 30.0
    #: Ask Peloton for in-place updates (keep instances on their hosts).
    in_place_updates: bool = False
    #: How often the pulse timer looks for updates whose pulses stopped.
    pulse_check_interval_s: float = 1.0
    #: A startJobUpdate while an update runs: "reject" (Aurora: INVALID_REQUEST naming the
    #: running update) or "replace" (Peloton's bridge: abort it and start the new one).
    concurrent_updates: str = "reject"
    #: slaDrainHosts checks only jobs with at least this many active instances (Aurora's
    #: -min_required_instances_for_sla_check, default 20); smaller jobs drain at once.
    sla_min_instances: int = 20
    #: slaDrainHosts checks non-production tasks too (Aurora's -sla_aware_kill_non_prod,
    #: default off: only tasks of the `preferred` tier are checked).
    sla_aware_kill_non_prod: bool = False
    #: Set to run tasks with the Thermos executor (a Mesos cluster with Thermos installed),
    #: as Peloton's bridge did; empty runs the Thermos processes as the container command.
    thermos_executor_path: str = ""
    #: A job no host or pool limit could ever hold: "queue" (Aurora: accepted, its tasks
    #: PENDING with the reason in getPendingReason, until a host that fits joins or the
    #: quota grows) or "refuse" (Peloton's native rule: INVALID_REQUEST naming the resource).
    unfit_jobs: str = "queue"
    #: Run tasks as the job's Aurora role (a Unix user of that name on the agent; an agent
    #: without one runs the task as a per-task user), as Aurora does.
    run_as_role: bool = True
    #: An update's minWaitInInstanceRunningMs: "aurora" (honoured: an instance counts as
    #: updated once it ran that long) or "peloton" (Peloton's bridge: ignored, an instance
    #: is updated as soon as it runs its new config, healthy).
    watch_time: str = "aurora"

    def __post_init__(self) -> None:
        for name, rules in (("unfit_jobs", UNFIT_JOB_RULES), ("watch_time", WATCH_TIME_RULES)):
            value = getattr(self, name)
            if value not in rules:
                raise InvalidArgument(f"{name} must be one of {sorted(rules)}, got {value!r}",
                                      field=f"handlers.{name}")


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """Everything app.AuroraBridge needs."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    cluster_name: str = "peloton"
    #: Peloton daemons (gRPC `host:port`).  Empty: discovered from ZooKeeper under `zk_root`
    #: when `zk_servers` is set, else Peloton's default ports on localhost.
    jobmgr: str = ""
    resmgr: str = ""
    hostmgr: str = ""
    zk_root: str = "/peloton"
    #: Deadline of each Peloton call.
    timeout_s: float = 20.0
    #: Advertised in the ServerSet member node (defaults to this machine's name).
    advertise_host: str = ""
    #: ZooKeeper servers (`h1:2181,h2:2181`): Peloton discovery and the ServerSet registration.
    zk_servers: str = ""
    #: Aurora's `scheduler_zk_path`; Peloton's bridge used /peloton/aurora/scheduler.
    zk_path: str = "/aurora/scheduler"
    max_body_bytes: int = 64 * 1024 * 1024
    #: Slow clients (http_server.HttpLimits): a request must arrive whole within this many
    #: seconds of its first line; a connection silent this long is closed; at most this
    #: many connections are open (one more is answered 503 and closed).
    request_timeout_s: float = 30.0
    idle_timeout_s: float = 60.0
    max_connections: int = 1000
    #: The users file (`--auth`); empty: authentication off (loopback only, or `insecure`).
    auth: str = ""
    #: Serve a non-loopback address without authentication anyway.
    insecure: bool = False
    #: TLS files: `cert`, `key`, `ca` (paths; empty: plain HTTP).
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    respool: RespoolSettings = field(default_factory=RespoolSettings)
    validation: ValidationSettings = field(default_factory=ValidationSettings)
    handlers: HandlerSettings = field(default_factory=HandlerSettings)
    #: Service discovery: with an ensemble, the bridge also runs the announcer (announcer/),
    #: which registers the running instances of announced jobs in ServerSets.
    announcer: AnnouncerConfig = field(default_factory=AnnouncerConfig)
