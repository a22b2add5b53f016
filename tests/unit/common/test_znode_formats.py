"""The JSON written to ZooKeeper: Peloton's leader ID and Aurora's ServerSet member."""

from __future__ import annotations

import ipaddress

import pytest

from peloton.common.leader import AURORA_SCHEDULER, ElectionConfig, LeaderId, leader_path, listen_ip
from peloton.common.serverset import Endpoint, ServiceInstance
from peloton.core.errors import DataCorruption


def test_leader_id_json_is_byte_identical_to_peloton_go() -> None:
    leader = LeaderId(hostname="peloton-1", ip="10.0.0.5", http=5292, grpc=5392)
    assert leader.to_json() == (b'{"hostname":"peloton-1","ip":"10.0.0.5",'
                                b'"http":5292,"grpc":5392,"version":""}')
    assert LeaderId.from_json(leader.to_json()) == leader
    assert leader.grpc_address == "10.0.0.5:5392"


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"hostname":"h","ip":"1.2.3.4"}',
                                  b'{"hostname":"h","ip":"1.2.3.4","http":"x","grpc":1}'])
def test_unreadable_leader_ids_are_data_corruption(data: bytes) -> None:
    with pytest.raises(DataCorruption):
        LeaderId.from_json(data)


def test_leader_paths_and_election_config() -> None:
    assert leader_path("/peloton", "jobmanager") == "/peloton/jobmanager/leader"
    assert leader_path("/peloton/", AURORA_SCHEDULER) == "/peloton/aurora/scheduler/leader"
    assert ElectionConfig(zk_servers=("a:2181", "b:2181")).hosts == "a:2181,b:2181"


def test_listen_ip_is_an_address_of_this_host() -> None:
    ipaddress.ip_address(listen_ip())


def test_serverset_json_matches_aurora_and_round_trips() -> None:
    member = ServiceInstance.for_http("sched-1", 5396)
    assert member.to_json() == (b'{"serviceEndpoint":{"host":"sched-1","port":5396},'
                                b'"additionalEndpoints":{"http":{"host":"sched-1","port":5396}},'
                                b'"status":"ALIVE"}')
    assert ServiceInstance.from_json(member.to_json()) == member
    sharded = ServiceInstance(Endpoint("h", 8082), shard=0)
    assert ServiceInstance.from_json(sharded.to_json()).shard == 0


def test_http_url_prefers_https_then_http_then_the_service_endpoint() -> None:
    both = ServiceInstance(Endpoint("thrift", 8082),
                           {"http": Endpoint("h", 8081), "https": Endpoint("s", 8443)})
    assert both.http_url() == "https://s:8443"
    assert ServiceInstance(Endpoint("thrift", 8082), {"http": Endpoint("h", 8081)}).http_url() == "http://h:8081"
    assert ServiceInstance(Endpoint("only", 8082)).http_url() == "http://only:8082"
    with pytest.raises(DataCorruption):
        ServiceInstance.from_json(b'{"additionalEndpoints":{}}')
