"""v0 host.HostInfo <-> core HostInfo, and HostState <-> HOST_STATE_*.

HOST_STATE_INVALID (0) has no core meaning: it is refused on the way in and
never written.  The core UNKNOWN is HOST_STATE_UNKNOWN.
"""

from __future__ import annotations

from peloton.api.convert.common import labels_from_wire
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.host import HostInfo
from peloton.core.states import HostState

_TO_V0: dict[HostState, host_pb2.HostState] = {
    HostState.UNKNOWN: host_pb2.HOST_STATE_UNKNOWN, HostState.UP: host_pb2.HOST_STATE_UP,
    HostState.DRAINING: host_pb2.HOST_STATE_DRAINING, HostState.DRAINED: host_pb2.HOST_STATE_DRAINED,
    HostState.DOWN: host_pb2.HOST_STATE_DOWN}
_FROM_V0: dict[int, HostState] = {int(v): k for k, v in _TO_V0.items()}


def host_state_to_v0(state: HostState) -> host_pb2.HostState:
    """Core HostState -> HOST_STATE_*."""
    return _TO_V0[state]


def host_state_from_v0(value: int, field: str = "state") -> HostState:
    """HOST_STATE_* -> core (HOST_STATE_INVALID is refused)."""
    try:
        return _FROM_V0[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not a host state: {value}", field=field) from None


def host_info_from_v0(info: host_pb2.HostInfo) -> HostInfo:
    """A v0 HostInfo -> core HostInfo."""
    if not info.hostname:
        raise InvalidArgument("hostname is required", field="hostname")
    return HostInfo(hostname=info.hostname, ip=info.ip,
                    state=host_state_from_v0(info.state, "state"),
                    goal_state=host_state_from_v0(info.goal_state, "goal_state"),
                    labels=labels_from_wire(info.labels), current_pool=info.current_pool,
                    desired_pool=info.desired_pool)


def host_info_to_v0(host: HostInfo) -> host_pb2.HostInfo:
    """A core HostInfo -> v0 HostInfo."""
    out = host_pb2.HostInfo(hostname=host.hostname, ip=host.ip, state=_TO_V0[host.state],
                            goal_state=_TO_V0[host.goal_state], current_pool=host.current_pool,
                            desired_pool=host.desired_pool)
    for label in host.labels:
        out.labels.add(key=label.key, value=label.value)
    return out
