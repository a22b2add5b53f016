"""The typed Peloton API client used by the CLI, the Aurora bridge and the archiver.

    with PelotonClient() as client:                     # localhost:5392/5394/5391
        pool = client.lookup_respool_id("/DefaultResPool").id.value
        created = client.create_job(config, job_id="")  # job_pb2.CreateResponse

It follows Peloton's own clients: the job manager serves jobs, tasks,
updates, stateless jobs, pods, watch and admin; the resource manager serves
resource pools; the host manager serves hosts.  Addresses are given, or
discovered from ZooKeeper leader znodes (client_discovery).  Every call
carries YARPC metadata and a deadline (default 20 s), messages may be up to
256 MiB, and every failure is raised as a `peloton.core.errors` error: gRPC
status codes through `grpc_errors.error_for`, v0 errors embedded in
responses through `client_errors`, timeouts as `DeadlineExceeded`.

The three v0 services Peloton renamed (`peloton.api.job.JobManager`,
`peloton.api.task.TaskManager`, `peloton.api.respool.ResourceManager`) are
called at those legacy paths, which Uber's daemons and ours both serve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType

from peloton.api import client_sandbox
from peloton.api.client_cron import CronCalls
from peloton.api.client_discovery import (
    DEFAULT_HOSTMGR,
    DEFAULT_JOBMGR,
    DEFAULT_RESMGR,
    DEFAULT_ZK_ROOT,
    Endpoints,
    endpoints_from_zookeeper,
    normalize_address,
)
from peloton.api.client_forecast import ForecastCalls
from peloton.api.client_maintenance import MaintenanceCalls
from peloton.api.client_sandbox import FileTail
from peloton.api.client_transport import DeadlineExceeded, ServiceHandle, Transport
from peloton.api.client_v0 import Range, V0Calls
from peloton.api.client_v1 import V1Calls
from peloton.api.gen.pelotonpy.auth import auth_pb2
from peloton.api.gen.pelotonpy.ext import capacity_pb2
from peloton.common.tls import TlsFiles

__all__ = ["DEFAULT_CALLER", "DEFAULT_TIMEOUT", "DeadlineExceeded", "Endpoints", "FileTail", "PelotonClient",
           "Range"]

DEFAULT_CALLER = "peloton-cli"
DEFAULT_TIMEOUT = 20.0

#: YARPC dispatcher names of the daemons (the `rpc-service` header).
JOBMGR_SERVICE = "peloton-jobmgr"
RESMGR_SERVICE = "peloton-resmgr"
HOSTMGR_SERVICE = "peloton-hostmgr"

# Service paths as Peloton serves them (v0 job/task/respool at their legacy names).
_JOBS = "peloton.api.job.JobManager"
_TASKS = "peloton.api.task.TaskManager"
_RESPOOLS = "peloton.api.respool.ResourceManager"
_UPDATES = "peloton.api.v0.update.svc.UpdateService"
_HOSTS = "peloton.api.v0.host.svc.HostService"
_STATELESS = "peloton.api.v1alpha.job.stateless.svc.JobService"
_PODS = "peloton.api.v1alpha.pod.svc.PodService"
_WATCH = "peloton.api.v1alpha.watch.svc.WatchService"
_ADMIN = "peloton.api.v1alpha.admin.svc.AdminService"
_CRON = "pelotonpy.api.cron.CronService"
_WORKFLOW_OPTIONS = "pelotonpy.api.update.WorkflowOptionsService"
_MAINTENANCE = "pelotonpy.api.maintenance.MaintenanceService"
_FORECAST = "pelotonpy.api.forecast.ForecastService"
#: The host manager's daemon-to-daemon service (our design), for task reconciliation.
_HOSTMGR_INTERNAL = "pelotonpy.internal.hostmgr.HostManagerService"
# Our capacity extension (proto/pelotonpy/ext/capacity.proto).
_HOST_CAPACITY = "pelotonpy.ext.capacity.HostCapacityService"
_POOL_STATUS = "pelotonpy.ext.capacity.PoolStatusService"
_AUTH = "pelotonpy.auth.AuthService"


class PelotonClient(V0Calls, V1Calls, CronCalls, MaintenanceCalls, ForecastCalls):
    """A connection to one Peloton cluster; cheap to build, channels open on first use."""

    def __init__(self, jobmgr: str = DEFAULT_JOBMGR, resmgr: str = DEFAULT_RESMGR,
                 hostmgr: str = DEFAULT_HOSTMGR, *, zk_servers: Sequence[str] = (),
                 zk_root: str = DEFAULT_ZK_ROOT, caller: str = DEFAULT_CALLER,
                 timeout: float = DEFAULT_TIMEOUT, headers: Mapping[str, str] | None = None,
                 tls: TlsFiles | None = None) -> None:
        """Connect to the given addresses, or to the leaders registered in `zk_servers`.

        `headers` are extra application headers sent on every call (Peloton's
        BASIC auth reads `username` and `password`; a login token goes as
        `authorization: Bearer <token>`).  With `tls`, channels use TLS.
        """
        if zk_servers:
            endpoints = endpoints_from_zookeeper(zk_servers, zk_root, timeout=timeout)
        else:
            endpoints = Endpoints(normalize_address(jobmgr), normalize_address(resmgr),
                                  normalize_address(hostmgr))
        self.endpoints = endpoints
        self.timeout = timeout
        self._bind(Transport(caller=caller, timeout=timeout, headers=headers, tls=tls,
                             await_leader=bool(zk_servers)))

    def _bind(self, transport: Transport) -> None:
        self._transport = transport
        endpoints = self.endpoints

        def on_jobmgr(name: str) -> ServiceHandle:
            return ServiceHandle(transport, endpoints.jobmgr, JOBMGR_SERVICE, name)

        self._jobs = on_jobmgr(_JOBS)
        self._tasks = on_jobmgr(_TASKS)
        self._updates = on_jobmgr(_UPDATES)
        self._stateless = on_jobmgr(_STATELESS)
        self._pods = on_jobmgr(_PODS)
        self._watch = on_jobmgr(_WATCH)
        self._admin = on_jobmgr(_ADMIN)
        self._cron = on_jobmgr(_CRON)
        self._auth = on_jobmgr(_AUTH)
        self._workflow_options = on_jobmgr(_WORKFLOW_OPTIONS)
        self._respools = ServiceHandle(transport, endpoints.resmgr, RESMGR_SERVICE, _RESPOOLS)
        self._hosts = ServiceHandle(transport, endpoints.hostmgr, HOSTMGR_SERVICE, _HOSTS)
        self._maintenance = ServiceHandle(transport, endpoints.hostmgr, HOSTMGR_SERVICE,
                                          _MAINTENANCE)
        self._hostmgr_internal = ServiceHandle(transport, endpoints.hostmgr, HOSTMGR_SERVICE,
                                               _HOSTMGR_INTERNAL)
        self._host_capacity = ServiceHandle(transport, endpoints.hostmgr, HOSTMGR_SERVICE,
                                            _HOST_CAPACITY)
        self._pool_status = ServiceHandle(transport, endpoints.resmgr, RESMGR_SERVICE,
                                          _POOL_STATUS)
        self._forecast = ServiceHandle(transport, endpoints.resmgr, RESMGR_SERVICE, _FORECAST)

    # -- logging in (pelotonpy.auth.AuthService on the job manager) ---------------------------
    def login(self, ttl_secs: float = 0.0) -> auth_pb2.LoginResponse:
        """A login token for this client's credentials (`username`/`password` headers or a
        client certificate); later calls send it as `authorization: Bearer <token>`."""
        return self._auth.call("Login", auth_pb2.LoginRequest(ttl_secs=ttl_secs),
                               auth_pb2.LoginResponse)

    def whoami(self) -> auth_pb2.WhoAmIResponse:
        """Who the cluster takes this client for."""
        return self._auth.call("WhoAmI", auth_pb2.WhoAmIRequest(), auth_pb2.WhoAmIResponse)

    def with_headers(self, headers: Mapping[str, str]) -> PelotonClient:
        """The same cluster and channels, calling with `headers` instead (e.g. one web UI
        session's token).  Closing either closes the shared channels."""
        other = object.__new__(type(self))
        other.endpoints, other.timeout = self.endpoints, self.timeout
        other._bind(self._transport.derive(headers))
        return other

    # -- task reconciliation with the host backends -------------------------------------------
    def reconcile_tasks(self, run_ids: Sequence[str] | None = None) -> None:
        """Ask the host backends to re-report runs: `run_ids` (explicit) or every run (None,
        implicit).  Asynchronous: statuses arrive as updates, and runs no host knows end LOST."""
        from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2

        req = hostmgr_pb2.ReconcileRequest(run_ids=list(run_ids or ()), all=run_ids is None)
        self._hostmgr_internal.call("Reconcile", req, hostmgr_pb2.ReconcileResponse)

    # -- our capacity extension (pelotonpy.ext.capacity) ---------------------------------------
    def list_host_capacity(self) -> capacity_pb2.ListHostCapacityResponse:
        """Every host's total, allocated and task count, and the cluster's totals."""
        return self._host_capacity.call("ListHostCapacity", capacity_pb2.ListHostCapacityRequest(),
                                        capacity_pb2.ListHostCapacityResponse)

    def list_pool_status(self) -> capacity_pb2.ListPoolStatusResponse:
        """Every pool's entitlement, allocation, demand and queue, and the cluster's capacity."""
        return self._pool_status.call("ListPoolStatus", capacity_pb2.ListPoolStatusRequest(),
                                      capacity_pb2.ListPoolStatusResponse)

    # -- sandbox files (BrowseSandbox, then HTTP from the agent) ------------------------------
    def read_task_file(self, job_id: str, instance_id: int, filename: str = "stdout", *,
                       task_id: str = "") -> bytes:
        """The content of `filename` in a task's sandbox (latest run unless `task_id`)."""
        sandbox = self.browse_sandbox(job_id, instance_id, task_id)
        path = client_sandbox.pick_path(list(sandbox.paths), filename)
        return client_sandbox.fetch_file(sandbox.hostname, sandbox.port, path, timeout=self.timeout)

    def tail_task_file(self, job_id: str, instance_id: int, filename: str = "stdout", *,
                       max_bytes: int = 64 * 1024, task_id: str = "") -> FileTail:
        """The last `max_bytes` of `filename` in a task's sandbox and the file's size (for log views)."""
        sandbox = self.browse_sandbox(job_id, instance_id, task_id)
        path = client_sandbox.pick_path(list(sandbox.paths), filename)
        return client_sandbox.fetch_tail(sandbox.hostname, sandbox.port, path, max_bytes,
                                         timeout=self.timeout)

    def read_pod_file(self, name: str, filename: str = "stdout", *, pod_id: str = "") -> bytes:
        """The content of `filename` in a pod's sandbox (latest run unless `pod_id`)."""
        sandbox = self.browse_pod_sandbox(name, pod_id=pod_id)
        path = client_sandbox.pick_path(list(sandbox.paths), filename)
        return client_sandbox.fetch_file(sandbox.hostname, sandbox.port, path, timeout=self.timeout)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close every channel."""
        self._transport.close()

    def __enter__(self) -> PelotonClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
