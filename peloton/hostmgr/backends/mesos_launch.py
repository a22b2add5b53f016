"""Launching on Mesos: runs wait for an offer with room, then go in one ACCEPT per agent.

`dispatch` matches each host's waiting runs against the offers held for its
agent (mesos_offers.Picker), in the order they were asked for, and ACCEPTs
every held offer of the agent with one LAUNCH of the runs that fit; the
others keep waiting for the room the next offers bring.  `expire_waiting`
reports FAILED the runs that waited longer than `launch_wait_secs`.

How an ACCEPT ends decides what the runs become: sent, they are Mesos'
(it reports them); not sent (no subscription), they wait again; broken in
flight, they are reconciled (the master says whether they exist);
refused, they are reported FAILED.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.backends.mesos_driver import CallNotSent, CallRejected, CallUncertain, MesosLink
from peloton.hostmgr.backends.mesos_offers import Picker
from peloton.hostmgr.backends.mesos_wire import task_info_to_json

if TYPE_CHECKING:
    from peloton.hostmgr.backends.mesos import MesosBackend

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Run:
    """A run the backend launched (or saw reported), until it ends."""

    hostname: str
    agent_id: str
    health_checked: bool = False


@dataclass(slots=True)
class Waiting:
    """A run waiting for an offer with room for it."""

    task: LaunchSpec
    deadline: float


def dispatch(b: MesosBackend, link: MesosLink) -> None:
    """ACCEPT the held offers of every agent with room for some of its waiting runs."""
    accepts = []
    with b.lock:
        for hostname, waiting in b.waiting.items():
            host = b.hosts.get(hostname)
            offers = b.offers.of(host.agent_id) if host is not None else []
            if host is None or not offers or not waiting:
                continue
            picker = Picker(offers, b.config.role)
            chosen = [(w, res) for w in waiting if (res := picker.take(w.task)) is not None]
            if not chosen:
                continue
            picked = {w.task.run_id for w, _ in chosen}
            b.waiting[hostname] = [w for w in waiting if w.task.run_id not in picked]
            b.offers.take(offers)
            for w, _ in chosen:
                hc = w.task.spec.health_check
                b.runs[w.task.run_id] = Run(hostname, host.agent_id,
                                            hc is not None and hc.enabled)
            accepts.append((host, offers, chosen, [
                task_info_to_json(w.task, host.agent_id, res) for w, res in chosen]))
    for host, offers, chosen, infos in accepts:
        body = {"offer_ids": [{"value": o.offer_id} for o in offers],
                "operations": [{"type": "LAUNCH", "launch": {"task_infos": infos}}],
                "filters": {"refuse_seconds": 0.0}}  # leftovers come back in the next offer
        runs = [w for w, _ in chosen]
        try:
            link.call("ACCEPT", b.framework_id, body)
        except CallNotSent:  # the offers are void anyway: wait for new ones
            with b.lock:
                for w in runs:
                    b.runs.pop(w.task.run_id, None)
                b.waiting.setdefault(host.hostname, [])[:0] = runs
        except CallUncertain as exc:
            log.warning("ACCEPT on %s broke in flight (%s); reconciling its runs",
                        host.hostname, exc)
            with b.lock:
                for w in runs:
                    b.worker.queue_reconcile({"task_id": {"value": w.task.run_id},
                                              "agent_id": {"value": host.agent_id}})
        except CallRejected as exc:
            with b.lock:
                failed = [b.own_update(host.hostname, host.agent_id, w.task.run_id,
                                       TaskState.FAILED, "REASON_TASK_INVALID",
                                       f"the Mesos master refused the launch: {exc}")
                          for w in runs]
            b.deliver(failed)


def expire_waiting(b: MesosBackend, now: float) -> None:
    """Report FAILED the runs that waited for room longer than `launch_wait_secs`."""
    failed: list[StatusUpdate] = []
    with b.lock:
        for hostname, waiting in b.waiting.items():
            late = [w for w in waiting if w.deadline <= now]
            if not late:
                continue
            b.waiting[hostname] = [w for w in waiting if w.deadline > now]
            host = b.hosts.get(hostname)
            failed += [b.own_update(hostname, host.agent_id if host else "", w.task.run_id,
                                    TaskState.FAILED, "REASON_INVALID_OFFERS",
                                    f"no Mesos offer from {hostname} had room for the run "
                                    f"within {b.config.launch_wait_secs:g} s") for w in late]
    b.deliver(failed)
