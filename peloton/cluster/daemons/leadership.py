"""Leader-only work of one daemon process: a fresh set of objects per leadership term.

The job, resource and host managers run as single leaders with warm
standbys (peloton-core.md §1).  A standby process is up, connected to
ZooKeeper and serving gRPC, but its APIs answer UNAVAILABLE "call to
non-leader node" (leader_gate) and it runs nothing else.

On `on_gained(epoch)` a term starts: the epoch is claimed in the store
(`claim`: a store holding a newer epoch refuses, and this candidate resigns),
the role's objects for this term are built (with a store fenced to this
term twice over: in process, peloton/common/fencing.py, and by the store
itself, peloton/storage/leader_store.py),
their recovery-first `start()` runs in the documented order (each daemon's
composition root owns it: the job manager recovers jobs before its engines
start, the resource manager loads its pools before its loops, the host
manager loads maintenance records and reconciles before it prunes), and
only then does the gate open.  On `on_lost` the gate closes first, then the
objects stop, newest first, and are dropped: a later term starts again from
storage, never from what an earlier one left in memory.

Without ZooKeeper (`election.zk_servers` empty) the process leads from the
start, as the only instance of its role.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from peloton.api.ports_grpc.leader_gate import LeaderGate, ServiceRecorder
from peloton.common.components import Component, Lifecycle
from peloton.common.fencing import Fence
from peloton.common.leader import Candidate, LeaderId

log = logging.getLogger(__name__)


@dataclass
class Term:
    """One leadership term's objects; `epoch` is set while it leads."""

    recorder: ServiceRecorder = field(default_factory=ServiceRecorder)
    parts: list[Component] = field(default_factory=list)
    epoch: int | None = None
    name: str = ""


#: Builds one term: registers its servicers on `term.recorder` and returns its components
#: (started in order, stopped in reverse); writes must go through `fence` and a store fenced
#: to `term.epoch` (Store.with_fencing).
TermBuilder = Callable[[Term, Fence], list[Component]]
#: Records a term's epoch in the store before the term starts: (ZooKeeper epoch, or None when
#: solo) -> the epoch of the term.  Raises when the store knows a newer one.
Claim = Callable[[int | None], int]


class Leadership:
    """Runs a role's terms while this process leads it; a `Component`."""

    def __init__(self, role: str, build: TermBuilder, *, client: KazooClient | None = None,
                 me: LeaderId | None = None, root: str = "/peloton",
                 claim: Claim | None = None) -> None:
        self.role = role
        self.name = f"leadership:{role}"
        self._build = build
        self._claim = claim
        self._candidate = (Candidate(client, role, me, root=root, on_gained=self._gained,
                                     on_lost=self._lost)
                           if client is not None and me is not None else None)
        self._next: Term | None = None
        self._current: tuple[Term, Lifecycle] | None = None
        self._solo_epoch = 0
        self.gate = LeaderGate(self._prepare().recorder.names)

    @property
    def leading(self) -> bool:
        """True while a term runs."""
        return self._current is not None

    @property
    def epoch(self) -> int | None:
        """The running term's epoch (ZooKeeper's zxid of the claim; a counter when solo)."""
        return self._current[0].epoch if self._current is not None else None

    def start(self) -> None:
        """Join the election (or, solo, lead at once)."""
        if self._candidate is not None:
            self._candidate.start()
        else:
            self._solo_epoch += 1
            self._gained(self._solo_epoch)

    def stop(self) -> None:
        """Leave the election; the running term (if any) stops first."""
        if self._candidate is not None:
            self._candidate.stop()
        else:
            self._lost()

    # -- terms ---------------------------------------------------------------------------------
    def _prepare(self) -> Term:
        """Build the next term's objects now (the first one: its service names set up the
        gate before the gRPC server starts)."""
        if self._next is None:
            term = Term()
            fence = Fence(lambda: self._is_current(term), f"{self.role} term")
            term.parts = self._build(term, fence)
            self._next = term
        return self._next

    def _is_current(self, term: Term) -> bool:
        if term.epoch is None:
            return False
        if self._candidate is None:
            return True  # solo: the term is current from its start until its stop
        return self._candidate.epoch == term.epoch  # None as soon as ZooKeeper drops us

    def _gained(self, epoch: int) -> None:
        if self._claim is not None:
            # Solo epochs restart at 1 with the process; the store's count continues.
            epoch = self._claim(epoch if self._candidate is not None else None)
        term = self._prepare()
        self._next = None
        term.epoch = epoch
        term.name = f"{self.role}@{epoch}"
        lifecycle = Lifecycle(term.parts, name=term.name)
        log.info("%s: leading (epoch %d): recovering and starting", self.role, epoch)
        try:
            lifecycle.start()  # recovery first; a failure stops what started and re-raises
        except BaseException:
            term.epoch = None
            raise
        self._current = (term, lifecycle)
        # The solo term id must differ across restarts of the process (its epochs restart
        # at 1); ZooKeeper epochs only grow, so they identify a term on their own.
        term_id = str(epoch) if self._candidate is not None else uuid.uuid4().hex
        self.gate.open(term_id, term.recorder)
        log.info("%s: leader (epoch %d), serving %s", self.role, epoch,
                 ", ".join(term.recorder.names))

    def _lost(self) -> None:
        self.gate.close()
        current, self._current = self._current, None
        if current is None:
            return
        term, lifecycle = current
        log.warning("%s: no longer leader (epoch %s): stopping", self.role, term.epoch)
        try:
            lifecycle.stop()
        finally:
            term.epoch = None
