"""The typed client finds the three leaders in a real ZooKeeper, as `peloton -z` does."""

from __future__ import annotations

import pytest

from peloton.api.client import PelotonClient
from peloton.common.leader import LeaderId, leader_path, new_client
from peloton.core.errors import Unavailable

pytestmark = pytest.mark.zookeeper


def test_client_dials_the_leaders_published_in_zookeeper(zookeeper: str) -> None:
    zk = new_client(zookeeper, use_gevent=False)
    zk.start(timeout=10)
    try:
        for role, port in (("jobmanager", 6392), ("resourcemanager", 6394), ("hostmanager", 6391)):
            path = leader_path("/cli-test", role)
            zk.create(path, LeaderId("h", "10.9.8.7", 1, port).to_json(), makepath=True)
            zk.create(f"{path}/candidate_", b"", ephemeral=True, sequence=True)
        client = PelotonClient(zk_servers=[zookeeper], zk_root="/cli-test", timeout=5)
        assert (client.endpoints.jobmgr, client.endpoints.resmgr, client.endpoints.hostmgr) == (
            "10.9.8.7:6392", "10.9.8.7:6394", "10.9.8.7:6391")
        client.close()
        with pytest.raises(Unavailable, match="no jobmanager leader"):
            PelotonClient(zk_servers=[zookeeper], zk_root="/no-cluster", timeout=1)
    finally:
        zk.stop()
        zk.close()
