"""A plain grpcio client generated from Peloton's OWN .proto files works against `peloton up`.

Our proto/ is proven wire-identical by tests/wire; this test goes one step further when a
checkout of uber/peloton is on the machine (the search tool's mirror): it compiles Peloton's
protobuf/ tree at test time into a temporary directory (nothing of it is committed), and a
separate Python process that sees only that generated code — not ours — creates a pool and a
batch job, watches it finish and reads it back, at both the v0 service paths and the renamed
legacy paths Peloton's own client used, with YARPC metadata.  Skipped when no checkout exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.harness.cluster import UpCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
MIRROR = Path(os.environ.get("PELOTON_ORIGINAL_REPO", "/work/.mirror/uber+peloton/repo"))

CLIENT = r'''
import sys, time, grpc
sys.path.insert(0, sys.argv[1])
from peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.v0.task import task_pb2, task_pb2_grpc
import peloton.api.v0.job.job_pb2 as check
assert check.__file__.startswith(sys.argv[1]), check.__file__  # Peloton's code, not ours
channel = grpc.insecure_channel(sys.argv[2])
meta = [("rpc-caller", "original-client"), ("rpc-service", "peloton-jobmgr"),
        ("rpc-encoding", "proto")]
pools = respool_pb2_grpc.ResourceManagerStub(channel)
cfg = respool_pb2.ResourcePoolConfig(name="orig")
cfg.parent.value = "root"
# Without an SLA a job is non-preemptible, which only runs within its pool's reservation.
for kind, amount in (("cpu", 1), ("memory", 512), ("disk", 512), ("gpu", 0)):
    cfg.resources.add(kind=kind, reservation=amount, limit=1000, share=1)
pool = pools.CreateResourcePool(respool_pb2.CreateRequest(config=cfg), metadata=meta, timeout=10)
assert not pool.HasField("error"), pool
jobs = job_pb2_grpc.JobManagerStub(channel)
config = job_pb2.JobConfig(name="original", instanceCount=3)
config.respoolID.value = pool.result.value
config.defaultConfig.resource.cpuLimit = 0.1
config.defaultConfig.resource.memLimitMb = 16
config.defaultConfig.command.shell = True
config.defaultConfig.command.value = "echo from the original client"
created = jobs.Create(job_pb2.CreateRequest(config=config), metadata=meta, timeout=10)
assert not created.HasField("error"), created
job_id = created.jobId
# Peloton's Python client called the v0 services at renamed paths; serve those too.
legacy = channel.unary_unary("/peloton.api.job.JobManager/Get",
                             request_serializer=job_pb2.GetRequest.SerializeToString,
                             response_deserializer=job_pb2.GetResponse.FromString)
deadline = time.time() + 90
while time.time() < deadline:
    info = legacy(job_pb2.GetRequest(id=job_id), metadata=meta, timeout=10).jobInfo
    if info.runtime.state == job_pb2.SUCCEEDED:
        break
    time.sleep(0.3)
assert info.runtime.state == job_pb2.SUCCEEDED, info.runtime
assert info.config.name == "original" and info.config.instanceCount == 3
tasks = task_pb2_grpc.TaskManagerStub(channel).List(task_pb2.ListRequest(jobId=job_id),
                                                      metadata=meta, timeout=10)
assert sorted(tasks.result.value) == [0, 1, 2]
assert {t.runtime.state for t in tasks.result.value.values()} == {task_pb2.SUCCEEDED}
print("ORIGINAL CLIENT OK")
'''


def _generate(dest: Path) -> Path:
    """Peloton's protobuf/ tree compiled for Python into `dest`; returns the import root."""
    src = dest / "src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", "protobuf"],
                             capture_output=True, check=True).stdout
    tar_path = dest / "protobuf.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(src, filter="data")
    root = src / "protobuf"
    out = dest / "gen"
    out.mkdir()
    files = [str(p.relative_to(root)) for p in (root / "peloton" / "api").rglob("*.proto")]
    files += [str(p.relative_to(root)) for p in (root / "mesos").rglob("*.proto")]
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"--python_out={out}",
                    f"--grpc_python_out={out}", *files], check=True, capture_output=True)
    # Regular packages, so these modules win over our own `peloton` package on sys.path.
    for directory in [out, *[d for d in out.rglob("*") if d.is_dir()]]:
        (directory / "__init__.py").touch()
    return out


@pytest.mark.skipif(not (MIRROR / "HEAD").exists() and not (MIRROR / ".git").exists(),
                    reason="no checkout of uber/peloton on this machine (set "
                           "PELOTON_ORIGINAL_REPO to one)")
def test_client_built_from_pelotons_own_protos_runs_a_job(tmp_path: Path) -> None:
    gen = _generate(tmp_path)
    up = UpCluster(tmp_path / "cluster", agents=1, extra=["--agent-cpus", "2",
                                                          "--agent-mem-mb", "2048"])
    (tmp_path / "cluster").mkdir()
    up.start()
    try:
        result = subprocess.run([sys.executable, "-c", CLIENT, str(gen),
                                 f"127.0.0.1:{up.jobmgr_port}"], capture_output=True, text=True,
                                timeout=180, cwd=tmp_path)
        assert "ORIGINAL CLIENT OK" in result.stdout, result.stdout + result.stderr
    finally:
        up.close()
