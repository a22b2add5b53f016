"""Job and task methods over the in-memory FakePeloton: what Aurora sees, what Peloton is asked."""

from __future__ import annotations

from typing import Any

from aurorabridge.config import HandlerSettings, RespoolSettings
from aurorabridge.handlers import handler_table, updates
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.respool_loader import RespoolLoader
from aurorabridge.thrift_api import api, args_class
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.conftest import Call, FakeClock, messages

OK, INVALID = api.ResponseCode.OK, api.ResponseCode.INVALID_REQUEST
KEY = api.JobKey(role="www", environment="devel", name="hello")


def deploy(call: Call, instances: int = 3, name: str = "hello", role: str = "www") -> Any:
    resp = call(
        "startJobUpdate", request=b.update_request(b.task_config(role=role, name=name), instances), message=""
    )
    assert resp.responseCode == OK, messages(resp)
    return resp.result.startJobUpdateResult.key


def tasks(call: Call, **query: Any) -> list[Any]:
    resp = call("getTasksWithoutConfigs", query=api.TaskQuery(**query))
    assert resp.responseCode == OK, messages(resp)
    return list(resp.result.scheduleStatusResult.tasks)


def test_create_job_then_reject_a_duplicate_then_revive_after_kill(call: Call, fake: FakePeloton) -> None:
    config = b.job_configuration(instances=2)
    assert call("createJob", description=config).responseCode == OK
    spec = fake.calls_of("create_stateless_job")[-1]["spec"]
    assert spec.instance_count == 2 and fake.calls_of("create_stateless_job")[-1]["opaque_data"] == ""
    dup = call("createJob", description=config)
    assert dup.responseCode == INVALID and "already exists" in messages(dup)
    assert call("killTasks", job=KEY, instances=None, message="").responseCode == OK
    assert call("createJob", description=config).responseCode == OK
    revived = fake.calls_of("replace_job")[-1]
    assert revived["update_spec"].start_pods and revived["opaque_data"] == ""
    assert len(tasks(call, jobKeys=[KEY], statuses=[api.ScheduleStatus.RUNNING])) == 2


def test_listings_by_role_hide_killed_jobs(call: Call) -> None:
    deploy(call, 2, name="a")
    deploy(call, 1, name="b")
    deploy(call, 1, name="c", role="other")
    summaries = call("getJobSummary", role="www").result.jobSummaryResult.summaries
    assert sorted((s.job.key.name, s.job.instanceCount, s.stats.activeTaskCount) for s in summaries) == [
        ("a", 2, 2),
        ("b", 1, 1),
    ]
    assert len(call("getJobSummary", role="").result.jobSummaryResult.summaries) == 3
    jobs = call("getJobs", ownerRole="www").result.getJobsResult.configs
    assert all(c.taskConfig.executorConfig.name == "AuroraExecutor" for c in jobs)
    roles = call("getRoleSummary").result.roleSummaryResult.summaries
    assert [(r.role, r.jobCount) for r in roles] == [("other", 1), ("www", 2)]
    call("killTasks", job=api.JobKey(role="www", environment="devel", name="a"), instances=[], message="")
    summaries = call("getJobSummary", role="www").result.jobSummaryResult.summaries
    assert [s.job.key.name for s in summaries] == ["b"]
    assert call("getJobSummary", role="bad role!").responseCode == INVALID


def test_listings_reuse_configs_until_the_job_version_moves(call: Call, fake: FakePeloton) -> None:
    deploy(call, 1)
    call("getJobSummary", role="www")
    gets = len(fake.calls_of("get_stateless_job"))
    call("getJobSummary", role="www")
    assert len(fake.calls_of("get_stateless_job")) == gets
    fake.finish_workflow(fake.job_by_name("www/devel/hello").job_id)
    call("getJobSummary", role="www")
    assert len(fake.calls_of("get_stateless_job")) == gets + 1


def test_task_query_filters(call: Call, fake: FakePeloton) -> None:
    key = deploy(call, 4)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.set_pod(job_id, 3, pod_pb2.POD_STATE_PENDING, message="0 of 2 hosts fit: 2 insufficient memory")
    fake.set_pod(job_id, 2, pod_pb2.POD_STATE_FAILED)
    # The failed service instance is rescheduled: as in Aurora, its next task is listed PENDING.
    assert [t.assignedTask.instanceId for t in tasks(call, jobKeys=[key.job])] == [0, 1, 2, 2, 3]
    assert [
        t.assignedTask.instanceId for t in tasks(call, role="www", statuses=[api.ScheduleStatus.PENDING])
    ] == [2, 3]
    assert [
        t.assignedTask.instanceId
        for t in tasks(call, role="www", environment="devel", jobName="hello", instanceIds=[0, 2])
    ] == [0, 2, 2]
    task_id = f"{job_id}-1-1"
    assert [t.assignedTask.taskId for t in tasks(call, taskIds=[task_id])] == [task_id]
    assert tasks(call, slaveHosts=["elsewhere"]) == []
    assert [t.assignedTask.instanceId for t in tasks(call, jobKeys=[key.job], offset=1, limit=2)] == [1, 2]
    assert tasks(call, jobKeys=[api.JobKey(role="www", environment="devel", name="missing")]) == []
    reasons = call("getPendingReason", query=api.TaskQuery(role="www")).result.getPendingReasonResult.reasons
    assert sorted((r.taskId, r.reason) for r in reasons) == [
        (f"{job_id}-2-2", "Waiting to be placed"),
        (f"{job_id}-3-1", "0 of 2 hosts fit: 2 insufficient memory"),
    ]
    bad = call("getPendingReason", query=api.TaskQuery(role="www", statuses=[api.ScheduleStatus.RUNNING]))
    assert bad.responseCode == INVALID and "statuses" in messages(bad)


def test_big_listings_use_one_query_and_small_ones_fetch_history(call: Call, fake: FakePeloton) -> None:
    deploy(call, 30)
    before = len(fake.calls_of("get_pod_events_v1"))
    assert len(tasks(call, role="www")) == 30
    assert len(fake.calls_of("get_pod_events_v1")) == before  # over pod_events_max_pods: status only
    few = tasks(call, role="www", instanceIds=[1, 2])
    assert len(fake.calls_of("get_pod_events_v1")) == before + 2
    assert [e.message for e in few[0].taskEvents] == ["queued", None]


def test_kill_one_some_or_all(call: Call, fake: FakePeloton) -> None:
    key = deploy(call, 3)
    job_id = fake.job_by_name("www/devel/hello").job_id
    assert call("killTasks", job=key.job, instances=[0, 2, 9], message="").responseCode == OK
    assert sorted(c["name"] for c in fake.calls_of("stop_pod")) == [f"{job_id}-0", f"{job_id}-2"]
    assert call("killTasks", job=key.job, instances=[0, 1, 2], message="").responseCode == OK
    assert fake.calls_of("stop_stateless_job")[-1]["job_id"] == job_id
    missing = call(
        "killTasks", job=api.JobKey(role="www", environment="devel", name="nope"), instances=None, message=""
    )
    assert missing.responseCode == OK and messages(missing) == "No tasks to kill."
    assert (
        call(
            "killTasks", job=api.JobKey(role="www", environment="", name="x"), instances=None, message=""
        ).responseCode
        == INVALID
    )


def test_restart_shards_and_add_instances(call: Call, fake: FakePeloton) -> None:
    key = deploy(call, 3)
    fake.finish_workflow(fake.job_by_name("www/devel/hello").job_id)
    assert call("restartShards", job=key.job, shardIds=[0, 1]).responseCode == OK
    restart = fake.calls_of("restart_stateless_job")[-1]["restart_spec"]
    assert [(getattr(r, "from"), r.to) for r in restart.ranges] == [(0, 2)]  # half-open, as Peloton reads it
    assert call("restartShards", job=key.job, shardIds=[5]).responseCode == INVALID
    instance = api.InstanceKey(jobKey=key.job, instanceId=1)
    assert call("addInstances", key=instance, count=2).responseCode == OK
    grown = fake.calls_of("replace_job")[-1]
    assert grown["spec"].instance_count == 5 and grown["opaque_data"] == ""
    assert (
        call("addInstances", key=api.InstanceKey(jobKey=key.job, instanceId=9), count=1).responseCode
        == INVALID
    )
    assert call("addInstances", key=instance, count=0).responseCode == INVALID


def test_restart_and_add_are_refused_during_an_update(call: Call) -> None:
    key = deploy(call, 2)
    for method, kwargs in (
        ("restartShards", {"job": key.job, "shardIds": [0]}),
        ("addInstances", {"key": api.InstanceKey(jobKey=key.job, instanceId=0), "count": 1}),
    ):
        resp = call(method, **kwargs)
        assert resp.responseCode == api.ResponseCode.JOB_UPDATING_ERROR and key.id in messages(resp)


def test_config_summary_groups_instances_by_config(call: Call, fake: FakePeloton) -> None:
    key = deploy(call, 3)
    job = fake.job_by_name("www/devel/hello")
    fake.finish_workflow(job.job_id)
    changed = b.update_request(b.task_config(cpus=2.0), 3, only=[(2, 2)])
    assert call("startJobUpdate", request=changed, message="").responseCode == OK
    groups = call("getConfigSummary", job=key.job).result.configSummaryResult.summary.groups
    shapes = sorted(
        ([(r.first, r.last) for r in g.instances], {r.numCpus for r in g.config.resources} - {None})
        for g in groups
    )
    assert shapes == [([(0, 1)], {0.5}), ([(2, 2)], {2.0})]


def test_populate_job_config_fills_the_job_key(call: Call) -> None:
    config = b.job_configuration()
    config.taskConfig.job = None
    task = call("populateJobConfig", description=config).result.populateJobResult.taskConfig
    assert task.job == api.JobKey(role="www", environment="devel", name="hello")
    config.instanceCount = -1
    assert call("populateJobConfig", description=config).responseCode == INVALID


def test_peloton_errors_map_to_response_codes(call: Call, fake: FakePeloton) -> None:
    from peloton.core.errors import Unavailable

    def down(*args: Any, **kwargs: Any) -> Any:
        raise Unavailable("job manager is not reachable")

    fake.query_stateless_jobs = down  # type: ignore[method-assign]
    resp = call("getJobSummary", role="www")
    assert resp.responseCode == api.ResponseCode.ERROR_TRANSIENT and "not reachable" in messages(resp)


def test_earlier_runs_are_listed_when_pod_runs_depth_allows(fake: FakePeloton) -> None:
    from aurorabridge.config import HandlerSettings, RespoolSettings
    from aurorabridge.handlers import handler_table, updates
    from aurorabridge.handlers.context import BridgeContext
    from aurorabridge.respool_loader import RespoolLoader
    from aurorabridge.thrift_api import args_class

    ctx = BridgeContext(fake, RespoolLoader(fake, RespoolSettings()), HandlerSettings(pod_runs_depth=3),
                        on_pulse_expired=updates.pulse_expired)
    table = handler_table(ctx)

    def call(method: str, **kwargs: Any) -> Any:
        return table[method](args_class(method)(**kwargs))

    key = deploy(call, 2)
    fake.finish_workflow(fake.job_by_name("www/devel/hello").job_id)
    call("restartShards", job=key.job, shardIds=[1])
    runs = [(t.assignedTask.instanceId, t.assignedTask.taskId.rsplit("-", 1)[1], t.ancestorId)
            for t in tasks(call, jobKeys=[key.job])]
    job_id = fake.job_by_name("www/devel/hello").job_id
    assert runs == [(0, "1", None), (1, "2", f"{job_id}-1-1"), (1, "1", None)]


def test_earlier_runs_are_listed_by_default_and_cost_nothing_without_restarts(call: Any,
                                                                             fake: FakePeloton) -> None:
    key = deploy(call, 2)
    fake.finish_workflow(fake.job_by_name("www/devel/hello").job_id)
    assert len(tasks(call, jobKeys=[key.job])) == 2
    assert not fake.calls_of("get_pod"), "no instance has an earlier run: no GetPod call"
    call("restartShards", job=key.job, shardIds=[1])
    listed = [(t.assignedTask.instanceId, t.assignedTask.taskId.rsplit("-", 1)[1])
              for t in tasks(call, jobKeys=[key.job])]
    assert listed == [(0, "1"), (1, "2"), (1, "1")]  # Peloton's bridge's default depth of 6
    assert len(fake.calls_of("get_pod")) == 1


def test_a_revived_key_starts_every_instance_as_new(call: Call, fake: FakePeloton) -> None:
    config = b.job_configuration(instances=2)
    assert call("createJob", description=config).responseCode == OK
    assert call("killTasks", job=KEY, instances=None, message="").responseCode == OK
    assert call("createJob", description=config).responseCode == OK  # the same config again
    revived = fake.calls_of("replace_job")[-1]
    spec = revived["spec"]
    # Nothing changed but every instance is stopped: each is forced to start (Peloton's bridge).
    assert sorted(spec.instance_spec) == [0, 1]
    assert all("aurora_bridge_update" in {lab.key for lab in spec.instance_spec[i].labels}
               for i in (0, 1))
    assert revived["update_spec"].start_pods


def test_kill_tasks_says_no_tasks_only_when_none_is_live(call: Call, fake: FakePeloton) -> None:
    key = deploy(call, 2)
    job_id = fake.job_by_name("www/devel/hello").job_id
    assert call("killTasks", job=key.job, instances=None, message="").responseCode == OK
    # The job is being killed but one run is still going: it is killed again, not "no tasks".
    fake.set_pod(job_id, 1, pod_pb2.POD_STATE_KILLING)
    again = call("killTasks", job=key.job, instances=None, message="")
    assert again.responseCode == OK and messages(again) != "No tasks to kill."
    fake.set_pod(job_id, 1, pod_pb2.POD_STATE_KILLED)
    done = call("killTasks", job=key.job, instances=None, message="")
    assert done.responseCode == OK and messages(done) == "No tasks to kill."
    one = call("killTasks", job=key.job, instances=[0], message="")
    assert messages(one) == "No tasks to kill."


class SlowPods:
    """A FakePeloton whose new job shows no pods for the first `hidden` QueryPods calls, as the
    job manager's engine creates them a moment after CreateJob answers."""

    def __init__(self, fake: FakePeloton, hidden: int) -> None:
        self.fake, self.hidden, self.looks = fake, hidden, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fake, name)

    def query_pods(self, job_id: str, spec: Any, **kw: Any) -> Any:
        self.looks += 1
        if self.looks <= self.hidden:
            return type(self.fake.query_pods(job_id, spec, **kw))()
        return self.fake.query_pods(job_id, spec, **kw)


def _context_over(port: Any, clock: FakeClock, **settings: Any) -> BridgeContext:
    loader = RespoolLoader(port, RespoolSettings(retry_for_s=0, retry_interval_s=0))
    return BridgeContext(port, loader, HandlerSettings(workers=4, **settings), clock=clock,
                         sleep=clock.advance, on_pulse_expired=updates.pulse_expired)


def test_create_job_answers_once_its_tasks_exist(fake: FakePeloton, clock: FakeClock) -> None:
    # Aurora's client checks for the new job's tasks right after `--wait-until`; Aurora stored
    # them before createJob answered, so the bridge waits for Peloton's to exist.
    port = SlowPods(fake, hidden=5)
    table = handler_table(_context_over(port, clock))
    resp = table["createJob"](args_class("createJob")(description=b.job_configuration(instances=2)))
    assert resp.responseCode == OK, messages(resp)
    assert port.looks == 6
    query = api.TaskQuery(jobKeys=[KEY])
    found = table["getTasksWithoutConfigs"](args_class("getTasksWithoutConfigs")(query=query))
    assert len(found.result.scheduleStatusResult.tasks) == 2


def test_create_job_stays_ok_when_its_tasks_are_slower_than_the_wait(
        fake: FakePeloton, clock: FakeClock) -> None:
    port = SlowPods(fake, hidden=10**9)
    table = handler_table(_context_over(port, clock, create_visible_s=3.0))
    start = clock.now
    resp = table["createJob"](args_class("createJob")(description=b.job_configuration(instances=2)))
    assert resp.responseCode == OK, messages(resp)
    assert 3.0 <= clock.now - start < 3.1
    assert fake.calls_of("create_stateless_job")
