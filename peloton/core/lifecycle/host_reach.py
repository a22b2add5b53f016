"""Whether the host manager can reach a host, as a table: what each backend event does to it,
and which states count the host as connected or offer it to placement.

A host is CONNECTED from its registration until the backend reports it gone.  An agent
killed -9 stays registered until its heartbeats time out (seconds), and looks empty the
whole time, so placement would keep choosing it and every launch there would end LOST
before it started.  So a launch the backend could not get to the host (routing.py's
`unreached`: connection refused, not connected, no such agent) makes it UNREACHED: still
connected (its capacity counts, its runs stay booked, kills are still sent), but not
offered until it is heard from again:

    event          DISCONNECTED   CONNECTED      UNREACHED
    REGISTERED     CONNECTED      CONNECTED      CONNECTED
    HEARD          DISCONNECTED   CONNECTED      CONNECTED
    UNREACHED      DISCONNECTED   UNREACHED      UNREACHED
    HOLD_EXPIRED   DISCONNECTED   CONNECTED      CONNECTED
    GONE           DISCONNECTED   DISCONNECTED   DISCONNECTED

- HEARD is a sign of life the backend reports (`HostEventListener.host_seen`: our agents'
  heartbeats and status reports), so a healthy host whose one call failed comes back
  within a heartbeat.  It does not reconnect a host the backend reported gone: only a
  registration does (the backend asks a host it has forgotten to register again).
- HOLD_EXPIRED: the host manager gives a host up as unreached for only so long
  (`HostManagerConfig.unreached_hold`), for backends that report no heartbeats (Mesos,
  Kubernetes: their launches fail only for a host they no longer list, and a host listed
  again is REGISTERED) and for a registration that overtook the failed launch.
"""

from __future__ import annotations

from enum import StrEnum


class Reach(StrEnum):
    """Whether a host can be reached, as far as the host manager knows."""

    #: Not registered with the backend: never reported, or reported gone.
    DISCONNECTED = "disconnected"
    #: Registered, and no launch has failed to get to it since it was last heard from.
    CONNECTED = "connected"
    #: Registered, but a launch could not get to it since it was last heard from.
    UNREACHED = "unreached"


class ReachEvent(StrEnum):
    """What the host manager learns about a host's reachability."""

    #: The backend reported the host (re-)registered (`host_up`).
    REGISTERED = "registered"
    #: The backend heard from the host (`host_seen`: a heartbeat, a status report).
    HEARD = "heard"
    #: A launch on the host did not get to it (the backend raised NotFound or Unavailable).
    UNREACHED = "unreached"
    #: The host was UNREACHED for `unreached_hold` seconds without being heard from.
    HOLD_EXPIRED = "hold_expired"
    #: The backend reported the host gone (`host_gone`).
    GONE = "gone"


R, E = Reach, ReachEvent

#: state -> event -> next state; every pair is named (a test walks them).
REACH: dict[Reach, dict[ReachEvent, Reach]] = {
    R.DISCONNECTED: {E.REGISTERED: R.CONNECTED, E.HEARD: R.DISCONNECTED,
                     E.UNREACHED: R.DISCONNECTED, E.HOLD_EXPIRED: R.DISCONNECTED,
                     E.GONE: R.DISCONNECTED},
    R.CONNECTED: {E.REGISTERED: R.CONNECTED, E.HEARD: R.CONNECTED, E.UNREACHED: R.UNREACHED,
                  E.HOLD_EXPIRED: R.CONNECTED, E.GONE: R.DISCONNECTED},
    R.UNREACHED: {E.REGISTERED: R.CONNECTED, E.HEARD: R.CONNECTED, E.UNREACHED: R.UNREACHED,
                  E.HOLD_EXPIRED: R.CONNECTED, E.GONE: R.DISCONNECTED},
}

#: States in which the host is registered with the backend: its capacity counts toward the
#: cluster's, kills are sent to it, launches are tried there.
CONNECTED = frozenset({R.CONNECTED, R.UNREACHED})
#: States in which the host may be offered to placement (if UP, schedulable, unleased, with room).
OFFERED = frozenset({R.CONNECTED})


def next_reach(state: Reach, event: ReachEvent) -> Reach:
    """The state after `event`."""
    return REACH[state][event]
