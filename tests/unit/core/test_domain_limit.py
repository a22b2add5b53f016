"""DOMAIN limits (Aurora's limit on any attribute): at most N tasks with a label per rack/zone."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import AndConstraint, Condition, Label, LabelConstraint, LabelKind
from peloton.core.placement.stack import Placer
from tests.unit.core.factories import gang, host, needs, task

JOB = Label("aurora_job_key", "www/prod/web")


def per(attribute: str, limit: int) -> LabelConstraint:
    return LabelConstraint(LabelKind.DOMAIN, Condition.LESS_THAN, JOB, limit, domain=attribute)


def racks(*layout: tuple[str, str]) -> list:  # type: ignore[type-arg]
    return [host(name, cpu=16, labels=(Label("rack", rack), Label("zone", "z1"))) for name, rack in layout]


def test_at_most_n_per_rack_within_one_batch_and_across_batches() -> None:
    placer = Placer(racks(("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")))
    n = needs(1, constraint=per("rack", 2))
    plan = placer.place([gang(task(n, "web", labels=(JOB,))) for _ in range(7)])
    rack_of = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    per_rack = Counter(rack_of[p.hostname] for p in plan.placed)
    assert per_rack == {"a": 2, "b": 2, "c": 2} and len(plan.unplaced) == 1
    why = str(plan.unplaced[0].report)
    assert why == ("0 of 4 hosts fit: 4 already have 2 tasks labelled "
                   "aurora_job_key=www/prod/web in its rack (the limit is 2 per rack)"), why
    assert not placer.place([gang(task(n, "web", labels=(JOB,)))]).placed  # the next batch too


def test_hosts_without_the_attribute_do_not_satisfy_the_limit() -> None:
    placer = Placer([host("bare", cpu=16), *racks(("a1", "a"))])
    n = needs(1, constraint=per("rack", 1))
    plan = placer.place([gang(task(n, "web", labels=(JOB,))) for _ in range(2)])
    assert [p.hostname for p in plan.placed] == ["a1"]


def test_running_tasks_count_and_limits_combine() -> None:
    hosts = [host("a1", cpu=16, labels=(Label("rack", "a"), Label("zone", "z1")), task_labels=((JOB, 1),)),
             host("b1", cpu=16, labels=(Label("rack", "b"), Label("zone", "z1"))),
             host("c1", cpu=16, labels=(Label("rack", "c"), Label("zone", "z2")))]
    both = AndConstraint((per("rack", 1), per("zone", 2)))
    plan = Placer(hosts).place([gang(task(needs(1, constraint=both), "web", labels=(JOB,)))
                                for _ in range(3)])
    assert sorted(p.hostname for p in plan.placed) == ["b1", "c1"]  # a is full; z1 then holds 2


def test_a_domain_leaf_needs_a_domain_and_is_a_limit() -> None:
    with pytest.raises(InvalidArgument):
        LabelConstraint(LabelKind.DOMAIN, Condition.LESS_THAN, JOB, 1)
    with pytest.raises(InvalidArgument):
        LabelConstraint(LabelKind.DOMAIN, Condition.EQUAL, JOB, 1, domain="rack")
    with pytest.raises(InvalidArgument):
        LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, JOB, 1, domain="rack")


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=8), st.integers(1, 3), st.integers(1, 12))
def test_no_rack_ever_exceeds_its_limit(layout: list[str], limit: int, tasks: int) -> None:
    hosts = racks(*[(f"h{i}", r) for i, r in enumerate(layout)])
    plan = Placer(hosts).place([gang(task(needs(1, constraint=per("rack", limit)), "web", labels=(JOB,)))
                                for _ in range(tasks)])
    rack_of = {f"h{i}": r for i, r in enumerate(layout)}
    per_rack = Counter(rack_of[p.hostname] for p in plan.placed)
    assert all(n <= limit for n in per_rack.values())
    assert len(plan.placed) == min(tasks, limit * len(set(layout)))  # 16 cpus each: only the limit binds


def test_domain_leaves_cross_the_daemon_wire_intact() -> None:
    from peloton.api.convert.private_sched import constraint_from_pb, constraint_to_pb

    tree = AndConstraint((per("rack", 2), LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, JOB, 1)))
    assert constraint_from_pb(constraint_to_pb(tree)) == tree
