"""From a pod's status to the ServerSet member it should have (or none).

A pod has a member while its current run is RUNNING and is not being stopped
(desired state other than KILLED/DELETED): Aurora's executor joins the ServerSet
when the task starts and leaves it as soon as it is told to stop.  The member
is the run's: a new run is a new member (new node, new sequence number), as a
new Aurora task is, even on the same host and ports.

What a pod asks for is in its labels (peloton/core/model/announce.py), read
from the job's spec at the run's config version (GetJob by version, cached per
job and version: a version's spec never changes).  The announced host is the
run's host name, as Aurora's executor announces the agent's `--hostname`, or
with `use_ip` the host's address from QueryHosts (for hosts whose names do not
resolve, like the local agents of `peloton up`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from peloton.api.convert.v0_v1 import task_config_for_instance
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.common.serverset import Endpoint, ServiceInstance
from peloton.core.errors import InvalidArgument, NotFound, PelotonError
from peloton.core.model.announce import Announce, announce_of, endpoints, serverset_path

log = logging.getLogger(__name__)

_RUNNING = pod_pb2.POD_STATE_RUNNING
_STOPPING = frozenset({pod_pb2.POD_STATE_KILLED, pod_pb2.POD_STATE_DELETED})
#: Job versions whose announcement is remembered (oldest forgotten first).
CACHE_SIZE = 20_000
#: Least time between two QueryHosts calls made because a host's address was not known.
HOSTS_REFRESH_SECS = 5.0


class SpecReader(Protocol):
    """The Peloton calls the resolver makes (PelotonClient has them)."""

    def get_stateless_job(self, job_id: str, *, version: str = "", summary_only: bool = False) -> Any: ...
    def query_hosts(self, states: Any = ()) -> Any: ...


@dataclass(frozen=True, slots=True)
class Member:
    """The node one pod should have: where, for which run, with what data."""

    path: str
    run: str
    instance: ServiceInstance

    @property
    def data(self) -> bytes:
        """The ServerSet JSON of the node."""
        return self.instance.to_json()


def split_pod_name(name: str) -> tuple[str, int] | None:
    """`<job id>-<instance>` -> (job id, instance); None for anything else."""
    job_id, _, instance = name.rpartition("-")
    return (job_id, int(instance)) if job_id and instance.isdigit() else None


class _JobVersion:
    """One job version's name and, per instance, what it announces (computed on first use)."""

    def __init__(self, job_id: str, version: str, spec: Any) -> None:
        self.job_id, self.version, self.spec = job_id, version, spec
        self.name = str(spec.name) if spec is not None else ""
        self._by_instance: dict[int, Announce | None] = {}

    def announce(self, instance: int) -> Announce | None:
        if self.spec is None:
            return None
        if instance not in self._by_instance:
            config = task_config_for_instance(self.spec, instance)
            try:
                found = announce_of(config.labels)
            except InvalidArgument as exc:
                log.warning("job %s version %s instance %d is not announced: %s", self.job_id,
                            self.version, instance, exc)
                found = None
            self._by_instance[instance] = found
        return self._by_instance[instance]


class MemberResolver:
    """Computes members from pod statuses; see the module docstring."""

    def __init__(self, peloton: SpecReader, root: str, *, use_ip: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.use_ip = use_ip
        self._peloton = peloton
        self._clock = clock
        self._versions: OrderedDict[tuple[str, str], _JobVersion] = OrderedDict()
        self._addresses: dict[str, str] = {}
        self._hosts_read_at = -HOSTS_REFRESH_SECS

    def member(self, pod_name: str, status: Any) -> Member | None:
        """The member pod `pod_name` with `status` (a v1alpha PodStatus) should have."""
        parts = split_pod_name(pod_name)
        if parts is None or status.state != _RUNNING or status.desired_state in _STOPPING:
            return None
        if not status.host or not status.pod_id.value:
            return None
        job_id, instance = parts
        job = self._job_version(job_id, status.version.value)
        announce = job.announce(instance)
        if announce is None:
            return None
        ports = dict(status.containers_status[0].ports) if status.containers_status else {}
        found = endpoints(announce, self._address(status.host), ports)
        named = {name: Endpoint(found.host, port) for name, port in found.named}
        instance_doc = ServiceInstance(Endpoint(found.host, found.primary), named, "ALIVE", instance)
        return Member(serverset_path(announce, self.root, job.name), status.pod_id.value, instance_doc)

    def _job_version(self, job_id: str, version: str) -> _JobVersion:
        key = (job_id, version)
        found = self._versions.get(key)
        if found is not None:
            self._versions.move_to_end(key)
            return found
        spec = None
        try:
            spec = self._peloton.get_stateless_job(job_id, version=version).job_info.spec
        except (NotFound, InvalidArgument) as exc:
            log.info("job %s version %s has no spec to announce from: %s", job_id, version, exc)
        found = self._versions[key] = _JobVersion(job_id, version, spec)
        while len(self._versions) > CACHE_SIZE:
            self._versions.popitem(last=False)
        return found

    def _address(self, host: str) -> str:
        if not self.use_ip:
            return host
        if host not in self._addresses and self._clock() - self._hosts_read_at >= HOSTS_REFRESH_SECS:
            self._hosts_read_at = self._clock()
            try:
                for info in self._peloton.query_hosts().host_infos:
                    if info.ip:
                        self._addresses[info.hostname] = info.ip
            except PelotonError as exc:
                log.warning("could not read host addresses (announcing host names): %s", exc)
        return self._addresses.get(host, host)
