"""Services of Peloton's API that no daemon implements, served so callers get a clear answer.

Peloton declared these in its .proto files without any daemon serving them
(its apiserver only forwarded them).  We register their generated base
servicers through service_registry, so every method answers UNIMPLEMENTED
with a message naming it and pointing at the README's compatibility table,
instead of gRPC's bare "Method not found".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from peloton.api.gen.peloton.api.v0.job.svc import job_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool.svc import respool_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.task.svc import task_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.host.svc import host_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.respool.svc import respool_svc_pb2_grpc as v1_respool
from peloton.api.grpc_server import GrpcServer
from peloton.api.service_registry import register

UNSERVED: tuple[tuple[Callable[[Any, Any], None], type], ...] = (
    (job_svc_pb2_grpc.add_JobServiceServicer_to_server, job_svc_pb2_grpc.JobServiceServicer),
    (task_svc_pb2_grpc.add_TaskServiceServicer_to_server, task_svc_pb2_grpc.TaskServiceServicer),
    (respool_svc_pb2_grpc.add_ResourcePoolServiceServicer_to_server,
     respool_svc_pb2_grpc.ResourcePoolServiceServicer),
    (host_svc_pb2_grpc.add_HostServiceServicer_to_server, host_svc_pb2_grpc.HostServiceServicer),
    (v1_respool.add_ResourcePoolServiceServicer_to_server, v1_respool.ResourcePoolServiceServicer),
)


def register_unserved(server: GrpcServer) -> None:
    """Answer every method of the unserved services with a clear UNIMPLEMENTED."""
    for add_fn, base in UNSERVED:
        register(server, add_fn, base())
