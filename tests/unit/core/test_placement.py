"""Placement: filters, rankers, ports, gangs and reason reports."""

from __future__ import annotations

import dataclasses

from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.host import EXCLUSIVE_ATTRIBUTE
from peloton.core.model.resources import PortRange, Resources, to_units
from peloton.core.placement.report import RejectCode
from peloton.core.placement.request import Strategy, job_label
from peloton.core.placement.stack import PlacementConfig, Placer
from peloton.core.states import HostState
from tests.unit.core.factories import gang, host, needs, task

ZONE_A = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1)


def _where(placer: Placer, *tasks_: object) -> list[str | None]:
    plan = placer.place([gang(t) for t in tasks_])  # type: ignore[arg-type]
    by_id = {p.task_id: p.hostname for p in plan.placed}
    return [by_id.get(t.task_id) for t in tasks_]  # type: ignore[attr-defined]


def test_pack_is_best_fit_and_spread_is_least_loaded() -> None:
    hosts = [host("small", cpu=2), host("big", cpu=16), host("mid", cpu=4)]
    assert _where(Placer(hosts), task(needs(3))) == ["mid"]
    assert _where(Placer(hosts), task(needs(1, strategy=Strategy.SPREAD))) == ["big"]
    spread = needs(1, strategy=Strategy.SPREAD)
    placer = Placer([host("h1", cpu=4), host("h2", cpu=4)])
    assert sorted(_where(placer, task(spread), task(spread))) == ["h1", "h2"]  # type: ignore[type-var]


def test_spread_job_puts_one_task_per_host() -> None:
    # A 3-task SPREAD_JOB job on 3 hosts gets one per host, where PACK fills one host.
    hosts = [host("h1", cpu=8), host("h2", cpu=8), host("h3", cpu=8)]
    spread = needs(1, strategy=Strategy.SPREAD_JOB)
    mine = (job_label("job-a"),)
    where = _where(Placer(hosts), *(task(spread, "job-a", i, labels=mine) for i in range(3)))
    assert sorted(where) == ["h1", "h2", "h3"]  # type: ignore[type-var]
    assert len(set(_where(Placer(hosts), *(task(needs(1), "job-b", i) for i in range(3))))) == 1


def test_spread_job_counts_tasks_placed_in_earlier_rounds_and_per_job() -> None:
    placer = Placer([host("h1", cpu=8), host("h2", cpu=4), host("h3", cpu=2)])
    spread = needs(1, strategy=Strategy.SPREAD_JOB)
    a, b = (job_label("job-a"),), (job_label("job-b"),)
    first = _where(placer, task(spread, "job-a", 0, labels=a))
    rest = [_where(placer, task(spread, "job-a", i, labels=a))[0] for i in (1, 2)]
    assert sorted(first + rest) == ["h1", "h2", "h3"]  # type: ignore[type-var]
    # More tasks than hosts: evenly, the fewest of the job's tasks first.
    more = [_where(placer, task(spread, "job-a", i, labels=a))[0] for i in (3, 4)]
    assert len(set(more)) == 2
    # Another job's tasks do not count against this one: it starts on the emptiest host.
    assert _where(placer, task(spread, "job-b", 0, labels=b)) == ["h1"]


def test_every_host_has_its_hostname_as_a_label() -> None:
    hosts = [host("h1", labels=(Label("zone", "a"),)), host("h2", labels=(Label("zone", "a"),))]
    on_h2 = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("hostname", "h2"), 1)
    assert _where(Placer(hosts), task(needs(1, constraint=on_h2))) == ["h2"]
    not_h1 = LabelConstraint(LabelKind.HOST, Condition.LESS_THAN, Label("hostname", "h1"), 1)
    both = AndConstraint((not_h1, ZONE_A))
    assert _where(Placer(hosts), task(needs(1, constraint=both))) == ["h2"]
    nowhere = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("hostname", "h9"), 1)
    placer = Placer(hosts)
    plan = placer.place([gang(task(needs(1, constraint=nowhere)))])
    report = plan.unplaced[0].report
    assert report.hosts_fit == 0 and "hostname" in str(report)


def test_a_hostname_label_the_backend_reports_too_is_counted_once() -> None:
    # Kubernetes nodes carry `hostname=<name>` among their labels already.
    hosts = [host(name, labels=(Label("hostname", name),)) for name in ("h1", "h2")]
    on_h2 = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("hostname", "h2"), 1)
    assert _where(Placer(hosts), task(needs(1, constraint=on_h2))) == ["h2"]


def test_resources_debited_within_a_batch() -> None:
    placer = Placer([host("h", cpu=4, mem=1000)])
    n = needs(1, mem=400)
    assert _where(placer, task(n), task(n), task(n)) == ["h", "h", None]
    assert placer.index.by_name["h"].free().mem_mb == 200


def test_revocable_uses_slack_cpu() -> None:
    placer = Placer([host("h", cpu=0.5, rcpu=4)])
    assert _where(placer, task(needs(2, revocable=True)), task(needs(2))) == ["h", None]
    assert placer.index.by_name["h"].rcpu == to_units(2)


def test_ports_assigned_from_ranges() -> None:
    ports = (PortRange(31000, 31001), PortRange(32000, 32005))
    placer = Placer([host("h", ports=ports)])
    plan = placer.place([gang(task(needs(0.1, ports=3))), gang(task(needs(0.1, ports=4))),
                         gang(task(needs(0.1, ports=5)))])
    taken = [port for p in plan.placed for port in p.ports]
    assert [len(p.ports) for p in plan.placed] == [3, 4]
    assert len(set(taken)) == 7 and set(taken) <= {31000, 31001, *range(32000, 32006)}
    assert plan.unplaced[0].report.count(RejectCode.INSUFFICIENT_PORTS) == 1


def test_scarce_gpu_hosts() -> None:
    hosts = [host("gpu", cpu=8, gpu=2), host("plain", cpu=1)]
    assert _where(Placer(hosts), task(needs(2)), task(needs(1, gpu=1))) == [None, "gpu"]
    lenient = Placer(hosts, PlacementConfig(scarce_gpu=False))
    assert _where(lenient, task(needs(2))) == ["gpu"]


def test_host_state_must_be_up() -> None:
    placer = Placer([host("d", state=HostState.DRAINING), host("u", cpu=1)])
    assert _where(placer, task(needs(1)), task(needs(1))) == ["u", None]


def test_host_constraints_and_or_and_not_applicable() -> None:
    hosts = [host("a1", labels=(Label("zone", "a"),)), host("b1", labels=(Label("zone", "b"),)),
             host("c1", labels=(Label("zone", "c"), Label("ssd", "yes")))]
    ssd = LabelConstraint(LabelKind.HOST, Condition.GREATER_THAN, Label("ssd", "yes"), 0)
    per_job = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("job", "x"), 5)
    assert _where(Placer(hosts), task(needs(1, constraint=ZONE_A))) == ["a1"]
    either = OrConstraint((ZONE_A, ssd))
    assert sorted(_where(Placer(hosts), task(needs(6, constraint=either)),  # type: ignore[type-var]
                         task(needs(6, constraint=either)))) == ["a1", "c1"]
    # A TASK leaf is not applicable to the host filter: zone=a AND job<5 still means zone a.
    both = AndConstraint((ZONE_A, per_job))
    assert _where(Placer(hosts), task(needs(1, constraint=both))) == ["a1"]
    nowhere = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "z"), 1)
    plan = Placer(hosts).place([gang(task(needs(1, constraint=nowhere)))])
    assert str(plan.unplaced[0].report) == "0 of 3 hosts fit: 3 lack label zone=z"


def test_at_most_one_per_host_counts_batch_and_existing_tasks() -> None:
    label = Label("job", "web")
    one = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, label, 1)
    hosts = [host("h1", cpu=8), host("h2", cpu=8), host("h3", cpu=8, task_labels=((label, 1),))]
    n = needs(1, constraint=one)
    got = _where(Placer(hosts), *[task(n, "web", labels=(label,)) for _ in range(3)])
    assert sorted(got[:2]) == ["h1", "h2"] and got[2] is None  # type: ignore[type-var]
    plan = Placer(hosts).place([gang(task(n, labels=(label,))) for _ in range(3)])
    report = plan.unplaced[0].report
    assert report.count(RejectCode.TASK_CONSTRAINT) == 3 and report.hosts_fit == 0


def test_exclusive_hosts() -> None:
    ex = Label(EXCLUSIVE_ATTRIBUTE, "db")
    hosts = [host("ex", cpu=8, labels=(ex,)), host("shared", cpu=1)]
    wants = LabelConstraint(LabelKind.HOST, Condition.EQUAL, ex, 1)
    assert _where(Placer(hosts), task(needs(4))) == [None]
    assert _where(Placer(hosts), task(needs(4, constraint=wants))) == ["ex"]


def test_desired_host_first_and_only() -> None:
    hosts = [host("h1", cpu=2), host("h2", cpu=8)]
    assert _where(Placer(hosts), task(needs(1), desired="h2")) == ["h2"]
    assert _where(Placer(hosts), task(needs(4), desired="h1")) == ["h2"]
    plan = Placer(hosts).place([gang(task(needs(4), desired="h1", only=True))])
    report = plan.unplaced[0].report
    assert str(report) == "0 of 2 hosts fit: 1 insufficient cpu, 1 not the desired host"


def test_gang_all_or_nothing_with_rollback() -> None:
    placer = Placer([host("h1", cpu=2, ports=(PortRange(100, 101),)), host("h2", cpu=1)])
    g = gang(task(needs(2, ports=2)), task(needs(1)), task(needs(1)))
    plan = placer.place([g])
    assert plan.placed == ()
    assert len(plan.unplaced) == 3
    notes = {u.report.note for u in plan.unplaced}
    assert "" in notes and any("could not be placed" in n for n in notes)
    h1 = placer.index.by_name["h1"]
    assert h1.free().cpu == 2 and h1.ports.free == 2  # rolled back
    # The capacity freed by the rollback is usable by the next gang in the same call.
    plan = placer.place([g, gang(task(needs(2)))])
    assert [p.hostname for p in plan.placed] == ["h1"]


def test_release_and_host_updates() -> None:
    placer = Placer([host("h", cpu=2, ports=(PortRange(10, 12),))])
    req = task(needs(2, ports=2))
    (placed,) = placer.place([gang(req)]).placed
    placer.release(placed, req)
    assert placer.index.by_name["h"].free().cpu == 2
    assert placer.index.by_name["h"].ports.free == 3
    placer.index.upsert(host("h", cpu=1))
    placer.index.upsert(host("h2", cpu=3))
    assert _where(placer, task(needs(2))) == ["h2"]
    placer.index.remove("h2")
    assert len(placer.index) == 1
    assert _where(placer, task(needs(1))) == ["h"]


def test_a_placer_kept_between_rounds_rebuilds_only_hosts_that_changed() -> None:
    offers = [host("h1", cpu=4), host("h2", cpu=4), host("h3", cpu=4)]
    placer = Placer(offers)
    (placed,) = placer.place([gang(task(needs(3)))]).placed
    debited = placed.hostname
    # Next round: the same offers (the host manager refused the reservation, say): the host
    # placement debited is rebuilt from its offer, the others are kept.
    assert placer.sync(offers) == 1
    assert placer.index.by_name[debited].free().cpu == 4
    assert placer.sync(offers) == 0
    # A changed offer is rebuilt; a host no longer offered leaves the index.
    fuller = dataclasses.replace(host(debited, cpu=4), available=Resources(cpu=1, mem_mb=8192,
                                                                         disk_mb=100_000))
    rest = [o for o in offers if o.hostname not in (debited, "h3")]
    assert placer.sync([fuller, *rest]) == 1
    assert sorted(placer.index.by_name) == sorted([debited, *(o.hostname for o in rest)])
    assert placer.index.by_name[debited].free().cpu == 1
    # It places as a placer built from those offers would.
    assert _where(placer, task(needs(4))) == _where(Placer([fuller, *rest]), task(needs(4)))


def test_a_kept_placer_forgets_failures_when_a_host_leaves() -> None:
    offers = [host("h1", cpu=2), host("h2", cpu=2)]
    placer = Placer(offers)
    first = placer.place([gang(task(needs(3)))]).unplaced[0].report
    assert first.hosts_total == 2
    placer.sync(offers[:1])  # h2 is not offered this round
    again = placer.place([gang(task(needs(3)))]).unplaced[0].report
    assert again is not first and again.hosts_total == 1


def test_report_counts_first_rejection_per_host() -> None:
    hosts = [host("a", cpu=1, labels=(Label("zone", "a"),)), host("b", cpu=8),
             host("c", cpu=8, state=HostState.DOWN), host("g", cpu=8, gpu=1)]
    plan = Placer(hosts).place([gang(task(needs(4, constraint=ZONE_A)))])
    report = plan.unplaced[0].report
    assert report.hosts_total == 4 and report.hosts_fit == 0
    assert report.count(RejectCode.INSUFFICIENT_CPU) == 1
    assert report.count(RejectCode.HOST_CONSTRAINT) == 1
    assert report.count(RejectCode.HOST_NOT_UP) == 1
    assert report.count(RejectCode.GPU_HOST_RESERVED) == 1


def test_failed_needs_remembered_until_capacity_returns() -> None:
    placer = Placer([host("h", cpu=2)])
    n = needs(2)
    assert _where(placer, task(n), task(n)) == ["h", None]
    first = placer.place([gang(task(n))]).unplaced[0].report
    again = placer.place([gang(task(n))]).unplaced[0].report
    assert again is first  # not searched or explained again: nothing was freed
    placer.index.upsert(host("h", cpu=2))  # a fresh offer: capacity is back
    assert _where(placer, task(n)) == ["h"]


def test_gpu_task_report_counts_gpu_first() -> None:
    hosts = [host("plain", cpu=1), host("plain2", cpu=16), host("gpu", cpu=8, gpu=1)]
    plan = Placer(hosts).place([gang(task(needs(4, gpu=2)))])
    assert str(plan.unplaced[0].report) == "0 of 3 hosts fit: 3 insufficient gpu"
