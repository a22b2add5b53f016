"""Persistent volumes end to end (issue 25, item 1): a stateful job writes to its volume, is
killed, restarted, updated to a new command and has its agent killed and restarted, and reads
its data back every time; the volume APIs answer as Peloton's; deleting the job removes the
volume from the host.  Real processes: `peloton up --agents 0` plus one `peloton agent`."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from peloton.agent.volumes import volumes_root
from peloton.api.gen.peloton.api.v0.volume import volume_pb2
from peloton.api.gen.peloton.api.v0.volume.svc import volume_svc_pb2, volume_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1_peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.volume.svc import (
    volume_svc_pb2 as v1_volume_svc_pb2,
)
from peloton.api.gen.peloton.api.v1alpha.volume.svc import (
    volume_svc_pb2_grpc as v1_volume_svc_pb2_grpc,
)
from tests.e2e.conftest import write_pool
from tests.e2e.test_services import v0_job_id
from tests.harness.cluster import UpCluster, eventually
from tests.harness.procs import stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
RUNNING, KILLED = 8, 14
AGENT = ["--cpus", "2", "--mem-mb", "4096", "--disk-mb", "100000"]

# Each run appends its own line to the volume, then shows everything the volume holds.
JOB = """\
name: volume-db
owningteam: e2e
instancecount: 1
type: 1
sla:
  priority: 1
  preemptible: false
defaultconfig:
  resource:
    cpulimit: 0.1
    memlimitmb: 16
    disklimitmb: 10
  volume:
    containerpath: /data
    sizemb: 20
  command:
    shell: true
    value: 'echo {word}-$PELOTON_TASK_ID >> data/log && cat data/log && sleep 1000'
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[UpCluster]:
    up = UpCluster(tmp_path, agents=0).start()
    try:
        up.add_agent("disk-host", *AGENT)
        up.cli("respool", "create", "/vol", str(write_pool(tmp_path, "vol", cpu_res=1,
                                                          mem_res=1024, disk_res=1000)))
        yield up
    finally:
        up.close()


def _running_run(up: UpCluster, job_id: str, not_run: str = "") -> str:
    def check() -> str:
        rt = up.client.get_task(job_id, 0).result.runtime
        run = rt.mesosTaskId.value
        return run if rt.state == RUNNING and run != not_run else ""
    try:
        run: str = eventually(check, 90, f"a run other than {not_run or 'none'} RUNNING")
    except AssertionError:
        rt = up.client.get_task(job_id, 0).result.runtime
        raise AssertionError(f"{rt}\n{up.log()[-3000:]}") from None
    return run


def _log(up: UpCluster, job_id: str, run: str) -> list[str]:
    """The volume's content as run `run` printed it (its stdout ends with its own line)."""
    def read() -> list[str]:
        out = up.cli("task", "logs", job_id, "0", check=False).stdout.split()
        return out if out and out[-1].endswith(run) else []
    lines: list[str] = eventually(read, 30, f"stdout of {run}")
    return lines


def _volumes(up: UpCluster, job_id: str) -> dict[str, volume_pb2.PersistentVolumeInfo]:
    channel = grpc.insecure_channel(f"127.0.0.1:{up.jobmgr_port}")
    try:
        stub = volume_svc_pb2_grpc.VolumeServiceStub(channel)
        req = volume_svc_pb2.ListVolumesRequest()
        req.jobId.value = job_id
        return dict(stub.ListVolumes(req, timeout=10).volumes)
    finally:
        channel.close()


def test_stateful_job_keeps_its_volume_until_the_job_is_deleted(cluster: UpCluster,
                                                                 tmp_path: Path) -> None:
    up = cluster
    (tmp_path / "db.yaml").write_text(JOB.format(word="v1"))
    job_id = v0_job_id(up.cli("job", "create", "/vol", str(tmp_path / "db.yaml")).stdout)
    runs = [_running_run(up, job_id)]
    assert _log(up, job_id, runs[-1]) == [f"v1-{runs[0]}"]
    # The volume is reported, CREATED once its first run runs, on the host, of the asked size.
    created = eventually(lambda: [(k, v) for k, v in _volumes(up, job_id).items()
                                  if v.state == 2], 30, "volume CREATED")
    assert len(created) == 1
    vid, vol = created[0]
    assert vol.hostname == "disk-host" and vol.sizeMB == 20 and vol.containerPath == "/data"
    work = tmp_path / "agents" / "disk-host"
    sandboxes = work / "sandboxes"
    data = volumes_root(work, sandboxes.resolve() if sandboxes.is_symlink() else sandboxes)
    data = data / vid / "data"
    assert (data / "log").read_text().split() == [f"v1-{runs[0]}"]

    # The volume APIs answer as Peloton's: v1alpha sees the same volume as a pod's, an unknown
    # id is NOT_FOUND "volume not found", and a volume its running instance uses is refused.
    channel = grpc.insecure_channel(f"127.0.0.1:{up.jobmgr_port}")
    try:
        v0_stub = volume_svc_pb2_grpc.VolumeServiceStub(channel)
        v1_stub = v1_volume_svc_pb2_grpc.VolumeServiceStub(channel)
        got = v1_stub.GetVolume(v1_volume_svc_pb2.GetVolumeRequest(
            volume_id=v1_peloton_pb2.VolumeID(value=vid)), timeout=10).result
        assert (got.pod_name.value, got.state, got.size_mb) == (f"{job_id}-0", 2, 20)
        for call, req in ((v0_stub.GetVolume, volume_svc_pb2.GetVolumeRequest()),
                          (v0_stub.DeleteVolume, volume_svc_pb2.DeleteVolumeRequest())):
            with pytest.raises(grpc.RpcError) as err:
                call(req, timeout=10)
            assert (err.value.code(), err.value.details()) == (grpc.StatusCode.NOT_FOUND,
                                                               "volume not found")
        delete = volume_svc_pb2.DeleteVolumeRequest()
        delete.id.value = vid
        with pytest.raises(grpc.RpcError) as err:
            v0_stub.DeleteVolume(delete, timeout=10)
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INTERNAL,
                                                           "volume is being used")
    finally:
        channel.close()

    # Killed and started again: the same volume.
    up.cli("task", "stop", job_id)
    eventually(lambda: up.client.get_task(job_id, 0).result.runtime.state == KILLED, 60, "KILLED")
    up.cli("task", "start", job_id)
    runs.append(_running_run(up, job_id, runs[-1]))
    # Restarted: the same volume.
    up.cli("task", "restart", job_id)
    runs.append(_running_run(up, job_id, runs[-1]))
    assert _log(up, job_id, runs[-1]) == [f"v1-{r}" for r in runs]

    # Updated to a new command: the new command reads what the old one wrote.
    (tmp_path / "db2.yaml").write_text(JOB.format(word="v2"))
    up.cli("update", "create", job_id, str(tmp_path / "db2.yaml"), "1", "/vol", "--wait",
           timeout=120)
    runs.append(_running_run(up, job_id, runs[-1]))
    assert _log(up, job_id, runs[-1]) == [f"v1-{r}" for r in runs[:-1]] + [f"v2-{runs[-1]}"]

    # The agent crashes (kill -9) and comes back: its run is adopted, the volume is there, and
    # the next run after it still reads everything.
    proc, _ = up.extra_agents.pop()
    stop(proc, signal.SIGKILL, timeout=10)
    up.add_agent("disk-host", *AGENT)
    eventually(lambda: "disk-host" in up.cli("host", "query").stdout, 60, "agent back")
    up.cli("task", "restart", job_id)
    runs.append(_running_run(up, job_id, runs[-1]))
    assert _log(up, job_id, runs[-1]) == ([f"v1-{r}" for r in runs[:3]]
                                          + [f"v2-{r}" for r in runs[3:]])
    assert set(_volumes(up, job_id)) == {vid}, "one volume for the instance, whatever happened"

    # Deleting the job removes the volume from its host.
    up.cli("job", "stop", job_id)
    eventually(lambda: up.client.get_task(job_id, 0).result.runtime.state == KILLED, 60, "KILLED")
    up.cli("job", "delete", job_id)
    eventually(lambda: not data.parent.exists(), 60, "volume directory removed")
