"""Knobs of the host manager (Peloton's config/hostmgr, shortened where Peloton's values
were sized for Mesos offer cycles rather than for a placement round of a few milliseconds)."""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class HostManagerConfig:
    """Timing, sizes and the expected consumers of the status stream."""

    #: A lease not committed or released within this many seconds is taken back
    #: (Peloton holds a PLACING host for 300 s; a round here takes milliseconds).
    lease_timeout: float = 60.0
    #: A reservation whose run is not launched within this many seconds is freed.
    reservation_timeout: float = 300.0
    #: How often expired leases and reservations are looked for (seconds).
    prune_interval: float = 1.0
    #: Status events kept until every consumer acknowledged them (Peloton's 100,000).
    event_buffer_size: int = 100_000
    #: Consumers whose acknowledgement is awaited from the start, even before they
    #: subscribe, so nothing is acknowledged to the backend that they never saw.
    consumers: tuple[str, ...] = ("jobmgr",)
    #: A member consumer (`<consumer>@<member>`: each job manager of an all-active cluster)
    #: not heard from for this many seconds is no longer waited for (events.py); longer
    #: than the members' ZooKeeper session.
    member_idle_timeout: float = 60.0
    #: Implicit reconciliation (every run re-reported) every this many seconds; 0 = only at start.
    reconcile_interval: float = 1800.0
    #: After start, a DRAINING host is not declared empty until this many seconds have passed,
    #: so the runs the backend re-reports after a restart are known before anyone concludes.
    recovery_grace: float = 10.0
    #: A kill for a run no host has reported yet is remembered this long (it may re-register).
    pending_kill_ttl: float = 3600.0
    #: A host a launch could not get to is not offered until it is heard from (a heartbeat,
    #: a re-registration) or for this many seconds (backends that report no heartbeats);
    #: longer than the backend's heartbeat timeout, so a dead agent is gone before it ends.
    unreached_hold: float = 30.0

    def __post_init__(self) -> None:
        for name in ("lease_timeout", "reservation_timeout", "prune_interval",
                     "member_idle_timeout"):
            if getattr(self, name) <= 0:
                raise InvalidArgument(f"{name} must be > 0", field=name)
        for name in ("reconcile_interval", "recovery_grace", "pending_kill_ttl",
                     "unreached_hold"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be >= 0", field=name)
        if self.event_buffer_size < 1:
            raise InvalidArgument("event_buffer_size must be >= 1", field="event_buffer_size")
