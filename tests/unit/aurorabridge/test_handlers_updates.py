"""Update methods and the pulse timer over the FakePeloton, with a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from aurorabridge import opaque_data
from aurorabridge.handlers import updates
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.pelotonpy.api.update import update_pb2 as opt
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.conftest import Call, FakeClock, messages

OK, INVALID = api.ResponseCode.OK, api.ResponseCode.INVALID_REQUEST
U = api.JobUpdateStatus
NAME = "www/devel/hello"


def start(call: Call, request: Any) -> Any:
    resp = call("startJobUpdate", request=request, message="rolling")
    assert resp.responseCode == OK, messages(resp)
    return resp.result.startJobUpdateResult.key


def status(call: Call, key: Any) -> int:
    details = call("getJobUpdateDetails", key=key, query=None).result.getJobUpdateDetailsResult
    return int(details.detailsList[0].update.summary.state.status)


def test_first_update_creates_the_job_and_later_ones_replace_it(call: Call, fake: FakePeloton) -> None:
    first = start(call, b.update_request(instances=2))
    created = fake.calls_of("create_stateless_job")[-1]
    data = opaque_data.parse(created["opaque_data"])
    assert (data.update_id, data.message, data.metadata) == (first.id, "rolling", (("sha", "abc"),))
    job = fake.job_by_name(NAME)
    fake.finish_workflow(job.job_id)
    second = start(call, b.update_request(b.task_config(cpus=1.0), instances=2, group=2))
    replace = fake.calls_of("replace_job")[-1]
    assert replace["version"] == "1-1-2" and replace["update_spec"].batch_size == 2
    assert opaque_data.parse(replace["opaque_data"]).update_id == second.id != first.id
    summaries = call("getJobUpdateSummaries", jobUpdateQuery=api.JobUpdateQuery(role="www"))
    listed = summaries.result.getJobUpdateSummariesResult.updateSummaries
    assert [(s.key.id, s.state.status) for s in listed] == [
        (second.id, U.ROLLING_FORWARD),
        (first.id, U.ROLLED_FORWARD),
    ]
    only_done = call(
        "getJobUpdateSummaries",
        jobUpdateQuery=api.JobUpdateQuery(role="www", updateStatuses=[U.ROLLED_FORWARD]),
    ).result.getJobUpdateSummariesResult.updateSummaries
    assert [s.key.id for s in only_done] == [first.id]
    details = call("getJobUpdateDetails", key=None, query=api.JobUpdateQuery(key=second)).result
    update = details.getJobUpdateDetailsResult.detailsList[0]
    assert update.update.instructions.desiredState.task.resources[0].numCpus == 1.0
    assert [e.instanceId for e in update.instanceEvents] == [0, 1]


def test_no_op_updates_start_nothing_and_name_the_update_in_place(call: Call, fake: FakePeloton) -> None:
    first = start(call, b.update_request(instances=2))
    fake.finish_workflow(fake.job_by_name(NAME).job_id)
    resp = call("startJobUpdate", request=b.update_request(instances=2), message="")
    assert resp.responseCode == OK and messages(resp) == updates.NOOP_UPDATE
    result = resp.result.startJobUpdateResult
    assert result.key.id == first.id and result.updateSummary.state.status == U.ROLLED_FORWARD
    assert status(call, result.key) == U.ROLLED_FORWARD  # the key reads back
    assert not fake.calls_of("replace_job")


def test_a_no_op_update_of_a_job_without_one_starts_a_real_update(call: Call, fake: FakePeloton) -> None:
    assert call("createJob", description=b.job_configuration(b.task_config(), 2)).responseCode == OK
    key = start(call, b.update_request(instances=2))
    assert len(fake.calls_of("replace_job")) == 1
    assert status(call, key) == U.ROLLING_FORWARD


def test_a_second_update_replaces_the_running_one_when_configured(fake: FakePeloton,
                                                                  clock: FakeClock) -> None:
    from aurorabridge.config import HandlerSettings, RespoolSettings
    from aurorabridge.handlers import handler_table
    from aurorabridge.respool_loader import RespoolLoader
    from aurorabridge.thrift_api import args_class

    ctx = BridgeContext(fake, RespoolLoader(fake, RespoolSettings(retry_for_s=0)),
                        HandlerSettings(concurrent_updates=updates.REPLACE_RUNNING), clock=clock,
                        on_pulse_expired=updates.pulse_expired)
    table = handler_table(ctx)

    def replace_call(method: str, **kwargs: Any) -> Any:
        return table[method](args_class(method)(**kwargs))

    first = start(replace_call, b.update_request())
    second = start(replace_call, b.update_request(b.task_config(cpus=3.0)))
    assert second.id != first.id
    assert [c["job_id"] for c in fake.calls_of("abort_workflow")] == [fake.job_by_name(NAME).job_id]
    assert status(replace_call, second) == U.ROLLING_FORWARD
    assert status(replace_call, first) == U.ABORTED


def test_update_settings_round_trip_with_their_strategy(call: Call, fake: FakePeloton) -> None:
    settings = b.settings(only=[(0, 1)], rollback=True)
    settings.minWaitInInstanceRunningMs = 5000
    settings.updateStrategy = api.JobUpdateStrategy(varBatchStrategy=api.VariableBatchJobUpdateStrategy(
        groupSizes=[1, 2, 3], autopauseAfterBatch=True))
    request = api.JobUpdateRequest(taskConfig=b.task_config(), instanceCount=3, settings=settings,
                                   metadata=[])
    key = start(call, request)
    back = call("getJobUpdateDetails", key=key, query=None).result.getJobUpdateDetailsResult.detailsList[0]
    read = back.update.instructions.settings
    assert read.minWaitInInstanceRunningMs == 5000 and read.rollbackOnFailure is True
    assert read.updateStrategy.varBatchStrategy.groupSizes == [1, 2, 3]
    assert read.updateStrategy.varBatchStrategy.autopauseAfterBatch is True
    assert [(r.first, r.last) for r in read.updateOnlyTheseInstances] == [(0, 1)]
    summary = call("getJobUpdateSummaries", jobUpdateQuery=api.JobUpdateQuery(key=key))
    assert summary.result.getJobUpdateSummariesResult.updateSummaries[0].key.id == key.id


@pytest.mark.parametrize(("wait_for_batch", "kind"), [(False, "queueStrategy"), (True, "batchStrategy")])
def test_an_update_without_a_strategy_reports_aurora_s_default(call: Call, wait_for_batch: bool,
                                                              kind: str) -> None:
    request = b.update_request(group=2)
    request.settings.waitForBatchCompletion = wait_for_batch
    key = start(call, request)
    read = call("getJobUpdateDetails", key=key, query=None).result.getJobUpdateDetailsResult
    strategy = read.detailsList[0].update.instructions.settings.updateStrategy
    assert getattr(strategy, kind).groupSize == 2
    assert [s for s in ("queueStrategy", "batchStrategy", "varBatchStrategy")
            if getattr(strategy, s) is not None] == [kind]


def test_updates_of_older_bridges_report_a_strategy(call: Call, fake: FakePeloton) -> None:
    key = start(call, b.update_request(group=2))
    job = fake.job_by_name(NAME)
    data = opaque_data.parse(job.workflows[-1].opaque_data.data)
    fake._set_workflow_state(job, job.workflows[-1].status.state,
                             opaque_data.OpaqueData(data.update_id, data.actions).to_json())
    read = call("getJobUpdateDetails", key=key, query=None).result.getJobUpdateDetailsResult
    settings = read.detailsList[0].update.instructions.settings
    assert settings.updateStrategy.queueStrategy.groupSize == 2


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda s: setattr(s, "updateStrategy", api.JobUpdateStrategy(
        varBatchStrategy=api.VariableBatchJobUpdateStrategy(groupSizes=[], autopauseAfterBatch=False))),
     "settings.updateStrategy.varBatchStrategy.groupSizes"),
    (lambda s: setattr(s, "updateStrategy", api.JobUpdateStrategy(
        varBatchStrategy=api.VariableBatchJobUpdateStrategy(groupSizes=[2, 0], autopauseAfterBatch=False))),
     "settings.updateStrategy.varBatchStrategy.groupSizes"),
    (lambda s: setattr(s, "minWaitInInstanceRunningMs", -1), "minWaitInInstanceRunningMs"),
])
def test_bad_settings_are_refused_naming_the_field(call: Call, fake: FakePeloton, mutate: Any,
                                                   field: str) -> None:
    request = b.update_request()
    mutate(request.settings)
    resp = call("startJobUpdate", request=request, message="")
    assert resp.responseCode == INVALID and field in messages(resp), messages(resp)
    assert not fake.calls_of("create_stateless_job") and not fake.calls_of("replace_job")


def test_a_second_update_is_refused_while_one_runs(call: Call, fake: FakePeloton) -> None:
    first = start(call, b.update_request())
    resp = call("startJobUpdate", request=b.update_request(b.task_config(cpus=3.0)), message="")
    assert resp.responseCode == INVALID and first.id in messages(resp)
    assert resp.result.startJobUpdateResult.key.id == first.id
    assert not fake.calls_of("replace_job")


def test_non_service_and_invalid_updates_are_refused_before_any_call(call: Call, fake: FakePeloton) -> None:
    resp = call("startJobUpdate", request=b.update_request(b.task_config(is_service=False)), message="")
    assert resp.responseCode == INVALID and messages(resp) == updates.NON_SERVICE_TASK
    resp = call("startJobUpdate", request=b.update_request(b.task_config(cpus=0.0)), message="")
    assert resp.responseCode == INVALID and "numCpus" in messages(resp)
    resp = call("startJobUpdate", request=b.update_request(group=0), message="")
    assert resp.responseCode == INVALID and "updateGroupSize" in messages(resp)
    assert call("startJobUpdate", request=None, message="").responseCode == INVALID
    assert fake.calls == []


def test_pause_resume_abort_check_the_update_id(call: Call, fake: FakePeloton) -> None:
    key = start(call, b.update_request())
    stale = api.JobUpdateKey(job=key.job, id="0000")
    for method in ("pauseJobUpdate", "resumeJobUpdate", "abortJobUpdate"):
        resp = call(method, key=stale, message="")
        assert resp.responseCode == INVALID and "0000" in messages(resp) and key.id in messages(resp)
    assert not fake.calls_of("pause_workflow")
    assert call("pauseJobUpdate", key=key, message="").responseCode == OK
    assert status(call, key) == U.ROLL_FORWARD_PAUSED
    assert call("resumeJobUpdate", key=key, message="").responseCode == OK
    assert status(call, key) == U.ROLLING_FORWARD
    assert call("abortJobUpdate", key=key, message="").responseCode == OK
    assert status(call, key) == U.ABORTED
    again = call("pauseJobUpdate", key=key, message="")
    assert again.responseCode == INVALID and "ABORTED" in messages(again)
    missing = api.JobUpdateKey(job=api.JobKey(role="www", environment="devel", name="nope"), id="x")
    assert call("pulseJobUpdate", key=missing).responseCode == INVALID


def test_rollback_to_the_previous_config_or_to_nothing(call: Call, fake: FakePeloton) -> None:
    first = start(call, b.update_request(instances=2))
    assert call("rollbackJobUpdate", key=first, message="").responseCode == OK
    assert fake.calls_of("replace_job")[-1]["spec"].instance_count == 0  # first deployment
    assert status(call, first) == U.ROLLING_BACK
    fake.finish_workflow(fake.job_by_name(NAME).job_id)
    assert status(call, first) == U.ROLLED_BACK
    second = start(call, b.update_request(instances=2))
    fake.finish_workflow(fake.job_by_name(NAME).job_id)
    third = start(call, b.update_request(b.task_config(cpus=2.0), instances=3, rollback=True))
    assert call("rollbackJobUpdate", key=third, message="").responseCode == OK
    back = fake.calls_of("replace_job")[-1]
    assert back["spec"].instance_count == 2 and not back["update_spec"].rollback_on_failure
    assert back["spec"].default_spec.containers[0].resource.cpu_limit == 0.5
    done = call("rollbackJobUpdate", key=second, message="")
    assert done.responseCode == INVALID


def test_pinned_instances_keep_the_rest_and_restart_stopped_ones(call: Call, fake: FakePeloton) -> None:
    start(call, b.update_request(instances=4))
    job = fake.job_by_name(NAME)
    fake.finish_workflow(job.job_id)
    start(call, b.update_request(b.task_config(cpus=1.0), instances=5, only=[(0, 0)]))
    spec = fake.calls_of("replace_job")[-1]["spec"]
    assert spec.default_spec.containers[0].resource.cpu_limit == 1.0
    assert sorted(spec.instance_spec) == [1, 2, 3]  # 0 takes the new default, 4 is new
    assert all(spec.instance_spec[i].containers[0].resource.cpu_limit == 0.5 for i in (1, 2, 3))
    fake.finish_workflow(job.job_id)
    fake.set_pod(job.job_id, 4, pod_pb2.POD_STATE_KILLED)
    start(call, b.update_request(b.task_config(cpus=1.0), instances=5, only=[(4, 4)]))
    spec = fake.calls_of("replace_job")[-1]["spec"]
    labels = {lab.key for lab in spec.instance_spec[4].labels}
    assert "aurora_bridge_update" in labels  # stopped, unchanged: forced to restart


def test_pulses_resume_and_the_timer_blocks_again(
    ctx: BridgeContext, call: Call, fake: FakePeloton, clock: FakeClock
) -> None:
    key = start(call, b.update_request(pulse_ms=5000))
    job = fake.job_by_name(NAME)
    assert fake.calls_of("create_stateless_job")[-1]["create_spec"].start_paused
    assert status(call, key) == U.ROLL_FORWARD_AWAITING_PULSE
    pulse = call("pulseJobUpdate", key=key)
    assert pulse.result.pulseJobUpdateResult.status == api.JobUpdatePulseStatus.OK
    assert status(call, key) == U.ROLLING_FORWARD and ctx.pulses.armed(job.job_id) == key.id
    clock.advance(4)
    assert ctx.pulses.tick() == 0
    call("pulseJobUpdate", key=key)  # pushes the deadline
    clock.advance(4)
    assert ctx.pulses.tick() == 0 and status(call, key) == U.ROLLING_FORWARD
    clock.advance(2)
    assert ctx.pulses.tick() == 1
    assert status(call, key) == U.ROLL_FORWARD_AWAITING_PULSE
    assert job.workflows[-1].status.state == sl.WORKFLOW_STATE_PAUSED
    call("pulseJobUpdate", key=key)
    assert status(call, key) == U.ROLLING_FORWARD
    call("pauseJobUpdate", key=key, message="")  # a user pause is not a pulse pause
    assert status(call, key) == U.ROLL_FORWARD_PAUSED and ctx.pulses.armed(job.job_id) is None
    call("pulseJobUpdate", key=key)
    assert status(call, key) == U.ROLL_FORWARD_PAUSED
    call("resumeJobUpdate", key=key, message="")
    assert ctx.pulses.armed(job.job_id) == key.id
    fake.finish_workflow(job.job_id)
    clock.advance(10)
    assert ctx.pulses.tick() == 1 and status(call, key) == U.ROLLED_FORWARD  # expired after finishing: no-op
    finished = call("pulseJobUpdate", key=key).result.pulseJobUpdateResult
    assert finished.status == api.JobUpdatePulseStatus.FINISHED


def test_timers_are_rearmed_after_a_restart(ctx: BridgeContext, call: Call, fake: FakePeloton) -> None:
    key = start(call, b.update_request(pulse_ms=1000))
    call("pulseJobUpdate", key=key)
    job = fake.job_by_name(NAME)
    ctx.pulses.disarm(job.job_id)  # as if the bridge had restarted
    assert updates.recover_pulses(ctx) == 1 and ctx.pulses.armed(job.job_id) == key.id


def test_job_update_diff(call: Call, fake: FakePeloton) -> None:
    diff = call("getJobUpdateDiff", request=b.update_request(instances=3)).result.getJobUpdateDiffResult
    assert [(r.first, r.last) for g in diff.add for r in g.instances] == [(0, 2)] and not diff.update
    start(call, b.update_request(instances=3))
    fake.finish_workflow(fake.job_by_name(NAME).job_id)
    diff = call("getJobUpdateDiff", request=b.update_request(b.task_config(cpus=4.0), instances=2))
    result = diff.result.getJobUpdateDiffResult
    assert [(r.first, r.last) for g in result.update for r in g.instances] == [(0, 1)]
    assert [(r.first, r.last) for g in result.remove for r in g.instances] == [(2, 2)]
    assert result.update[0].config.resources[0].numCpus == 4.0
    assert not fake.calls_of("replace_job")


@pytest.mark.parametrize(("policy", "field"), [
    (api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(percentage=150.0)), "percentage"),
    (api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(percentage=-1.0)), "percentage"),
    (api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(percentage=60.0)), "percentage"),
    (api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=2)), "count"),
    (api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=1, durationSecs=-5)), "durationSecs"),
    (api.SlaPolicy(), "exactly one"),
])
def test_sla_policies_out_of_range_are_refused_naming_the_field(call: Call, fake: FakePeloton, policy: Any,
                                                               field: str) -> None:
    task = b.task_config()
    task.slaPolicy = policy
    resp = call("startJobUpdate", request=b.update_request(task, instances=2), message="")
    assert resp.responseCode == INVALID and "slaPolicy" in messages(resp) and field in messages(resp)
    assert not fake.calls_of("create_stateless_job")
    task.slaPolicy = api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(percentage=40.0))
    assert call("startJobUpdate", request=b.update_request(task, instances=2), message="").responseCode == OK


def test_watch_time_and_strategy_go_to_the_job_manager(call: Call, fake: FakePeloton) -> None:
    request = b.update_request(instances=3)
    request.settings.minWaitInInstanceRunningMs = 5000
    request.settings.updateStrategy = api.JobUpdateStrategy(
        varBatchStrategy=api.VariableBatchJobUpdateStrategy(groupSizes=[1, 2],
                                                            autopauseAfterBatch=True))
    first = start(call, request)
    created = fake.calls_of("create_stateless_job")[-1]["options"]
    assert created.strategy == opt.STRATEGY_VAR_BATCH and list(created.group_sizes) == [1, 2]
    assert created.autopause_after_batch and created.watch_time_ms == 5000
    fake.finish_workflow(fake.job_by_name(NAME).job_id)
    second = b.update_request(b.task_config(cpus=2.0), instances=3, rollback=True)
    second.settings.updateStrategy = api.JobUpdateStrategy(
        batchStrategy=api.BatchJobUpdateStrategy(groupSize=2, autopauseAfterBatch=True))
    key = start(call, second)
    replaced = fake.calls_of("replace_job")[-1]
    assert replaced["options"].strategy == opt.STRATEGY_BATCH
    assert replaced["update_spec"].batch_size == 2 and replaced["options"].watch_time_ms == 1000
    assert call("rollbackJobUpdate", key=key, message="").responseCode == OK
    back = fake.calls_of("replace_job")[-1]["options"]
    assert back.strategy == opt.STRATEGY_BATCH and not back.autopause_after_batch  # never on rollback
    assert first.id != key.id


def test_a_redeploy_after_a_revival_is_a_no_op(call: Call, fake: FakePeloton) -> None:
    start(call, b.update_request(instances=2))
    job = fake.job_by_name(NAME)
    fake.finish_workflow(job.job_id)
    key = api.JobKey(role="www", environment="devel", name="hello")
    assert call("killTasks", job=key, instances=None, message="").responseCode == OK
    revived = start(call, b.update_request(instances=2))  # the killed key, same config
    spec = fake.calls_of("replace_job")[-1]["spec"]
    assert sorted(spec.instance_spec) == [0, 1]  # both forced to start again
    fake.finish_workflow(job.job_id)
    replaces = len(fake.calls_of("replace_job"))
    noop = call("startJobUpdate", request=b.update_request(instances=2), message="")
    assert noop.responseCode == OK and "unchanged" in messages(noop)
    assert noop.result.startJobUpdateResult.key.id == revived.id
    assert len(fake.calls_of("replace_job")) == replaces  # nothing started
