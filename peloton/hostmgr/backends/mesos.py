"""The Apache Mesos HostBackend: Peloton as a Mesos framework (v1 scheduler HTTP API).

How the HostBackend maps onto Mesos' v1 scheduler API (README.md beside
this module says what is and is not supported):

- start: SUBSCRIBE as framework "Peloton" (role and principal "peloton",
  checkpointing, a long failover timeout) with the framework id from
  `load_framework_id`; every SUBSCRIBED goes to `save_framework_id`
  (framework id, stream id).  A host manager that comes back within the
  failover timeout is the same framework, and its tasks keep running.
- hosts: mesos_hosts.py (the master's agent list).  launch: runs wait per
  host until its held offers (mesos_offers.py) have room, then go in one
  ACCEPT with a LAUNCH operation; runs still waiting after
  `launch_wait_secs` are reported FAILED.  kill: KILL with the grace as
  kill policy; runs seen ended are not killed again (Mesos would answer a
  KILL of a task it forgot with a reconciliation TASK_LOST).
- status: each UPDATE is a StatusUpdate (mesos_wire.py).  ACKNOWLEDGE is
  sent only from acknowledge(); until then Mesos re-sends the update.
  Mesos sends one unacknowledged update per task at a time: a run's next
  update comes only after the previous one is acknowledged.  Updates
  without a uuid (reconciliation answers) and the backend's own (launch
  failures) are re-delivered every `resend_secs` until acknowledged.
- reconcile: RECONCILE naming the runs (with their agent when known), or
  implicit for None; implicit also after every (re-)subscription.
- failover: the link (mesos_driver.py) reconnects a broken stream with the
  framework id and follows redirects and ZooKeeper to the leading master;
  when the stream is silent for three heartbeat intervals, the backend
  starts a new one (backing off).  Every SUBSCRIBED is followed by an
  implicit reconciliation.  A link the master "failed over" to another
  scheduler (a new host manager leader) stays away.

The worker thread (mesos_worker.py) makes every call to the master.
Listener callbacks never run under the backend's lock.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence

from peloton.core.errors import NotFound, Unavailable
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import BackendHost, HostEventListener, StatusUpdate
from peloton.hostmgr.backends.mesos_config import MesosConfig
from peloton.hostmgr.backends.mesos_driver import MesosLink, agent_get
from peloton.hostmgr.backends.mesos_hosts import HostTable
from peloton.hostmgr.backends.mesos_launch import Run, Waiting
from peloton.hostmgr.backends.mesos_offers import OfferBook
from peloton.hostmgr.backends.mesos_wire import (
    Json,
    framework_to_json,
    status_from_json,
    uuid_from_json,
    value_of,
)
from peloton.hostmgr.backends.mesos_worker import Worker

__all__ = ["MesosBackend", "MesosConfig"]

log = logging.getLogger(__name__)

#: How many ended run ids are remembered (so they are neither killed nor reported alive again).
ENDED_MEMORY = 100_000


class MesosBackend:
    """Hosts are a Mesos master's agents; see the module docstring."""

    name = "mesos"

    def __init__(self, config: MesosConfig, *,
                 load_framework_id: Callable[[], str] = lambda: "",
                 save_framework_id: Callable[[str, str], None] = lambda fid, sid: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.load_framework_id, self.save_framework_id = load_framework_id, save_framework_id
        self.lock = threading.Lock()
        self.listener: HostEventListener | None = None
        self.framework_id = ""
        self.subscribed = False
        self.hosts = HostTable(config.role)
        self.offers = OfferBook()
        self.waiting: dict[str, list[Waiting]] = {}        # hostname -> runs waiting for room
        self.runs: dict[str, Run] = {}                     # run id -> where it was launched
        self.ended: OrderedDict[str, None] = OrderedDict()
        #: Updates Mesos will not re-send (no uuid, or made here): uuid -> (update, sent at);
        #: `own_done` remembers acknowledged ones, so a second acknowledgement is not sent on.
        self.own: dict[str, tuple[StatusUpdate, float]] = {}
        self.own_done: OrderedDict[str, None] = OrderedDict()
        self.worker = Worker(self)

    # -- HostBackend -------------------------------------------------------------------
    def start(self, listener: HostEventListener) -> None:
        """Subscribe (in the worker) and report to `listener`."""
        with self.lock:
            self.listener = listener
        self.worker.start()

    def stop(self) -> None:
        """Decline held offers and disconnect without tearing down: tasks keep running."""
        self.worker.stop()
        with self.lock:
            self.listener = None
            self.subscribed = False
            self.offers.clear()
            self.waiting.clear()
            self.hosts.clear()

    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Queue runs for the host's next offers with room (a run id already known is skipped)."""
        failed: list[StatusUpdate] = []
        with self.lock:
            host = self._host(hostname)
            queued = {w.task.run_id for w in self.waiting.get(hostname, ())}
            deadline = self.clock() + self.config.launch_wait_secs
            for task in tasks:
                rid = task.run_id
                if rid in self.runs or rid in self.ended or rid in queued:
                    continue
                queued.add(rid)
                if task.spec.volume is not None:
                    failed.append(self.own_update(host.hostname, host.agent_id, rid, TaskState.FAILED,
                                                  "REASON_TASK_INVALID",
                                                  "persistent volumes are not supported on Mesos"))
                else:
                    self.waiting.setdefault(hostname, []).append(Waiting(task, deadline))
        self.worker.kick()
        self.deliver(failed)

    def kill(self, hostname: str, run_ids: Sequence[str], grace_secs: float) -> None:
        """KILL each run; a run still waiting for an offer just ends KILLED; ended runs are skipped."""
        killed: list[StatusUpdate] = []
        with self.lock:
            host = self._host(hostname)
            for rid in run_ids:
                if rid in self.ended:
                    continue
                waiting = self.waiting.get(hostname, [])
                if any(w.task.run_id == rid for w in waiting):
                    self.waiting[hostname] = [w for w in waiting if w.task.run_id != rid]
                    killed.append(self.own_update(host.hostname, host.agent_id, rid, TaskState.KILLED,
                                                  "REASON_TASK_KILLED", "killed before it was launched"))
                    continue
                self.worker.queue_kill({"task_id": {"value": rid},
                                        "agent_id": {"value": host.agent_id},
                                        "kill_policy": {"grace_period": {
                                            "nanoseconds": int(max(grace_secs, 0.0) * 1e9)}}})
        self.worker.kick()
        self.deliver(killed)

    def acknowledge(self, updates: Sequence[StatusUpdate]) -> None:
        """ACKNOWLEDGE Mesos' updates (in the worker); forget the backend's own."""
        with self.lock:
            for update in updates:
                if update.uuid in self.own:
                    del self.own[update.uuid]
                    _remember(self.own_done, update.uuid)
                elif update.agent_id and update.uuid not in self.own_done:
                    self.worker.queue_ack(update)
        self.worker.kick()

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        """RECONCILE (sent once subscribed); runs still waiting for an offer are not asked about."""
        if run_ids is not None and not run_ids:
            return
        with self.lock:
            if run_ids is None:
                self.worker.queue_reconcile(None)
            else:
                waiting = {w.task.run_id for ws in self.waiting.values() for w in ws}
                for rid in run_ids:
                    if rid in waiting:
                        continue
                    run = self.runs.get(rid)
                    entry: Json = {"task_id": {"value": rid}}
                    if run is not None:
                        entry["agent_id"] = {"value": run.agent_id}
                    self.worker.queue_reconcile(entry)
        self.worker.kick()

    def list_sandbox(self, hostname: str, run_id: str, path: str = "") -> list[tuple[str, int]]:
        """(name, size) of the entries under a sandbox path (the agent's /files/browse)."""
        address, root = self._sandbox(hostname, run_id)
        body = agent_get(address, "/files/browse", {"path": f"{root}/{path}".rstrip("/")},
                         self.config.call_timeout_secs)
        return [(str(e["path"]).rsplit("/", 1)[-1], int(e.get("size", 0))) for e in json.loads(body)]

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of a sandbox file (the agent's /files/read)."""
        address, root = self._sandbox(hostname, run_id)
        body = agent_get(address, "/files/read", {"path": f"{root}/{path.lstrip('/')}",
                                                  "offset": offset, "length": length},
                         self.config.call_timeout_secs)
        text = json.loads(body.decode("utf-8", "surrogateescape")).get("data", "")
        return str(text).encode("utf-8", "surrogateescape")

    def sandbox_root(self, hostname: str, run_id: str) -> str:
        """The run's sandbox as the agent's file server names it (its /files/download path).

        The command executor's id is the task id, and Mesos serves an executor's latest
        sandbox under this virtual path.
        """
        return self._sandbox(hostname, run_id)[1]

    def _sandbox(self, hostname: str, run_id: str) -> tuple[str, str]:
        with self.lock:
            host = self._host(hostname)
            if not self.framework_id:
                raise Unavailable("not registered with the Mesos master yet")
            return host.address, f"/frameworks/{self.framework_id}/executors/{run_id}/runs/latest"

    def _host(self, hostname: str) -> BackendHost:
        host = self.hosts.get(hostname)
        if host is None:
            raise NotFound(f"no Mesos agent {hostname!r}")
        if not self.subscribed:
            raise Unavailable("not subscribed to the Mesos master")
        return host

    # -- updates (the worker and the link's thread call these) ------------------------------------
    def own_update(self, hostname: str, agent_id: str, run_id: str, state: TaskState, reason: str,
                   message: str) -> StatusUpdate:
        """An update made here, re-delivered until acknowledged; the lock must be held."""
        update = StatusUpdate(str(uuid.uuid4()), run_id, state, hostname, agent_id, time.time(),
                              message, reason)
        self.own[update.uuid] = (update, self.clock())
        self._note_state(update)
        return update

    def status(self, status: Json, hostname: str) -> StatusUpdate | None:
        """A Mesos TaskStatus as the update to deliver (None: stale, drop it); lock held."""
        rid = value_of(status, "task_id")
        run = self.runs.get(rid)
        raw_uuid = status.get("uuid")
        update = status_from_json(status, hostname,
                                  uuid_from_json(raw_uuid) if raw_uuid else str(uuid.uuid4()),
                                  run is not None and run.health_checked)
        if not raw_uuid:
            if rid in self.ended and not update.state.terminal:
                return None  # a reconciliation answer older than the end we saw
            self.own[update.uuid] = (update, self.clock())
        self._note_state(update)
        return update

    def _note_state(self, update: StatusUpdate) -> None:
        if update.state.terminal:
            self.runs.pop(update.run_id, None)
            _remember(self.ended, update.run_id)
        elif update.run_id not in self.runs and update.run_id not in self.ended:
            self.runs[update.run_id] = Run(update.hostname, update.agent_id)

    def deliver(self, updates: Sequence[StatusUpdate]) -> None:
        """Hand updates to the listener (never under the lock)."""
        listener = self.listener
        if listener is None:
            return
        for update in updates:
            listener.status_update(update)

    def pending_count(self) -> int:
        """Updates of the backend's own awaiting acknowledgement (Mesos keeps its own)."""
        with self.lock:
            return len(self.own)

    def hosts_up(self) -> list[BackendHost]:
        """Every agent currently reported as a host."""
        with self.lock:
            return self.hosts.hosts()

    def new_link(self) -> MesosLink:
        """A subscription for the worker to start (with the framework id, once known)."""
        cfg = self.config
        framework = framework_to_json(
            name=cfg.framework_name, role=cfg.role, principal=cfg.principal, user=cfg.user,
            failover_timeout=cfg.failover_timeout_secs, gpu=cfg.gpu_supported,
            revocable=cfg.revocable_resources, framework_id=self.framework_id)
        return MesosLink(cfg.master, framework, self.worker, principal=cfg.principal,
                         secret=cfg.secret, call_timeout_secs=cfg.call_timeout_secs)


def _remember(memory: OrderedDict[str, None], key: str) -> None:
    memory[key] = None
    if len(memory) > ENDED_MEMORY:
        memory.popitem(last=False)
