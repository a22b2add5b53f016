"""The UI's actions: each button's POST reaches the right RPC with the right arguments."""

from __future__ import annotations

import pytest

from tests.unit.ui import fakes
from tests.unit.ui.conftest import Ui

JOB_API = f"/ui/api/jobs/{fakes.JOB}"


def _ranges(request: object) -> list[tuple[int, int]]:
    return [(getattr(r, "from"), r.to) for r in request.ranges]  # type: ignore[attr-defined]


def test_stop_job_stops_every_instance_through_the_task_manager(ui: Ui) -> None:
    answer = ui.post(f"{JOB_API}/stop")
    assert answer.status == 200
    assert answer.data["message"] == f"Stopping 3 instances of job {fakes.JOB}"
    sent = ui.world.call("TaskManager.Stop").request
    assert sent.jobId.value == fakes.JOB and _ranges(sent) == []


def test_start_job_starts_every_instance(ui: Ui) -> None:
    assert ui.post(f"{JOB_API}/start").data["message"] == f"Starting 2 instances of job {fakes.JOB}"
    assert _ranges(ui.world.call("TaskManager.Start").request) == []


def test_restart_batch_job_restarts_its_tasks(ui: Ui) -> None:
    answer = ui.post(f"{JOB_API}/restart")
    assert answer.status == 200 and "Restarting every instance" in answer.data["message"]
    assert _ranges(ui.world.call("TaskManager.Restart").request) == []
    assert ui.world.requests("JobManager.Restart") == []


def test_restart_service_job_is_a_rolling_workflow_at_the_current_version(ui: Ui) -> None:
    ui.world.jobs[fakes.JOB] = fakes.job_config("web", service=True)
    answer = ui.post(f"{JOB_API}/restart", {"batch_size": 2})
    assert answer.status == 200
    assert answer.data["update_id"] == "upd-1" and "2 at a time" in answer.data["message"]
    sent = ui.world.call("JobManager.Restart").request
    assert (sent.resourceVersion, sent.restartConfig.batchSize) == (3, 2)
    assert _ranges(sent) == [(0, 2**31 - 1)]


def test_restart_that_keeps_losing_the_version_race_is_409_after_retries(ui: Ui) -> None:
    ui.world.jobs[fakes.JOB] = fakes.job_config("web", service=True)
    ui.world.restart_conflicts = True
    answer = ui.post(f"{JOB_API}/restart")
    assert answer.status == 409 and answer.data["error"] == "conflict"
    assert "another update got in first" in answer.data["message"]
    assert len(ui.world.requests("JobManager.Restart")) == 5


@pytest.mark.parametrize("batch", [-1, "2", True, 1.5])
def test_bad_batch_size_is_400(ui: Ui, batch: object) -> None:
    answer = ui.post(f"{JOB_API}/restart", {"batch_size": batch})
    assert answer.status == 400 and answer.data["error"] == "invalid_argument"
    assert answer.data["message"].startswith("batch_size:")


@pytest.mark.parametrize(("verb", "method"), [("stop", "TaskManager.Stop"), ("start", "TaskManager.Start"),
                                              ("restart", "TaskManager.Restart")])
def test_task_actions_send_a_one_instance_range(ui: Ui, verb: str, method: str) -> None:
    answer = ui.post(f"{JOB_API}/tasks/1/{verb}")
    assert answer.status == 200 and "instance 1" in answer.data["message"]
    assert _ranges(ui.world.call(method).request) == [(1, 2)]


def test_task_action_the_server_skipped_is_400(ui: Ui) -> None:
    answer = ui.post(f"{JOB_API}/tasks/2/start")  # the fake starts only instances 0 and 1
    assert answer.status == 400
    assert answer.data["message"] == f"job {fakes.JOB} has no instance 2"


@pytest.mark.parametrize(("verb", "method"), [("pause", "UpdateService.PauseUpdate"),
                                              ("resume", "UpdateService.ResumeUpdate"),
                                              ("abort", "UpdateService.AbortUpdate")])
def test_workflow_actions_name_the_jobs_current_update(ui: Ui, verb: str, method: str) -> None:
    ui.world.update_id = "upd-1"
    answer = ui.post(f"{JOB_API}/workflow/{verb}")
    assert answer.status == 200 and answer.data["update_id"] == "upd-1"
    assert ui.world.call(method).request.updateId.value == "upd-1"


def test_workflow_action_without_a_workflow_is_409(ui: Ui) -> None:
    answer = ui.post(f"{JOB_API}/workflow/pause")
    assert answer.status == 409 and answer.data["error"] == "failed_precondition"
    assert answer.data["message"] == f"job {fakes.JOB} has no workflow to pause"
    assert ui.world.requests("UpdateService.PauseUpdate") == []


def test_host_maintenance_start_and_complete(ui: Ui) -> None:
    started = ui.post("/ui/api/hosts/host-a/maintenance/start")
    assert started.status == 200 and started.data["message"].startswith("Maintenance started on host-a")
    assert ui.world.call("HostService.StartMaintenance").request.hostname == "host-a"
    completed = ui.post("/ui/api/hosts/host-b/maintenance/complete")
    assert completed.status == 200
    assert ui.world.call("HostService.CompleteMaintenance").request.hostname == "host-b"


def test_host_errors_keep_their_kind_and_message(ui: Ui) -> None:
    missing = ui.post("/ui/api/hosts/nohost/maintenance/start")
    assert (missing.status, missing.data) == (404, {"error": "not_found", "message": "host nohost not found"})
    up = ui.post("/ui/api/hosts/host-a/maintenance/complete")
    assert up.status == 409 and up.data["message"] == "host host-a is not in maintenance"
