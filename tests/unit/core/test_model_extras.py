"""Port allocation and constraint evaluation helpers added to the model."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
    Verdict,
    evaluate,
    explain_mismatch,
    names_host_label_key,
)
from peloton.core.model.resources import PortRange
from peloton.core.placement.portpool import PortPool


def test_port_pool_take_and_give() -> None:
    pool = PortPool([PortRange(5, 7), PortRange(9, 9)])
    assert pool.take(3) == (5, 6, 7) and pool.free == 1
    pool.give((6, 5))
    assert pool.ranges == [[5, 6], [9, 9]] and pool.free == 3
    with pytest.raises(InvalidArgument):
        pool.take(4)


ZA = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1)
JOB = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("job", "x"), 1)


def _count(**labels: int):  # type: ignore[no-untyped-def]
    return lambda lb: labels.get(lb.value, 0)


def test_evaluate_semantics() -> None:
    assert evaluate(ZA, LabelKind.HOST, _count(a=1)) is Verdict.MATCH
    assert evaluate(ZA, LabelKind.HOST, _count()) is Verdict.MISMATCH
    assert evaluate(JOB, LabelKind.HOST, _count()) is Verdict.NOT_APPLICABLE
    both = AndConstraint((ZA, JOB))
    assert evaluate(both, LabelKind.HOST, _count(a=1)) is Verdict.MATCH
    assert evaluate(both, LabelKind.TASK, _count(x=1)) is Verdict.MISMATCH
    either = OrConstraint((JOB, ZA))
    assert evaluate(either, LabelKind.HOST, _count()) is Verdict.MISMATCH
    assert evaluate(AndConstraint(()), LabelKind.HOST, _count()) is Verdict.NOT_APPLICABLE
    gt = LabelConstraint(LabelKind.HOST, Condition.GREATER_THAN, Label("zone", "a"), 1)
    assert evaluate(gt, LabelKind.HOST, _count(a=2)) is Verdict.MATCH


def test_explain_and_exclusive_key() -> None:
    nested = AndConstraint((JOB, AndConstraint((ZA,))))
    assert explain_mismatch(nested, LabelKind.HOST, _count()) is ZA
    assert names_host_label_key(nested, "zone")
    assert not names_host_label_key(nested, "job")
