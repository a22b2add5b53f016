"""The typed client on its own: wire paths, metadata, error mapping, discovery."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from peloton.api.client import DeadlineExceeded, PelotonClient
from peloton.api.client_discovery import endpoints_from, normalize_address
from peloton.api.client_errors import embedded_error
from peloton.api.gen.peloton.api.v0.errors import errors_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.grpc_server import GrpcServer
from peloton.core import errors
from tests.unit.cli.fakes import JOB

#: Address of the legacy-path server, the metadata it saw, and the event releasing slow calls.
Legacy = tuple[str, list[dict[str, str]], threading.Event]


@pytest.fixture
def legacy_only() -> Iterator[Legacy]:
    """A server that answers JobManager.Get only at Peloton's renamed path, as Uber's jobmgr does."""
    seen: list[dict[str, str]] = []
    release = threading.Event()

    def get(request: Any, context: grpc.ServicerContext) -> Any:
        seen.append(dict(context.invocation_metadata()))
        if request.id.value == "slow":
            release.wait(5)
        return job_pb2.GetResponse(jobInfo=job_pb2.JobInfo(id=request.id))

    handler = grpc.unary_unary_rpc_method_handler(
        get, request_deserializer=job_pb2.GetRequest.FromString,
        response_serializer=job_pb2.GetResponse.SerializeToString)
    server = GrpcServer("127.0.0.1:0", max_workers=4)
    server.add_generic([grpc.method_handlers_generic_handler("peloton.api.job.JobManager", {"Get": handler})],
                       ["peloton.api.job.JobManager"])
    server.start()
    yield f"127.0.0.1:{server.port}", seen, release
    release.set()
    server.stop(grace=0)


def test_v0_job_manager_is_called_at_the_legacy_path_with_yarpc_metadata(
        legacy_only: Legacy) -> None:
    address, seen, _ = legacy_only
    with PelotonClient(address, address, address, caller="peloton-aurorabridge") as client:
        assert client.get_job(JOB).jobInfo.id.value == JOB
    assert seen[0]["rpc-caller"] == "peloton-aurorabridge"
    assert seen[0]["rpc-service"] == "peloton-jobmgr"
    assert seen[0]["rpc-encoding"] == "proto"


def test_deadline_is_sent_and_enforced(legacy_only: Legacy) -> None:
    address, _, release = legacy_only
    with PelotonClient(address, address, address, timeout=0.2) as client, \
            pytest.raises(DeadlineExceeded, match=r"within 0\.2s"):
        client.get_job("slow")
    release.set()


def test_basic_auth_headers_ride_along(legacy_only: Legacy) -> None:
    address, seen, _ = legacy_only
    with PelotonClient(address, address, address, headers={"username": "u", "password": "p"}) as client:
        client.get_job(JOB)
    assert (seen[0]["username"], seen[0]["password"]) == ("u", "p")


def test_unimplemented_method_maps_to_unimplemented(
        legacy_only: Legacy) -> None:
    address, _, _ = legacy_only
    with PelotonClient(address, address, address) as client, pytest.raises(errors.Unimplemented):
        client.get_active_jobs()


@pytest.mark.parametrize("response,kind,text", [
    (job_pb2.CreateResponse(error=job_pb2.CreateResponse.Error(
        alreadyExists=job_pb2.JobAlreadyExists(message="job x exists"))),
     errors.AlreadyExists, "job x exists"),
    (job_pb2.GetResponse(error=job_pb2.GetResponse.Error(
        notFound=errors_pb2.JobNotFound(message="job x not found"))), errors.NotFound, "job x not found"),
    (respool_pb2.DeleteResponse(error=respool_pb2.DeleteResponse.Error(
        isBusy=respool_pb2.ResourcePoolIsBusy(message="busy"))), errors.FailedPrecondition, "busy"),
    (task_pb2.GetResponse(outOfRange=task_pb2.InstanceIdOutOfRange(instanceCount=4)), errors.InvalidArgument,
     "0..3"),
    (task_pb2.GetPodEventsResponse(error=task_pb2.GetPodEventsResponse.Error(message="boom")),
     errors.PelotonError, "boom"),
])
def test_embedded_v0_errors_become_typed_errors(response: Any, kind: type, text: str) -> None:
    err = embedded_error(response)
    assert type(err) is kind and text in str(err)


def test_success_responses_carry_no_error() -> None:
    assert embedded_error(job_pb2.CreateResponse()) is None
    assert embedded_error(task_pb2.StopResponse(invalidInstanceIds=[3])) is None


def test_invalid_config_names_the_field() -> None:
    err = embedded_error(job_pb2.CreateResponse(error=job_pb2.CreateResponse.Error(
        invalidConfig=job_pb2.InvalidJobConfig(message="bad"))))
    assert isinstance(err, errors.InvalidArgument) and err.field == "config"


def test_discovery_asks_one_leader_per_role() -> None:
    leaders = {"jobmanager": "10.0.0.1:5392", "resourcemanager": "10.0.0.2:5394",
               "hostmanager": "10.0.0.3:5391"}
    found = endpoints_from(leaders.__getitem__)
    assert (found.jobmgr, found.resmgr, found.hostmgr) == ("10.0.0.1:5392", "10.0.0.2:5394", "10.0.0.3:5391")


def test_addresses_accept_the_original_url_forms() -> None:
    assert normalize_address("localhost:5392") == "localhost:5392"
    assert normalize_address("grpc://10.1.2.3:5392/") == "10.1.2.3:5392"
    assert normalize_address("http://peloton-jobmgr:5392/api") == "peloton-jobmgr:5392"
