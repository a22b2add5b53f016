"""v0 TaskManager: every error case Peloton's handler distinguishes, with its answer.

Peloton's answers are read from uber/peloton pkg/jobmgr/tasksvc/handler.go.
Several of its texts embed Go renderings: `%v` of the JobID message
(`value:"<id>" `) and `err.Error()` of its storage's YARPC error
(`code:not-found message:Job runtime not found <id>`), which is how
Peloton's clients saw them.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.parity import Case, Ids, check
from tests.unit.jobmgr_servicers.test_error_parity_v0_jobs import UNKNOWN
from tests.unit.jobmgr_servicers.test_v0_methods import create_batch, tasks_stub, wait_states

S = grpc.StatusCode
RUNTIME = f"code:not-found message:Job runtime not found {UNKNOWN}"
CONFIG = f'job value:"{UNKNOWN}"  not found, Failed to get Job Runtime: {RUNTIME}'


def _jid(value: str) -> dict[str, str]:
    return {"value": value}


def _range(frm: int, to: int) -> task_pb2.InstanceRange:
    r = task_pb2.InstanceRange(to=to)
    setattr(r, "from", frm)
    return r


CASES = [
    Case("get a task of an unknown job",
         lambda c, ids: tasks_stub(c).Get(task_pb2.GetRequest(jobId=_jid(UNKNOWN)), timeout=10),
         body="notFound", message=CONFIG),
    Case("get an instance the job does not have",
         lambda c, ids: tasks_stub(c).Get(task_pb2.GetRequest(jobId=_jid(ids["batch"]),
                                                              instanceId=7), timeout=10),
         code=S.NOT_FOUND, message=lambda ids: f"task:{ids['batch']}-7 not found"),
    Case("list the tasks of an unknown job",
         lambda c, ids: tasks_stub(c).List(task_pb2.ListRequest(jobId=_jid(UNKNOWN)), timeout=10),
         body="notFound", message="err= <nil>"),
    Case("list a range without tasks",
         lambda c, ids: tasks_stub(c).List(task_pb2.ListRequest(jobId=_jid(ids["batch"]),
                                                                range=_range(5, 9)), timeout=10),
         body="notFound", message="err= <nil>"),
    Case("query the tasks of an unknown job",
         lambda c, ids: tasks_stub(c).Query(task_pb2.QueryRequest(jobId=_jid(UNKNOWN)),
                                            timeout=10),
         body="error.notFound",
         message=f'Failed to find job with id value:"{UNKNOWN}" , err={RUNTIME}'),
    Case("query tasks sorted by a field Peloton cannot sort by",
         lambda c, ids: tasks_stub(c).Query(task_pb2.QueryRequest(
             jobId=_jid(ids["batch"]), spec={"pagination": {"orderBy": [
                 {"property": {"value": "runId"}}]}}), timeout=10),
         body="error.notFound", message="err= Sort only supports fields: creation_time, host, "
                                        "instanceId, message, name, reason, state"),
    Case("start the tasks of an unknown job",
         lambda c, ids: tasks_stub(c).Start(task_pb2.StartRequest(jobId=_jid(UNKNOWN)),
                                            timeout=10),
         body="error.notFound", message=RUNTIME),
    Case("start the tasks of a terminated batch job",
         lambda c, ids: tasks_stub(c).Start(task_pb2.StartRequest(jobId=_jid(ids["killed"])),
                                            timeout=10),
         code=S.INVALID_ARGUMENT, message="cannot start tasks in a terminated job"),
    Case("stop the tasks of an unknown job",
         lambda c, ids: tasks_stub(c).Stop(task_pb2.StopRequest(jobId=_jid(UNKNOWN)), timeout=10),
         body="error.notFound", message=RUNTIME),
    Case("restart the tasks of an unknown job (nothing to restart, OK)",
         lambda c, ids: tasks_stub(c).Restart(task_pb2.RestartRequest(jobId=_jid(UNKNOWN)),
                                              timeout=10)),
    Case("refresh an unknown job",
         lambda c, ids: tasks_stub(c).Refresh(task_pb2.RefreshRequest(jobId=_jid(UNKNOWN)),
                                              timeout=10),
         code=S.NOT_FOUND, message="job not found"),
    Case("refresh a range without tasks",
         lambda c, ids: tasks_stub(c).Refresh(task_pb2.RefreshRequest(
             jobId=_jid(ids["batch"]), range=_range(5, 9)), timeout=10),
         code=S.NOT_FOUND, message="tasks not found"),
    Case("get the cache of a job not in the cache",
         lambda c, ids: tasks_stub(c).GetCache(task_pb2.GetCacheRequest(jobId=_jid(UNKNOWN)),
                                               timeout=10),
         code=S.NOT_FOUND, message="Job not found in cache"),
    Case("get the cache of a task not in the cache",
         lambda c, ids: tasks_stub(c).GetCache(task_pb2.GetCacheRequest(
             jobId=_jid(ids["batch"]), instanceId=9), timeout=10),
         code=S.NOT_FOUND, message="Task not found in cache"),
    Case("browse the sandbox of a task of an unknown job",
         lambda c, ids: tasks_stub(c).BrowseSandbox(task_pb2.BrowseSandboxRequest(
             jobId=_jid(UNKNOWN)), timeout=10),
         body="error.notFound", message=CONFIG),
    Case("pod events of an unknown job (none, OK)",
         lambda c, ids: tasks_stub(c).GetPodEvents(task_pb2.GetPodEventsRequest(
             jobId=_jid(UNKNOWN)), timeout=10)),
]


@pytest.fixture
def ids(cluster: Cluster) -> Iterator[Ids]:
    batch = create_batch(cluster, 2)
    killed = create_batch(cluster, 1)
    wait_states(cluster, batch, {0: task_pb2.RUNNING, 1: task_pb2.RUNNING})
    wait_states(cluster, killed, {0: task_pb2.RUNNING})
    tasks_stub(cluster).Stop(task_pb2.StopRequest(jobId=_jid(killed)), timeout=10)

    def is_killed() -> bool:
        state = cluster.v0jobs.Get(job_pb2.GetRequest(id=_jid(killed)), timeout=10)
        return job_pb2.JobState.Name(state.jobInfo.runtime.state) == "KILLED"

    cluster.until(is_killed, "the stopped job KILLED")
    yield {"batch": batch, "killed": killed}


def test_v0_task_manager_answers_every_error_case_as_peloton(cluster: Cluster, ids: Ids) -> None:
    for case in CASES:
        check(case, cluster, ids)
