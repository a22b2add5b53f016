"""The Mesos backend finds the leading master in a real ZooKeeper (`mesos:zk://...`) and follows it.

Masters are published the way Mesos publishes them: sequential `json.info_` nodes under the
master path holding MasterInfo as JSON; the lowest sequence is the leader.  When the leader's
node goes, the link's ZooKeeper watch moves to the next master and the backend subscribes there as the
same framework (a new master learns frameworks as they re-subscribe).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from peloton.common.leader import new_client
from peloton.hostmgr.backends.mesos import MesosBackend, MesosConfig
from tests.harness.agents import Recorder
from tests.harness.fake_mesos import FakeMesosMaster
from tests.harness.fake_mesos_agent import AgentSpec
from tests.harness.procs import wait_for

pytestmark = pytest.mark.zookeeper


def _info(master: FakeMesosMaster) -> bytes:
    address = {"hostname": "127.0.0.1", "ip": "127.0.0.1", "port": master.port}
    return json.dumps({"id": str(uuid.uuid4()), "address": address, "hostname": "127.0.0.1",
                       "port": master.port, "version": master.version}).encode()


def test_the_leading_master_is_found_and_followed_in_zookeeper(zookeeper: str,
                                                               tmp_path: Path) -> None:
    first = FakeMesosMaster(tmp_path / "m1", (AgentSpec("on-first"),)).start()
    second = FakeMesosMaster(tmp_path / "m2", (AgentSpec("on-second"),)).start()
    root = f"/mesos-{uuid.uuid4().hex[:8]}"
    zk = new_client(zookeeper, use_gevent=False)
    zk.start(timeout=10)
    saved: list[tuple[str, str]] = []
    backend = MesosBackend(MesosConfig(master=f"zk://{zookeeper}{root}", tick_secs=0.05,
                                       agent_refresh_secs=0.5),
                           save_framework_id=lambda fid, sid: saved.append((fid, sid)))
    try:
        leader = zk.create(f"{root}/json.info_", _info(first), sequence=True, makepath=True)
        zk.create(f"{root}/json.info_", _info(second), sequence=True)
        recorder = Recorder(backend)
        backend.start(recorder)
        wait_for(lambda: "on-first" in recorder.hosts, 20, "the leader's agent")
        zk.delete(leader)  # the leader is gone: the next sequence leads
        wait_for(lambda: "on-second" in recorder.hosts, 30, "the new leader's agent")
        wait_for(lambda: ("on-first", "the agent is no longer active on the Mesos master")
                 in recorder.gone, 10, "the old leader's agent gone")
        assert len({fid for fid, _ in saved}) == 1 and list(second.frameworks) == [saved[0][0]]
    finally:
        backend.stop()
        zk.stop()
        zk.close()
        first.stop()
        second.stop()
