"""The UI's read API: what each page gets, and which requests reach Peloton for it."""

from __future__ import annotations

from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from tests.unit.ui import fakes
from tests.unit.ui.conftest import Ui

OTHER = "8c2b5d1f-0000-4000-8000-0000000000aa"


def test_overview_counts_hosts_jobs_tasks_and_sums_top_level_pools(ui: Ui) -> None:
    ui.world.jobs[OTHER] = fakes.job_config("web", service=True)
    data = ui.get("/ui/api/overview").data
    assert data["hosts"] == {"total": 2, "by_state": {"UP": 1, "DOWN": 1}}
    assert data["jobs"]["total"] == 2 and data["jobs"]["by_state"] == {"RUNNING": 2}
    assert data["tasks"]["by_state"] == {"RUNNING": 4, "SUCCEEDED": 2}
    # Only /DefaultResPool is top level: its child's reservation is inside its own.
    assert data["reservation"] == {"cpu": 1.0, "memory": 512.0, "disk": 512.0, "gpu": 0.0}
    assert data["limit"]["memory"] == 4096.0
    assert data["allocation"] == {"cpu": 1.5, "memory": 512.0, "disk": 30.0, "gpu": 0.0}


def test_pools_are_listed_parents_first_with_reservation_limit_and_allocation(ui: Ui) -> None:
    pools = ui.get("/ui/api/pools").data["pools"]
    assert [(p["path"], p["depth"]) for p in pools] == [
        ("/", 0), ("/DefaultResPool", 1), ("/DefaultResPool/batch", 2)]
    batch = pools[2]
    assert batch["reservation"]["cpu"] == 0.5 and batch["limit"]["cpu"] == 2.0
    assert batch["allocation"] == {"cpu": 0.25, "memory": 128.0, "disk": 0.0, "gpu": 0.0}
    assert batch["parent"] == fakes.POOL and batch["team"] == "team6"


def test_hosts_filter_by_state_is_sent_to_the_host_manager(ui: Ui) -> None:
    data = ui.get("/ui/api/hosts?state=down,draining").data
    assert [h["hostname"] for h in data["hosts"]] == ["host-b"]
    assert data["hosts"][0]["state"] == "DOWN"
    sent = ui.world.requests("HostService.QueryHosts")[-1]
    names = [host_pb2.HostState.Name(s) for s in sent.host_states]
    assert names == ["HOST_STATE_DOWN", "HOST_STATE_DRAINING"]


def test_unknown_host_state_is_400_naming_the_choices(ui: Ui) -> None:
    answer = ui.get("/ui/api/hosts?state=SLEEPY")
    assert answer.status == 400
    assert answer.data["error"] == "invalid_argument"
    assert "unknown state 'SLEEPY'" in answer.data["message"] and "DRAINING" in answer.data["message"]


def test_jobs_filters_become_the_query_spec(ui: Ui) -> None:
    data = ui.get("/ui/api/jobs?state=running,pending&name=hel&owner=alice"
                  "&pool=/DefaultResPool&limit=50").data
    spec = ui.world.requests("JobManager.Query")[-1].spec
    assert [job_pb2.JobState.Name(s) for s in spec.jobStates] == ["RUNNING", "PENDING"]
    assert (spec.name, spec.owner, spec.respool.value, spec.pagination.limit) == (
        "hel", "alice", "/DefaultResPool", 50)
    [job] = data["jobs"]
    assert job["id"] == fakes.JOB and job["name"] == "hello" and job["pool"] == "/DefaultResPool"
    assert job["task_states"] == {"RUNNING": 2, "SUCCEEDED": 1} and job["owner"] == "alice"


def test_jobs_without_filters_send_an_empty_spec_with_the_default_page(ui: Ui) -> None:
    ui.get("/ui/api/jobs")
    spec = ui.world.requests("JobManager.Query")[-1].spec
    assert not spec.jobStates and not spec.name and not spec.owner and not spec.respool.value
    assert spec.pagination.limit == 200


def test_job_detail_has_config_runtime_sorted_tasks_and_workflows(ui: Ui) -> None:
    ui.world.update_id = "upd-9"
    ui.world.workflows = [fakes.workflow("RESTART", "ROLLING_FORWARD", 1, 0, 2),
                          fakes.workflow("UPDATE", "SUCCEEDED", 3, 0, 0, batch=2)]
    data = ui.get(f"/ui/api/jobs/{fakes.JOB}").data
    assert data["job"]["name"] == "hello" and data["job"]["pool"] == "/DefaultResPool"
    assert data["job"]["resources"]["cpu"] == 0.5 and data["job"]["command"] == "echo hi"
    assert data["runtime"]["state"] == "RUNNING" and data["runtime"]["config_version"] == 3
    tasks = data["tasks"]
    assert [(t["instance"], t["state"], t["host"], t["message"]) for t in tasks] == [
        (0, "SUCCEEDED", "host-a", "msg0"), (1, "FAILED", "host-a", "msg1"), (2, "RUNNING", "host-a", "msg2")]
    current = data["workflow"]
    assert current["update_id"] == "upd-9" and current["type"] == "RESTART" and current["active"]
    assert (current["completed"], current["remaining"], current["total"]) == (1, 2, 3)
    assert [(w["type"], w["state"], w["batch_size"]) for w in data["workflows"]] == [
        ("RESTART", "ROLLING_FORWARD", 1), ("UPDATE", "SUCCEEDED", 2)]
    assert ui.world.requests("ResourceManager.GetResourcePool")[-1].id.value == fakes.POOL


def test_job_without_an_update_has_no_current_workflow(ui: Ui) -> None:
    data = ui.get(f"/ui/api/jobs/{fakes.JOB}").data
    assert data["workflow"] is None and data["workflows"] == []


def test_unknown_job_is_404_with_the_servers_message(ui: Ui) -> None:
    answer = ui.get(f"/ui/api/jobs/{OTHER}")
    assert answer.status == 404
    assert answer.data == {"error": "not_found", "message": f"job {OTHER} not found"}


def test_task_detail_has_the_run_and_its_events(ui: Ui) -> None:
    data = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/1").data
    assert data["task"]["instance"] == 1 and data["task"]["state"] == "RUNNING"
    assert data["task"]["host"] == "host-a"
    [event] = data["events"]
    assert (event["state"], event["message"], event["run_id"]) == ("RUNNING", "started", f"{fakes.JOB}-0-1")
    sent = ui.world.requests("TaskManager.GetPodEvents")[-1]
    assert (sent.jobId.value, sent.instanceId, sent.limit) == (fakes.JOB, 1, 100)


def test_task_of_an_unplaced_run_shows_why_its_logs_are_missing(ui: Ui) -> None:
    ui.world.sandbox = ("", "", ["run/stdout", "run/stderr"])
    logs = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/0").data["logs"]
    assert logs["stdout"]["error"] == "unavailable"
    assert "may not have been placed yet" in logs["stdout"]["message"]


def test_task_out_of_range_is_400_with_the_valid_range(ui: Ui) -> None:
    answer = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/7")
    assert answer.status == 400
    assert answer.data["message"] == f"instance out of range for job {fakes.JOB}: valid instances are 0..2"


def test_job_detail_carries_the_explain_story_and_task_detail_the_jobs_name(ui: Ui) -> None:
    data = ui.get(f"/ui/api/jobs/{fakes.JOB}").data
    story = data["explain"]
    assert story["job_id"] == fakes.JOB and story["name"] == "hello"
    assert story["waiting"] == []  # the fake's tasks carry no waiting reason
    assert story["lines"][0].startswith(f"Job {fakes.JOB} (hello)")
    assert ui.get(f"/ui/api/jobs/{fakes.JOB}/explain").data["job_id"] == fakes.JOB
    task = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/1").data
    assert task["job_name"] == "hello"


def test_a_malformed_job_id_is_400_before_anything_is_asked(ui: Ui) -> None:
    before = len(ui.world.calls)
    answer = ui.get("/ui/api/jobs/not-a-job")
    assert answer.status == 400 and "is not a job id" in answer.data["message"]
    assert len(ui.world.calls) == before
