"""The Kubernetes host backend: our resource manager and placement decide, Kubernetes runs pods.

Nodes become hosts, a launch creates a pod bound to the chosen node (our
scheduler name, so kube-scheduler never moves it), pod phases and container
states become status updates, a kill deletes the pod with the task's grace.

Threads (greenlets under the daemons' gevent):
- the node watch: list, then watch; a node that is Ready is a host (capacity =
  allocatable minus other pods' requests), a cordoned one is a host that takes no
  new runs, a NotReady one is gone until Ready again, a deleted one is gone and its
  runs are LOST (their pods are deleted, so nothing runs twice);
- the pod watch (every bound pod: ours become updates, the others' requests come off
  their node's capacity);
- `create_concurrency` workers that create and delete pods;
- a sweeper that re-delivers unacknowledged updates and deletes finished pods
  `finished_pod_ttl_secs` after their end was acknowledged;
- the Service keeper: a Service per announced job (k8s_services.py).
A stateful run's volume is a PersistentVolumeClaim pinned to its node (k8s_volumes.py),
created by the worker just before the run's pod, deleted when the job manager destroys the
volume (the job was deleted).
A watch that ends is re-opened from its last resourceVersion; one that fails (410 Gone,
the API server restarted) lists again and compares, so a pod or node that changed or
vanished meanwhile is seen.

Updates carry a uuid made of the pod's uid and the state, so a restarted host
manager that lists the same pods re-delivers the same updates (the job manager
drops repeats), adopts every pod that still exists, and the job manager kills the
pods of runs it no longer knows.  Runs no pod exists for are reported LOST only
after the first list.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from peloton.core.errors import FailedPrecondition, InvalidArgument, NotFound
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import HostEventListener, StatusUpdate
from peloton.hostmgr.backends.k8s_api import (
    Conflict,
    KubeApi,
    KubeError,
    KubeNotFound,
    Refused,
)
from peloton.hostmgr.backends.k8s_config import PREFIX, KubeConfig
from peloton.hostmgr.backends.k8s_follow import Follower
from peloton.hostmgr.backends.k8s_services import ServiceKeeper, live_jobs
from peloton.hostmgr.backends.k8s_view import ClusterView, Outbox, Run
from peloton.hostmgr.backends.k8s_volumes import Claims, claim_manifest, mount_claim
from peloton.hostmgr.backends.k8s_wire import Json, pod_manifest, pod_name

#: On a node we cordoned for maintenance: which of our clusters did (so only we lift it).
CORDON_ANNOTATION = f"{PREFIX}/cordoned-by"

log = logging.getLogger(__name__)


class KubeBackend:
    """Hosts are a Kubernetes cluster's nodes; runs are pods.  See the module docstring."""

    name = "k8s"

    def __init__(self, config: KubeConfig, api: KubeApi | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._api = api or KubeApi(config)
        self._clock = clock
        self._lock = threading.RLock()
        self._listener: HostEventListener | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._work: queue.Queue[tuple[str, str, Json | None]] = queue.Queue()
        self._view = ClusterView(config, lambda run_id: self._work.put(("delete", run_id, None)),
                                 clock)
        self._follower = Follower(self._api, self._lock, self._stopping, self._flush, config)
        self._pods_synced = threading.Event()
        self._nodes_synced = threading.Event()
        self._deferred_reconcile: list[Sequence[str] | None] = []
        self._last_kill_retry = 0.0
        self._services = ServiceKeeper(config, self._api, self._live_jobs, clock)
        self._claims = Claims(config, self._api)
        #: run id -> the claim of its volume (its manifest, whether an earlier run made it,
        #: the volume id), while the run is known.
        self._claim_of: dict[str, tuple[Json, bool, str]] = {}

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, listener: HostEventListener) -> None:
        """List nodes and pods, report them, then follow both watches."""
        with self._lock:
            self._listener = listener
            self._stopping.clear()
            pending = [u for u, _ in self._view.pending.values()]
        loops: list[tuple[str, Callable[[], None]]] = [
            ("k8s-nodes", self._node_loop), ("k8s-pods", self._pod_loop),
            ("k8s-sweeper", self._sweep_loop),
            *((f"k8s-worker-{i}", self._work_loop) for i in range(self.config.create_concurrency))]
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self._services.start()
        if pending:
            listener.status_updates(pending)

    def stop(self) -> None:
        """Stop following the cluster; pods keep running (adopted at the next start)."""
        self._stopping.set()
        with self._lock:
            self._listener = None
        self._follower.close_all()
        for _ in range(self.config.create_concurrency):
            self._work.put(("stop", "", None))
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []
        self._services.stop()
        self._pods_synced.clear()
        self._nodes_synced.clear()

    def pending_count(self) -> int:
        """Updates not yet acknowledged."""
        with self._lock:
            return len(self._view.pending)

    def _live_jobs(self) -> set[tuple[str, str]] | None:
        """Jobs with a run not ended, once the pods were listed (k8s_services.py)."""
        if not self._pods_synced.is_set():
            return None
        with self._lock:
            return live_jobs(self._view.runs)

    def wait_synced(self, timeout: float) -> bool:
        """True once nodes and pods have been listed (tests and tools)."""
        return self._nodes_synced.wait(timeout) and self._pods_synced.wait(timeout)

    # -- HostBackend -------------------------------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Queue a pod per run, bound to `hostname`; a run already known is not started twice."""
        out = Outbox()
        with self._lock:
            node = self._view.nodes.get(hostname)
            if node is None:
                raise NotFound(f"no Kubernetes node {hostname!r}")
            for task in tasks:
                if task.run_id in self._view.runs:
                    continue
                namespace = self.config.namespace_of(task.pool)
                run = self._view.runs[task.run_id] = Run(hostname, namespace, pod_name(task.run_id))
                try:
                    if task.spec.command.uris:  # no fetcher in a pod: fail, never start without
                        raise InvalidArgument("URIs (command.uris) are not fetched on the "
                                              "Kubernetes backend", field="command.uris")
                    manifest = pod_manifest(task, node, namespace, self.config)
                    if task.spec.volume is not None:
                        claim = claim_manifest(task, hostname, namespace, self.config)
                        mount_claim(manifest, task)
                        self._claim_of[task.run_id] = (claim, task.volume_created,
                                                       task.volume_id)
                except InvalidArgument as exc:
                    self._view.end(out, task.run_id, run, TaskState.FAILED, f"pod not created: {exc}",
                              "REASON_CONTAINER_LAUNCH_FAILED")
                    continue
                self._work.put(("create", task.run_id, manifest))
                self._services.note_launch(task, namespace)
        self._flush(out)

    def kill(self, hostname: str, run_ids: Sequence[str], grace_secs: float) -> None:
        """Delete the runs' pods with the grace; each run ends KILLED once its pod is gone."""
        with self._lock:
            if hostname not in self._view.nodes:
                raise NotFound(f"no Kubernetes node {hostname!r}")
            for run_id in run_ids:
                run = self._view.runs.get(run_id)
                if run is None or run.state.terminal or run.kill_grace is not None:
                    continue
                run.kill_grace = max(0.0, grace_secs)
                if run.uid:  # else the worker sees the kill before or after creating it
                    self._work.put(("delete", run_id, None))

    def acknowledge(self, updates: Sequence[StatusUpdate]) -> None:
        """Stop re-delivering these; a run whose end is acknowledged is forgotten once its
        pod is gone (a finished pod is deleted `finished_pod_ttl_secs` later)."""
        now = self._clock()
        with self._lock:
            for update in updates:
                if self._view.pending.pop(update.uuid, None) is None or not update.state.terminal:
                    continue
                run = self._view.runs.get(update.run_id)
                if run is None or not run.state.terminal:
                    continue
                if run.gone or not run.uid:
                    del self._view.runs[update.run_id]
                else:
                    run.acked_at = now

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        """Re-report runs (every known one for None); a run with no pod is LOST, but only
        once the pods have been listed since this backend started."""
        if not self._pods_synced.is_set():
            with self._lock:
                self._deferred_reconcile.append(None if run_ids is None else list(run_ids))
            return
        out = Outbox()
        with self._lock:
            for run_id in (list(self._view.runs) if run_ids is None else run_ids):
                run = self._view.runs.get(run_id)
                if run is None:
                    out.updates.append(self._view.update(
                        str(uuid.uuid4()), run_id, TaskState.LOST, "", "",
                        "no pod of this run exists", "REASON_RECONCILIATION"))
                elif run.state is not TaskState.LAUNCHED:
                    update = self._view.current_update(run_id, run)
                    if update is not None:
                        out.updates.append(update)
        self._flush(out)

    def list_sandbox(self, hostname: str, run_id: str, path: str = "") -> list[tuple[str, int]]:
        """The pod's log as `stdout` (Kubernetes keeps stdout and stderr as one log)."""
        data = self.read_sandbox(hostname, run_id, "stdout")
        return [("stderr", 0), ("stdout", len(data))]

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of the pod's log (`stdout`); `stderr` is empty (merged into stdout)."""
        with self._lock:
            run = self._view.runs.get(run_id)
            namespace = run.namespace if run else self.config.namespace
        if path.lstrip("/") != "stdout":
            return b""
        try:
            data = self._api.raw("GET", f"/api/v1/namespaces/{namespace}/pods/"
                                 f"{pod_name(run_id)}/log", [("container", "task")])
        except KubeNotFound:
            raise NotFound(f"no pod of run {run_id}") from None
        return data[offset:offset + length]

    def cordon(self, hostname: str, unschedulable: bool) -> None:
        """Mark a node (un)schedulable, for host maintenance (kube-scheduler then keeps its
        own pods away too); off with `cordon_on_maintenance: false`.  Only a cordon we made is
        lifted: a node an administrator cordoned stays cordoned."""
        if not self.config.cordon_on_maintenance:
            return
        path = f"/api/v1/nodes/{hostname}"
        try:
            node = self._api.call("GET", path)
            ours = (node.get("metadata", {}).get("annotations") or {}).get(CORDON_ANNOTATION)
            cordoned = bool(node.get("spec", {}).get("unschedulable"))
            if unschedulable and not cordoned:
                self._api.patch(path, {"metadata": {"annotations": {
                    CORDON_ANNOTATION: self.config.cluster_name}}, "spec": {"unschedulable": True}})
            elif not unschedulable and ours == self.config.cluster_name:
                self._api.patch(path, {"metadata": {"annotations": {CORDON_ANNOTATION: None}},
                                       "spec": {"unschedulable": False}})
        except KubeError as exc:
            log.warning("could not %s node %s: %s", "cordon" if unschedulable else "uncordon",
                        hostname, exc)

    # -- updates -----------------------------------------------------------------------------
    def _flush(self, out: Outbox) -> None:
        """Tell the listener, outside the lock (it may call back in)."""
        listener = self._listener
        if listener is None:
            return
        for host in out.hosts_up:
            listener.host_up(host)
        for hostname, why in out.hosts_gone:
            listener.host_gone(hostname, why)
        if out.updates:
            listener.status_updates(out.updates)

    # -- pods --------------------------------------------------------------------------------
    def _pod_loop(self) -> None:
        self._follower.follow("/api/v1/pods", [("fieldSelector", "spec.nodeName!=")],
                              self._view.list_mark, self._view.pods_listed,
                              self._view.pod_event, lambda: self._listed(self._pods_synced))

    def _node_loop(self) -> None:
        query = [("labelSelector", self.config.node_selector)] if self.config.node_selector else []
        self._follower.follow("/api/v1/nodes", query, self._view.list_mark,
                              self._view.nodes_listed, self._view.node_event,
                              lambda: self._listed(self._nodes_synced))

    def _listed(self, synced: threading.Event) -> None:
        """After a list: the first one of each kind may let asked reconciles run."""
        if not synced.is_set():
            synced.set()
            self._run_deferred_reconcile()

    def _run_deferred_reconcile(self) -> None:
        if not (self._pods_synced.is_set() and self._nodes_synced.is_set()):
            return
        with self._lock:
            asked, self._deferred_reconcile = self._deferred_reconcile, []
        for run_ids in asked:
            self.reconcile(run_ids)

    # -- creating and deleting pods ----------------------------------------------------------
    def _work_loop(self) -> None:
        while not self._stopping.is_set():
            what, run_id, manifest = self._work.get()
            if what == "stop":
                return
            try:
                if what == "create" and manifest is not None:
                    self._create(run_id, manifest)
                elif what == "delete":
                    self._delete(run_id)
            except Exception:
                log.exception("%s of the pod of run %s failed", what, run_id)

    def _create(self, run_id: str, manifest: Json) -> None:
        out = Outbox()
        with self._lock:
            run = self._view.runs.get(run_id)
            if run is None or run.state.terminal:
                return
            killed_early = run.kill_grace is not None
            if killed_early:
                self._view.end(out, run_id, run, TaskState.KILLED, "killed before its pod was created")
                run.gone = True
        if killed_early:
            self._flush(out)
            return
        claim = self._claim_of.get(run_id)
        if claim is not None and not self._ensure_claim(run_id, run, manifest, claim[0], claim[1]):
            return
        namespace = manifest["metadata"]["namespace"]
        deadline = self._clock() + self.config.call_timeout_secs * 2
        backoff = 0.2
        while True:
            try:
                pod = self._api.call("POST", f"/api/v1/namespaces/{namespace}/pods", body=manifest)
                break
            except Conflict:
                try:
                    pod = self._api.call("GET", f"/api/v1/namespaces/{namespace}/pods/"
                                         f"{manifest['metadata']['name']}")
                except KubeError:
                    return  # gone again meanwhile: the watch tells
                break
            except Refused as exc:
                with self._lock:
                    self._view.end(out, run_id, run, TaskState.FAILED,
                                   f"the API server refused the pod: {exc.message}",
                                   "REASON_CONTAINER_LAUNCH_FAILED")
                self._flush(out)
                self._event(manifest, "FailedCreate", f"run {run_id}: {exc.message}")
                return
            except KubeError as exc:
                if self._clock() >= deadline or self._stopping.is_set():
                    with self._lock:
                        self._view.end(out, run_id, run, TaskState.FAILED,
                                  f"could not create the pod: {exc}", "REASON_CONTAINER_LAUNCH_FAILED")
                        run.kill_grace = 0.0  # in case the creation did happen after all
                        run.uid = run.uid or "unknown"
                    self._flush(out)
                    self._delete(run_id)
                    return
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.config.max_backoff_secs)
        with self._lock:
            self._view.our_pod(out, "ADDED", pod)
            killed = run.kill_grace is not None and not run.gone
        self._flush(out)
        if killed:
            self._delete(run_id)

    def _ensure_claim(self, run_id: str, run: Run, pod: Json, claim: Json,
                      created_before: bool) -> bool:
        """Create (or find) a stateful run's claim before its pod; False when the run failed
        instead (a lost volume, a refused claim, an API server away for too long)."""
        deadline = self._clock() + self.config.call_timeout_secs * 2
        backoff = 0.2
        while True:
            try:
                self._claims.ensure(claim, created_before)
                return True
            except FailedPrecondition as exc:
                problem = str(exc)
            except Refused as exc:
                problem = f"the API server refused the PersistentVolumeClaim: {exc.message}"
            except KubeError as exc:
                if self._clock() < deadline and not self._stopping.is_set():
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, self.config.max_backoff_secs)
                    continue
                problem = f"could not create the PersistentVolumeClaim: {exc}"
            out = Outbox()
            with self._lock:
                self._view.end(out, run_id, run, TaskState.FAILED, problem,
                               "REASON_CONTAINER_LAUNCH_FAILED")
                run.gone = True
            self._flush(out)
            self._event(pod, "FailedCreate", f"run {run_id}: {problem}")
            return False

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Delete the PersistentVolumeClaims of these volumes (wherever their node is: a
        claim is an API object); returns those a live run of ours still mounts."""
        with self._lock:
            in_use = {vol for run_id, (_, _, vol) in self._claim_of.items()
                      if (r := self._view.runs.get(run_id)) is not None and not r.state.terminal}
        return self._claims.destroy(volume_ids, in_use)

    def _event(self, manifest: Json, reason: str, message: str) -> None:
        """A Warning event about a pod we could not create, so `kubectl get events` shows why
        a run never appeared (events are best effort: a refusal is only logged)."""
        meta = manifest["metadata"]
        namespace = meta["namespace"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"generateName": f"{meta['name'][:200]}.", "namespace": namespace},
                 "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                    "namespace": namespace},
                 "reason": reason, "message": message[:1000], "type": "Warning",
                 "source": {"component": self.config.scheduler_name},
                 "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self._api.call("POST", f"/api/v1/namespaces/{namespace}/events", body=event)
        except KubeError as exc:
            log.warning("could not record event %s for pod %s: %s", reason, meta["name"], exc)

    def _delete(self, run_id: str) -> None:
        with self._lock:
            run = self._view.runs.get(run_id)
            if run is None or run.gone:
                return
            grace = round(run.kill_grace or 0.0)
            path = f"/api/v1/namespaces/{run.namespace}/pods/{run.name}"
        try:
            self._api.call("DELETE", path, [("gracePeriodSeconds", str(grace))])
        except KubeNotFound:
            out = Outbox()
            with self._lock:
                if run.kill_grace is not None and not run.state.terminal:
                    self._view.end(out, run_id, run, TaskState.KILLED, "killed on request")
                run.gone = True
                if run.acked_at:
                    self._view.runs.pop(run_id, None)
            self._flush(out)
        except KubeError as exc:
            log.warning("deleting pod %s failed: %s (the sweeper tries again)", path, exc)

    # -- sweeper -----------------------------------------------------------------------------
    def _sweep_loop(self) -> None:
        period = max(0.05, min(self.config.resend_secs, 1.0))
        while not self._stopping.wait(period):
            try:
                self._sweep()
            except Exception:
                log.exception("k8s sweeper failed")

    def _sweep(self) -> None:
        now = self._clock()
        with self._lock:
            listener = self._listener
            due = [u for u, at in self._view.pending.values() if now - at >= self.config.resend_secs]
            for update in due:
                self._view.pending[update.uuid] = (update, now)
            ttl = self.config.finished_pod_ttl_secs
            expired = [run_id for run_id, run in self._view.runs.items()
                       if run.acked_at and not run.gone and now - run.acked_at >= ttl
                       and run.kill_grace is None]
            retry = [run_id for run_id, run in self._view.runs.items()
                     if run.kill_grace is not None and run.uid and not run.gone
                     and not run.state.terminal]
            for run_id in expired:
                self._view.runs[run_id].kill_grace = 0.0
            for run_id in [r for r in self._claim_of if r not in self._view.runs]:
                del self._claim_of[run_id]
        for run_id in expired:
            self._work.put(("delete", run_id, None))
        if now - self._last_kill_retry >= 10.0:  # kills whose delete call failed
            self._last_kill_retry = now
            for run_id in retry:
                self._work.put(("delete", run_id, None))
        if due and listener is not None:
            listener.status_updates(due)
