"""The task life-cycle locks of AdminService: `Kill` and `Launch` (Peloton's lifecyclemgr).

`LifecycleGate` is the host manager as the job manager's goal-state actions, run
control and loops use it, with the two locks AdminService.Lockdown / RemoveLockdown
set:

* While `Kill` is locked every kill is refused with `KillLocked` ("kill op is
  locked", Peloton's text), so the action that asked fails and its goal-state key
  backs off and tries again, as Peloton's Kill and ShutdownExecutor did.  The refused
  kills are remembered and sent when the lock is removed, so a run left KILLING by a
  refused kill is not left running (Peloton relied on its retries alone).  API calls
  that stop tasks record the goal (KILLED) without failing (peloton/jobmgr/tasks.py),
  as Peloton's APIs only wrote goals.
* While `Launch` is locked the placement processor takes no placements (they wait in
  the resource manager) and so launches nothing.  Peloton accepted that lock but did
  not act on it ("Not supported yet" in its admin_svc.proto).

Every other method of the port goes to the real host manager unchanged.  Orphan runs
(runs of no known task) are killed by the status-event loop through the real host
manager, whatever the lock says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from peloton.core.errors import Unavailable
from peloton.core.ports import HostManagerPort

log = logging.getLogger(__name__)

#: Peloton's text (pkg/jobmgr/task/lifecyclemgr/v0_lifecyclemgr.go).
KILL_LOCKED = "kill op is locked"


class KillLocked(Unavailable):
    """A kill refused because AdminService has locked `Kill`."""


class LifecycleGate:
    """A HostManagerPort with AdminService's Kill and Launch locks (see the module doc)."""

    def __init__(self, hosts: HostManagerPort) -> None:
        self._hosts = hosts
        self.kill_locked = False
        self.launch_locked = False
        #: Kills refused while locked: run id -> grace seconds (the shortest asked).
        self._held: dict[str, float] = {}

    def lock_kill(self) -> None:
        """Refuse kills from now on."""
        self.kill_locked = True

    def unlock_kill(self) -> None:
        """Allow kills again, and send the ones refused meanwhile."""
        self.kill_locked = False
        held, self._held = self._held, {}
        by_grace: dict[float, list[str]] = {}
        for run_id, grace in held.items():
            by_grace.setdefault(grace, []).append(run_id)
        for grace, run_ids in sorted(by_grace.items()):
            log.info("Kill lock removed: killing %d runs refused meanwhile", len(run_ids))
            self._hosts.kill(sorted(run_ids), grace)

    def kill(self, run_ids: Sequence[str], grace_secs: float = 5.0) -> None:
        """Kill runs, unless kills are locked (KillLocked; they are sent at unlock)."""
        if self.kill_locked:
            for run_id in run_ids:
                self._held[run_id] = min(grace_secs, self._held.get(run_id, grace_secs))
            raise KillLocked(KILL_LOCKED)
        self._hosts.kill(run_ids, grace_secs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hosts, name)
