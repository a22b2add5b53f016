"""The simulated cluster: groups of identical hosts (CLUSTER.yaml), and the hosts they expand to.

    version: 1
    preemption: true            # may the resource manager preempt (default true, as resmgr)
    hosts:
      - group: general          # hosts general-00000, general-00001, ...
        count: 90
        resources: {cpu: 32, mem_mb: 131072, disk_mb: 1000000}
        labels: {zone: [a, b, c], kind: general}   # a list is dealt round-robin

A label whose value is a list gives host i of the group the value at i modulo the
list's length, so zones or racks can be spread without listing every host.
Expansion is deterministic: groups in file order, hosts in index order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.resources import Resources
from peloton.simulation.errors import InputError
from peloton.simulation.fields import Fields, check_version, join, load_yaml, read_text, scalar_text

VERSION = 1
#: Group names become host name prefixes: lower-case letters, digits and dashes.
GROUP_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62})$")
#: Largest host count of one group (a simulated host is cheap, but not free).
MAX_GROUP_HOSTS = 1_000_000


@dataclass(frozen=True, slots=True)
class HostGroup:
    """`count` identical hosts; each label has one value or a list dealt round-robin."""

    name: str
    count: int
    resources: Resources
    labels: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def host_labels(self, index: int) -> tuple[Label, ...]:
        """The labels of host `index` of the group (sorted by key)."""
        return tuple(Label(key, values[index % len(values)]) for key, values in self.labels)

    def hostname(self, index: int) -> str:
        """`<group>-<index, five digits>`."""
        return f"{self.name}-{index:05d}"

    def hosts(self) -> tuple[SimHost, ...]:
        """Every host of the group, in index order."""
        return tuple(SimHost(self.hostname(i), self.name, self.resources, self.host_labels(i))
                     for i in range(self.count))


@dataclass(frozen=True, slots=True)
class SimHost:
    """One simulated host: its name, group, capacity and labels."""

    hostname: str
    group: str
    resources: Resources
    labels: tuple[Label, ...] = ()

    def matches(self, labels: Iterable[tuple[str, str]]) -> bool:
        """The host carries every `(key, value)` given."""
        own = {(lb.key, lb.value) for lb in self.labels}
        return all(pair in own for pair in labels)


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """The cluster a simulation starts with."""

    groups: tuple[HostGroup, ...]
    preemption: bool = True

    def hosts(self) -> tuple[SimHost, ...]:
        """Every host, groups in file order."""
        return tuple(h for g in self.groups for h in g.hosts())

    def capacity(self) -> Resources:
        """Total resources of every host."""
        total = Resources()
        for group in self.groups:
            total = total + group.resources.scale(group.count)
        return total

    @property
    def host_count(self) -> int:
        """Number of hosts."""
        return sum(g.count for g in self.groups)


def group_from_data(data: object, prefix: str) -> HostGroup:
    """One host group mapping (shared by CLUSTER.yaml and the what-if `add` change)."""
    fields = Fields(data, prefix, ("group", "count", "resources", "labels"))
    name = fields.string("group", required=True)
    if not GROUP_NAME.match(name):
        raise InvalidArgument(f"group name {name!r} must be 1-63 of a-z 0-9 - (host names are "
                              "<group>-00000, ...)", field=fields.field("group"))
    count = fields.integer("count", required=True, minimum=1)
    if count > MAX_GROUP_HOSTS:
        raise InvalidArgument(f"must be at most {MAX_GROUP_HOSTS:,}, got {count:,}",
                              field=fields.field("count"))
    resources = fields.resources("resources", required=True)
    if resources.is_zero():
        raise InvalidArgument("a host needs some cpu, memory, disk or gpu",
                              field=fields.field("resources"))
    return HostGroup(name, count, resources, _group_labels(fields))


def _group_labels(fields: Fields) -> tuple[tuple[str, tuple[str, ...]], ...]:
    raw = fields.get("labels")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise InvalidArgument("must be a mapping of label key to a value or a list of values",
                              field=fields.field("labels"))
    out = []
    for key, value in raw.items():
        where = join(fields.field("labels"), str(key))
        if isinstance(value, list):
            if not value:
                raise InvalidArgument("a list of values must not be empty", field=where)
            values = tuple(scalar_text(v, f"{where}[{i}]") for i, v in enumerate(value))
        else:
            values = (scalar_text(value, where),)
        out.append((str(key), values))
    return tuple(sorted(out))


def cluster_from_data(data: object) -> ClusterSpec:
    """A parsed CLUSTER.yaml document."""
    fields = Fields(data, "", ("version", "preemption", "hosts"))
    check_version(fields, VERSION, "cluster file")
    raw_groups = fields.items("hosts", required=True)
    if not raw_groups:
        raise InvalidArgument("must list at least one host group", field="hosts")
    groups: list[HostGroup] = []
    for i, raw in enumerate(raw_groups):
        group = group_from_data(raw, f"hosts[{i}]")
        if any(g.name == group.name for g in groups):
            raise InvalidArgument(f"group {group.name!r} is defined twice", field=f"hosts[{i}].group")
        groups.append(group)
    return ClusterSpec(tuple(groups), preemption=fields.boolean("preemption", True))


def read_cluster(text: str, source: str = "cluster.yaml") -> ClusterSpec:
    """Parse CLUSTER.yaml text; InputError naming the file and field."""
    data = load_yaml(text, source)
    try:
        return cluster_from_data(data)
    except InvalidArgument as exc:
        raise InputError(source, exc.message, field=exc.field) from None


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read CLUSTER.yaml from `path`."""
    return read_cluster(read_text(path), str(path))

