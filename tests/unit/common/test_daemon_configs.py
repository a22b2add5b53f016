"""The daemon processes' config files: the examples in docs/config load, the environment wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.cluster.daemons.config import DEFAULT_PORTS, SCHEMAS, JobmgrProcessConfig, load
from peloton.common.leader import ElectionConfig
from peloton.core.errors import InvalidArgument
from peloton.jobmgr.config import JobManagerConfig

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


@pytest.mark.parametrize(("zk", "partitions", "want"), [
    ((), None, 0),                          # one process, no ZooKeeper: a single leader
    (("127.0.0.1:2181",), None, 64),        # with ZooKeeper: all-active members by default
    (("127.0.0.1:2181",), 0, 0),            # a single leader with standbys, asked for
    (("127.0.0.1:2181",), 8, 8),
    ((), 4, 4),                             # a solo member holding every partition
])
def test_a_job_manager_is_a_member_of_64_partitions_by_default_with_zookeeper(
        zk: tuple[str, ...], partitions: int | None, want: int) -> None:
    jobmgr = JobManagerConfig(partitions=partitions, member_session_timeout=2.5)
    config = JobmgrProcessConfig(election=ElectionConfig(zk_servers=zk, session_timeout=9.0),
                                 jobmgr=jobmgr)
    assert config.partitions == want
    # A member's ZooKeeper session is its own (short: a killed member's partitions move
    # after about this long); a leader's is the election's, as every other daemon's.
    assert config.session_timeout == (2.5 if want else 9.0)


def test_the_example_job_manager_config_is_a_member_with_a_three_second_session() -> None:
    config = load(SCHEMAS["jobmgr"], [DOCS / "jobmgr.yaml"], env={})
    assert isinstance(config, JobmgrProcessConfig)
    assert config.partitions == 64 and config.session_timeout == 3.0
    assert load(SCHEMAS["resmgr"], [DOCS / "resmgr.yaml"], env={}).session_timeout == 10.0


@pytest.mark.parametrize(("key", "value"), [("partitions", "-1"),
                                            ("member_session_timeout", "0")])
def test_bad_member_settings_are_named(key: str, value: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        load(SCHEMAS["jobmgr"], [], env={f"PELOTON_JOBMGR_{key.upper()}": value})
    assert err.value.field == f"jobmgr.{key}"
