"""The Pystachio schema of `.aurora` files: Aurora's and Thermos's config objects, ours.

A `.aurora` file is Python run with these names in scope (as Aurora's client
runs it): it builds `Job`/`Service` objects out of `Task`, `Process` and
`Resources`, and leaves them in a list named `jobs`.  Every struct, field
name, type and default here is the one Aurora documents
(docs/reference/configuration.md of Apache Aurora), so a file written for
Aurora loads unchanged; the objects are Pystachio templates, so `{{name}}`
placeholders resolve from `.bind(...)`, `--bind name=value` and the
surrounding objects.  `{{mesos.instance}}`, `{{mesos.hostname}}`,
`{{thermos.task_id}}` and `{{thermos.ports[name]}}` stay as written: the
agent binds them when the task runs (aurorabridge/atop/thermos.py).

Sizes are in bytes (`ram = 512 * MB`); `cpu` in cores; `gpu` whole devices.
"""

from __future__ import annotations

from pystachio import (
    Boolean,
    Choice,
    Default,
    Empty,
    Enum,
    Float,
    Integer,
    List,
    Map,
    Required,
    String,
    Struct,
)

#: The executor name whose data is Thermos JSON (Aurora's AURORA_EXECUTOR_NAME).
AURORA_EXECUTOR_NAME = "AuroraExecutor"

BYTES = 1
KB = 1024 * BYTES
MB = 1024 * KB
GB = 1024 * MB
TB = 1024 * GB


# -- Thermos: what runs inside one task ------------------------------------------------------

class ThermosContext(Struct):
    """What the executor binds under `{{thermos.*}}` when the task starts."""

    ports = Map(String, Integer)
    task_id = String
    user = String


class Resources(Struct):
    """A task's (or process's) resources: cores, bytes of memory and disk, GPUs."""

    cpu = Required(Float)
    ram = Required(Integer)
    disk = Required(Integer)
    gpu = Default(Integer, 0)


class Constraint(Struct):
    """A Thermos ordering constraint: the named processes run one after the other."""

    order = List(String)


class RotatePolicy(Struct):
    """Log rotation of a process's stdout/stderr."""

    log_size = Default(Integer, 100 * MB)
    backups = Default(Integer, 5)


LoggerDestination = Enum("file", "console", "both", "none")
LoggerMode = Enum("standard", "rotate")


class Logger(Struct):
    """Where a process's output goes."""

    destination = Default(LoggerDestination, LoggerDestination("file"))
    mode = Default(LoggerMode, LoggerMode("standard"))
    rotate = RotatePolicy


class Process(Struct):
    """One command line of a task."""

    cmdline = Required(String)
    name = Required(String)
    resources = Resources  # reserved by Thermos, not enforced
    max_failures = Default(Integer, 1)
    daemon = Default(Boolean, False)
    ephemeral = Default(Boolean, False)
    min_duration = Default(Integer, 5)
    final = Default(Boolean, False)
    logger = Default(Logger, Empty)


class Task(Struct):
    """Processes that run together in one sandbox, with the task's resources."""

    name = Default(String, "{{processes[0].name}}")
    processes = List(Process)
    constraints = Default(List(Constraint), [])
    resources = Resources
    max_failures = Default(Integer, 1)
    max_concurrency = Default(Integer, 0)
    finalization_wait = Default(Integer, 30)
    user = String


# -- Aurora: how a task is scheduled ---------------------------------------------------------

class MesosContext(Struct):
    """What is bound under `{{mesos.*}}` for one instance."""

    instance = Required(Integer)
    hostname = Required(String)


class QueueUpdateStrategy(Struct):
    """Keep `batch_size` instances updating at any time."""

    batch_size = Default(Integer, 1)


class BatchUpdateStrategy(Struct):
    """Update `batch_size` instances and wait for the whole batch."""

    batch_size = Default(Integer, 1)
    autopause_after_batch = Default(Boolean, False)


class VariableBatchUpdateStrategy(Struct):
    """Update batches of the given sizes in turn (the last size repeats)."""

    batch_sizes = Required(List(Integer))
    autopause_after_batch = Default(Boolean, False)


class UpdateConfig(Struct):
    """How `aurora update start` rolls a new config out."""

    batch_size = Default(Integer, 1)
    watch_secs = Default(Integer, 45)
    max_per_shard_failures = Default(Integer, 0)
    max_total_failures = Default(Integer, 0)
    rollback_on_failure = Default(Boolean, True)
    wait_for_batch_completion = Default(Boolean, False)
    pulse_interval_secs = Integer
    sla_aware = Default(Boolean, False)
    update_strategy = Choice([QueueUpdateStrategy, BatchUpdateStrategy, VariableBatchUpdateStrategy])


class HttpHealthChecker(Struct):
    """An HTTP GET of `endpoint` on the `health` port must answer `expected_response`."""

    endpoint = Default(String, "/health")
    expected_response = Default(String, "ok")
    expected_response_code = Default(Integer, 0)


class ShellHealthChecker(Struct):
    """A shell command that must exit 0."""

    shell_command = Required(String)


class HealthCheckerConfig(Struct):
    """One of the two checkers."""

    http = HttpHealthChecker
    shell = ShellHealthChecker


DefaultHealthChecker = HealthCheckerConfig(http=HttpHealthChecker())


class HealthCheckConfig(Struct):
    """When and how often a task's health is checked."""

    health_checker = Default(HealthCheckerConfig, DefaultHealthChecker)
    initial_interval_secs = Default(Float, 15.0)
    interval_secs = Default(Float, 10.0)
    max_consecutive_failures = Default(Integer, 0)
    min_consecutive_successes = Default(Integer, 1)
    timeout_secs = Default(Float, 1.0)


class HttpLifecycleConfig(Struct):
    """Graceful shutdown over HTTP on a named port."""

    port = Default(String, "health")
    graceful_shutdown_endpoint = Default(String, "/quitquitquit")
    shutdown_endpoint = Default(String, "/abortabortabort")
    graceful_shutdown_wait_secs = Default(Integer, 5)
    shutdown_wait_secs = Default(Integer, 5)


class LifecycleConfig(Struct):
    """How a task is asked to stop."""

    http = HttpLifecycleConfig


DisableLifecycle = LifecycleConfig()
DefaultLifecycleConfig = LifecycleConfig(http=HttpLifecycleConfig())


class Announcer(Struct):
    """Register each instance's endpoints for service discovery (a ServerSet in ZooKeeper)."""

    primary_port = Default(String, "http")
    portmap = Default(Map(String, String), {"aurora": "{{primary_port}}"})
    zk_path = String


class MesosTaskInstance(Struct):
    """What the executor receives for one instance."""

    task = Required(Task)
    instance = Required(Integer)
    role = Required(String)
    announce = Announcer
    environment = Required(String)
    health_check_config = Default(HealthCheckConfig, HealthCheckConfig())
    lifecycle = LifecycleConfig


class Parameter(Struct):
    """A `docker run` parameter."""

    name = Required(String)
    value = Required(String)


class Docker(Struct):
    """Run the task in a Docker image."""

    image = Required(String)
    parameters = Default(List(Parameter), [])


class AppcImage(Struct):
    """An App Container image for the Mesos containerizer."""

    name = Required(String)
    image_id = Required(String)


class DockerImage(Struct):
    """A Docker image for the Mesos containerizer."""

    name = Required(String)
    tag = Required(String)


Mode = Enum("RO", "RW")


class Volume(Struct):
    """A host path mounted into the container."""

    container_path = Required(String)
    host_path = Required(String)
    mode = Required(Mode)


class Mesos(Struct):
    """The Mesos (universal) containerizer, optionally with an image."""

    image = Choice([AppcImage, DockerImage])
    volumes = Default(List(Volume), [])


class Container(Struct):
    """Deprecated wrapper: `Container(docker=Docker(...))` is `Docker(...)`."""

    docker = Docker


class PartitionPolicy(Struct):
    """What the scheduler does with a task whose agent is partitioned."""

    reschedule = Default(Boolean, True)
    delay_secs = Default(Integer, 0)


class Metadata(Struct):
    """A key/value pair shown with the job's tasks."""

    key = Required(String)
    value = Required(String)


class ExecutorConfig(Struct):
    """A custom executor (the default runs the Thermos task)."""

    name = Default(String, AURORA_EXECUTOR_NAME)
    data = Default(String, "")


class PercentageSlaPolicy(Struct):
    """At least `percentage` % of the instances up for `duration_secs` during maintenance."""

    percentage = Required(Float)
    duration_secs = Required(Integer)


class CountSlaPolicy(Struct):
    """At least `count` instances up for `duration_secs` during maintenance."""

    count = Required(Integer)
    duration_secs = Required(Integer)


class CoordinatorSlaPolicy(Struct):
    """An HTTP coordinator decides whether an instance may go down."""

    coordinator_url = Required(String)
    status_key = Default(String, "drain")


class MesosJob(Struct):
    """A job: `instances` copies of `task`, named cluster/role/environment/name."""

    name = Default(String, "{{task.name}}")
    role = Required(String)
    contact = String
    cluster = Required(String)
    environment = Required(String)
    instances = Default(Integer, 1)
    task = Required(Task)
    announce = Announcer
    tier = String
    cron_schedule = String
    cron_collision_policy = Default(String, "KILL_EXISTING")
    update_config = Default(UpdateConfig, UpdateConfig())
    constraints = Map(String, String)
    metadata = Default(List(Metadata), [])
    service = Default(Boolean, False)
    max_task_failures = Default(Integer, 1)
    production = Default(Boolean, False)
    priority = Default(Integer, 0)
    health_check_config = Default(HealthCheckConfig, HealthCheckConfig())
    lifecycle = Default(LifecycleConfig, DefaultLifecycleConfig)
    task_links = Map(String, String)  # accepted and ignored, as by Aurora
    executor_config = Default(ExecutorConfig, ExecutorConfig())
    enable_hooks = Default(Boolean, False)
    partition_policy = PartitionPolicy
    sla_policy = Choice([CoordinatorSlaPolicy, CountSlaPolicy, PercentageSlaPolicy])
    container = Choice([Container, Docker, Mesos])


Job = MesosJob
#: A Job that Aurora restarts whenever it ends (`service = True`).
Service = Job(service=True)

#: Every schema struct class, for origin tracking (aurorabridge/client/origins.py).
STRUCTS = (
    ThermosContext, Resources, Constraint, RotatePolicy, Logger, Process, Task, MesosContext,
    QueueUpdateStrategy, BatchUpdateStrategy, VariableBatchUpdateStrategy, UpdateConfig,
    HttpHealthChecker, ShellHealthChecker, HealthCheckerConfig, HealthCheckConfig,
    HttpLifecycleConfig, LifecycleConfig, Announcer, MesosTaskInstance, Parameter, Docker,
    AppcImage, DockerImage, Volume, Mesos, Container, PartitionPolicy, Metadata, ExecutorConfig,
    PercentageSlaPolicy, CountSlaPolicy, CoordinatorSlaPolicy, MesosJob,
)
