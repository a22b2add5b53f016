"""The placement stack: filters and rankers wired in one place, and the gang placer.

For each task, in order:

1. the desired host, if the task names one, is tried first (and is the only
   candidate while `desired_host_only` holds);
2. the ranker for the task's strategy walks the index partitions the task
   may use (gpu hosts for gpu tasks; hosts without gpus otherwise, plus gpu
   hosts when they are not kept scarce);
3. each candidate goes through the filter chain below, cheapest first; the
   static part is answered from a per-(needs, host class) cache;
4. the first host that passes gets the task: resources, ports and labels
   are debited at once, so later tasks in the batch see them.  Its dynamic
   ports are drawn from the host's free ports by its run (portpool.py), so a
   retry of a run that found its port busy gets other ports.

A gang is placed all or nothing: if one member finds no host, the members
already placed are rolled back.  A needs value that found no host is not
searched again, in this call or later ones, until the index gives capacity
back (a rollback, `release`, or a refreshed host bumps its generation):
until then hosts only fill up, so the answer cannot change.  Reports for
unplaced tasks are only computed for them, by running every filter over
every host, once per failing needs value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from peloton.core.model.host import HostOffer
from peloton.core.model.ids import TaskId
from peloton.core.placement.domain_limit import DomainLimitFilter
from peloton.core.placement.explain import explain
from peloton.core.placement.filters import (
    CompiledNeeds,
    ExclusiveHostFilter,
    HostConstraintFilter,
    HostFilter,
    HostnameConstraintFilter,
    HostUpFilter,
    PortFilter,
    ResourceFilter,
    ScarceGpuFilter,
    TaskConstraintFilter,
)
from peloton.core.placement.hosts import HostIndex, HostRecord, Partition
from peloton.core.placement.portpool import port_draw
from peloton.core.placement.report import (
    PlacementPlan,
    PlacementReport,
    TaskPlacement,
    Unplaced,
)
from peloton.core.placement.request import GangRequest, PlacementNeeds, TaskRequest
from peloton.core.placement.scorers import SCORERS


@dataclass(frozen=True, slots=True)
class PlacementConfig:
    """Knobs of the placer."""

    #: Keep gpu hosts for gpu tasks (Peloton's `scarce_resource_types: [GPU]`).
    scarce_gpu: bool = True
    #: Compiled needs kept between calls (their verdict caches); cleared when exceeded.
    max_cached_needs: int = 10_000


class Placer:
    """Places gangs onto a `HostIndex`, which keeps every assignment made.

    The daemon keeps one placer, refreshes its hosts with `sync` (or
    `index.upsert`) as offers change, calls `place` per batch, and calls
    `release` for a placement it could not launch.
    """

    def __init__(self, hosts: Iterable[HostOffer] = (),
                 config: PlacementConfig = PlacementConfig(),
                 index: HostIndex | None = None) -> None:
        """A placer over `hosts`, or over `index` as it is (its hosts are all rebuilt from
        the offers of the first `sync`, at the positions they hold)."""
        self.config = config
        hosts = list(hosts)
        self.index = index if index is not None else HostIndex(hosts)
        # Cheapest first: state and gpu-ness are one comparison, exclusivity a flag,
        # host constraints a small tree walk; all four are cached per host class.
        self.static_filters: tuple[HostFilter, ...] = (
            HostUpFilter(), ScarceGpuFilter(config.scarce_gpu), ExclusiveHostFilter(),
            HostConstraintFilter())
        # Per host: arithmetic, then a port count, then the task-label walk, then host
        # constraints naming `hostname` (which no class verdict can answer), then the
        # per-domain limits (a no-op for needs without DOMAIN leaves).
        self.dynamic_filters: tuple[HostFilter, ...] = (
            ResourceFilter(), PortFilter(), TaskConstraintFilter(), HostnameConstraintFilter(),
            DomainLimitFilter(self.index))
        self._compiled: dict[PlacementNeeds, CompiledNeeds] = {}
        #: needs -> (index generation, report): needs that found no host.  Valid while
        #: the index has not given capacity back (its generation is unchanged), since
        #: until then hosts only fill up.
        self._failed: dict[PlacementNeeds, tuple[int, PlacementReport]] = {}
        #: hostname -> the offer its index record was built from and still equals (a host
        #: placement debited, or credited back by `release`, is left out: rebuilt on `sync`).
        self._offers: dict[str, HostOffer] = {} if index is not None else {
            o.hostname: o for o in hosts}

    def sync(self, offers: Iterable[HostOffer]) -> int:
        """Make the index hold exactly `offers` (a new round's hosts); returns how many hosts
        were (re)built.

        A host whose offer equals the one its record was built from, and that placement has
        not debited since, is kept as it is, so a daemon that keeps one placer across rounds
        pays for the hosts that changed, not for all of them.  Hosts not offered are removed;
        if any was, remembered failures are dropped (their reports counted it).
        """
        index = self.index
        known = self._offers
        seen: set[str] = set()
        built = 0
        for offer in offers:
            name = offer.hostname
            seen.add(name)
            old = known.get(name)
            if old is None or (old is not offer and old != offer):
                index.upsert(offer)
                known[name] = offer
                built += 1
        gone = [name for name in index.by_name if name not in seen]
        for name in gone:
            index.remove(name)
            known.pop(name, None)
        if gone:
            self._failed.clear()
        return built

    # -- public -------------------------------------------------------------------
    def place(self, gangs: Sequence[GangRequest],
              runs: Mapping[TaskId, int] | None = None) -> PlacementPlan:
        """Place every gang whole or not at all; debit the index for what was placed.

        `runs` names the run of each task being placed (run 0 for a task it leaves out):
        a task's dynamic ports are drawn by its run, the same for the same run and
        elsewhere on the host for the next one (`portpool.port_draw`).
        """
        placed: list[TaskPlacement] = []
        unplaced: list[Unplaced] = []
        index = self.index
        for gang in gangs:
            undo: list[tuple[HostRecord, TaskRequest, tuple[int, ...]]] = []
            miss: TaskRequest | None = None
            report: PlacementReport | None = None
            for req in gang.tasks:
                cn = self._compile(req.needs)
                known = None if req.desired_host_only else self._known_failure(req.needs)
                host = self._choose(req, cn) if known is None else None
                if host is None:
                    miss = req
                    report = known or self.explain(req)
                    if known is None and not req.desired_host_only:
                        self._remember_failure(req.needs, report)
                    break
                draw = 0
                if cn.ports:
                    draw = port_draw(req.task_id, runs.get(req.task_id, 0) if runs else 0)
                ports = index.debit(host, req.needs.resources, cn.revocable, cn.ports,
                                    req.labels, port_draw=draw)
                undo.append((host, req, ports))
            if miss is None:
                placed.extend(TaskPlacement(req.task_id, h.hostname, h.agent_id, ports)
                              for h, req, ports in undo)
                for h, _, _ in undo:
                    self._offers.pop(h.hostname, None)  # no longer what its offer says
                continue
            assert report is not None
            # Rolling back returns capacity, which bumps the index generation and so
            # retires every remembered failure.
            for h, req, ports in reversed(undo):
                index.debit(h, req.needs.resources, req.needs.revocable,
                            req.needs.ports, req.labels, -1, ports)
            for req in gang.tasks:
                if req is miss:
                    unplaced.append(Unplaced(req.task_id, report))
                else:
                    note = f"gang member {miss.task_id} could not be placed"
                    unplaced.append(Unplaced(req.task_id, PlacementReport(
                        report.hosts_total, report.hosts_fit, report.rejections, note)))
        return PlacementPlan(tuple(placed), tuple(unplaced))

    def explain(self, req: TaskRequest) -> PlacementReport:
        """Count, per filter, the hosts that reject `req` now (see explain.py)."""
        return explain(self.index, self.static_filters, self.dynamic_filters,
                       self._compile(req.needs), req)

    def release(self, placement: TaskPlacement, req: TaskRequest) -> None:
        """Give back what `place` debited for a task that was not launched after all."""
        host = self.index.by_name.get(placement.hostname)
        if host is not None:
            self.index.debit(host, req.needs.resources, req.needs.revocable, req.needs.ports,
                             req.labels, -1, placement.ports)
            self._offers.pop(host.hostname, None)

    def fits(self, host: HostRecord, req: TaskRequest) -> bool:
        """Would `host` take `req` now (every filter passes)?"""
        if req.desired_host_only and host.hostname != req.desired_host:
            return False
        return self._fits(host, self._compile(req.needs))

    # -- internals ----------------------------------------------------------------
    def _known_failure(self, needs: PlacementNeeds) -> PlacementReport | None:
        entry = self._failed.get(needs)
        if entry is None:
            return None
        if entry[0] != self.index.generation:
            del self._failed[needs]
            return None
        return entry[1]

    def _remember_failure(self, needs: PlacementNeeds, report: PlacementReport) -> None:
        if len(self._failed) >= self.config.max_cached_needs:
            self._failed.clear()
        self._failed[needs] = (self.index.generation, report)

    def _compile(self, needs: PlacementNeeds) -> CompiledNeeds:
        cn = self._compiled.get(needs)
        if cn is None:
            if len(self._compiled) >= self.config.max_cached_needs:
                self._compiled.clear()
            cn = self._compiled[needs] = CompiledNeeds(needs)
        return cn

    def _fits(self, host: HostRecord, cn: CompiledNeeds) -> bool:
        cls_id = host.cls.class_id
        ok = cn.static_ok.get(cls_id)
        if ok is None:
            ok = cn.static_ok[cls_id] = all(f.ok(host, cn) for f in self.static_filters)
        if not ok:
            return False
        # A plain loop: all() over a generator costs more than the filters on this hot path.
        for f in self.dynamic_filters:  # noqa: SIM110
            if not f.ok(host, cn):
                return False
        return True

    def _partitions(self, cn: CompiledNeeds) -> list[Partition]:
        parts = self.index.partitions
        if cn.gpu > 0:
            return [parts[True]]
        if self.config.scarce_gpu:
            return [parts[False]]
        return [parts[False], parts[True]]

    def _choose(self, req: TaskRequest, cn: CompiledNeeds) -> HostRecord | None:
        if req.desired_host:
            host = self.index.by_name.get(req.desired_host)
            if host is not None and self._fits(host, cn):
                return host
            if req.desired_host_only:
                return None
        scorer = SCORERS[req.needs.strategy]
        fits = self._fits
        for part in self._partitions(cn):
            for host in scorer.candidates(self.index, part, cn, req):
                if fits(host, cn):
                    return host
        return None
