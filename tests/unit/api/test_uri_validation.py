"""A task's URIs (fetched files, immutable remote volumes) are checked at create through both
APIs: one the agent could not fetch is refused naming the field the client wrote."""

from __future__ import annotations

import pytest

from peloton.api.convert import v0_job, v1_job
from peloton.core.errors import InvalidArgument
from peloton.core.model.task import UriSpec
from tests.unit.api.helpers import v0_config, v1_spec


def test_v0_keeps_a_cached_uri_and_refuses_a_bad_one_naming_it() -> None:
    cfg = v0_config("service_job.yaml")
    cfg.defaultConfig.command.uris.add(value="https://h.invalid/conf-v1.json#sha256=" + "0" * 64,
                                       cache=True, output_file="etc/conf.json")
    spec = v0_job.job_spec_from_v0(cfg)
    assert spec.default_task.command.uris[-1] == UriSpec(
        "https://h.invalid/conf-v1.json#sha256=" + "0" * 64, cache=True,
        output_file="etc/conf.json")
    cfg.defaultConfig.command.uris.add(value="gopher://nn/data", cache=True)
    with pytest.raises(InvalidArgument, match="scheme must be one of file, ftp") as err:
        v0_job.job_spec_from_v0(cfg)
    index = len(cfg.defaultConfig.command.uris) - 1
    assert err.value.field == f"defaultConfig.command.uris[{index}]"


def test_v1_refuses_a_bad_checksum_naming_the_field() -> None:
    msg = v1_spec()
    msg.default_spec.mesos_spec.uris.add(value="http://h.invalid/x#sha256=nothex", cache=True)
    with pytest.raises(InvalidArgument, match="#sha256=<64 hex digits>") as err:
        v1_job.job_spec_from_v1(msg)
    assert err.value.field == "default_spec.mesos_spec.uris[0]"
