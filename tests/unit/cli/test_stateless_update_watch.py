"""`peloton job stateless`, `update` and `watch`: argument order, flags, versions, waits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from cli.exit_codes import ExitCode
from peloton.api.convert.update_options import METADATA_KEY
from peloton.api.gen.pelotonpy.api.update import update_pb2
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import JOB, POOL, World
from tests.unit.cli.fakes_v1 import StatelessState

SPEC_YAML = """\
name: svc
owning_team: team6
instance_count: 3
default_spec:
  containers:
  - name: c1
    command:
      shell: true
      value: "sleep 1000"
"""

JOB_YAML = """\
name: svc
type: 1
instanceCount: 3
defaultConfig:
  command:
    shell: true
    value: sleep 1000
"""


def _file(tmp_path: Path, text: str, name: str = "spec.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_replace_argument_order_and_flags(peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "2", "/DefaultResPool",
                     "1-1-1", "--maxInstanceRetries", "3", "--maxTolerableInstanceFailures", "1",
                     "--rollbackOnFailure", "--start-paused", "--opaque-data", "note", "--in-place",
                     "--start-pods", "--override")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "New EntityVersion: 2-1-1"
    call = world.call("JobService.ReplaceJob")
    req = call.request
    assert (req.job_id.value, req.version.value, req.opaque_data.data) == (JOB, "1-1-1", "note")
    assert (req.spec.name, req.spec.instance_count, req.spec.respool_id.value) == ("svc", 3, POOL)
    us = req.update_spec
    assert (us.batch_size, us.max_instance_retries, us.max_tolerable_instance_failures) == (2, 3, 1)
    assert us.rollback_on_failure and us.start_paused and us.in_place and us.start_pods
    assert call.metadata["rpc-service"] == "peloton-jobmgr"


def test_replace_without_version_reads_the_current_one(
        peloton: Peloton, world: World, stateless_state: StatelessState, tmp_path: Path) -> None:
    stateless_state.version = "5-1-1"
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1", "/DefaultResPool")
    assert result.exit_code == 0, result.output
    assert world.requests("JobService.GetJob")[0].summary_only
    assert world.call("JobService.ReplaceJob").request.version.value == "5-1-1"


def test_stale_entity_version_is_conflict(peloton: Peloton, tmp_path: Path) -> None:
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1", "/DefaultResPool",
                     "0-0-0")
    assert result.exit_code == ExitCode.CONFLICT
    assert "entity version 0-0-0 is stale" in result.stderr


def _replace_waiting(peloton: Peloton, tmp_path: Path) -> Any:
    """`job stateless replace ... --wait` of SPEC_YAML over entity version 1-1-1."""
    return peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1",
                   "/DefaultResPool", "1-1-1", "--wait")


def test_replace_wait_shows_instances_done_failed_remaining(
        peloton: Peloton, stateless_state: StatelessState, tmp_path: Path) -> None:
    stateless_state.workflow_script = [
        ("SUCCEEDED", 3, 0, 0, "1-1-1"),          # the previous workflow, not ours
        ("ROLLING_FORWARD", 1, 0, 2, "2-1-1"),
        ("ROLLING_FORWARD", 2, 0, 1, "2-1-1"),
        ("SUCCEEDED", 3, 0, 0, "2-1-1"),
    ]
    result = _replace_waiting(peloton, tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["New EntityVersion: 2-1-1", f"Workflow of job {JOB} SUCCEEDED"]
    assert "done 3 failed 0 remaining 0" in result.stderr and "3/3" in result.stderr


def test_a_wait_off_a_terminal_logs_each_change_with_the_pods_states(
        peloton: Peloton, stateless_state: StatelessState, tmp_path: Path) -> None:
    # Off a terminal (a CI log) a bar shows only at the end: a wait killed on a deadline
    # must still have said where it stood, and the pods' states say why.
    stateless_state.workflow_script = [
        ("ROLLING_FORWARD", 1, 0, 2, "2-1-1"),
        ("ROLLING_FORWARD", 1, 0, 2, "2-1-1"),
        ("ROLLING_FORWARD", 2, 0, 1, "2-1-1"),
        ("SUCCEEDED", 3, 0, 0, "2-1-1"),
    ]
    result = _replace_waiting(peloton, tmp_path)
    assert result.exit_code == 0, result.output
    lines = [line.rsplit(" ", 1)[0] for line in result.stderr.splitlines()]
    assert lines == [
        f"workflow {JOB[:8]} 1/3 ROLLING_FORWARD  done 1 failed 0 remaining 2  pods RUNNING 3",
        f"workflow {JOB[:8]} 2/3 ROLLING_FORWARD  done 2 failed 0 remaining 1  pods RUNNING 3",
        f"workflow {JOB[:8]} 3/3 SUCCEEDED  done 3 failed 0 remaining 0  pods RUNNING 3"]


def test_replace_wait_rolled_back_is_wait_failed(
        peloton: Peloton, stateless_state: StatelessState, tmp_path: Path) -> None:
    stateless_state.workflow_script = [("ROLLING_BACKWARD", 1, 1, 1, "2-1-1"),
                                       ("ROLLED_BACK", 2, 1, 0, "2-1-1")]
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1", "/DefaultResPool",
                     "1-1-1", "--rollbackOnFailure", "--wait")
    assert result.exit_code == ExitCode.WAIT_FAILED
    assert "ended ROLLED_BACK" in result.stderr


def test_create_invalid_spec_names_the_field(peloton: Peloton, tmp_path: Path) -> None:
    text = SPEC_YAML.replace("instance_count: 3", "instance_count: 0")
    result = peloton("job", "stateless", "create", "/DefaultResPool", _file(tmp_path, text), "2")
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert "spec.instance_count" in result.stderr


def test_create_prints_id_and_version(peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "stateless", "create", "/DefaultResPool", _file(tmp_path, SPEC_YAML), "2",
                     "--start-paused", "--maxInstanceRetries", "4")
    assert result.stdout.strip() == f"Job {JOB} created. Entity Version: 1-1-1"
    create_spec = world.call("JobService.CreateJob").request.create_spec
    assert (create_spec.batch_size, create_spec.max_instance_retries) == (2, 4)
    assert create_spec.start_paused


def test_workflow_pause_and_alias(peloton: Peloton, world: World) -> None:
    first = peloton("job", "stateless", "workflow", "pause", JOB, "1-1-1", "--opaque-data", "x")
    assert first.stdout.strip() == "Workflow paused. New EntityVersion: 2-1-1"
    second = peloton("job", "stateless", "pause", JOB, "2-1-1")
    assert second.stdout.strip() == "Workflow paused. New EntityVersion: 3-1-1"
    requests = world.requests("JobService.PauseJobWorkflow")
    assert [(r.version.value, r.opaque_data.data) for r in requests] == [("1-1-1", "x"), ("2-1-1", "")]


def test_restart_and_delete_take_job_then_version(peloton: Peloton, world: World) -> None:
    peloton("job", "stateless", "restart", JOB, "1-1-1", "--batch-size", "2", "-r", "0:2", "--in-place")
    spec = world.call("JobService.RestartJob").request.restart_spec
    assert (spec.batch_size, spec.in_place) == (2, True)
    assert [(r.__getattribute__("from"), r.to) for r in spec.ranges] == [(0, 2)]
    deleted = peloton("job", "stateless", "delete", JOB, "2-1-1", "--force")
    assert deleted.stdout.strip() == "Job deleted"
    assert world.call("JobService.DeleteJob").request.force


def test_list_streams_every_batch(peloton: Peloton) -> None:
    result = peloton("job", "stateless", "list")
    names = [line.split()[1] for line in result.stdout.splitlines()[2:] if line.strip()]
    assert names == ["svc-a", "svc-b"]
    as_json = json.loads(peloton("-j", "job", "stateless", "list").stdout)
    assert [j["name"] for j in as_json["jobs"]] == ["svc-a", "svc-b"]


def test_stateless_get_unknown_is_not_found(peloton: Peloton) -> None:
    result = peloton("job", "stateless", "get", "0000dead-0000-4000-8000-000000000000")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert result.stderr.strip() == "Error: job 0000dead-0000-4000-8000-000000000000 not found"
    got = yaml.safe_load(peloton("job", "stateless", "get", JOB, "--summaryonly", "-o", "yaml").stdout)
    assert got["summary"]["status"]["version"]["value"] == "1-1-1"


def test_update_create_argument_order_and_wait(peloton: Peloton, world: World, tmp_path: Path) -> None:
    config = _file(tmp_path, JOB_YAML, "job.yaml")
    peloton("job", "create", "/DefaultResPool", config, "-i", JOB)
    world.update_script = [("ROLLING_FORWARD", 1, 0, 2), ("ROLLING_FORWARD", 2, 0, 1), ("SUCCEEDED", 3, 0, 0)]
    result = peloton("update", "create", JOB, config, "2", "/DefaultResPool", "--maxattempts", "3",
                     "--maxfailureInstances", "1", "--rollbackOnFailure", "--in-place", "--wait")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Job update upd-1 created", "Job update upd-1 SUCCEEDED"]
    assert "done 3 failed 0 remaining 0" in result.stderr
    req = world.call("UpdateService.CreateUpdate").request
    assert (req.jobId.value, req.jobConfig.respoolID.value, req.jobConfig.changeLog.version) == (JOB, POOL, 3)
    uc = req.updateConfig
    assert (uc.batchSize, uc.maxInstanceAttempts, uc.maxFailureInstances) == (2, 3, 1)
    assert uc.rollbackOnFailure and uc.inPlace and not uc.startPaused


def test_update_create_invalid_argument_from_status(peloton: Peloton, world: World, tmp_path: Path) -> None:
    config = _file(tmp_path, JOB_YAML, "job.yaml")
    peloton("job", "create", "/DefaultResPool", config, "-i", JOB)
    result = peloton("update", "create", JOB, config, "0", "/DefaultResPool")
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert result.stderr.strip() == "Error: updateConfig.batchSize: must be > 0"


def test_update_list_and_pause(peloton: Peloton, world: World) -> None:
    lines = peloton("update", "list", JOB).stdout.splitlines()
    assert lines[0].split() == ["Update-ID", "State", "Done", "Failed", "Remaining"]
    assert lines[2].split() == ["upd-1", "ROLLING_FORWARD", "2", "0", "4"]
    paused = peloton("update", "pause", "upd-1", "--opaque-data", "why")
    assert paused.stdout.strip() == "Job update upd-1 paused"
    assert world.requests("UpdateService.PauseUpdate")[0].opaque_data.data == "why"


def test_watch_job_prints_each_change(peloton: Peloton, world: World) -> None:
    result = peloton("-j", "watch", "job", JOB, "--labels", "team:infra")
    assert result.exit_code == 0, result.output
    changes = [json.loads(line) for line in result.stdout.splitlines()]
    assert [c["revision"] for c in changes] == ["1", "2"]
    flt = world.call("WatchService.Watch").request.stateless_job_filter
    assert [j.value for j in flt.job_ids] == [JOB]
    assert [(lb.key, lb.value) for lb in flt.labels] == [("team", "infra")]
    assert "watch stream has ended" in result.stderr


def test_replace_sends_our_update_options_beside_peloton_request(
        peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1",
                     "/DefaultResPool", "1-1-1", "--watch-time", "30", "--group-sizes", "1,2",
                     "--autopause")
    assert result.exit_code == 0, result.output
    call = world.call("JobService.ReplaceJob")
    options = update_pb2.UpdateOptions.FromString(call.metadata[METADATA_KEY])  # type: ignore[arg-type]
    assert options.strategy == update_pb2.STRATEGY_VAR_BATCH
    assert list(options.group_sizes) == [1, 2] and options.autopause_after_batch
    assert options.watch_time_ms == 30_000
    assert call.request.update_spec.batch_size == 1  # Peloton's message as it was


def test_replace_without_options_sends_none(peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1",
                     "/DefaultResPool", "1-1-1")
    assert result.exit_code == 0, result.output
    assert METADATA_KEY not in world.call("JobService.ReplaceJob").metadata


def test_a_negative_watch_time_is_refused_before_any_call(
        peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "stateless", "replace", JOB, _file(tmp_path, SPEC_YAML), "1",
                     "/DefaultResPool", "1-1-1", "--watch-time", "-1")
    assert result.exit_code == ExitCode.USAGE and "--watch-time" in result.stderr
    assert not world.requests("JobService.ReplaceJob")


def test_update_create_sends_the_watch_time(peloton: Peloton, world: World, tmp_path: Path) -> None:
    config = _file(tmp_path, JOB_YAML, "job.yaml")
    peloton("job", "create", "/DefaultResPool", config, "-i", JOB)
    result = peloton("update", "create", JOB, config, "2", "/DefaultResPool", "--watch-time", "1.5",
                     "--strategy", "batch")
    assert result.exit_code == 0, result.output
    options = update_pb2.UpdateOptions.FromString(
        world.call("UpdateService.CreateUpdate").metadata[METADATA_KEY])  # type: ignore[arg-type]
    assert options.strategy == update_pb2.STRATEGY_BATCH and options.watch_time_ms == 1500
