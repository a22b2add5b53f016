"""The counterfactuals: each a change to the snapshot that might start the target sooner.

`candidates` picks, from the snapshot alone, one change of each kind that applies:

* more reservation on the target's pool: enough to hold what the pool uses now plus the
  gang's need, on every kind it asks for (`reservation_needed`; the pool's ancestors get
  as much more, limits are raised to match);
* a lower-priority job stopped: of the jobs running below the target's priority, the
  one holding the most cpu (its queued tasks go too);
* hosts of a shape added: the shape of the largest host (or a host just big enough),
  as many as the target's pending tasks need;
* fewer instances: the first half of the job's pending instances, for a
  forecast of the whole job only (for some of its instances, the others are not theirs to
  give up: the change would say nothing about them);
* smaller resources: the targets asking for half (the whole job's pending tasks, or the
  instances asked about).

Each is a new `Snapshot` and target set; the simulation runs it like the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from peloton.core import words
from peloton.core.forecast.model import CounterfactualKind, LiveHost, QueuedTask, Snapshot
from peloton.core.model.resources import KINDS, ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig

K = CounterfactualKind
Target = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Change:
    """One counterfactual: what changes, in words, and the snapshot and targets with it."""

    kind: CounterfactualKind
    description: str
    snapshot: Snapshot
    targets: frozenset[Target]


def more_reservation(snapshot: Snapshot, pool: str, extra: Resources) -> Snapshot:
    """`pool` (and its ancestors, as far as needed) reserves `extra` more; limits follow."""
    paths = {pool}
    parent = pool.rsplit("/", 1)[0]
    while parent:
        paths.add(parent)
        parent = parent.rsplit("/", 1)[0]
    pools = []
    for state in snapshot.pools:
        if state.path not in paths:
            pools.append(state)
            continue
        config = state.config
        kinds = {rc.kind for rc in config.resources}
        resources = []
        for rc in config.resources:
            reservation = rc.reservation + extra.get(rc.kind)
            resources.append(replace(rc, reservation=reservation,
                                     limit=max(rc.limit, reservation)))
        for kind in KINDS:
            if kind not in kinds and extra.get(kind) > 0:
                resources.append(ResourceConfig(kind=kind, reservation=extra.get(kind),
                                                limit=extra.get(kind)))
        pools.append(replace(state, config=replace(config, resources=tuple(resources))))
    return replace(snapshot, pools=tuple(pools))


def stop_job(snapshot: Snapshot, job_id: str) -> Snapshot:
    """Every task of `job_id`, running or queued, gone."""
    return replace(snapshot, running=tuple(r for r in snapshot.running if r.job_id != job_id),
                   queued=tuple(q for q in snapshot.queued if q.job_id != job_id))


def add_hosts(snapshot: Snapshot, shape: LiveHost, count: int) -> Snapshot:
    """`count` hosts like `shape` (same capacity and labels) join now."""
    added = tuple(replace(shape, hostname=f"forecast-added-{i:03d}", maintenance=False)
                  for i in range(count))
    return replace(snapshot, hosts=snapshot.hosts + added)


def resize(snapshot: Snapshot, job_id: str, factor: float,
           only: frozenset[int] | None = None) -> Snapshot:
    """The queued tasks of `job_id` (those of the instances `only`, if given) ask for
    `factor` times their resources."""
    return replace(snapshot, queued=tuple(
        replace(q, resources=q.resources.scale(factor))
        if q.job_id == job_id and (only is None or q.instance in only) else q
        for q in snapshot.queued))


def named(instances: Iterable[int]) -> str:
    """"instance 3", "instances 3, 5"."""
    ids = sorted(instances)
    return f"instance{'s' if len(ids) != 1 else ''} {', '.join(map(str, ids))}"


def keep_instances(snapshot: Snapshot, job_id: str, keep: frozenset[int]) -> Snapshot:
    """Only the queued instances `keep` of `job_id` remain queued."""
    return replace(snapshot, queued=tuple(q for q in snapshot.queued
                                          if q.job_id != job_id or q.instance in keep))


def reservation_needed(snapshot: Snapshot, pool: str, need: Resources) -> Resources:
    """How much more `pool` must reserve to hold what it uses now plus `need`, per kind the
    target asks for (at least `need`: a reservation below the use guarantees nothing more)."""
    state = snapshot.pool(pool)
    out: dict[ResourceKind | str, float] = {}
    for kind in KINDS:
        if need.get(kind) > 0:
            reservation = state.config.resource(kind).reservation
            out[kind] = max(need.get(kind), state.allocation.get(kind) + need.get(kind)
                            - reservation)
    return Resources.of(out)


def _largest_host(snapshot: Snapshot, need: Resources) -> LiveHost | None:
    """The shape to add: the largest host that could hold `need` on its own."""
    fitting = [h for h in snapshot.hosts if need.fits_in(h.capacity)]
    if not fitting:
        return None
    return max(fitting, key=lambda h: (h.capacity.cpu, h.capacity.mem_mb, h.hostname))


def candidates(snapshot: Snapshot, targets: frozenset[Target]) -> list[Change]:
    """One change of each kind that applies to the targets (module docstring)."""
    tasks = [q for q in snapshot.queued if (q.job_id, q.instance) in targets]
    if not tasks:
        return []
    head: QueuedTask = tasks[0]
    job_id = head.job_id
    need = head.resources.scale(max(head.gang, 1))
    out: list[Change] = []
    extra = reservation_needed(snapshot, head.pool, need)
    out.append(Change(K.RESERVATION, f"+{words.resources(extra)} reservation on pool {head.pool}",
                      more_reservation(snapshot, head.pool, extra), targets))
    lower: dict[str, Resources] = {}
    for run in snapshot.running:
        if run.priority < head.priority and run.job_id != job_id:
            lower[run.job_id] = lower.get(run.job_id, Resources()) + run.resources
    if lower:
        victim = max(sorted(lower), key=lambda j: (lower[j].cpu, lower[j].mem_mb))
        priority = min(r.priority for r in snapshot.running if r.job_id == victim)
        out.append(Change(K.STOP_JOB, f"job {victim} (priority {priority}, holding "
                                      f"{words.resources(lower[victim])}) stopped",
                          stop_job(snapshot, victim), targets))
    shape = _largest_host(snapshot, head.resources)
    if shape is not None:
        pending = Resources()
        for task in tasks:
            pending = pending + task.resources
        per_host = max(math.floor(min((shape.capacity.get(k) / pending.get(k) * len(tasks))
                                      for k in KINDS if pending.get(k) > 0)), 1)
        count = max(math.ceil(len(tasks) / per_host), 1)
        out.append(Change(K.ADD_HOSTS, f"{words.plural(count, 'host')} like {shape.hostname} "
                                       f"({words.resources(shape.capacity)}) added",
                          add_hosts(snapshot, shape, count), targets))
    queued_of_job = [q.instance for q in snapshot.queued if q.job_id == job_id]
    whole_job = all((job_id, i) in targets for i in queued_of_job)
    if whole_job and len(queued_of_job) > 1:
        ordered = sorted(queued_of_job)
        keep = frozenset(ordered[:math.ceil(len(ordered) / 2)])
        kept_targets = frozenset(t for t in targets if t[1] in keep)
        out.append(Change(K.FEWER_INSTANCES,
                          f"{len(keep)} of the job's {len(ordered)} pending instances",
                          keep_instances(snapshot, job_id, keep), kept_targets))
    half = words.resources(head.resources.scale(0.5))
    if whole_job:
        out.append(Change(K.SMALLER_RESOURCES, f"half the resources per task ({half})",
                          resize(snapshot, job_id, 0.5), targets))
    else:
        mine = frozenset(i for _, i in targets)
        out.append(Change(K.SMALLER_RESOURCES, f"half the resources for {named(mine)} ({half})",
                          resize(snapshot, job_id, 0.5, mine), targets))
    return out
