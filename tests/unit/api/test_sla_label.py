"""The task label `peloton/sla-policy` (a task's own policy in SLA-aware host drains): read
at create through both APIs, a malformed one refused naming the field."""

from __future__ import annotations

import pytest

from peloton.api.convert import v0_job, v1_job
from peloton.core.errors import InvalidArgument
from peloton.core.model.sla_policy import CountSla
from peloton.core.sla import TASK_SLA_LABEL, TaskSla, task_sla, task_sla_label
from tests.unit.api.helpers import v0_config, v1_spec

GOOD = task_sla_label(TaskSla(CountSla(2, 60), production=False)).value
BAD = '{"countSlaPolicy": {"count": -1}}'


def test_v0_reads_the_label_and_refuses_a_bad_one_naming_the_field() -> None:
    cfg = v0_config("service_job.yaml")
    cfg.defaultConfig.labels.add(key=TASK_SLA_LABEL, value=GOOD)
    spec = v0_job.job_spec_from_v0(cfg)
    assert task_sla(spec.default_task.labels) == TaskSla(CountSla(2, 60), production=False)
    cfg.defaultConfig.labels[-1].value = BAD
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "defaultConfig.labels"
    assert TASK_SLA_LABEL in str(err.value) and "count must be >= 0" in str(err.value)


def test_v1_refuses_a_bad_label_naming_the_field() -> None:
    msg = v1_spec()
    msg.default_spec.labels.add(key=TASK_SLA_LABEL, value="not json")
    with pytest.raises(InvalidArgument) as err:
        v1_job.job_spec_from_v1(msg)
    assert err.value.field == "default_spec.labels"
