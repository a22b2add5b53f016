"""The Mesos agents the backend reports as hosts, kept in step with the master's agent list.

Capacity comes from the operator API (GET_AGENTS: each agent's total
resources our role may use), not from offers: an offer shows only what is
free at that moment, while the host manager books a host's whole capacity
and subtracts what its runs hold, which also stays right after a restart
(adopted runs are booked again; the offers never showed them).  This is
what Peloton's own Mesos plugin does (agent syncer over GET_AGENTS).

- An active agent is a host; a new or changed one is reported `host_up`.
- An agent that left the list, or is listed inactive (disconnected), is
  `host_gone`; one the master lists as recovered (it failed over and the
  agent has not re-registered yet) is neither: it keeps its last state.
- A hostname that comes back under a new agent id is simply up again.
- Every agent id ever seen keeps its hostname, so a status update from an
  agent that just went away still names its host.
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.hostmgr.backends.base import BackendHost
from peloton.hostmgr.backends.mesos_wire import Json, host_from_agent_json, value_of


@dataclass(frozen=True, slots=True)
class HostChanges:
    """What one refresh changed: hosts to report up, hostnames to report gone."""

    up: tuple[BackendHost, ...] = ()
    gone: tuple[str, ...] = ()


class HostTable:
    """Hosts by hostname, plus agent id -> hostname.  Not thread-safe (the backend's lock)."""

    def __init__(self, role: str) -> None:
        self.role = role
        self._hosts: dict[str, BackendHost] = {}
        self._names: dict[str, str] = {}

    def get(self, hostname: str) -> BackendHost | None:
        """The host reported up under this name, if any."""
        return self._hosts.get(hostname)

    def hosts(self) -> list[BackendHost]:
        """Every host reported up."""
        return list(self._hosts.values())

    def name_of(self, agent_id: str) -> str:
        """The hostname of any agent seen so far ("" if never seen)."""
        return self._names.get(agent_id, "")

    def note(self, agent_id: str, hostname: str) -> None:
        """Remember an agent's hostname seen elsewhere (an offer)."""
        if agent_id and hostname:
            self._names.setdefault(agent_id, hostname)

    def apply(self, answer: Json) -> HostChanges:
        """Bring the table in step with a GET_AGENTS answer."""
        listing = answer.get("get_agents", {})
        active: dict[str, BackendHost] = {}
        for agent in listing.get("agents", []):
            host = host_from_agent_json(agent, self.role)
            self._names[host.agent_id] = host.hostname
            if agent.get("active", True):
                active[host.hostname] = host
        recovering = {str(info.get("hostname", "")) for info in listing.get("recovered_agents", [])}
        for info in listing.get("recovered_agents", []):
            self.note(value_of(info, "id"), str(info.get("hostname", "")))
        gone = tuple(h for h in self._hosts if h not in active and h not in recovering)
        up = tuple(h for h in active.values() if self._hosts.get(h.hostname) != h)
        for hostname in gone:
            del self._hosts[hostname]
        self._hosts.update((h.hostname, h) for h in up)
        return HostChanges(up, gone)

    def lose(self, agent_id: str) -> str:
        """The master says the agent is gone (FAILURE): its hostname if it was up, else ""."""
        hostname = self._names.get(agent_id, "")
        host = self._hosts.get(hostname)
        if host is None or host.agent_id != agent_id:
            return ""
        del self._hosts[hostname]
        return hostname

    def clear(self) -> None:
        """Forget the hosts reported up (a new start reports them all again)."""
        self._hosts.clear()
