"""`peloton job stateless query|start|refresh`, `watch pod` and `update get|resume|abort|rollback`:
the request each sends and what it prints."""

from __future__ import annotations

import json
import time

import yaml

from cli.exit_codes import ExitCode
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import JOB, World
from tests.unit.cli.fakes_v1 import StatelessState


def test_stateless_query_sends_every_filter_and_prints_a_table(peloton: Peloton, world: World) -> None:
    before = int(time.time())
    result = peloton("job", "stateless", "query", "--labels", "team=web,env=prod", "-r", "/DefaultResPool",
                     "-k", "db,cache", "-s", "RUNNING,job_state_failed", "--owner", "team6",
                     "--name", "svc", "-d", "2", "-n", "10", "-q", "50", "-o", "5",
                     "-p", "name,creation_time", "-a", "ASC", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    spec = world.call("JobService.QueryJobs").request.spec
    assert [(lb.key, lb.value) for lb in spec.labels] == [("team", "web"), ("env", "prod")]
    assert spec.respool.value == "/DefaultResPool" and list(spec.keywords) == ["db", "cache"]
    assert [stateless_pb2.JobState.Name(s) for s in spec.job_states] == \
        ["JOB_STATE_RUNNING", "JOB_STATE_FAILED"]
    assert (spec.owner, spec.name) == ("team6", "svc")
    page = spec.pagination
    assert (page.offset, page.limit, page.max_limit) == (5, 10, 50)
    assert [(o.property.value, o.order) for o in page.order_by] == \
        [("name", query_pb2.OrderBy.ORDER_BY_ASC), ("creation_time", query_pb2.OrderBy.ORDER_BY_ASC)]
    span = spec.creation_time_range
    assert span.max.seconds - span.min.seconds == 2 * 86400 and span.max.seconds >= before
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["ID", "Name", "Owner", "State"]
    row = lines[2].split()
    assert row[:4] == [JOB[:8], "svc", "team6", "RUNNING"]
    assert row[6:9] == ["3", "3", "0"]  # instances, running, succeeded


def test_stateless_query_defaults_and_json(peloton: Peloton, world: World) -> None:
    result = peloton("-j", "job", "stateless", "query")
    assert result.exit_code == 0, result.output
    spec = world.call("JobService.QueryJobs").request.spec
    assert not spec.labels and not spec.job_states and not spec.HasField("creation_time_range")
    assert (spec.pagination.limit, spec.pagination.max_limit) == (100, 100)
    assert [(o.property.value, o.order) for o in spec.pagination.order_by] == \
        [("creation_time", query_pb2.OrderBy.ORDER_BY_DESC)]
    records = json.loads(result.stdout)["records"]
    assert [(r["job_id"]["value"], r["name"]) for r in records] == [(JOB, "svc")]


def test_stateless_query_rejects_an_unknown_state(peloton: Peloton, world: World) -> None:
    result = peloton("job", "stateless", "query", "-s", "SLEEPING")
    assert result.exit_code == ExitCode.USAGE
    assert "unknown state 'SLEEPING'" in result.stderr
    assert not world.requests("JobService.QueryJobs")


def test_stateless_start_takes_job_then_version(peloton: Peloton, world: World,
                                                stateless_state: StatelessState) -> None:
    result = peloton("job", "stateless", "start", JOB, "1-1-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Job started. New EntityVersion: 2-1-1"
    req = world.call("JobService.StartJob").request
    assert (req.job_id.value, req.version.value) == (JOB, "1-1-1")
    stale = peloton("job", "stateless", "start", JOB, "1-1-1")
    assert stale.exit_code == ExitCode.CONFLICT
    assert "entity version 1-1-1 is stale" in stale.stderr
    assert stateless_state.version == "2-1-1"


def test_an_empty_version_is_the_current_one_asked_first(peloton: Peloton, world: World,
                                                         stateless_state: StatelessState) -> None:
    # Peloton answers a call without the job's entity version ABORTED, so the CLI asks.
    result = peloton("job", "stateless", "start", JOB, "")
    assert result.exit_code == 0, result.output
    assert world.call("JobService.StartJob").request.version.value == "1-1-1"
    assert world.requests("JobService.GetJob")


def test_stateless_refresh(peloton: Peloton, world: World) -> None:
    result = peloton("job", "stateless", "refresh", JOB)
    assert result.exit_code == 0, result.output
    assert world.call("JobService.RefreshJob").request.job_id.value == JOB
    assert yaml.safe_load(result.stdout) == {}
    missing = peloton("job", "stateless", "refresh", "0000dead-0000-4000-8000-000000000000")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert missing.stderr.strip() == "Error: job 0000dead-0000-4000-8000-000000000000 not found"
    bad = peloton("job", "stateless", "refresh", "nope")
    assert bad.exit_code == ExitCode.INVALID_ARGUMENT and "is not a job id" in bad.stderr


def test_watch_pod_filters_by_job_names_and_labels(peloton: Peloton, world: World) -> None:
    result = peloton("-j", "watch", "pod", JOB, f"{JOB}-0", f"{JOB}-2", "--labels", "tier:web",
                     "--labels", "team:infra")
    assert result.exit_code == 0, result.output
    flt = world.call("WatchService.Watch").request.pod_filter
    assert flt.job_id.value == JOB
    assert [p.value for p in flt.pod_names] == [f"{JOB}-0", f"{JOB}-2"]
    assert [(lb.key, lb.value) for lb in flt.labels] == [("tier", "web"), ("team", "infra")]
    changes = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(c["revision"], c["pods"][0]["status"]["state"]) for c in changes] == \
        [("1", "POD_STATE_LAUNCHED"), ("2", "POD_STATE_RUNNING")]
    assert "watch stream has ended" in result.stderr


def test_watch_pod_prints_yaml_documents_and_all_pods_without_a_job(peloton: Peloton,
                                                                     world: World) -> None:
    result = peloton("watch", "pod", "-o", "yaml")
    assert result.exit_code == 0, result.output
    flt = world.call("WatchService.Watch").request.pod_filter
    assert not flt.HasField("job_id") and not flt.pod_names and not flt.labels
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["pods"][0]["pod_name"]["value"] for d in docs] == [f"{JOB}-0", f"{JOB}-0"]


def test_update_get_prints_state_and_progress(peloton: Peloton, world: World) -> None:
    world.update_script = [("ROLLING_FORWARD", 2, 1, 3)]
    result = peloton("update", "get", "upd-1")
    assert result.exit_code == 0, result.output
    req = world.call("UpdateService.GetUpdate").request
    assert req.updateId.value == "upd-1" and not req.statusOnly
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Update-ID", "State", "Done", "Failed", "Remaining"]
    assert lines[2].split() == ["upd-1", "ROLLING_FORWARD", "2", "1", "3"]
    as_json = json.loads(peloton("-j", "update", "get", "upd-1").stdout)
    assert as_json["updateInfo"]["status"]["state"] == "ROLLING_FORWARD"


def test_update_resume_and_abort_carry_opaque_data(peloton: Peloton, world: World) -> None:
    resumed = peloton("update", "resume", "upd-1", "--opaque-data", "go on")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.strip() == "Job update upd-1 resumed"
    aborted = peloton("update", "abort", "upd-1")
    assert aborted.stdout.strip() == "Job update upd-1 aborted"
    resume_req = world.call("UpdateService.ResumeUpdate").request
    abort_req = world.call("UpdateService.AbortUpdate").request
    assert (resume_req.updateId.value, resume_req.opaque_data.data) == ("upd-1", "go on")
    assert (abort_req.updateId.value, abort_req.opaque_data.data) == ("upd-1", "")


def test_update_rollback(peloton: Peloton, world: World) -> None:
    result = peloton("update", "rollback", "upd-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Job update upd-1 rolling back"
    assert world.call("UpdateService.RollbackUpdate").request.updateId.value == "upd-1"
    assert peloton("update", "rollback", "upd-1", "--opaque-data", "x").exit_code == ExitCode.USAGE
    missing = peloton("update", "rollback", "upd-9")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "update upd-9 not found" in missing.stderr
