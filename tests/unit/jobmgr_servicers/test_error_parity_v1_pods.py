"""v1alpha PodService: every error case Peloton's handler distinguishes, with its answer.

Peloton's answers are read from uber/peloton pkg/jobmgr/podsvc/handler.go
(pod names parsed by its util.ParseTaskID; "task:<pod> not found" from its
task store; wrapped errors as described in v1_answers.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2 as pb
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.parity import Case, Ids, check
from tests.unit.jobmgr_servicers.test_error_parity_v0_jobs import UNKNOWN
from tests.unit.jobmgr_servicers.test_v0_methods import create_batch, tasks_stub, wait_states

S = grpc.StatusCode
GONE = f"{UNKNOWN}-0"


def _pod(name: str) -> dict[str, str]:
    return {"value": name}


CASES = [
    Case("get a pod whose name is too short",
         lambda c, ids: c.pods.GetPod(pb.GetPodRequest(pod_name=_pod("abc-1")), timeout=10),
         code=S.INVALID_ARGUMENT, message="invalid pelotonTaskID abc-1"),
    Case("get a pod whose instance is not a number",
         lambda c, ids: c.pods.GetPod(pb.GetPodRequest(pod_name=_pod(f"{UNKNOWN}-x")),
                                      timeout=10),
         code=S.INVALID_ARGUMENT, message=f"unable to parse instanceID {UNKNOWN}-x"),
    Case("restart a pod whose name cannot be parsed",
         lambda c, ids: c.pods.RestartPod(pb.RestartPodRequest(pod_name=_pod("abc")), timeout=10),
         code=S.INVALID_ARGUMENT, message="invalid pod name"),
    Case("get an unknown pod",
         lambda c, ids: c.pods.GetPod(pb.GetPodRequest(pod_name=_pod(GONE)), timeout=10),
         code=S.NOT_FOUND,
         message=f"failed to get task runtime: code:not-found message:task:{GONE} not found"),
    Case("get an instance the job does not have",
         lambda c, ids: c.pods.GetPod(pb.GetPodRequest(pod_name=_pod(f"{ids['batch']}-5")),
                                      timeout=10),
         code=S.NOT_FOUND, message=lambda ids: (
             f"failed to get task runtime: code:not-found message:task:{ids['batch']}-5 not found")),
    Case("start a pod of an unknown job",
         lambda c, ids: c.pods.StartPod(pb.StartPodRequest(pod_name=_pod(GONE)), timeout=10),
         code=S.NOT_FOUND, message=f"fail to get job config: code:not-found "
                                   f"message:Job runtime not found {UNKNOWN}"),
    Case("start a pod of a terminated batch job",
         lambda c, ids: c.pods.StartPod(pb.StartPodRequest(pod_name=_pod(f"{ids['killed']}-0")),
                                        timeout=10),
         code=S.INVALID_ARGUMENT, message="cannot start pod in terminated job"),
    Case("stop an unknown pod",
         lambda c, ids: c.pods.StopPod(pb.StopPodRequest(pod_name=_pod(GONE)), timeout=10),
         code=S.NOT_FOUND, message=f"task:{GONE} not found"),
    Case("restart an unknown pod",
         lambda c, ids: c.pods.RestartPod(pb.RestartPodRequest(pod_name=_pod(GONE)), timeout=10),
         code=S.NOT_FOUND, message=f"task:{GONE} not found"),
    Case("refresh an unknown pod",
         lambda c, ids: c.pods.RefreshPod(pb.RefreshPodRequest(pod_name=_pod(GONE)), timeout=10),
         code=S.NOT_FOUND,
         message=f"fail to get task info: code:not-found message:task:{GONE} not found"),
    Case("the events of an unknown pod (none, OK)",
         lambda c, ids: c.pods.GetPodEvents(pb.GetPodEventsRequest(pod_name=_pod(GONE)),
                                            timeout=10)),
    Case("the cache of a pod of a job not in the cache",
         lambda c, ids: c.pods.GetPodCache(pb.GetPodCacheRequest(pod_name=_pod(GONE)), timeout=10),
         code=S.NOT_FOUND, message="job not found in cache"),
    Case("the cache of a pod not in the cache",
         lambda c, ids: c.pods.GetPodCache(pb.GetPodCacheRequest(
             pod_name=_pod(f"{ids['batch']}-5")), timeout=10),
         code=S.NOT_FOUND, message="task not found in cache"),
]


@pytest.fixture
def ids(cluster: Cluster) -> Iterator[Ids]:
    batch = create_batch(cluster, 1)
    killed = create_batch(cluster, 1)
    wait_states(cluster, batch, {0: task_pb2.RUNNING})
    wait_states(cluster, killed, {0: task_pb2.RUNNING})
    tasks_stub(cluster).Stop(task_pb2.StopRequest(jobId={"value": killed}), timeout=10)

    def is_killed() -> bool:
        state = cluster.v0jobs.Get(job_pb2.GetRequest(id={"value": killed}), timeout=10)
        return job_pb2.JobState.Name(state.jobInfo.runtime.state) == "KILLED"

    cluster.until(is_killed, "the stopped job KILLED")
    yield {"batch": batch, "killed": killed}


def test_v1_pod_service_answers_every_error_case_as_peloton(cluster: Cluster, ids: Ids) -> None:
    for case in CASES:
        check(case, cluster, ids)
