"""What-if changes (CHANGES.yaml), and the planner that turns inputs into `Scenario`s.

    version: 1
    name: more-batch            # how the report labels this run
    changes:
      - pool: /batch            # edit a pool: only the values given change
        at: 0                   # seconds (or 90s, 15m, 2h, 1d) after t = 0; default 0
        resources:
          - {kind: cpu, reservation: 40, limit: 100, share: 2}
      - drain: {count: 10, labels: {zone: a}}   # maintenance: tasks move off first
        at: 2h
        batch: 5                # optional: 5 hosts at a time ...
        every: 10m              # ... every 10 minutes
      - remove: {group: general, count: 2}      # hosts vanish; their tasks are lost
      - add: {group: extra, count: 20, resources: {cpu: 32, mem_mb: 131072}}
      - preemption: false       # turn preemption off (or on)
      - scale_arrivals: 1.5     # 1.5x the arrival rate: submit times divided by 1.5

Host selectors (`drain`, `remove`) pick, among the hosts present and not yet
drained or removed at that time, those of `group` carrying every label of
`labels`, in cluster order (groups in file order, then added groups, hosts by
index); `count` takes the first N of them (default: all).  Asking for more hosts
than match is an error, as is an edit that breaks a pool-tree rule: a what-if
that cannot happen is refused before anything runs, naming `changes[i]`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from peloton.core.errors import InvalidArgument, PelotonError
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.respool.validation import parse_kind
from peloton.simulation.cluster import ClusterSpec, HostGroup, SimHost, group_from_data
from peloton.simulation.errors import InputError
from peloton.simulation.fields import Fields, check_version, kind_of, load_yaml, number, read_text
from peloton.simulation.pools import PoolsSpec
from peloton.simulation.scenario import (
    DEFAULT_EPOCH,
    DEFAULT_GRACE,
    DEFAULT_SAMPLE_INTERVAL,
    Action,
    AddHosts,
    DrainHosts,
    RemoveHosts,
    Scenario,
    SetPoolConfig,
    SetPreemption,
    describe,
)
from peloton.simulation.trace import Trace

VERSION = 1
BASELINE = "baseline"
_ACTIONS = ("pool", "drain", "remove", "add", "preemption", "scale_arrivals")
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(d|h|m|s)")
_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


# -- the parsed file -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceEdit:
    """New values for one resource kind of a pool; None leaves a value as it was."""

    kind: str
    reservation: float | None = None
    limit: float | None = None
    share: float | None = None


@dataclass(frozen=True, slots=True)
class PoolChange:
    """Edit pool `path` at `at`."""

    at: float
    path: str
    edits: tuple[ResourceEdit, ...]


@dataclass(frozen=True, slots=True)
class HostSelector:
    """Which hosts: of `group` (any if empty), carrying `labels`, the first `count` (all if None)."""

    count: int | None = None
    group: str = ""
    labels: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        parts = [f"group {self.group}"] if self.group else []
        parts += [f"{k}={v}" for k, v in self.labels]
        what = " ".join(parts) or "any"
        return f"{'all' if self.count is None else self.count} host(s) of {what}"


@dataclass(frozen=True, slots=True)
class HostChange:
    """Drain (`remove` False) or remove hosts at `at`, optionally `batch` at a time `every` seconds."""

    at: float
    remove: bool
    selector: HostSelector
    batch: int | None = None
    every: float = 0.0


@dataclass(frozen=True, slots=True)
class AddChange:
    """A new host group joins at `at`."""

    at: float
    group: HostGroup


@dataclass(frozen=True, slots=True)
class PreemptionChange:
    """Preemption on or off from `at`."""

    at: float
    enabled: bool


Change = PoolChange | HostChange | AddChange | PreemptionChange


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A what-if: its name, its timed changes (file order) and an arrival-rate factor."""

    name: str
    changes: tuple[Change, ...] = ()
    scale_arrivals: float = 1.0


def parse_seconds(value: object, field: str) -> float:
    """Seconds from a number or a duration like `90s`, `15m`, `2h`, `1d`, `1h30m` (>= 0)."""
    if isinstance(value, str):
        return _duration_text(value.strip(), field)
    seconds = number(value, field)
    if seconds < 0:
        raise InvalidArgument(f"must be >= 0, got {seconds:g}", field=field)
    return seconds


def _duration_text(text: str, field: str) -> float:
    try:
        return parse_seconds(float(text), field)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise InvalidArgument(f"must be seconds or a duration like 90s, 15m, 2h, 1d; got {text!r}",
                              field=field)
    return total


def _edits(fields: Fields) -> tuple[ResourceEdit, ...]:
    raw = fields.items("resources", required=True)
    if not raw:
        raise InvalidArgument("must list at least one resource kind to change",
                              field=fields.field("resources"))
    out: list[ResourceEdit] = []
    for i, item in enumerate(raw):
        entry = Fields(item, f"{fields.field('resources')}[{i}]", ("kind", "reservation", "limit", "share"))
        try:
            kind = parse_kind(entry.string("kind", required=True)).value
        except InvalidArgument as exc:
            raise InvalidArgument(exc.message, field=entry.field("kind")) from None
        values = {k: entry.number(k, minimum=0) if entry.has(k) else None
                  for k in ("reservation", "limit", "share")}
        if all(v is None for v in values.values()):
            raise InvalidArgument("give a reservation, limit or share to change", field=entry.prefix)
        if any(e.kind == kind for e in out):
            raise InvalidArgument(f"{kind} is changed twice in one change", field=entry.field("kind"))
        out.append(ResourceEdit(kind, **values))
    return tuple(out)


def _selector(data: object, prefix: str) -> HostSelector:
    fields = Fields(data, prefix, ("count", "group", "labels"))
    count = fields.integer("count", minimum=1) if fields.has("count") else None
    labels = fields.labels("labels")
    if count is None and not labels and not fields.has("group"):
        raise InvalidArgument("name a count, a group or labels (all hosts of the cluster is "
                              "not a what-if)", field=prefix)
    return HostSelector(count=count, group=fields.string("group"), labels=labels)


def _change(data: object, where: str) -> Change | float:
    """One change (a float is a scale_arrivals factor)."""
    if not isinstance(data, dict):
        raise InvalidArgument(f"must be a mapping, got {kind_of(data)}", field=where)
    actions = [k for k in _ACTIONS if k in data]
    if len(actions) != 1:
        raise InvalidArgument(f"must have exactly one of {', '.join(_ACTIONS)}; got "
                              f"{', '.join(actions) or 'none'}", field=where)
    action = actions[0]
    extra = {"pool": ("at", "resources"), "drain": ("at", "batch", "every"),
             "remove": ("at", "batch", "every"), "add": ("at",), "preemption": ("at",),
             "scale_arrivals": ()}[action]
    fields = Fields(data, where, (action, *extra))
    at = parse_seconds(fields.get("at"), fields.field("at")) if fields.has("at") else 0.0
    if action == "pool":
        path = fields.string("pool", required=True)
        return PoolChange(at, path, _edits(fields))
    if action in ("drain", "remove"):
        selector = _selector(fields.get(action, required=True), fields.field(action))
        batch = fields.integer("batch", minimum=1) if fields.has("batch") else None
        every = parse_seconds(fields.get("every"), fields.field("every")) if fields.has("every") else 0.0
        if every and batch is None:
            raise InvalidArgument("`every` needs `batch` (how many hosts at a time)",
                                  field=fields.field("every"))
        return HostChange(at, action == "remove", selector, batch, every)
    if action == "add":
        return AddChange(at, group_from_data(fields.get("add", required=True), fields.field("add")))
    if action == "preemption":
        return PreemptionChange(at, fields.boolean("preemption", True))
    return fields.number("scale_arrivals", required=True, positive=True)


def whatif_from_data(data: object) -> WhatIf:
    """A parsed CHANGES.yaml document."""
    fields = Fields(data, "", ("version", "name", "changes"))
    check_version(fields, VERSION, "what-if file")
    name = fields.string("name", "what-if")
    if not _LABEL.match(name) or name == BASELINE:
        raise InvalidArgument(f"name {name!r} must be 1-63 of A-Z a-z 0-9 . _ - and not "
                              f"{BASELINE!r}", field="name")
    changes: list[Change] = []
    scale: float | None = None
    raw = fields.items("changes", required=True)
    if not raw:
        raise InvalidArgument("must list at least one change", field="changes")
    for i, item in enumerate(raw):
        parsed = _change(item, f"changes[{i}]")
        if isinstance(parsed, float):
            if scale is not None:
                raise InvalidArgument("scale_arrivals may be given once", field=f"changes[{i}]")
            scale = parsed
        else:
            changes.append(parsed)
    return WhatIf(name, tuple(changes), scale or 1.0)


def read_whatif(text: str, source: str = "changes.yaml") -> WhatIf:
    """Parse CHANGES.yaml text; InputError naming the file and `changes[i].field`."""
    data = load_yaml(text, source)
    try:
        return whatif_from_data(data)
    except InvalidArgument as exc:
        raise InputError(source, exc.message, field=exc.field) from None


def load_whatif(path: str | Path) -> WhatIf:
    """Read CHANGES.yaml from `path`."""
    return read_whatif(read_text(path), str(path))


# -- applying changes (pure) ----------------------------------------------------------------
def scale_arrivals(trace: Trace, factor: float) -> Trace:
    """The trace with every submit time divided by `factor` (factor 2 = twice the arrival rate)."""
    if factor <= 0:
        raise InvalidArgument(f"arrival scale must be > 0, got {factor:g}", field="scale_arrivals")
    if factor == 1.0:
        return trace
    return replace(trace, jobs=tuple(replace(j, submit=j.submit / factor) for j in trace.jobs))


def edit_pool(config: ResourcePoolConfig, edits: Sequence[ResourceEdit]) -> ResourcePoolConfig:
    """`config` with the edited kinds' values replaced (other kinds and values untouched)."""
    resources = list(config.resources)
    for edit in edits:
        kind = parse_kind(edit.kind)
        current = config.resource(kind)
        new = ResourceConfig(
            kind=kind, type=current.type,
            reservation=current.reservation if edit.reservation is None else edit.reservation,
            limit=current.limit if edit.limit is None else edit.limit,
            share=current.share if edit.share is None else edit.share)
        index = next((i for i, rc in enumerate(resources) if rc.kind is kind), None)
        if index is None:
            resources.append(new)
        else:
            resources[index] = new
    return replace(config, resources=tuple(resources))


class _HostState:
    """Which hosts exist and which are still schedulable, as changes are applied in time order."""

    def __init__(self, hosts: Sequence[SimHost], groups: Sequence[str]) -> None:
        self.hosts: dict[str, SimHost] = {h.hostname: h for h in hosts}
        self.gone: set[str] = set()
        self.groups = set(groups)

    def select(self, selector: HostSelector, where: str, at: float) -> tuple[str, ...]:
        if selector.group and selector.group not in self.groups:
            raise InvalidArgument(f"no host group {selector.group!r} (groups: "
                                  f"{', '.join(sorted(self.groups))})", field=f"{where}.group")
        found = [h.hostname for h in self.hosts.values() if h.hostname not in self.gone
                 and (not selector.group or h.group == selector.group) and h.matches(selector.labels)]
        want = len(found) if selector.count is None else selector.count
        if not found or want > len(found):
            raise InvalidArgument(f"{selector} wanted at t={at:g}s, but {len(found)} such host(s) "
                                  "are left", field=where)
        chosen = tuple(found[:want])
        self.gone.update(chosen)
        return chosen

    def add(self, group: HostGroup, where: str) -> tuple[SimHost, ...]:
        if group.name in self.groups:
            raise InvalidArgument(f"host group {group.name!r} already exists", field=f"{where}.group")
        self.groups.add(group.name)
        hosts = group.hosts()
        self.hosts.update((h.hostname, h) for h in hosts)
        return hosts


def _host_actions(change: HostChange, hostnames: tuple[str, ...]) -> list[Action]:
    batch = change.batch or len(hostnames)
    out: list[Action] = []
    for step, start in enumerate(range(0, len(hostnames), batch)):
        chunk = hostnames[start:start + batch]
        at = change.at + step * change.every
        out.append(RemoveHosts(at, chunk) if change.remove else DrainHosts(at, chunk))
    return out


def resolve(whatif: WhatIf, cluster: ClusterSpec, pools: PoolsSpec) -> tuple[Action, ...]:
    """The what-if's changes as concrete actions, sorted by time (file order among ties).

    Changes are applied in time order (file order among equal times) against the
    cluster and pools as the earlier changes left them; InvalidArgument naming
    `changes[i]` when one cannot apply.
    """
    order = sorted(range(len(whatif.changes)), key=lambda i: (whatif.changes[i].at, i))
    state = _HostState(cluster.hosts(), [g.name for g in cluster.groups])
    current = pools
    actions: list[tuple[float, int, int, Action]] = []
    for i in order:
        change = whatif.changes[i]
        where = f"changes[{i}]"
        try:
            produced = _apply(change, where, state, current)
        except InvalidArgument as exc:
            raise InvalidArgument(exc.message, field=exc.field or where) from None
        for j, action in enumerate(produced):
            if isinstance(action, SetPoolConfig):
                current = current.with_config(action.path, action.config)
            actions.append((action.at, i, j, action))
    actions.sort(key=lambda entry: entry[:3])
    return tuple(a for _, _, _, a in actions)


def _apply(change: Change, where: str, state: _HostState, pools: PoolsSpec) -> list[Action]:
    if isinstance(change, PoolChange):
        try:
            spec = pools.get(change.path)
        except KeyError:
            raise InvalidArgument(f"no pool {change.path!r} in the pools file",
                                  field=f"{where}.pool") from None
        config = edit_pool(spec.config, change.edits)
        try:
            pools.with_config(change.path, config)
        except PelotonError as exc:
            raise InvalidArgument(exc.message, field=f"{where}.resources") from None
        return [SetPoolConfig(change.at, change.path, config, spec.config)]
    if isinstance(change, HostChange):
        kind = "remove" if change.remove else "drain"
        return _host_actions(change, state.select(change.selector, f"{where}.{kind}", change.at))
    if isinstance(change, AddChange):
        return [AddHosts(change.at, state.add(change.group, f"{where}.add"))]
    return [SetPreemption(change.at, change.enabled)]


# -- planning --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How runs are made: `horizon` None means the trace's ideal end plus `grace`."""

    seed: int = 0
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL
    horizon: float | None = None
    grace: float = DEFAULT_GRACE


def check_trace_pools(trace: Trace, pools: PoolsSpec) -> None:
    """Every job names a leaf pool of the pools file (InvalidArgument naming the first that does not)."""
    leaves = set(pools.leaves())
    for job in trace.jobs:
        if job.pool not in leaves:
            kind = ("an inner pool (jobs go to leaf pools)" if job.pool in pools.paths()
                    else "not in the pools file")
            raise InvalidArgument(f"trace job {job.job!r} names pool {job.pool}, which is {kind}; "
                                  f"leaf pools: {', '.join(sorted(leaves))}", field="pool")


def _default_horizon(trace: Trace, timeline: Sequence[Action], grace: float) -> float:
    last_action = max((a.at for a in timeline), default=0.0)
    return max(trace.ideal_end(), last_action) + grace


def _scenario(label: str, trace: Trace, cluster: ClusterSpec, pools: PoolsSpec,
              timeline: tuple[Action, ...], options: PlanOptions, horizon: float,
              whatif: WhatIf | None) -> Scenario:
    return Scenario(label=label, trace=trace, hosts=cluster.hosts(), pools=pools,
                    preemption=cluster.preemption, timeline=timeline, horizon=horizon,
                    sample_interval=options.sample_interval, seed=options.seed,
                    epoch=trace.header.start or DEFAULT_EPOCH,
                    changes=_change_lines(whatif, timeline),
                    arrival_scale=whatif.scale_arrivals if whatif else 1.0)


def _change_lines(whatif: WhatIf | None, timeline: Sequence[Action]) -> tuple[str, ...]:
    if whatif is None:
        return ()
    lines = [describe(a) for a in timeline]
    if whatif.scale_arrivals != 1.0:
        lines.append(f"arrivals x{whatif.scale_arrivals:g} (submit times divided by "
                     f"{whatif.scale_arrivals:g})")
    return tuple(lines)


def plan(trace: Trace, cluster: ClusterSpec, pools: PoolsSpec, whatif: WhatIf | None = None,
         options: PlanOptions = PlanOptions()) -> tuple[Scenario, Scenario | None]:
    """The baseline scenario and, with a what-if, the what-if scenario (same horizon for both).

    InvalidArgument when the trace names a pool that is not a leaf, or a change
    cannot apply (naming `changes[i]`).
    """
    check_trace_pools(trace, pools)
    if options.sample_interval <= 0:
        raise InvalidArgument(f"sample interval must be > 0, got {options.sample_interval:g}",
                              field="sample_interval")
    timeline: tuple[Action, ...] = ()
    changed = trace
    if whatif is not None:
        timeline = resolve(whatif, cluster, pools)
        changed = scale_arrivals(trace, whatif.scale_arrivals)
    horizon = options.horizon
    if horizon is None:
        horizon = max(_default_horizon(trace, (), options.grace),
                      _default_horizon(changed, timeline, options.grace))
    horizon = float(horizon)
    if horizon <= 0:
        raise InvalidArgument(f"horizon must be > 0, got {horizon:g}", field="horizon")
    baseline = _scenario(BASELINE, trace, cluster, pools, (), options, horizon, None)
    if whatif is None:
        return baseline, None
    return baseline, _scenario(whatif.name, changed, cluster, pools, timeline, options, horizon, whatif)

