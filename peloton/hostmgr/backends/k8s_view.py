"""What the Kubernetes backend knows of the cluster: nodes, other schedulers' pods, our runs,
and the updates not yet acknowledged; and how each watched object changes it.

No I/O and no threads: the backend (k8s.py) holds its lock around every call and passes an
`Outbox` that collects what to tell the host manager once the lock is released; a pod that
must go is handed to the `delete` callable (the backend's workers call the API server).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from peloton.core.model.resources import Resources
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.base import BackendHost, StatusUpdate
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.k8s_wire import (
    RUN_ID_ANNOTATION,
    Json,
    NodeFacts,
    PodStatus,
    host_of,
    is_ours,
    node_facts,
    pod_host_ports,
    pod_node,
    pod_requests,
    pod_status,
    pod_terminal,
    run_id_of,
)


@dataclass(slots=True)
class Run:
    """One run as the backend knows it."""

    node: str
    namespace: str
    name: str
    #: The pod's uid once it exists ("" while its creation is queued or in flight).
    uid: str = ""
    #: The last state reported (LAUNCHED: nothing reported yet).
    state: TaskState = TaskState.LAUNCHED
    healthy: HealthState | None = None
    was_healthy: bool = False
    #: The grace of a kill asked for (None: not killed).
    kill_grace: float | None = None
    #: When its end was acknowledged (0: not yet); the finished pod is deleted a TTL later.
    acked_at: float = 0.0
    gone: bool = False
    #: The view's list mark when the pod's uid became known (`ClusterView.list_mark`).
    known_at: int = 0


@dataclass(slots=True)
class Outbox:
    """What to tell the listener once the lock is released."""

    updates: list[StatusUpdate] = field(default_factory=list)
    hosts_up: list[BackendHost] = field(default_factory=list)
    hosts_gone: list[tuple[str, str]] = field(default_factory=list)


class ClusterView:
    """Nodes, other pods' requests per node, our runs and unacknowledged updates."""

    def __init__(self, config: KubeConfig, delete: Callable[[str], None],
                 clock: Callable[[], float]) -> None:
        self.config = config
        self._delete = delete
        self._clock = clock
        self.nodes: dict[str, NodeFacts] = {}
        #: The host last announced for each Ready node.
        self.announced: dict[str, BackendHost] = {}
        #: node -> pod uid -> requests of live pods that are not ours.
        self.foreign: dict[str, dict[str, tuple[Resources, tuple[int, ...]]]] = {}
        self.foreign_node: dict[str, str] = {}
        self.runs: dict[str, Run] = {}
        #: Counts the pod lists asked for (`list_mark`).
        self._lists = 0
        #: update uuid -> (update, when last delivered).
        self.pending: dict[str, tuple[StatusUpdate, float]] = {}

    def update(self, update_id: str, run_id: str, state: TaskState, node: str, agent: str,
                message: str, reason: str = "", exit_code: int | None = None,
                healthy: HealthState | None = None) -> StatusUpdate:
        update = StatusUpdate(update_id, run_id, state, node, agent, time.time(), message, reason,
                              exit_code=exit_code, healthy=healthy)
        self.pending[update_id] = (update, self._clock())
        return update

    def agent(self, node: str) -> str:
        facts = self.nodes.get(node)
        return facts.uid if facts is not None and facts.uid else node

    def current_update(self, run_id: str, run: Run) -> StatusUpdate | None:
        """The update that says the run's current state (the same uuid as when it was first
        said, so a repeat is recognised)."""
        pending = next((u for u, _ in self.pending.values() if u.run_id == run_id
                        and u.state is run.state and u.healthy is run.healthy), None)
        if pending is not None:
            return pending
        update_id = f"k8s:{run.uid or run.name}:{run.state.value}:{run.healthy or ''}"
        return self.update(update_id, run_id, run.state, run.node, self.agent(run.node),
                            "reconciled", healthy=run.healthy)

    def report(self, out: Outbox, run_id: str, run: Run, status: PodStatus) -> None:
        """Say the run's new state, if it is new (never back from an end, nor RUNNING ->
        STARTING)."""
        if run.state.terminal:
            return
        if status.state is TaskState.STARTING and run.state is TaskState.RUNNING:
            return
        if status.state is run.state and status.healthy is run.healthy:
            return
        run.state, run.healthy = status.state, status.healthy
        run.was_healthy |= status.healthy is HealthState.HEALTHY
        update_id = f"k8s:{run.uid or run.name}:{status.state.value}:{status.healthy or ''}"
        out.updates.append(self.update(update_id, run_id, status.state, run.node,
                                        self.agent(run.node), status.message, status.reason,
                                        status.exit_code, status.healthy))

    def end(self, out: Outbox, run_id: str, run: Run, state: TaskState, message: str,
             reason: str = "") -> None:
        self.report(out, run_id, run, PodStatus(state, message, reason))

    def pod_event(self, out: Outbox, kind: str, pod: Json) -> None:
        if is_ours(pod, self.config):
            self.our_pod(out, kind, pod)
        else:
            self.foreign_pod(out, kind, pod)

    def our_pod(self, out: Outbox, kind: str, pod: Json) -> None:
        run_id = run_id_of(pod)
        meta = pod.get("metadata", {})
        run = self.runs.get(run_id)
        if run is None:
            if kind == "DELETED":
                return
            # A pod from before this backend started: adopt it.
            run = self.runs[run_id] = Run(pod_node(pod), meta.get("namespace", ""),
                                            meta.get("name", ""))
        if run.uid and meta.get("uid") and meta["uid"] != run.uid:
            return  # an older pod of the same name, already gone for us
        if not run.uid:
            run.uid = meta.get("uid", "")
            run.known_at = self._lists
        if kind == "DELETED":
            run.gone = True
            if not run.state.terminal:
                if run.kill_grace is not None:
                    self.end(out, run_id, run, TaskState.KILLED, "killed on request")
                else:
                    self.end(out, run_id, run, TaskState.LOST, "pod deleted outside the scheduler",
                              "REASON_TASK_UNKNOWN")
            if run.acked_at or (run.state.terminal and not any(
                    u.run_id == run_id for u, _ in self.pending.values())):
                self.runs.pop(run_id, None)
            return
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and run.kill_grace is None and not pod_terminal(pod):
            return  # deleted by someone else: LOST once it is gone
        status = pod_status(pod, killed=run.kill_grace is not None, was_healthy=run.was_healthy)
        self.report(out, run_id, run, status)
        if (status.state is TaskState.FAILED and status.reason == "REASON_CONTAINER_LAUNCH_FAILED"
                and not deleting):
            # The kubelet would retry the image for ever; the job manager decides instead.
            run.kill_grace = 0.0
            self._delete(run_id)

    def foreign_pod(self, out: Outbox, kind: str, pod: Json) -> None:
        uid = pod.get("metadata", {}).get("uid", "")
        node = pod_node(pod)
        old = self.foreign_node.pop(uid, "")
        if old:
            self.foreign.get(old, {}).pop(uid, None)
        if kind != "DELETED" and node and not pod_terminal(pod):
            self.foreign.setdefault(node, {})[uid] = (pod_requests(pod, self.config.gpu_resources),
                                                      pod_host_ports(pod))
            self.foreign_node[uid] = node
        for changed in {old, node} - {""}:
            self.announce(out, changed)

    def list_mark(self) -> int:
        """Note that a list is about to be asked for; pass the mark to `pods_listed`."""
        self._lists += 1
        return self._lists

    def pods_listed(self, out: Outbox, pods: list[Json], mark: int) -> None:
        """A full list, asked for at `mark`: compare with what we knew (pods gone meanwhile
        are DELETED).  A pod whose uid became known after the list was asked for (its
        create answered while the list was in flight) may be missing from it without
        being gone: it is left to the watch (reported LOST, then seen running, it was)."""
        ours = {run_id_of(p): p for p in pods if is_ours(p, self.config)}
        for run_id, run in list(self.runs.items()):
            if run.uid and not run.gone and run_id not in ours and run.known_at < mark:
                self.our_pod(out, "DELETED", {"metadata": {
                    "uid": run.uid, "annotations": {RUN_ID_ANNOTATION: run_id}}})
                self.forget_gone(run_id)
        self.foreign.clear()
        self.foreign_node.clear()
        for pod in pods:
            self.pod_event(out, "ADDED", pod)
        for node in list(self.announced):
            self.announce(out, node)

    def forget_gone(self, run_id: str) -> None:
        run = self.runs.get(run_id)
        if run is not None:
            run.gone = True

    # -- nodes -------------------------------------------------------------------------------
    def nodes_listed(self, out: Outbox, nodes: list[Json], mark: int) -> None:
        """A full list of nodes (`mark` unused: no node is created here)."""
        names = {n.get("metadata", {}).get("name", "") for n in nodes}
        for name in list(self.nodes):
            if name not in names:
                self.node_deleted(out, name)
        for node in nodes:
            self.node_event(out, "ADDED", node)

    def node_event(self, out: Outbox, kind: str, node: Json) -> None:
        name = node.get("metadata", {}).get("name", "")
        if kind == "DELETED":
            self.node_deleted(out, name)
            return
        self.nodes[name] = node_facts(node, self.config)
        self.announce(out, name)

    def announce(self, out: Outbox, name: str) -> None:
        """Tell the listener the node's host if it changed; a NotReady node is gone."""
        facts = self.nodes.get(name)
        if facts is None:
            return
        if not facts.ready:
            if self.announced.pop(name, None) is not None:
                out.hosts_gone.append((name, "node is not Ready"))
            return
        foreign = Resources()
        taken: set[int] = set()
        for amount, ports in self.foreign.get(name, {}).values():
            foreign = foreign + amount
            taken.update(ports)
        host = host_of(facts, foreign, self.config, frozenset(taken))
        if self.announced.get(name) != host:
            self.announced[name] = host
            out.hosts_up.append(host)

    def node_deleted(self, out: Outbox, name: str) -> None:
        if self.nodes.pop(name, None) is None:
            return
        self.announced.pop(name, None)
        out.hosts_gone.append((name, "node deleted"))
        for run_id, run in self.runs.items():
            if run.node == name and not run.state.terminal:
                self.end(out, run_id, run, TaskState.LOST, f"node {name} was deleted",
                          "REASON_AGENT_REMOVED")
                if run.uid and not run.gone:
                    # Nothing may keep running there once the run may run again elsewhere.
                    run.kill_grace = 0.0
                    self._delete(run_id)

    # -- list + watch ------------------------------------------------------------------------
