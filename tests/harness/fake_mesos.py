"""A small, real fake of a Mesos master speaking the v1 scheduler HTTP API, for tests.

It speaks JSON: `POST /api/v1/scheduler` with a
SUBSCRIBE call is answered 200 with a chunked RecordIO stream of events
and a `Mesos-Stream-Id` header; every other call must carry that header
and is answered 202.  `GET /version` and the operator call GET_AGENTS
(`POST /api/v1`) are served too.  Agents (tests/harness/fake_mesos_agent.py)
really run the tasks.

Behaviour follows Mesos' master where the backend depends on it:
- one offer per agent per allocation, of what no task uses and no offer
  holds (role "*" and the framework's role); DECLINE and ACCEPT install a
  refuse filter on the agent (`refuse_seconds`, 5 s when no filters);
- ACCEPT with LAUNCH validates offers (TASK_LOST REASON_INVALID_OFFERS),
  duplicate ids and resources (TASK_ERROR REASON_TASK_INVALID);
- resources come back when a task's latest state is terminal; a task is
  forgotten once its terminal update is acknowledged;
- KILL of an unknown task is answered by reconciliation; RECONCILE answers
  with the state of the last update sent (no uuid), TASK_LOST for unknown
  tasks (the framework is not PARTITION_AWARE);
- removing an agent rescinds its offers, reports its tasks TASK_LOST and
  sends FAILURE; `fail_over()` drops every stream and offer, as a new
  leading master would; a standby master (`redirect_to`) answers 307;
- SUBSCRIBE with a known framework id is a scheduler failover
  (Master::failoverFramework): the same framework and tasks, and a stream
  that still held it gets ERROR "Framework failed over" and is closed; a
  framework disconnected longer than its `failover_timeout` is removed
  (tasks killed) and a later SUBSCRIBE with its id gets ERROR "Framework
  has been removed" (Master::frameworkFailoverTimeout, validateFramework).
Not faked: protobuf encoding, quota, maintenance,
reservations and volumes, inverse offers, recovered (not re-registered) agents.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path

from tests.harness.fake_mesos_agent import TERMINAL, AgentSpec, FakeAgent, Json
from tests.harness.fake_mesos_bag import Bag
from tests.harness.fake_mesos_calls import SchedulerCalls, _Framework
from tests.harness.fake_mesos_http import EventStream, MasterHandler

DEFAULT_AGENTS = (AgentSpec("mesos-agent-0"), AgentSpec("mesos-agent-1"),
                  AgentSpec("mesos-agent-2", attributes=(("rack", "r2"),)))


class FakeMesosMaster(SchedulerCalls):
    """A leading (or, with `redirect_to`, standby) master with fake agents; start() then stop()."""

    def __init__(self, work_dir: Path, agents: Sequence[AgentSpec] = DEFAULT_AGENTS, *,
                 heartbeat_secs: float = 15.0, tick_secs: float = 0.05, retry_secs: float = 0.3,
                 version: str = "1.11.0", redirect_to: str = "") -> None:
        self.work_dir = work_dir
        self.heartbeat_secs, self.tick_secs, self.retry_secs = heartbeat_secs, tick_secs, retry_secs
        self.version, self.redirect_to = version, redirect_to
        #: Answer this many SUBSCRIBE calls with HTTP 500.
        self.fail_subscribes = 0
        self.lock = threading.RLock()
        self.agents: dict[str, FakeAgent] = {}
        self.frameworks: dict[str, _Framework] = {}
        self.removed: set[str] = set()
        #: Every non-SUBSCRIBE call received, and (task id, uuid) of every ACKNOWLEDGE.
        self.calls: list[Json] = []
        self.acks: list[tuple[str, str]] = []
        self.subscriptions = 0
        self._numbers = iter(range(1_000_000))
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        for spec in agents:
            self.add_agent(spec)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeMesosMaster:
        self._serve()
        threading.Thread(target=self._tick, name="fake-mesos-tick", daemon=True).start()
        return self

    def _serve(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), MasterHandler)
        self._server.daemon_threads = True
        self._server.master = self  # type: ignore[attr-defined]
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-mesos-http",
                         daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.pause()
        with self.lock:
            for agent in self.agents.values():
                agent.stop()

    def pause(self) -> None:
        """Stop answering (the port closes) and drop every stream: the master is down."""
        self.fail_over()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def resume(self) -> None:
        """Answer again on the same port (a restarted master; agents and tasks are kept)."""
        self._serve()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    # -- what tests do to the cluster ------------------------------------------------------
    def add_agent(self, spec: AgentSpec) -> FakeAgent:
        with self.lock:
            agent = FakeAgent(spec, next(self._numbers), self.work_dir / spec.hostname,
                              self._agent_update, self.lock, self.retry_secs)
            self.agents[agent.agent_id] = agent
            return agent

    def agent(self, hostname: str) -> FakeAgent:
        return next(a for a in self.agents.values() if a.spec.hostname == hostname)

    def fail_over(self) -> None:
        """A new leading master: every subscriber is cut off and every offer is void."""
        with self.lock:
            for fw in self.frameworks.values():
                if fw.stream is not None:
                    fw.stream.close()
                    fw.disconnected_at = time.monotonic()
                fw.stream = None
                fw.offers.clear()

    def mute(self) -> None:
        """Every open stream goes silent but stays open (a half-open TCP connection)."""
        with self.lock:
            for fw in self.frameworks.values():
                if fw.stream is not None:
                    fw.stream.muted = True

    def remove_agent(self, hostname: str) -> None:
        """The agent is gone for good: its offers are rescinded, its tasks LOST, FAILURE sent."""
        with self.lock:
            agent = self.agent(hostname)
            del self.agents[agent.agent_id]
            for fw in self.frameworks.values():
                self._rescind(fw, agent.agent_id)
                for task in [t for t in fw.tasks.values() if t.agent_id == agent.agent_id]:
                    del fw.tasks[task.task_id]
                    self._master_update(fw, task.task_id, agent.agent_id, "TASK_LOST",
                                        "REASON_AGENT_REMOVED", f"Agent {hostname} removed")
                if fw.stream is not None:
                    fw.stream.send({"type": "FAILURE",
                                    "failure": {"agent_id": {"value": agent.agent_id}}})
            agent.stop()

    def disconnect_agent(self, hostname: str, connected: bool = False) -> None:
        """The agent loses (or, with connected=True, regains) its master; tasks keep running."""
        with self.lock:
            agent = self.agent(hostname)
            agent.connected = connected
            if connected:
                agent.retry(float("inf"))
            for fw in self.frameworks.values():
                if not connected:
                    self._rescind(fw, agent.agent_id)

    def pending_updates(self) -> int:
        """Status updates the agents hold unacknowledged."""
        with self.lock:
            return sum(a.pending() for a in self.agents.values())

    def framework(self) -> _Framework:
        """The one framework (tests register one)."""
        with self.lock:
            return next(iter(self.frameworks.values()))

    # -- the scheduler API -------------------------------------------------------------------
    def subscribe(self, call: Json) -> EventStream:
        with self.lock:
            info = call["subscribe"]["framework_info"]
            fid = str((call.get("framework_id") or info.get("id") or {}).get("value", ""))
            stream = EventStream()
            if fid in self.removed:
                stream.send({"type": "ERROR", "error": {"message": "Framework has been removed"}})
                stream.close()
                return stream
            fw = self.frameworks.get(fid)
            if fw is None:
                fid = fid or f"{uuid.uuid4()}-0000"
                fw = self.frameworks[fid] = _Framework(fid, info)
            if fw.stream is not None:
                # Mesos' Master::failoverFramework: the scheduler that held the framework is
                # told, then cut off; its offers are void and go to the new one.
                fw.stream.send({"type": "ERROR", "error": {"message": "Framework failed over"}})
                fw.stream.close()
            fw.info, fw.stream, fw.suppressed = info, stream, False
            fw.disconnected_at = None
            fw.offers.clear()
            self.subscriptions += 1
            stream.send({"type": "SUBSCRIBED", "subscribed": {
                "framework_id": {"value": fid}, "heartbeat_interval_seconds": self.heartbeat_secs,
                "master_info": {"id": "fake-master", "ip": 2130706433, "port": self.port,
                                "hostname": "127.0.0.1", "version": self.version}}})
            for agent in self.agents.values():  # agents re-send what is unacknowledged at once
                agent.retry(float("inf"))
            return stream

    def stream_closed(self, stream: EventStream) -> None:
        with self.lock:
            for fw in self.frameworks.values():
                if fw.stream is stream:
                    fw.stream = None
                    fw.offers.clear()
                    fw.disconnected_at = time.monotonic()

    def _expire_failover(self, now: float) -> None:
        """Mesos' frameworkFailoverTimeout: a framework disconnected for longer than its
        FrameworkInfo.failover_timeout is removed, its tasks killed; it may not come back."""
        for fw in list(self.frameworks.values()):
            timeout = float(fw.info.get("failover_timeout", 0.0))
            if fw.stream is None and fw.disconnected_at is not None \
                    and now - fw.disconnected_at >= timeout:
                self._on_teardown(fw, {})

    def call(self, call: Json, stream_id: str) -> tuple[int, str]:
        """Any call but SUBSCRIBE: (HTTP status, error text)."""
        with self.lock:
            fw = self.frameworks.get(str(call.get("framework_id", {}).get("value", "")))
            if fw is None or fw.stream is None:
                return 403, "Framework is not subscribed"
            if stream_id != fw.stream.stream_id:
                return 400, "The stream ID included in this request didn't match"
            self.calls.append(call)
            kind = str(call.get("type", "")).lower()
            handler = getattr(self, f"_on_{kind}", None)
            if handler is not None:
                handler(fw, call.get(kind) or {})
            return 202, ""

    def get_agents(self) -> Json:
        with self.lock:
            return {"type": "GET_AGENTS", "get_agents": {"recovered_agents": [], "agents": [
                {"agent_info": a.info(), "active": a.connected, "version": self.version,
                 "pid": f"slave(1)@127.0.0.1:{a.port}", "total_resources": a.spec.resources()}
                for a in self.agents.values()]}}

    def _agent_update(self, agent: FakeAgent, tid: str, latest: str, head: Json | None) -> None:
        fw = self.frameworks.get(agent.tasks[tid].framework_id)
        task = fw.tasks.get(tid) if fw is not None else None
        if fw is None or task is None:
            return
        task.state = latest
        if head is not None:
            task.update_state = head["state"]
            if fw.stream is not None:
                fw.stream.send({"type": "UPDATE", "update": {"status": head}})

    def _rescind(self, fw: _Framework, agent_id: str) -> None:
        for oid in [oid for oid, (aid, _) in fw.offers.items() if aid == agent_id]:
            del fw.offers[oid]
            if fw.stream is not None:
                fw.stream.send({"type": "RESCIND", "rescind": {"offer_id": {"value": oid}}})

    def _tick(self) -> None:
        while not self._stop.wait(self.tick_secs):
            with self.lock:
                now = time.monotonic()
                for agent in self.agents.values():
                    agent.retry(now)
                self._expire_failover(now)
                for fw in self.frameworks.values():
                    if fw.stream is not None and now - fw.stream.last_heartbeat >= self.heartbeat_secs:
                        fw.stream.last_heartbeat = now
                        fw.stream.send({"type": "HEARTBEAT"})
                    self._allocate(fw, now)

    def _allocate(self, fw: _Framework, now: float) -> None:
        if fw.stream is None or fw.suppressed:
            return
        revocable = any(c.get("type") == "REVOCABLE_RESOURCES"
                        for c in fw.info.get("capabilities", []))
        offers = []
        for agent in self.agents.values():
            if not agent.connected or fw.filters.get(agent.agent_id, 0.0) > now:
                continue
            free = Bag(r for r in agent.spec.resources()
                       if Bag.role_of(r) in ("*", fw.role) and (revocable or "revocable" not in r))
            for other in self.frameworks.values():
                for task in other.tasks.values():
                    if task.agent_id == agent.agent_id and task.state not in TERMINAL:
                        free.subtract(Bag(task.resources))
                for aid, resources in other.offers.values():
                    if aid == agent.agent_id:
                        free.subtract(Bag(resources))
            if not free.useful():
                continue
            oid = f"{fw.framework_id}-O{next(self._numbers)}"
            resources = free.to_json(fw.role)
            fw.offers[oid] = (agent.agent_id, resources)
            info = agent.info()
            offers.append({"id": {"value": oid}, "framework_id": {"value": fw.framework_id},
                           "agent_id": {"value": agent.agent_id}, "hostname": info["hostname"],
                           "url": {"scheme": "http", "path": "/slave(1)", "address": {
                               "hostname": info["hostname"], "ip": "127.0.0.1", "port": agent.port}},
                           "resources": resources, "attributes": info["attributes"],
                           "allocation_info": {"role": fw.role}})
        if offers:
            fw.stream.send({"type": "OFFERS", "offers": {"offers": offers}})


