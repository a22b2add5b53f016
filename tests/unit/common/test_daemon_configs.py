"""The daemon processes' config files: the examples in docs/config load, the environment wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.cluster.daemons.config import DEFAULT_PORTS, SCHEMAS, load
from peloton.core.errors import InvalidArgument

DOCS = Path(__file__).resolve().parents[3] / "docs" / "config"


@pytest.mark.parametrize("role", sorted(SCHEMAS))
def test_every_example_config_loads_into_its_schema(role: str) -> None:
    config = load(SCHEMAS[role], [DOCS / f"{role}.yaml"], env={})
    assert config.grpc.port == DEFAULT_PORTS[role]
    assert config.election.zk_servers == ("127.0.0.1:2181",)


def test_later_files_and_the_environment_override_earlier_values(tmp_path: Path) -> None:
    override = tmp_path / "dev.yaml"
    override.write_text("grpc:\n  port: 6394\nresmgr:\n  preemption_enabled: false\n")
    config = load(SCHEMAS["resmgr"], [DOCS / "resmgr.yaml", override],
                  env={"ELECTION_ZK_SERVERS": "zk1:2181,zk2:2181", "PELOTON_GRPC_HOST": "0.0.0.0"})
    assert config.grpc.port == 6394 and config.grpc.host == "0.0.0.0"
    assert config.election.zk_servers == ("zk1:2181", "zk2:2181")
    assert config.resmgr.preemption_enabled is False  # type: ignore[attr-defined]
    assert config.resmgr.scheduling_period == 0.1  # type: ignore[attr-defined]


def test_a_bad_key_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("peers:\n  call_timeout: 0\n")
    with pytest.raises(InvalidArgument, match=r"peers\.call_timeout") as err:
        load(SCHEMAS["jobmgr"], [bad], env={})
    assert err.value.field == "peers.call_timeout"


def test_the_mesos_section_is_the_backends_own_config_less_its_master(tmp_path: Path) -> None:
    # Every setting of the Mesos backend can be given (one dataclass: nothing to drift apart).
    ok = tmp_path / "mesos.yaml"
    ok.write_text("backend: mesos:127.0.0.1:5050\n"
                  "mesos:\n  offer_hold_secs: 60\n  reconcile_batch: 10\n  role: batch\n")
    config = load(SCHEMAS["hostmgr"], [ok], env={})
    assert config.mesos.offer_hold_secs == 60.0  # type: ignore[attr-defined]
    assert config.mesos.reconcile_batch == 10  # type: ignore[attr-defined]
    twice = tmp_path / "twice.yaml"
    twice.write_text("backend: mesos:127.0.0.1:5050\nmesos:\n  master: 10.0.0.1:5050\n")
    with pytest.raises(InvalidArgument, match="backend: mesos:MASTER") as err:
        load(SCHEMAS["hostmgr"], [twice], env={})
    assert err.value.field == "mesos.master"
