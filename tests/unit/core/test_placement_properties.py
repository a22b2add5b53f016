"""Placement against a brute-force reference: same feasibility, same choice, no overcommit."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.host import HostOffer
from peloton.core.model.resources import EPSILON, PortRange
from peloton.core.placement.hosts import HostRecord, key_of
from peloton.core.placement.request import GangRequest, Strategy, TaskRequest
from peloton.core.placement.stack import Placer
from peloton.core.states import HostState
from tests.unit.core.factories import gang, host, needs, task

ZONES = [Label("zone", z) for z in "ab"]
JOB = Label("job", "j")

hosts_st = st.lists(st.builds(
    lambda i, cpu, mem, gpu, zone, state, ports, rcpu: host(
        f"h{i}", cpu, mem, 1000, gpu, labels=(zone,), state=state,
        ports=(PortRange(1000, 1000 + ports),) if ports >= 0 else (), rcpu=rcpu),
    st.integers(0, 10**6), st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    st.sampled_from([512.0, 2048.0, 8192.0]), st.sampled_from([0.0, 0.0, 0.0, 1.0]),
    st.sampled_from(ZONES), st.sampled_from([HostState.UP] * 4 + [HostState.DRAINING]),
    st.integers(-1, 3), st.sampled_from([0.0, 0.0, 2.0])),
    min_size=1, max_size=12, unique_by=lambda h: h.hostname)

constraints = st.sampled_from([
    None, LabelConstraint(LabelKind.HOST, Condition.EQUAL, ZONES[0], 1),
    LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, JOB, 1),
    LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, JOB, 2)])

tasks_st = st.lists(st.builds(
    lambda cpu, mem, gpu, ports, c, strat, rev: task(needs(cpu, mem, gpu=gpu, ports=ports,
                                                           constraint=c, strategy=strat,
                                                           revocable=rev),
                                                     labels=(JOB,)),
    st.sampled_from([0.5, 1.0, 1.5, 3.0]), st.sampled_from([256.0, 1024.0, 4096.0]),
    st.sampled_from([0.0, 0.0, 1.0]), st.integers(0, 2), constraints,
    st.sampled_from(list(Strategy)), st.sampled_from([False, False, False, True])),
    min_size=1, max_size=25)


def _best(placer: Placer, req: TaskRequest) -> set[str]:
    """Hostnames a perfect ranker could pick (ties on the milli-cpu key included)."""
    feasible = [h for h in placer.index.records() if placer.fits(h, req)]
    if not feasible:
        return set()
    free: Callable[[HostRecord], int] = (lambda h: h.rcpu) if req.needs.revocable else (lambda h: h.cpu)
    key = {h.hostname: key_of(free(h), h.idx) for h in feasible}
    if req.needs.strategy is Strategy.PACK:
        return {min(key, key=key.__getitem__)}
    return {max(key, key=key.__getitem__)}


@settings(max_examples=120, deadline=None)
@given(hosts_st, tasks_st)
def test_matches_brute_force(hosts: list[HostOffer], tasks: list[TaskRequest]) -> None:
    placer = Placer(hosts)
    for req in tasks:
        expected = _best(placer, req)
        plan = placer.place([GangRequest.single(req)])
        if expected:
            assert [p.hostname for p in plan.placed] == [next(iter(expected))]
        else:
            assert not plan.placed and plan.unplaced[0].report.hosts_fit == 0
    for h in placer.index.records():
        assert min(h.cpu, h.mem, h.disk, h.gpu, h.rcpu) >= 0  # exact fixed-point units


@settings(max_examples=80, deadline=None)
@given(hosts_st, st.lists(tasks_st, min_size=1, max_size=6))
def test_batches_never_overcommit(hosts: list[HostOffer],
                                  gangs: list[list[TaskRequest]]) -> None:
    placer = Placer(hosts)
    plan = placer.place([gang(*g) for g in gangs])
    offers = {h.hostname: h for h in hosts}
    used: dict[str, list[float]] = {}
    ports: dict[str, list[int]] = {}
    by_id = {t.task_id: t for g in gangs for t in g}
    limited: dict[tuple[str, int], list[object]] = {}
    for p in plan.placed:
        req = by_id[p.task_id]
        u = used.setdefault(p.hostname, [0.0, 0.0, 0.0])
        u[0] += 0.0 if req.needs.revocable else req.needs.resources.cpu
        u[1] += req.needs.resources.mem_mb
        u[2] += req.needs.resources.gpu
        ports.setdefault(p.hostname, []).extend(p.ports)
        assert len(p.ports) == req.needs.ports
        assert offers[p.hostname].state is HostState.UP
        # Checked here from the offers, not through the placer's own filters:
        if offers[p.hostname].available.gpu > 0:          # scarce GPU hosts: GPU tasks only
            assert req.needs.resources.gpu > 0
        c = req.needs.constraint
        assert c is None or isinstance(c, LabelConstraint)  # `constraints` draws label ones only
        if c is not None and c.kind is LabelKind.HOST:      # zone = a
            assert c.label in offers[p.hostname].labels
        if c is not None and c.kind is LabelKind.TASK:      # count of job tasks before it < k
            per_host = limited.setdefault((p.hostname, c.requirement), [])
            per_host.append(p.task_id)
    for name, (cpu, mem, gpu) in used.items():
        cap = offers[name].available
        assert cpu <= cap.cpu + EPSILON and mem <= cap.mem_mb + EPSILON and gpu <= cap.gpu + EPSILON
        assert len(ports[name]) == len(set(ports[name]))
        assert all(any(p in r for r in offers[name].ports) for p in ports[name])
    for (_, k), ids in limited.items():
        # The i-th task limited to "< k" saw at least i - 1 job tasks on its host.
        assert len(ids) <= k
    placed_ids = {p.task_id for p in plan.placed}
    for g in gangs:  # all or nothing
        inside = [t.task_id in placed_ids for t in g]
        assert all(inside) or not any(inside)
    assert len(plan.placed) + len(plan.unplaced) == sum(len(g) for g in gangs)


def _naive_report(placer: Placer, req: TaskRequest) -> dict[str, int]:
    """Every filter on every host, in chain order, no shortcuts."""
    cn = placer._compile(req.needs)
    counts: dict[str, int] = {}
    for h in placer.index.records():
        reason = None
        if req.desired_host_only and h.hostname != req.desired_host:
            reason = "not the desired host"
        else:
            for f in placer.static_filters + placer.dynamic_filters:
                if not f.ok(h, cn):
                    reason = str(f.check(h, cn))
                    break
        key = reason or "fit"
        counts[key] = counts.get(key, 0) + 1
    return counts


@settings(max_examples=120, deadline=None)
@given(hosts_st, tasks_st, st.data())
def test_report_matches_naive_count(hosts: list[HostOffer], tasks: list[TaskRequest],
                                    data: st.DataObject) -> None:
    placer = Placer(hosts)
    placer.place([GangRequest.single(t) for t in tasks[:-1]])  # use up some capacity
    probe = tasks[-1]
    if data.draw(st.booleans()):
        probe = TaskRequest(probe.task_id, probe.needs, probe.labels,
                            data.draw(st.sampled_from([h.hostname for h in hosts])), True)
    report = placer.explain(probe)
    got = {str(r): n for r, n in report.rejections}
    if report.hosts_fit:
        got["fit"] = report.hosts_fit
    assert got == _naive_report(placer, probe)
    assert report.hosts_total == len(hosts)
