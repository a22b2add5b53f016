"""A job no host could ever hold, through the bridge in front of a real job manager.

Aurora accepts it and leaves its tasks PENDING (hosts may join, quota may grow), so that is the
bridge's default; `unfit_jobs="refuse"` gives Peloton's native rule, a refusal naming the
resource.  The hosts are the job manager test cluster's: four of 64 cpu.
"""

from __future__ import annotations

import pytest

from aurorabridge.config import HandlerSettings
from aurorabridge.thrift_api import api
from peloton.core.errors import InvalidArgument
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.on_jobmgr import Bridge, bridge_on, job_key
from tests.unit.jobmgr_servicers import conftest as served_jobmgr
from tests.unit.jobmgr_servicers.conftest import Cluster

#: The served job manager with four 64-cpu hosts (its fixture, used here by name).
cluster = served_jobmgr.cluster

TOO_BIG = b.job_configuration(b.task_config(cpus=500), instances=1)


def test_by_default_an_unfit_job_is_accepted_and_stays_pending(cluster: Cluster) -> None:
    # The fake resource manager would place it anyway; the real one keeps it queued with the
    # reason (tests/e2e/test_gorealis.py::test_pending_reason, against `peloton up`).
    cluster.rm.auto_place = False
    for bridge in bridge_on(cluster):
        resp = bridge.call("createJob", description=TOO_BIG)
        assert resp.responseCode == api.ResponseCode.OK, [d.message for d in resp.details or []]

        def task_statuses(of: Bridge = bridge) -> list[int] | None:
            return [t.status for t in of.tasks(job_key())] or None

        statuses = bridge.until(task_statuses, "the job's task")
        assert statuses == [api.ScheduleStatus.PENDING]


def test_refuse_gives_pelotons_rule_naming_the_resource(cluster: Cluster) -> None:
    for bridge in bridge_on(cluster, HandlerSettings(workers=4, unfit_jobs="refuse")):
        resp = bridge.call("createJob", description=TOO_BIG)
        assert resp.responseCode == api.ResponseCode.INVALID_REQUEST
        text = " ".join(d.message for d in resp.details or [])
        assert "500 cpu" in text and "can never run" in text, text
        assert not bridge.tasks(job_key())


def test_an_unknown_rule_is_refused_naming_the_setting() -> None:
    with pytest.raises(InvalidArgument) as err:
        HandlerSettings(unfit_jobs="maybe")
    assert err.value.field == "handlers.unfit_jobs"
