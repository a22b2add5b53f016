"""The Mesos backend's worker: the subscription, and every call made to the master.

`Worker` receives the link's events (the link's thread) and runs one loop
(its own thread) that, every tick or when kicked: restarts a dead or
silent subscription (backing off), saves the framework id, refreshes the
agent list, sends queued ACKNOWLEDGE, KILL and RECONCILE calls, ACCEPTs
offers for waiting runs, declines offers held too long, fails runs that
waited too long, and re-delivers the backend's own updates.

A call the master did not get is queued again (kills, reconciliations),
except acknowledgements: Mesos re-sends the update and it is acknowledged
then.  Launches are mesos_launch.py's.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from peloton.core.errors import PelotonError
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.backends.mesos_driver import CallNotSent, MesosLink
from peloton.hostmgr.backends.mesos_launch import dispatch, expire_waiting
from peloton.hostmgr.backends.mesos_wire import Json, uuid_to_json, value_of

if TYPE_CHECKING:
    from peloton.hostmgr.backends.mesos import MesosBackend

log = logging.getLogger(__name__)


class Worker:
    """MesosEvents for the link, and the loop described in the module docstring."""

    def __init__(self, backend: MesosBackend) -> None:
        self.b = backend
        self.link: MesosLink | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._kick = threading.Event()
        # The queues below are guarded by the backend's lock.
        self._acks: list[Json] = []
        self._kills: list[Json] = []
        self._reconcile: list[Json] = []
        self._implicit = False
        self._unresolved: list[Json] = []  # updates from agents not yet known by hostname
        self._save: tuple[str, str] | None = None
        self._sync_at = 0.0
        self._restart = False
        self._restart_at = 0.0
        self._backoff = 1.0

    # -- lifecycle and queues (callers hold the backend's lock for queue_*) ---------------------
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="mesos-backend", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(self.b.config.call_timeout_secs + 10)
            self._thread = None
        link, self.link = self.link, None
        if link is None:
            return
        with self.b.lock:
            held = self.b.offers.clear()
        if held:  # politely: Mesos would also take them back when the stream closes
            self._call(link, "DECLINE", {"offer_ids": [{"value": o.offer_id} for o in held],
                                         "filters": {"refuse_seconds": 0.0}})
        link.stop()

    def kick(self) -> None:
        self._kick.set()

    def queue_ack(self, update: StatusUpdate) -> None:
        self._acks.append({"agent_id": {"value": update.agent_id},
                           "task_id": {"value": update.run_id}, "uuid": uuid_to_json(update.uuid)})

    def queue_kill(self, kill: Json) -> None:
        self._kills.append(kill)

    def queue_reconcile(self, entry: Json | None) -> None:
        if entry is None:
            self._implicit = True
        else:
            self._reconcile.append(entry)

    # -- MesosEvents (the link's thread) ----------------------------------------------------------
    def subscribed(self, framework_id: str, stream_id: str) -> None:
        log.info("subscribed to Mesos master %s as framework %s",
                 self.link.master if self.link else "?", framework_id)
        with self.b.lock:
            self.b.framework_id, self.b.subscribed = framework_id, True
            self._save, self._sync_at, self._backoff = (framework_id, stream_id), 0.0, 1.0
            self._implicit = True  # after a failover, ask for every task's state
        self.kick()

    def disconnected(self) -> None:
        with self.b.lock:
            self.b.subscribed = False
            self.b.offers.clear()

    def offers(self, offers: list[Json]) -> None:
        with self.b.lock:
            now = self.b.clock()
            for offer in offers:
                held = self.b.offers.add(offer, now)
                self.b.hosts.note(held.agent_id, held.hostname)
                if self.b.hosts.get(held.hostname) is None:
                    self._sync_at = 0.0  # an agent we do not list yet
        self.kick()

    def rescinded(self, offer_id: str) -> None:
        with self.b.lock:
            self.b.offers.remove(offer_id)
            self._sync_at = 0.0  # the agent may be going away
        self.kick()

    def update(self, status: Json) -> None:
        with self.b.lock:
            agent_id = value_of(status, "agent_id")
            hostname = self.b.hosts.name_of(agent_id)
            if agent_id and not hostname:
                self._unresolved.append(status)
                self._sync_at = 0.0
                update = None
            else:
                update = self.b.status(status, hostname)
        if update is None:
            self.kick()
        else:
            self.b.deliver([update])

    def agent_lost(self, agent_id: str) -> None:
        with self.b.lock:
            hostname = self.b.hosts.lose(agent_id)
            self._sync_at = 0.0
            listener = self.b.listener
        if hostname and listener is not None:
            listener.host_gone(hostname, "the Mesos master lost the agent")

    def error(self, message: str) -> None:
        log.error("Mesos master: %s", message)
        if "removed" in message.lower():  # torn down or failed over too late: register anew
            with self.b.lock:
                self.b.framework_id = ""
                self._save, self._restart = ("", ""), True

    # -- the loop -----------------------------------------------------------------------------
    def _run(self) -> None:
        if not self.b.framework_id:
            try:
                self.b.framework_id = self.b.load_framework_id() or ""
            except Exception:
                log.exception("could not load the Mesos framework id; registering anew")
        while not self._stop.is_set():
            try:
                self._step()
            except Exception:
                log.exception("Mesos backend worker step failed")
            self._kick.wait(self.b.config.tick_secs)
            self._kick.clear()

    def _step(self) -> None:
        now = self.b.clock()
        link = self._supervise(now)
        with self.b.lock:
            save, self._save = self._save, None
            subscribed = self.b.subscribed
        if save is not None:
            try:
                self.b.save_framework_id(*save)
            except Exception:
                log.exception("could not save the Mesos framework id")
        if link is not None and subscribed:
            self._sync(link, now)
            self._flush(link)
            dispatch(self.b, link)
            self._decline_expired(link, now)
        expire_waiting(self.b, now)
        self._resend(now)

    def _supervise(self, now: float) -> MesosLink | None:
        link = self.link
        silent = (link is not None and self.b.subscribed
                  and time.monotonic() - link.last_event > 3 * link.heartbeat_secs)
        if link is not None and not (link.aborted or silent or self._restart):
            return link
        if now < self._restart_at:
            return None
        if link is not None:
            log.warning("restarting the Mesos subscription (%s)",
                        "its thread failed" if link.aborted else "no heartbeat" if silent
                        else "framework removed")
            link.stop()
        with self.b.lock:
            self.b.subscribed, self._restart = False, False
            self.b.offers.clear()
        self._restart_at = now + self._backoff
        self._backoff = min(self._backoff * 2, self.b.config.max_backoff_secs)
        self.link = self.b.new_link()
        try:
            self.link.start()
        except Exception:
            log.exception("could not start the Mesos subscription")
        return self.link

    def _call(self, link: MesosLink, kind: str, body: Json) -> bool:
        """One call; False if the master did not get it (the caller may queue it again)."""
        try:
            link.call(kind, self.b.framework_id, body)
            return True
        except CallNotSent:
            return False
        except PelotonError as exc:
            log.warning("Mesos %s failed: %s", kind, exc)
            return True

    def _sync(self, link: MesosLink, now: float) -> None:
        if now < self._sync_at:
            return
        self._sync_at = now + self.b.config.agent_refresh_secs
        try:
            answer = link.operator({"type": "GET_AGENTS"})
        except (PelotonError, ValueError) as exc:
            log.warning("GET_AGENTS failed: %s", exc)
            self._sync_at = now + min(self.b.config.agent_refresh_secs, 1.0)
            return
        with self.b.lock:
            changes = self.b.hosts.apply(answer)
            statuses, self._unresolved = self._unresolved, []
            updates = [u for s in statuses if (u := self.b.status(
                s, self.b.hosts.name_of(value_of(s, "agent_id")))) is not None]
            listener = self.b.listener
        if listener is not None:
            for hostname in changes.gone:
                listener.host_gone(hostname, "the agent is no longer active on the Mesos master")
            for host in changes.up:
                listener.host_up(host)
        self.b.deliver(updates)

    def _flush(self, link: MesosLink) -> None:
        # Kills go before acknowledgements, and not for runs seen ended: the master forgets a
        # task once its end is acknowledged, and answers a later KILL with TASK_LOST.
        with self.b.lock:
            acks, wanted = self._acks, self._reconcile
            kills = [k for k in self._kills if value_of(k, "task_id") not in self.b.ended]
            implicit, self._implicit = self._implicit, False
            self._acks, self._kills, self._reconcile = [], [], []
        unsent = [k for k in kills if not self._call(link, "KILL", k)]
        for ack in acks:
            self._call(link, "ACKNOWLEDGE", ack)  # not sent: Mesos re-sends, acked again then
        size, later = max(1, self.b.config.reconcile_batch), []
        for i in range(0, len(wanted), size):
            if not self._call(link, "RECONCILE", {"tasks": wanted[i:i + size]}):
                later = wanted[i:]
                break
        implicit_later = implicit and not self._call(link, "RECONCILE", {"tasks": []})
        with self.b.lock:
            self._kills[:0] = unsent
            self._reconcile[:0] = later
            self._implicit = self._implicit or implicit_later

    def _decline_expired(self, link: MesosLink, now: float) -> None:
        with self.b.lock:
            old = self.b.offers.expired(now, self.b.config.offer_hold_secs)
        if old:
            self._call(link, "DECLINE", {"offer_ids": [{"value": o.offer_id} for o in old],
                                         "filters": {
                                             "refuse_seconds": self.b.config.decline_refuse_secs}})

    def _resend(self, now: float) -> None:
        with self.b.lock:
            due = [u for u, sent in self.b.own.values() if now - sent >= self.b.config.resend_secs]
            for update in due:
                self.b.own[update.uuid] = (update, now)
        self.b.deliver(due)
