"""Core host-side values <-> pelotonpy.internal.sched messages: the host manager's side.

Offers, reservations, host records and summaries, task specs and launches,
and status-stream events; see private_sched.py for the conventions (plain
field copies, enums as their values, shared objects through tables).  The
runs of one launch usually share a TaskSpec (one per job config version), so
specs travel in a table (`SpecTable`) the same way needs do.
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.api.convert.private_sched import (
    constraint_from_pb,
    constraint_to_pb,
    enum_from_pb,
    labels_from_pb,
    labels_to_pb,
    resources_from_pb,
    resources_to_pb,
    task_id_from_pb,
    task_id_to_pb,
)
from peloton.api.gen.pelotonpy.internal.sched import sched_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.evolve import constructor
from peloton.core.model.host import HostInfo, HostOffer
from peloton.core.model.resources import PortRange
from peloton.core.model.sched import HostReservation, LaunchFailure, LaunchSpec
from peloton.core.model.task import (
    CommandSpec,
    HealthCheckSpec,
    HealthCheckType,
    PortSpec,
    RestartPolicy,
    TaskSpec,
    UriSpec,
    VolumeSpec,
)
from peloton.core.ports import HostEvent, HostSummary
from peloton.core.states import HostState, TaskState


# -- offers and reservations --------------------------------------------------------------------
def offer_to_pb(o: HostOffer) -> pb.HostOffer:
    """HostOffer -> message."""
    return pb.HostOffer(
        hostname=o.hostname, agent_id=o.agent_id, capacity=resources_to_pb(o.capacity),
        available=resources_to_pb(o.available),
        ports=[pb.PortRange(begin=r.begin, end=r.end) for r in o.ports],
        labels=labels_to_pb(o.labels), state=o.state.value, revocable_cpu=o.revocable_cpu,
        task_labels=[pb.LabelCount(label=pb.Label(key=lb.key, value=lb.value), count=n)
                     for lb, n in o.task_labels])


def offer_from_pb(m: pb.HostOffer) -> HostOffer:
    """Message -> HostOffer."""
    return HostOffer(
        m.hostname, m.agent_id, resources_from_pb(m.capacity), resources_from_pb(m.available),
        tuple(PortRange(r.begin, r.end) for r in m.ports), labels_from_pb(m.labels),
        enum_from_pb(HostState, m.state, "offer.state"), m.revocable_cpu,
        tuple((Label(c.label.key, c.label.value), c.count) for c in m.task_labels))


def reservation_to_pb(r: HostReservation) -> pb.HostReservation:
    """HostReservation -> message."""
    return pb.HostReservation(hostname=r.hostname, task_id=task_id_to_pb(r.task_id),
                              run_id=r.run_id, resources=resources_to_pb(r.resources),
                              ports=list(r.ports), revocable=r.revocable,
                              labels=labels_to_pb(r.labels))


def reservation_from_pb(m: pb.HostReservation) -> HostReservation:
    """Message -> HostReservation."""
    return HostReservation(m.hostname, task_id_from_pb(m.task_id), m.run_id,
                           resources_from_pb(m.resources), tuple(m.ports), m.revocable,
                           labels_from_pb(m.labels))


# -- host records ------------------------------------------------------------------------------
def host_info_to_pb(h: HostInfo) -> pb.HostInfo:
    """HostInfo -> message."""
    return pb.HostInfo(hostname=h.hostname, ip=h.ip, state=h.state.value,
                       goal_state=h.goal_state.value, labels=labels_to_pb(h.labels),
                       current_pool=h.current_pool, desired_pool=h.desired_pool)


def host_info_from_pb(m: pb.HostInfo) -> HostInfo:
    """Message -> HostInfo."""
    return HostInfo(m.hostname, m.ip, enum_from_pb(HostState, m.state, "host.state"),
                    enum_from_pb(HostState, m.goal_state, "host.goal_state"),
                    labels_from_pb(m.labels), m.current_pool, m.desired_pool)


def summary_to_pb(s: HostSummary) -> pb.HostSummary:
    """HostSummary -> message."""
    return pb.HostSummary(info=host_info_to_pb(s.info), capacity=resources_to_pb(s.capacity),
                          allocated=resources_to_pb(s.allocated), agent_id=s.agent_id,
                          connected=s.connected, tasks=s.tasks)


def summary_from_pb(m: pb.HostSummary) -> HostSummary:
    """Message -> HostSummary."""
    return HostSummary(host_info_from_pb(m.info), resources_from_pb(m.capacity),
                       resources_from_pb(m.allocated), m.agent_id, m.connected, m.tasks)


# -- task specs and launches -------------------------------------------------------------------
def task_spec_to_pb(s: TaskSpec) -> pb.TaskSpec:
    """TaskSpec -> message (every field)."""
    c = s.command
    msg = pb.TaskSpec(
        name=s.name, resources=resources_to_pb(s.resources), fd_limit=s.fd_limit,
        ports=[pb.PortSpec(name=p.name, value=p.value, env_name=p.env_name) for p in s.ports],
        command=pb.CommandSpec(value=c.value, shell=c.shell, arguments=list(c.arguments),
                               environment=[pb.EnvVar(name=k, value=v) for k, v in c.environment],
                               uris=[u.value for u in c.uris], user=c.user,
                               fetch=[pb.UriSpec(value=u.value, executable=u.executable,
                                                 extract=u.extract, cache=u.cache,
                                                 output_file=u.output_file)
                                      for u in c.uris]),
        container_image=s.container_image, executor_data=s.executor_data,
        max_failures=s.restart_policy.max_failures, labels=labels_to_pb(s.labels),
        controller=s.controller, kill_grace_period_secs=s.kill_grace_period_secs,
        preemptible=s.preemptible, kill_on_preempt=s.kill_on_preempt, revocable=s.revocable)
    if s.constraint is not None:
        msg.constraint.CopyFrom(constraint_to_pb(s.constraint))
    if (h := s.health_check) is not None:
        msg.health_check.CopyFrom(pb.HealthCheckSpec(
            type=h.type.value, enabled=h.enabled, initial_interval_secs=h.initial_interval_secs,
            interval_secs=h.interval_secs, timeout_secs=h.timeout_secs,
            max_consecutive_failures=h.max_consecutive_failures, command=h.command,
            http_scheme=h.http_scheme, http_port=h.http_port, http_path=h.http_path))
    if s.volume is not None:
        msg.volume.CopyFrom(pb.VolumeSpec(container_path=s.volume.container_path,
                                          size_mb=s.volume.size_mb))
    return msg


def _uris_from_pb(c: pb.CommandSpec) -> tuple[UriSpec, ...]:
    if not c.fetch:  # written before `fetch` existed: the URLs alone
        return tuple(UriSpec(u) for u in c.uris)
    return tuple(UriSpec(u.value, u.executable, u.extract, u.cache, u.output_file)
                 for u in c.fetch)


def task_spec_from_pb(m: pb.TaskSpec) -> TaskSpec:
    """Message -> TaskSpec."""
    c = m.command
    health = None
    if m.HasField("health_check"):
        h = m.health_check
        health = HealthCheckSpec(enum_from_pb(HealthCheckType, h.type, "health_check.type"),
                                 h.enabled, h.initial_interval_secs, h.interval_secs,
                                 h.timeout_secs, h.max_consecutive_failures, h.command,
                                 h.http_scheme, h.http_port, h.http_path)
    return TaskSpec(
        name=m.name, resources=resources_from_pb(m.resources), fd_limit=m.fd_limit,
        ports=tuple(PortSpec(p.name, p.value, p.env_name) for p in m.ports),
        command=CommandSpec(c.value, c.shell, tuple(c.arguments),
                            tuple((e.name, e.value) for e in c.environment), _uris_from_pb(c), c.user),
        container_image=m.container_image, executor_data=bytes(m.executor_data),
        constraint=constraint_from_pb(m.constraint) if m.HasField("constraint") else None,
        health_check=health, restart_policy=RestartPolicy(m.max_failures),
        labels=labels_from_pb(m.labels), controller=m.controller,
        kill_grace_period_secs=m.kill_grace_period_secs, preemptible=m.preemptible,
        kill_on_preempt=m.kill_on_preempt, revocable=m.revocable,
        volume=(VolumeSpec(m.volume.container_path, m.volume.size_mb)
                if m.HasField("volume") else None))


class SpecTable:
    """Collects distinct task specs while launches are written; `messages` is the table."""

    def __init__(self) -> None:
        self._index: dict[int, int] = {}
        self._keep: list[TaskSpec] = []  # keeps ids stable while the table is being built
        self.messages: list[pb.TaskSpec] = []

    def ref(self, spec: TaskSpec) -> int:
        """The table position of `spec`, adding it on first sight."""
        pos = self._index.get(id(spec))
        if pos is None:
            pos = self._index[id(spec)] = len(self.messages)
            self._keep.append(spec)
            self.messages.append(task_spec_to_pb(spec))
        return pos


def launches_to_pb(tasks: Sequence[LaunchSpec]) -> tuple[list[pb.TaskSpec], list[pb.LaunchSpec]]:
    """Launches -> (spec table, launch messages)."""
    table = SpecTable()
    out = launches_into_pb(tasks, table)
    return table.messages, out


def launches_into_pb(tasks: Sequence[LaunchSpec], table: SpecTable) -> list[pb.LaunchSpec]:
    """Launches -> launch messages whose specs go to `table` (shared by several lists: an
    adoption of many hosts)."""
    out = []
    new, ref = pb.LaunchSpec, table.ref
    for t in tasks:
        # Only the fields most runs have: passing empty ports and volume fields too made
        # a recovery's adoption of a million runs cost 2.1 us a run instead of 1.3.
        msg = new(run_id=t.run_id, spec=ref(t.spec), pool=t.pool)
        if t.ports:
            msg.ports.extend([pb.NamedPort(name=n, port=p) for n, p in t.ports])
        if t.volume_id or t.volume_created:
            msg.volume_id, msg.volume_created = t.volume_id, t.volume_created
        out.append(msg)
    return out


def launches_from_pb(specs: Sequence[pb.TaskSpec],
                     tasks: Sequence[pb.LaunchSpec]) -> list[LaunchSpec]:
    """(spec table, launch messages) -> launches sharing one TaskSpec per table entry."""
    return launches_from_table([task_spec_from_pb(s) for s in specs], tasks)


def launches_from_table(decoded: Sequence[TaskSpec],
                        tasks: Sequence[pb.LaunchSpec]) -> list[LaunchSpec]:
    """Launch messages -> launches, their specs from a decoded table (`task_spec_from_pb`
    of each entry, decoded once for several lists)."""
    out = []
    for t in tasks:
        if t.spec >= len(decoded):
            raise InvalidArgument(f"run {t.run_id}: spec index {t.spec} outside a table of "
                                  f"{len(decoded)}", field="spec")
        out.append(_launch_spec(t.run_id, decoded[t.spec],
                                tuple((p.name, p.port) for p in t.ports), t.pool, t.volume_id,
                                t.volume_created))
    return out


#: Built per run of a launch or an adoption (a restart adopts a million).
_launch_spec = constructor(LaunchSpec)


def launch_failure_to_pb(f: LaunchFailure) -> pb.LaunchFailure:
    """LaunchFailure -> message."""
    return pb.LaunchFailure(run_id=f.run_id, reason=f.reason, unreached=f.unreached)


def launch_failure_from_pb(m: pb.LaunchFailure) -> LaunchFailure:
    """Message -> LaunchFailure."""
    return LaunchFailure(m.run_id, m.reason, unreached=m.unreached)


# -- the status stream ----------------------------------------------------------------------------
def event_to_pb(e: HostEvent) -> pb.HostEvent:
    """HostEvent -> message."""
    msg = pb.HostEvent(offset=e.offset, run_id=e.run_id, state=e.state.value, hostname=e.hostname,
                       agent_id=e.agent_id, timestamp=e.timestamp, message=e.message,
                       reason=e.reason, healthy=e.healthy)
    if e.exit_code is not None:
        msg.exit_code = e.exit_code
    return msg


#: HostEvent built without the frozen `__init__`'s machinery (core/model/evolve.py), and
#: task states by value: a job manager decodes every status event of its jobs (~2 us each,
#: from ~3.3).
_new_event = constructor(HostEvent)
_TASK_STATES = {s.value: s for s in TaskState}


def event_from_pb(m: pb.HostEvent) -> HostEvent:
    """Message -> HostEvent (InvalidArgument "event.state" for an unknown state)."""
    state = _TASK_STATES.get(m.state)
    if state is None:
        state = enum_from_pb(TaskState, m.state, "event.state")  # raises
    return _new_event(m.offset, m.run_id, state, m.hostname, m.agent_id, m.timestamp,
                      m.message, m.reason, m.exit_code if m.HasField("exit_code") else None,
                      m.healthy)
