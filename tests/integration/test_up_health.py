"""`peloton up` serves gRPC health and reflection and stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.harness.procs import PELOTON, OutputTail, free_port, stop


def test_up_answers_health_and_stops_on_sigterm(tmp_path) -> None:
    port = free_port()
    proc = subprocess.Popen([PELOTON, "up", "--grpc-port", str(port)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        OutputTail(proc).wait_for(f"127.0.0.1:{port}", timeout=30)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            refl = reflection_pb2_grpc.ServerReflectionStub(channel)
            answers = list(refl.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
            names = {s.name for s in answers[0].list_services_response.service}
            assert "grpc.health.v1.Health" in names
    finally:
        code = stop(proc, signal.SIGTERM)
    assert code == 0
