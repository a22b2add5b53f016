"""The fake Mesos master's answers to scheduler calls (everything but SUBSCRIBE).

Mixed into FakeMesosMaster; each `_on_<call>` runs under the master's lock
with the calling framework and the call's body.  See fake_mesos.py for the
Mesos behaviour these follow.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tests.harness.fake_mesos_agent import TERMINAL, FakeAgent, Json, new_uuid
from tests.harness.fake_mesos_bag import Bag
from tests.harness.fake_mesos_http import EventStream


@dataclass
class _Task:
    task_id: str
    agent_id: str
    resources: list[Json]
    kill_grace: float
    state: str = "TASK_STAGING"          # latest state the agent knows
    update_state: str = "TASK_STAGING"   # state of the last update sent to the framework


@dataclass
class _Framework:
    framework_id: str
    info: Json
    stream: EventStream | None = None
    tasks: dict[str, _Task] = field(default_factory=dict)
    offers: dict[str, tuple[str, list[Json]]] = field(default_factory=dict)  # id -> (agent, res)
    filters: dict[str, float] = field(default_factory=dict)  # agent id -> refused until
    suppressed: bool = False
    disconnected_at: float | None = None  # monotonic time the stream closed (failover timer)

    @property
    def role(self) -> str:
        return str(self.info.get("role", "*"))


class SchedulerCalls:
    """ACCEPT, DECLINE, REVIVE, SUPPRESS, KILL, ACKNOWLEDGE, RECONCILE, TEARDOWN."""

    agents: dict[str, FakeAgent]
    frameworks: dict[str, _Framework]
    removed: set[str]
    acks: list[tuple[str, str]]

    def _on_accept(self, fw: _Framework, accept: Json) -> None:
        offers = [fw.offers.pop(o.get("value", ""), None) for o in accept.get("offer_ids", [])]
        tasks = [t for op in accept.get("operations", []) if op.get("type") == "LAUNCH"
                 for t in op.get("launch", {}).get("task_infos", [])]
        agents = {o[0] for o in offers if o is not None}
        if not offers or None in offers or len(agents) != 1:
            for t in tasks:
                self._master_update(fw, t["task_id"]["value"], "", "TASK_LOST",
                                    "REASON_INVALID_OFFERS", "Task launched with invalid offers")
            return
        agent = self.agents[agents.pop()]
        pool = Bag()
        for _, resources in offers:  # type: ignore[misc]
            pool.add_all(resources)
        for t in tasks:
            tid = str(t.get("task_id", {}).get("value", ""))
            need = Bag(t.get("resources", []))
            problem = ("Task has duplicate ID" if not tid or tid in fw.tasks else
                       "Task uses an agent other than its offers'" if
                       t.get("agent_id", {}).get("value") != agent.agent_id else
                       "Task uses more resources than available" if not pool.covers(need) else "")
            if problem:
                self._master_update(fw, tid, agent.agent_id, "TASK_ERROR", "REASON_TASK_INVALID",
                                    problem)
                continue
            pool.subtract(need)
            grace = t.get("kill_policy", {}).get("grace_period", {}).get("nanoseconds", 3e9) / 1e9
            fw.tasks[tid] = _Task(tid, agent.agent_id, t.get("resources", []), grace)
            agent.launch(fw.framework_id, t)
        self._filter(fw, agent.agent_id, accept.get("filters"))

    def _on_decline(self, fw: _Framework, decline: Json) -> None:
        for oid in decline.get("offer_ids", []):
            offer = fw.offers.pop(oid.get("value", ""), None)
            if offer is not None:
                self._filter(fw, offer[0], decline.get("filters"))

    def _filter(self, fw: _Framework, agent_id: str, filters: Json | None) -> None:
        secs = float((filters or {}).get("refuse_seconds", 5.0))
        if secs > 0:
            fw.filters[agent_id] = time.monotonic() + secs

    def _on_revive(self, fw: _Framework, _: Json) -> None:
        fw.filters.clear()
        fw.suppressed = False

    def _on_suppress(self, fw: _Framework, _: Json) -> None:
        fw.suppressed = True

    def _on_kill(self, fw: _Framework, kill: Json) -> None:
        tid = kill["task_id"]["value"]
        task = fw.tasks.get(tid)
        if task is None:
            self._on_reconcile(fw, {"tasks": [{"task_id": {"value": tid},
                                               **({"agent_id": kill["agent_id"]}
                                                  if "agent_id" in kill else {})}]})
            return
        nanos = kill.get("kill_policy", {}).get("grace_period", {}).get("nanoseconds")
        agent = self.agents.get(task.agent_id)
        if agent is not None:
            agent.kill(tid, task.kill_grace if nanos is None else nanos / 1e9)

    def _on_acknowledge(self, fw: _Framework, ack: Json) -> None:
        tid, update_uuid = ack["task_id"]["value"], ack["uuid"]
        self.acks.append((tid, update_uuid))
        agent = self.agents.get(ack["agent_id"]["value"])
        acked = agent.acknowledge(tid, update_uuid) if agent is not None else None
        if acked is not None and acked["state"] in TERMINAL:
            fw.tasks.pop(tid, None)

    def _on_reconcile(self, fw: _Framework, reconcile: Json) -> None:
        wanted = reconcile.get("tasks", [])
        if not wanted:
            for task in fw.tasks.values():
                self._reconciled(fw, task.task_id, task.agent_id, task.update_state,
                                 "Reconciliation: Latest task state")
        for want in wanted:
            tid = want["task_id"]["value"]
            agent_id = want.get("agent_id", {}).get("value", "")
            known = fw.tasks.get(tid)
            if known is not None:
                self._reconciled(fw, tid, known.agent_id, known.update_state,
                                 "Reconciliation: Latest task state")
            elif agent_id in self.agents:
                self._reconciled(fw, tid, agent_id, "TASK_LOST",
                                 "Reconciliation: Task is unknown to the agent")
            else:
                self._reconciled(fw, tid, "", "TASK_LOST", "Reconciliation: Task is unknown")

    def _on_teardown(self, fw: _Framework, _: Json) -> None:
        """TEARDOWN, and what the failover timeout does: kill every task, forget the framework."""
        for task in fw.tasks.values():
            if task.agent_id in self.agents:
                self.agents[task.agent_id].kill(task.task_id, 0.0)
        self.removed.add(fw.framework_id)
        del self.frameworks[fw.framework_id]
        if fw.stream is not None:
            fw.stream.close()

    # -- events ---------------------------------------------------------------------------------
    def _reconciled(self, fw: _Framework, tid: str, agent_id: str, state: str, message: str) -> None:
        status: Json = {"task_id": {"value": tid}, "state": state, "source": "SOURCE_MASTER",
                        "reason": "REASON_RECONCILIATION", "message": message,
                        "timestamp": time.time()}
        if agent_id:
            status["agent_id"] = {"value": agent_id}
        if fw.stream is not None:
            fw.stream.send({"type": "UPDATE", "update": {"status": status}})

    def _master_update(self, fw: _Framework, tid: str, agent_id: str, state: str, reason: str,
                       message: str) -> None:
        """An update the master makes itself (it has a uuid but is never re-sent)."""
        status: Json = {"task_id": {"value": tid}, "state": state, "source": "SOURCE_MASTER",
                        "reason": reason, "message": message, "timestamp": time.time(),
                        "uuid": new_uuid()}
        if agent_id:
            status["agent_id"] = {"value": agent_id}
        if fw.stream is not None:
            fw.stream.send({"type": "UPDATE", "update": {"status": status}})
