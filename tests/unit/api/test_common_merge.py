"""Shared pieces: RFC 3339 times, entity versions, run ids, top-level config merge."""

from __future__ import annotations

import pytest

from peloton.api.convert import common
from peloton.api.convert.merge import merge_task_config, overridden_fields
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from tests.unit.api.helpers import JOB_ID


def test_times() -> None:
    assert common.time_to_rfc3339(0) == ""
    assert common.time_to_rfc3339(1_569_888_000.123456) == "2019-10-01T00:00:00.123456Z"
    assert common.time_from_rfc3339("2019-10-01T00:00:00.5Z", "t") == 1_569_888_000.5
    assert common.time_from_rfc3339("2019-10-01T02:00:00+02:00", "t") == 1_569_888_000.0
    assert common.time_from_rfc3339("", "t") == 0.0
    with pytest.raises(InvalidArgument) as err:
        common.time_from_rfc3339("yesterday", "startTime")
    assert err.value.field == "startTime"
    assert common.time_to_ns(1.5) == 1_500_000_000 and common.time_from_ns(2_500_000_000) == 2.5


def test_ids_and_versions() -> None:
    assert common.run_id_text(JOB_ID, 3, 7) == f"{JOB_ID}-3-7"
    assert common.run_of(f"{JOB_ID}-3-7", "taskId") == 7 and common.run_of("", "taskId") == 0
    with pytest.raises(InvalidArgument) as err:
        common.run_of("nope", "taskId")
    assert err.value.field == "taskId"
    assert common.job_id_from_wire(JOB_ID.upper()) == JOB_ID
    with pytest.raises(InvalidArgument) as err:
        common.job_id_from_wire("my-job", "jobId")
    assert err.value.field == "jobId"
    assert common.pod_entity_version(4) == "4-0-0"
    assert common.parse_entity_version("4-2-1") == (4, 2, 1)


def test_merge_is_top_level_and_bools_come_from_the_instance() -> None:
    base = task_pb2.TaskConfig(name="base", controller=True, killGracePeriodSeconds=10)
    base.resource.cpuLimit, base.resource.fdLimit = 1, 50
    base.labels.add(key="a", value="1")
    override = task_pb2.TaskConfig(name="", killGracePeriodSeconds=0)
    override.resource.cpuLimit = 2
    merged = merge_task_config(base, override)
    assert merged is not None
    assert merged.name == "base" and merged.killGracePeriodSeconds == 10  # zero values keep the base
    assert merged.resource.cpuLimit == 2 and merged.resource.fdLimit == 0  # replaced whole
    assert merged.controller is False  # a bool always comes from the instance config
    assert [lb.key for lb in merged.labels] == ["a"]
    assert overridden_fields(override) == {"resource", "controller", "revocable"}
    assert base.resource.cpuLimit == 1  # inputs untouched
    assert merge_task_config(None, override) is override and merge_task_config(base, None) is base
