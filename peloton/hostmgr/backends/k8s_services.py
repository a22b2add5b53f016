"""A Kubernetes Service for each announced job: the Kubernetes side of service discovery.

A task with the `peloton/announce` label (peloton/core/model/announce.py; the Aurora bridge
sets it for a job with an Announcer) asks for discovery.  On this backend its job also gets
a Service in its pods' namespace:

* selector: our pods of the job (`pelotonpy.dev/cluster` and `pelotonpy.dev/job-id`);
* ports: one per named port of the task, by name (`targetPort` is the pod's port name,
  so each pod's own dynamic number is used), plus the portmap's aliases.  Numbers: a
  static port keeps its number, a dynamic `http` is 80, `https` 443, any other the first
  free number from 10000 in the task's port order; a task without ports gets a headless
  Service (`clusterIP: None`, DNS lists the pods);
* name: the announce path's parts, last first (`www/prod/hello` -> `hello-prod-www`,
  Mesos-DNS's order), cut to a DNS label; an empty path gives `peloton-<job id prefix>`.

Lifecycle: created once a run of the job is launched (the keeper's next round, about a
second), kept while any run of the job is live, deleted when none has been for
`service_linger_secs` (a killed job; the linger covers a one-instance rolling update,
whose old run ends before the new one starts).  Services are labelled with the cluster
and the job, so a restarted host manager lists them again, adopts them and deletes those
whose job no longer runs.  A name already taken by a Service that is not this job's is
left alone (a warning); the job gets the name once that Service is gone.  Ports are those
of the first launch seen; an update that changes them takes effect when the Service is
made again.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from peloton.core.errors import InvalidArgument
from peloton.core.model.announce import Announce, announce_of
from peloton.core.model.ids import RunId
from peloton.core.model.sched import LaunchSpec
from peloton.hostmgr.backends.k8s_api import Conflict, KubeApi, KubeError, KubeNotFound
from peloton.hostmgr.backends.k8s_config import PREFIX, KubeConfig
from peloton.hostmgr.backends.k8s_view import Run

# The pod's label value and port names must be computed exactly as the pod manifest does.
from peloton.hostmgr.backends.k8s_wire import CLUSTER_LABEL, JOB_LABEL, Json
from peloton.hostmgr.backends.k8s_wire import _label_safe as label_safe
from peloton.hostmgr.backends.k8s_wire import _port_name as port_name
from peloton.hostmgr.backends.task_env import task_ports

log = logging.getLogger(__name__)

#: On our Services: the announce path they stand for.
ANNOUNCE_ANNOTATION = f"{PREFIX}/announce"
#: How often the keeper looks (seconds).
PERIOD = 1.0
#: After a refused create, wait this long before trying again.
RETRY_SECS = 30.0
#: A name another Service holds is tried again this often.
TAKEN_RETRY_SECS = 5.0
_WELL_KNOWN = {"http": 80, "https": 443}
_FIRST_FREE = 10000

#: (namespace, job label value)
JobKey = tuple[str, str]


def service_name(path: str, job_id: str) -> str:
    """A DNS-1035 label from the announce path (see the module docstring)."""
    parts = [p for p in path.split("/") if p][::-1]
    text = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", "-".join(parts).lower())).strip("-")
    if not text:
        text = f"peloton-{job_id[:8].lower()}"
    if not text[0].isalpha():
        text = f"s-{text}"
    if len(text) > 63:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        text = f"{text[:54].rstrip('-')}-{digest}"
    return text


def _service_ports(spec: LaunchSpec, announce: Announce) -> list[Json]:
    ports = task_ports(spec)
    static = {p.name: p.value for p in spec.spec.ports if p.value}
    used: set[int] = set()
    out: list[Json] = []

    def number(name: str) -> int:
        wanted = static.get(name) or _WELL_KNOWN.get(name, 0)
        if not wanted or wanted in used:
            wanted = _FIRST_FREE
            while wanted in used:
                wanted += 1
        used.add(wanted)
        return wanted

    targets: dict[str, str] = {}
    for i, (name, _, _) in enumerate(ports):
        targets[name] = port_name(name, i)
        out.append({"name": targets[name], "port": number(name), "targetPort": targets[name],
                    "protocol": "TCP"})
    names = {p["name"] for p in out}
    for i, (alias, target) in enumerate(announce.portmap, start=len(ports)):
        if alias in targets:
            continue
        goal: str | int | None = targets.get(target) if isinstance(target, str) else target
        own = port_name(alias, i)
        if goal is None or own in names:
            continue
        names.add(own)
        out.append({"name": own, "port": number(alias), "targetPort": goal, "protocol": "TCP"})
    return out


@dataclass(frozen=True, slots=True)
class ServiceWant:
    """The Service one announced job should have."""

    namespace: str
    job: str
    name: str
    manifest: Json


def service_want(spec: LaunchSpec, namespace: str, config: KubeConfig) -> ServiceWant | None:
    """The Service `spec`'s job should have, or None when its task is not announced."""
    try:
        announce = announce_of(spec.spec.labels)
        job_id = RunId.parse(spec.run_id).job_id
    except InvalidArgument:
        return None
    if announce is None:
        return None
    job = label_safe(job_id)
    name = service_name(announce.path, job_id)
    selector = {CLUSTER_LABEL: config.cluster_name, JOB_LABEL: job}
    ports = _service_ports(spec, announce)
    body: Json = {"selector": selector, "type": "ClusterIP"}
    if ports:
        body["ports"] = ports
    else:
        body["clusterIP"] = "None"
    manifest = {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(selector),
                             "annotations": {ANNOUNCE_ANNOTATION: announce.path}},
                "spec": body}
    return ServiceWant(namespace, job, name, manifest)


def live_jobs(runs: Mapping[str, Run]) -> set[JobKey]:
    """(namespace, job label) of every job with a run that has not ended."""
    out: set[JobKey] = set()
    for run_id, run in runs.items():
        if run.state.terminal or run.gone:
            continue
        job_id, _, _ = run_id.rpartition("-")[0].rpartition("-")
        out.add((run.namespace, label_safe(job_id)))
    return out


@dataclass(slots=True)
class _Entry:
    want: ServiceWant | None  # None: adopted from a listing, never launched by us
    name: str
    exists: bool = False
    warned: bool = False
    idle_since: float | None = None
    retry_at: float = 0.0


class ServiceKeeper:
    """Creates and deletes the Services of announced jobs; see the module docstring."""

    def __init__(self, config: KubeConfig, api: KubeApi,
                 live: Callable[[], set[JobKey] | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._api = api
        self._live = live
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[JobKey, _Entry] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def note_launch(self, spec: LaunchSpec, namespace: str) -> None:
        """A run is being launched: if its task is announced, its job wants a Service."""
        want = service_want(spec, namespace, self.config)
        if want is None:
            return
        with self._lock:
            entry = self._entries.get((want.namespace, want.job))
            if entry is None:
                self._entries[(want.namespace, want.job)] = _Entry(want, want.name)
            elif entry.want is None:
                entry.want = want

    def start(self) -> None:
        """Adopt our existing Services, then keep them in step every PERIOD seconds."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="k8s-services", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop (Services stay: the next start adopts them)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _loop(self) -> None:
        adopted = False
        while not self._stopping.wait(0 if not adopted else PERIOD):
            try:
                if not adopted:
                    self._adopt()
                    adopted = True
                self.tick()
            except Exception:
                log.exception("k8s services: a round failed")
                adopted = True

    def _adopt(self) -> None:
        query = [("labelSelector", f"{CLUSTER_LABEL}={self.config.cluster_name}")]
        for namespace in self.config.namespaces:
            try:
                items, _ = self._api.list(f"/api/v1/namespaces/{namespace}/services", query)
            except KubeError as exc:
                log.warning("k8s services: cannot list the Services of %s: %s", namespace, exc)
                continue
            for item in items:
                meta = item.get("metadata") or {}
                job = (meta.get("labels") or {}).get(JOB_LABEL)
                if not job or ANNOUNCE_ANNOTATION not in (meta.get("annotations") or {}):
                    continue
                with self._lock:
                    self._entries.setdefault((namespace, job), _Entry(None, meta.get("name", ""),
                                                                      exists=True))

    def tick(self) -> None:
        """One round: create what live jobs lack, delete what idle jobs kept too long."""
        live = self._live()
        if live is None:
            return  # pods not listed yet: nothing is known to be idle
        now = self._clock()
        with self._lock:
            entries = list(self._entries.items())
        for key, entry in entries:
            if key in live:
                entry.idle_since = None
                if not entry.exists and entry.want is not None and now >= entry.retry_at:
                    self._create(entry, now)
                continue
            if entry.idle_since is None:
                entry.idle_since = now
            if now - entry.idle_since >= self.config.service_linger_secs and self._delete(key, entry):
                with self._lock:
                    if self._entries.get(key) is entry:
                        del self._entries[key]

    def _create(self, entry: _Entry, now: float) -> None:
        want = entry.want
        assert want is not None
        path = f"/api/v1/namespaces/{want.namespace}/services"
        try:
            self._api.call("POST", path, body=want.manifest)
            entry.exists = True
            log.info("k8s services: created %s/%s for job %s", want.namespace, want.name, want.job)
        except Conflict:
            try:
                found = self._api.call("GET", f"{path}/{want.name}")
            except KubeError:
                return  # gone again: next round
            labels = (found.get("metadata") or {}).get("labels") or {}
            if labels.get(JOB_LABEL) == want.job and labels.get(CLUSTER_LABEL) == self.config.cluster_name:
                entry.exists = True
                return
            entry.retry_at = now + TAKEN_RETRY_SECS
            if not entry.warned:
                entry.warned = True
                log.warning("k8s services: %s/%s is taken by another Service: job %s gets it once "
                            "that one is gone", want.namespace, want.name, want.job)
        except KubeError as exc:
            entry.retry_at = now + RETRY_SECS
            log.warning("k8s services: could not create %s/%s: %s (again in %.0f s)",
                        want.namespace, want.name, exc, RETRY_SECS)

    def _delete(self, key: JobKey, entry: _Entry) -> bool:
        if not entry.exists:
            return True
        try:
            self._api.call("DELETE", f"/api/v1/namespaces/{key[0]}/services/{entry.name}")
            log.info("k8s services: deleted %s/%s (job %s ended)", key[0], entry.name, key[1])
        except KubeNotFound:
            pass
        except KubeError as exc:
            log.warning("k8s services: could not delete %s/%s: %s", key[0], entry.name, exc)
            return False
        return True
