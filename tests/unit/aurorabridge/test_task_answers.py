"""What task queries share and reuse (task_answers, coalesce, the processor's encoding memo),
and that reuse never hides a change."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from aurorabridge import codec
from aurorabridge.coalesce import Coalescer
from aurorabridge.negotiation import Codec, Negotiated
from aurorabridge.processor import ThriftProcessor
from aurorabridge.responses import ok
from aurorabridge.task_answers import TaskAnswers
from aurorabridge.thrift_api import api, result_class
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import Unavailable
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge.conftest import Call
from tests.unit.aurorabridge.test_handlers_jobs_tasks import deploy
from tests.unit.aurorabridge.wire import decode_reply, encode_call

KEY = api.JobKey(role="www", environment="devel", name="hello")


def listing(call: Call, method: str = "getTasksWithoutConfigs") -> Any:
    resp = call(method, query=api.TaskQuery(jobKeys=[KEY]))
    assert resp.responseCode == api.ResponseCode.OK
    return resp


def test_an_unchanged_big_listing_is_the_same_reply_and_a_change_shows(call: Call, fake: FakePeloton) -> None:
    deploy(call, 30)  # over pod_events_max_pods: tasks come from pod statuses alone
    first = listing(call)
    gets = len(fake.calls_of("get_stateless_job"))
    assert listing(call) is first
    assert len(fake.calls_of("query_pods")) == 2, "every request still asks Peloton"
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.set_pod(job_id, 7, pod_pb2.POD_STATE_FAILED, message="exited 1")
    changed = listing(call)
    tasks, before = changed.result.scheduleStatusResult.tasks, first.result.scheduleStatusResult.tasks
    assert changed is not first
    # The failed instance's next task (Aurora reschedules at once) comes first, then the failed one.
    assert [t.status for t in tasks[7:9]] == [api.ScheduleStatus.PENDING, api.ScheduleStatus.FAILED]
    assert tasks[8].taskEvents[0].message == "exited 1"
    assert all(tasks[i + (i > 7)] is before[i] for i in range(30) if i != 7), "unchanged pods keep their task"
    assert len(fake.calls_of("get_stateless_job")) == gets + 1, "one spec lookup, for the changed pod"
    with_configs = listing(call, "getTasksStatus").result.scheduleStatusResult.tasks
    assert with_configs[0].assignedTask.task.executorConfig is not None
    assert tasks[0].assignedTask.task.executorConfig is None


def test_earlier_runs_are_read_once_per_run_and_every_change_shows(call: Call, fake: FakePeloton) -> None:
    """A big listing of pods with earlier runs: one GetPod per pod and run (not per request),
    the reply reused while nothing changed, and a new run or a new state listed at once."""
    deploy(call, 30)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.finish_workflow(job_id)
    fake.relaunch_pods(job_id, [3, 4])

    def runs_of(resp: Any, instance: int) -> list[tuple[str, int]]:
        return [(t.assignedTask.taskId, t.status) for t in resp.result.scheduleStatusResult.tasks
                if t.assignedTask.instanceId == instance]

    first = listing(call)
    assert [r for r, _ in runs_of(first, 3)] == [f"{job_id}-3-2", f"{job_id}-3-1"]
    assert len(fake.calls_of("get_pod")) == 2, "one GetPod per pod that has earlier runs"
    assert listing(call) is first, "nothing changed: the same reply"
    assert len(fake.calls_of("get_pod")) == 2, "earlier runs are not read again"

    fake.relaunch_pods(job_id, [3])
    fake.move_pods(job_id, [5], pod_pb2.POD_STATE_STARTING)
    changed = listing(call)
    assert changed is not first
    assert [r for r, _ in runs_of(changed, 3)] == [f"{job_id}-3-3", f"{job_id}-3-2", f"{job_id}-3-1"]
    assert runs_of(changed, 5) == [(f"{job_id}-5-1", api.ScheduleStatus.STARTING)]
    assert runs_of(changed, 4) == runs_of(first, 4)
    assert runs_of(changed, 4)[0] == (f"{job_id}-4-2", api.ScheduleStatus.RUNNING)
    assert len(fake.calls_of("get_pod")) == 3, "only the pod with a new run is read again"


def test_an_earlier_run_still_stopping_is_read_again_until_it_has_ended(
        call: Call, fake: FakePeloton) -> None:
    """An earlier run that has not ended (KILLING while the pod's next run exists) is neither
    remembered nor a reason to reuse the reply: its end shows in the next listing."""
    deploy(call, 30)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.finish_workflow(job_id)
    fake.relaunch_pods(job_id, [3])
    fake.jobs[job_id].history[3][0].status.state = pod_pb2.POD_STATE_KILLING

    def earlier(resp: Any) -> list[tuple[str, int]]:
        return [(t.assignedTask.taskId, t.status) for t in resp.result.scheduleStatusResult.tasks
                if t.assignedTask.instanceId == 3][1:]

    first = listing(call)
    assert earlier(first) == [(f"{job_id}-3-1", api.ScheduleStatus.KILLING)]
    fake.jobs[job_id].history[3][0].status.state = pod_pb2.POD_STATE_KILLED
    second = listing(call)
    assert second is not first
    assert earlier(second) == [(f"{job_id}-3-1", api.ScheduleStatus.KILLED)]
    assert len(fake.calls_of("get_pod")) == 2, "read again while it was stopping"
    assert listing(call) is second, "ended: remembered, and the reply reused"
    assert len(fake.calls_of("get_pod")) == 2


def _with_plain_list(resp: Any) -> Any:
    """`resp` with its tasks in a plain list (what the encoder writes without cached bytes)."""
    out = copy.copy(resp)
    out.result = api.Result(scheduleStatusResult=api.ScheduleStatusResult(
        tasks=list(resp.result.scheduleStatusResult.tasks)))
    return out


def test_a_changed_listing_is_spliced_from_cached_encodings_byte_for_byte(
        call: Call, fake: FakePeloton, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the runs that changed are encoded again, and the reply spliced from the cached
    bytes is the plain encoder's, in every form the processor answers (binary with and without
    an envelope, JSON), after runs were changed, added and removed."""
    deploy(call, 30)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.finish_workflow(job_id)
    fake.relaunch_pods(job_id, [3, 4])
    first = listing(call)
    encoded: list[Any] = []  # the tasks encoded
    replies: list[int] = []  # the tasks in each reply encoded
    real = codec.encode_struct

    def counted(obj: Any) -> bytes:
        if isinstance(obj, api.ScheduledTask):
            encoded.append(obj)
        elif isinstance(obj, result_class("getTasksWithoutConfigs")):
            replies.append(len(obj.success.result.scheduleStatusResult.tasks))
        return real(obj)

    monkeypatch.setattr(codec, "encode_struct", counted)
    fake.relaunch_pods(job_id, [3])  # added: run 3; changed: run 2 (ended)
    fake.move_pods(job_id, [5], pod_pb2.POD_STATE_STARTING)  # changed
    del fake.jobs[job_id].pods[29]  # removed
    second = listing(call)
    before = {id(t) for t in first.result.scheduleStatusResult.tasks}
    fresh = [t for t in second.result.scheduleStatusResult.tasks if id(t) not in before]
    assert [(t.assignedTask.taskId, t.status) for t in fresh] == [
        (f"{job_id}-3-3", api.ScheduleStatus.RUNNING), (f"{job_id}-3-2", api.ScheduleStatus.KILLED),
        (f"{job_id}-5-1", api.ScheduleStatus.STARTING)]
    assert encoded == fresh, "each new task encoded once, the unchanged ones not again"
    assert len(second.result.scheduleStatusResult.tasks) == 32

    forms = [(Negotiated(Codec.BINARY, Codec.BINARY), encode_call("getTasksWithoutConfigs")),
             (Negotiated(Codec.BINARY, Codec.BINARY, ("AuroraSchedulerManager", "getTasksWithoutConfigs")),
              encode_call("getTasksWithoutConfigs", envelope=False)),
             (Negotiated(Codec.JSON, Codec.JSON), encode_call("getTasksWithoutConfigs", json=True))]
    plain = _with_plain_list(second)
    for neg, request in forms:
        replies.clear()
        spliced = ThriftProcessor({"getTasksWithoutConfigs": lambda args: second}).process(neg, request, [])
        if neg.output is Codec.BINARY:
            assert replies and max(replies) <= 1, "spliced, not encoded whole"
        expected = ThriftProcessor({"getTasksWithoutConfigs": lambda args: plain}).process(neg, request, [])
        assert spliced.body == expected.body, neg
    assert len(encoded) == 3


def test_a_changed_big_listing_looks_again_only_at_the_pods_that_changed(
        call: Call, fake: FakePeloton, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an unchanged pod adds to a listing is remembered with its PodInfo: a change looks
    at the changed pod's runs alone, not at every run's status again."""
    deploy(call, 30)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.finish_workflow(job_id)
    fake.relaunch_pods(job_id, [3])
    first = listing(call)
    looked: list[str] = []
    real = TaskAnswers.task

    def counted(self: TaskAnswers, job: str, pod: str, executor: bool, status: Any, make: Any) -> Any:
        looked.append(status.pod_id.value)
        return real(self, job, pod, executor, status, make)

    monkeypatch.setattr(TaskAnswers, "task", counted)
    fake.move_pods(job_id, [5], pod_pb2.POD_STATE_STARTING)
    changed = listing(call)
    assert changed is not first
    assert looked == [f"{job_id}-5-1"]
    assert {t.assignedTask.taskId: t.status for t in changed.result.scheduleStatusResult.tasks}[
        f"{job_id}-5-1"] == api.ScheduleStatus.STARTING


def test_an_unfiltered_big_listing_is_the_filtered_path_s_listing(call: Call, fake: FakePeloton) -> None:
    """The unfiltered listing, built from what each pod adds, lists the same tasks in the same
    order as a listing whose filter matches every task, with runs waiting to start, earlier
    runs, one still stopping, and pages."""
    deploy(call, 30)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.finish_workflow(job_id)
    fake.relaunch_pods(job_id, [3, 4, 4])
    fake.jobs[job_id].history[3][0].status.state = pod_pb2.POD_STATE_KILLING
    fake.set_pod(job_id, 7, pod_pb2.POD_STATE_FAILED, message="exited 1")
    every = list(api.ScheduleStatus._VALUES_TO_NAMES)
    for page in ({}, {"offset": 5}, {"offset": 3, "limit": 25}):
        for _ in range(2):  # built afresh, then from what each pod added
            unfiltered = call("getTasksWithoutConfigs", query=api.TaskQuery(jobKeys=[KEY], **page))
            filtered = call("getTasksWithoutConfigs",
                            query=api.TaskQuery(jobKeys=[KEY], statuses=every, **page))
            assert list(unfiltered.result.scheduleStatusResult.tasks) == list(
                filtered.result.scheduleStatusResult.tasks), page
    assert len(unfiltered.result.scheduleStatusResult.tasks) == 25


def test_small_listings_are_not_reused(call: Call, fake: FakePeloton) -> None:
    deploy(call, 2)  # event history is fetched, and may change without the pod status changing
    assert listing(call) is not listing(call)


def test_overlapping_callers_share_a_run_that_started_after_they_asked() -> None:
    coalescer: Coalescer[int] = Coalescer()
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def fn() -> int:
        runs.append(len(runs) + 1)
        if len(runs) == 1:
            started.set()
            release.wait(5)
        return len(runs)

    results: dict[str, int] = {}

    def caller(name: str) -> None:
        results[name] = coalescer.run("job", fn)

    first = threading.Thread(target=caller, args=("first",))
    first.start()
    assert started.wait(5)
    late = [threading.Thread(target=caller, args=(f"late{i}",)) for i in range(3)]
    for t in late:
        t.start()
    release.set()
    for t in [first, *late]:
        t.join(5)
    # The late callers asked while run 1 was under way: they get run 2, not run 1's older answer.
    assert results == {"first": 1, "late0": 2, "late1": 2, "late2": 2}
    assert runs == [1, 2]
    assert coalescer.run("job", fn) == 3, "nothing left in flight"


def test_a_failed_shared_run_fails_its_callers_and_is_not_remembered() -> None:
    coalescer: Coalescer[int] = Coalescer()

    def down() -> int:
        raise Unavailable("job manager is not reachable")

    with pytest.raises(Unavailable):
        coalescer.run("job", down)
    assert coalescer.run("job", lambda: 5) == 5


_UNPATCHED = """
import subprocess
import sys
import threading
from pathlib import Path
import gevent
from aurorabridge.coalesce import Coalescer

coalescer = Coalescer()
runs = []

def fn():
    runs.append(1)
    gevent.sleep(0.05)  # yields to the hub, as a Peloton call does
    return len(runs)

results = []

def serve():
    greenlets = [gevent.spawn(coalescer.run, "job", fn) for _ in range(2)]
    gevent.joinall(greenlets, timeout=5)
    results.extend(g.value for g in greenlets)

thread = threading.Thread(target=serve, daemon=True)
thread.start()
thread.join(5)
print("blocked" if thread.is_alive() else results)
"""


def test_greenlets_of_an_unpatched_process_never_wait_on_each_other() -> None:
    """The bridge served from a native thread of an unpatched process (this test process is
    monkey-patched, so it runs in a child): a greenlet waiting on a real Event would stop
    its hub, so each runs its own computation."""
    done = subprocess.run([sys.executable, "-c", _UNPATCHED], capture_output=True, text=True,
                          timeout=30, cwd=Path(__file__).resolve().parents[3], check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2, 2]", "each ran its own computation (not blocked)"


def test_a_shared_reply_is_encoded_once_and_enveloped_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [api.ScheduledTask(assignedTask=api.AssignedTask(taskId=f"t-{i}" + "x" * 40, instanceId=i),
                               status=api.ScheduleStatus.RUNNING) for i in range(2000)]
    shared = ok(api.Result(scheduleStatusResult=api.ScheduleStatusResult(tasks=tasks)))
    processor = ThriftProcessor({"getTasksWithoutConfigs": lambda args: shared})
    encodes: list[int] = []
    real = codec.write_binary_result

    def counted(r: Any) -> bytes:
        encodes.append(1)
        return real(r)

    monkeypatch.setattr(codec, "write_binary_result", counted)
    neg = Negotiated(Codec.BINARY, Codec.BINARY)
    bodies = [processor.process(neg, encode_call("getTasksWithoutConfigs", seqid=s), []).body for s in (3, 4)]
    assert len(encodes) == 1
    for seqid, body in zip((3, 4), bodies, strict=True):
        call = codec.Call("getTasksWithoutConfigs", seqid, None)
        fresh = codec.write_reply(Codec.BINARY, call, result_class("getTasksWithoutConfigs")(success=shared))
        assert body == fresh
    assert len(decode_reply("getTasksWithoutConfigs", bodies[1]).result.scheduleStatusResult.tasks) == 2000

