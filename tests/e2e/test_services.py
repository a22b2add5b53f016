"""Long-running services end to end: rolling updates, rollback, pause/resume/abort, restart,
daemon and stateful jobs, health checks (issue 5/6, item 6) — real processes, `--agents 3`."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.e2e.conftest import write_pool
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
RESOURCES = ["--agent-cpus", "2", "--agent-mem-mb", "4096", "--agent-disk-mb", "100000"]

SPEC = """\
name: {name}
owner: e2e
owningteam: e2e
description: "a service"
instancecount: {count}
sla:
  priority: 1
  preemptible: false
defaultspec:
  containers:
  - resource:
      cpulimit: 0.1
      memlimitmb: 32
      disklimitmb: 10
    entrypoint:
      value: '{command}'
{health}"""

HEALTH = """\
    livenesscheck:
      enabled: true
      type: 1
      initialintervalsecs: 1
      intervalsecs: 1
      timeoutsecs: 2
      maxconsecutivefailures: 2
      commandcheck:
        command: '{check}'
"""


@pytest.fixture
def services(tmp_path: Path) -> Iterator[UpCluster]:
    up = UpCluster(tmp_path, agents=3, extra=RESOURCES).start()
    try:
        up.cli("respool", "create", "/svc", str(write_pool(tmp_path, "svc", cpu_res=1,
                                                          mem_res=1024, disk_res=1000)))
        yield up
    finally:
        up.close()


def spec_file(base: Path, name: str, command: str, count: int = 6, check: str = "") -> Path:
    path = base / f"{name}-{abs(hash((command, count, check)))}.yaml"
    health = HEALTH.format(check=check) if check else ""
    path.write_text(SPEC.format(name=name, count=count, command=command, health=health))
    return path


def create(up: UpCluster, spec: Path, batch: int = 0) -> str:
    out = up.cli("job", "stateless", "create", "/svc", str(spec), str(batch)).stdout
    match = re.search(r"Job ([0-9a-f-]{36}) created", out)
    assert match, out
    return match.group(1)


def pods(up: UpCluster, job_id: str) -> list[pod_pb2.PodSummary]:
    out: list[pod_pb2.PodSummary] = []
    for chunk in up.client.list_pods(job_id):
        out.extend(chunk.pods)
    return out


def running_on(up: UpCluster, job_id: str, version: str | None = None) -> int:
    """Pods RUNNING (and, with `version`, on that config version prefix)."""
    n = 0
    for pod in pods(up, job_id):
        if pod.status.state == pod_pb2.POD_STATE_RUNNING and (
                version is None or pod.status.version.value.split("-")[0] == version):
            n += 1
    return n


def job(up: UpCluster, job_id: str) -> stateless_pb2.JobInfo:
    return up.client.get_stateless_job(job_id).job_info


def workflow(up: UpCluster, job_id: str) -> stateless_pb2.WorkflowStatus:
    return job(up, job_id).status.workflow_status


def wf_state(up: UpCluster, job_id: str) -> str:
    return stateless_pb2.WorkflowState.Name(workflow(up, job_id).state)


def reaches(up: UpCluster, job_id: str, state: str, timeout: float, what: str) -> None:
    """Poll until the job's workflow is in `state`; a timeout names the status last read."""
    seen: list[stateless_pb2.WorkflowStatus] = []

    def there() -> bool:
        seen[:] = [workflow(up, job_id)]
        return stateless_pb2.WorkflowState.Name(seen[0].state) == state

    try:
        eventually(there, timeout, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the workflow last read: {seen[0] if seen else None}") from None


def version(up: UpCluster, job_id: str) -> str:
    return job(up, job_id).status.version.value


def replace(up: UpCluster, job_id: str, spec: Path, batch: int, *flags: str) -> None:
    up.cli("job", "stateless", "replace", job_id, str(spec), str(batch), "/svc",
           version(up, job_id), *flags)


def test_rolling_update_keeps_at_most_batch_size_instances_down(services: UpCluster,
                                                                tmp_path: Path) -> None:
    job_id = create(services, spec_file(tmp_path, "web", "sleep 1000"))
    eventually(lambda: running_on(services, job_id) == 6, 90, "6 instances running")
    replace(services, job_id, spec_file(tmp_path, "web", "sleep 1001"), 2)
    worst = 0
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        down = 6 - running_on(services, job_id)
        worst = max(worst, down)
        if wf_state(services, job_id) == "WORKFLOW_STATE_SUCCEEDED" and down == 0:
            break
        time.sleep(0.05)
    assert wf_state(services, job_id) == "WORKFLOW_STATE_SUCCEEDED"
    assert worst <= 2, f"{worst} instances were down at once with batch size 2"
    target = version(services, job_id).split("-")[0]
    assert running_on(services, job_id, target) == 6


def test_bad_update_rolls_back_to_the_old_config(services: UpCluster, tmp_path: Path) -> None:
    job_id = create(services, spec_file(tmp_path, "api", "sleep 1000", count=4))
    eventually(lambda: running_on(services, job_id) == 4, 90, "4 running")
    old = version(services, job_id).split("-")[0]
    old_pods = {p.pod_name.value: p.status.version.value for p in pods(services, job_id)}
    assert all(v.split("-")[0] == old for v in old_pods.values())
    # As on Peloton, an instance seen RUNNING on the new config counts as updated at once,
    # so whether a run that exits at once fails the update would depend on whether its
    # RUNNING event is seen before its exit; a watch time (our extension, Aurora's
    # minWaitInInstanceRunningMs) makes every early exit count against the instance.
    replace(services, job_id, spec_file(tmp_path, "api", "exit 1", count=4), 2,
            "--rollbackOnFailure", "--maxInstanceRetries", "2",
            "--maxTolerableInstanceFailures", "1", "--watch-time", "5")
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_ROLLED_BACK", 180,
               "the failing update rolled back")
    eventually(lambda: running_on(services, job_id) == 4, 90, "all instances running again")
    spec = services.client.get_stateless_job(job_id).job_info.spec
    assert spec.default_spec.containers[0].entrypoint.value == "sleep 1000"
    # Every pod, not just the job's spec, is back on the old config: the rollback's config
    # version (a copy of the old one) or, if the update never reached it, the old version
    # itself; either way running the old command.
    rolled = version(services, job_id).split("-")[0]
    on: dict[str, str] = {}
    for name in old_pods:
        pod = services.client.get_pod(name, limit=1).current
        assert pod.status.state == pod_pb2.POD_STATE_RUNNING, (name, pod.status)
        on[name] = pod.status.version.value.split("-")[0]
        assert [c.entrypoint.value for c in pod.spec.containers] == ["sleep 1000"], \
            (name, pod.spec)
    assert set(on.values()) <= {old, rolled} and rolled in on.values(), (old, rolled, on)


def test_pause_stops_progress_and_resume_continues(services: UpCluster, tmp_path: Path) -> None:
    # A health check makes each instance take a second or two to count as updated.
    job_id = create(services, spec_file(tmp_path, "svc", "sleep 1000", check="true"))
    eventually(lambda: running_on(services, job_id) == 6, 90, "6 running")
    # A watch time keeps each instance in flight for 5 s, so the pause below lands mid-update
    # however slowly the polling and the CLI run on a busy machine: a workflow that already
    # ended takes a pause as a no-op answered OK (Peloton's), and would never read PAUSED.
    replace(services, job_id, spec_file(tmp_path, "svc", "sleep 1002", check="true"), 1,
            "--start-paused", "--watch-time", "5")
    assert wf_state(services, job_id) == "WORKFLOW_STATE_PAUSED"
    time.sleep(3)
    status = workflow(services, job_id)
    assert status.num_instances_completed == 0
    assert running_on(services, job_id) == 6
    services.cli("job", "stateless", "resume", job_id, version(services, job_id))
    eventually(lambda: workflow(services, job_id).num_instances_completed >= 2, 120,
               "progress after resume")
    services.cli("job", "stateless", "pause", job_id, version(services, job_id))
    reaches(services, job_id, "WORKFLOW_STATE_PAUSED", 30, "paused")
    time.sleep(1)  # let the instance in flight settle
    done = workflow(services, job_id).num_instances_completed
    time.sleep(3)
    assert workflow(services, job_id).num_instances_completed <= done + 1
    services.cli("job", "stateless", "resume", job_id, version(services, job_id))
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_SUCCEEDED", 180,
               "the update finished after resume")


def test_abort_leaves_a_mixed_but_stable_job(services: UpCluster, tmp_path: Path) -> None:
    job_id = create(services, spec_file(tmp_path, "mix", "sleep 1000", check="true"))
    eventually(lambda: running_on(services, job_id) == 6, 90, "6 running")
    old = version(services, job_id).split("-")[0]
    # A watch time keeps each instance of the update in flight for 5 s, so the abort lands
    # mid-update however slowly this test's polling and CLI run on a busy machine (without
    # it a fast update could finish between "two updated" and the abort).
    replace(services, job_id, spec_file(tmp_path, "mix", "sleep 1003", check="true"), 1,
            "--watch-time", "5")
    eventually(lambda: workflow(services, job_id).num_instances_completed >= 2, 120,
               "two instances updated")
    services.cli("job", "stateless", "abort", job_id, version(services, job_id))
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_ABORTED", 30, "aborted")
    eventually(lambda: running_on(services, job_id) == 6, 90, "every instance running")
    versions = {p.status.version.value.split("-")[0] for p in pods(services, job_id)}
    assert old in versions and len(versions) == 2, versions
    time.sleep(3)
    assert {p.status.version.value.split("-")[0] for p in pods(services, job_id)} == versions


def test_restart_workflow_restarts_every_instance_once(services: UpCluster,
                                                       tmp_path: Path) -> None:
    job_id = create(services, spec_file(tmp_path, "rs", "sleep 1000", count=4))
    eventually(lambda: running_on(services, job_id) == 4, 90, "4 running")
    before = {p.pod_name.value: p.status.pod_id.value for p in pods(services, job_id)}
    services.cli("job", "stateless", "restart", job_id, version(services, job_id),
                 "--batch-size", "2")
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_SUCCEEDED" and
               running_on(services, job_id) == 4, 120, "restart finished")
    after = {p.pod_name.value: p.status.pod_id.value for p in pods(services, job_id)}
    for name, pod_id in before.items():
        old_run = int(pod_id.rsplit("-", 1)[1])
        assert int(after[name].rsplit("-", 1)[1]) == old_run + 1, (name, pod_id, after[name])


def test_unhealthy_instance_is_not_counted_as_updated(services: UpCluster,
                                                      tmp_path: Path) -> None:
    # Peloton: a pod whose liveness check fails is killed (Mesos' executor does it) and
    # restarted; with unlimited retries the update keeps trying and never counts it.
    job_id = create(services, spec_file(tmp_path, "hc", "sleep 1000", count=2, check="true"))
    eventually(lambda: running_on(services, job_id) == 2, 90, "2 running")
    replace(services, job_id, spec_file(tmp_path, "hc", "sleep 1004", count=2,
                                        check="exit 1"), 1)
    first = eventually(lambda: next((p for p in pods(services, job_id)
                                     if p.status.version.value.split("-")[0] ==
                                     version(services, job_id).split("-")[0]), None),
                       60, "an instance on the new config")
    eventually(lambda: any(p.status.pod_id.value != first.status.pod_id.value and
                           p.pod_name.value == first.pod_name.value
                           for p in pods(services, job_id)), 90,
               "the unhealthy instance killed and started again")
    status = workflow(services, job_id)
    assert stateless_pb2.WorkflowState.Name(status.state) == "WORKFLOW_STATE_ROLLING_FORWARD"
    assert status.num_instances_completed == 0


def test_failing_health_check_fails_the_update_as_on_peloton(services: UpCluster,
                                                             tmp_path: Path) -> None:
    # Peloton's expected result (issue 12 item 3): max instance retries 1, max tolerable
    # instance failures 1, a liveness check that always fails -> the workflow FAILED.
    job_id = create(services, spec_file(tmp_path, "hf", "sleep 1000", count=2, check="true"))
    eventually(lambda: running_on(services, job_id) == 2, 90, "2 running")
    replace(services, job_id, spec_file(tmp_path, "hf", "sleep 1005", count=2, check="exit 1"), 1,
            "--maxInstanceRetries", "1", "--maxTolerableInstanceFailures", "1")
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_FAILED", 120,
               "the update FAILED on the failing health check")
    status = workflow(services, job_id)
    assert status.num_instances_failed == 1 and status.num_instances_completed == 0


def test_failing_health_check_rolls_back_when_asked(services: UpCluster, tmp_path: Path) -> None:
    job_id = create(services, spec_file(tmp_path, "hr", "sleep 1000", count=2, check="true"))
    eventually(lambda: running_on(services, job_id) == 2, 90, "2 running")
    replace(services, job_id, spec_file(tmp_path, "hr", "sleep 1006", count=2, check="exit 1"), 1,
            "--maxInstanceRetries", "1", "--maxTolerableInstanceFailures", "1",
            "--rollbackOnFailure")
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_ROLLED_BACK", 180,
               "the update ROLLED_BACK on the failing health check")
    eventually(lambda: running_on(services, job_id) == 2, 90, "both running again")
    for pod in pods(services, job_id):
        spec = services.client.get_pod(pod.pod_name.value, limit=1).current.spec
        assert spec.containers[0].entrypoint.value == "sleep 1000", spec


def test_watch_time_turns_a_late_failure_into_a_rollback(services: UpCluster,
                                                         tmp_path: Path) -> None:
    # Without a watch time this update succeeds as soon as its pods run; with one (our
    # extension, `--watch-time`), the run dying after 2 s fails the instance and rolls back.
    job_id = create(services, spec_file(tmp_path, "wt", "sleep 1000", count=1))
    eventually(lambda: running_on(services, job_id) == 1, 90, "1 running")
    replace(services, job_id, spec_file(tmp_path, "wt", "sleep 2; exit 1", count=1), 1,
            "--watch-time", "6", "--maxInstanceRetries", "1",
            "--maxTolerableInstanceFailures", "1", "--rollbackOnFailure")
    shown = services.cli("job", "stateless", "workflow", "options", job_id).stdout
    assert "Watch time:" in shown and "6s" in shown, shown
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_ROLLED_BACK", 120,
               "rolled back after a failure inside the watch time")
    eventually(lambda: running_on(services, job_id) == 1, 60, "the old command running again")


def test_restart_start_and_update_of_a_stopped_job_as_on_peloton(services: UpCluster,
                                                                 tmp_path: Path) -> None:
    # Issue 12 item 2, Peloton's results: RestartJob of a KILLED job runs every pod again;
    # an update of a stopped job (no start_pods) succeeds and leaves it stopped; StartJob
    # then starts it on the new config.
    job_id = create(services, spec_file(tmp_path, "life", "sleep 1000", count=2))
    eventually(lambda: running_on(services, job_id) == 2, 90, "2 running")
    services.cli("job", "stateless", "stop", job_id, version(services, job_id))
    eventually(lambda: job(services, job_id).status.state == stateless_pb2.JOB_STATE_KILLED, 60,
               "the job KILLED")
    services.cli("job", "stateless", "restart", job_id, version(services, job_id))
    eventually(lambda: running_on(services, job_id) == 2 and
               wf_state(services, job_id) == "WORKFLOW_STATE_SUCCEEDED", 90,
               "the killed job restarted")
    assert job(services, job_id).status.desired_state == stateless_pb2.JOB_STATE_RUNNING
    services.cli("job", "stateless", "stop", job_id, version(services, job_id))
    eventually(lambda: job(services, job_id).status.state == stateless_pb2.JOB_STATE_KILLED, 60,
               "the job KILLED again")
    replace(services, job_id, spec_file(tmp_path, "life", "sleep 1007", count=2), 1)
    eventually(lambda: wf_state(services, job_id) == "WORKFLOW_STATE_SUCCEEDED", 60,
               "the update of the stopped job SUCCEEDED")
    assert running_on(services, job_id) == 0
    assert job(services, job_id).status.state == stateless_pb2.JOB_STATE_KILLED
    new = version(services, job_id).split("-")[0]
    services.cli("job", "stateless", "start", job_id, version(services, job_id))
    eventually(lambda: running_on(services, job_id, new) == 2, 90,
               "started on the new config")


DAEMON_JOB = """\
name: node-agent
owningteam: e2e
instancecount: 1
type: 2
sla:
  priority: 1
  preemptible: false
defaultconfig:
  resource:
    cpulimit: 0.1
    memlimitmb: 16
    disklimitmb: 10
  command:
    shell: true
    value: 'sleep 1000'
"""

STATEFUL_JOB = """\
name: database
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
    sizemb: 10
  command:
    shell: true
    value: 'sleep 1000'
"""


def v0_job_id(output: str) -> str:
    match = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", output)
    assert match, output
    return match.group(0)


def test_daemon_job_runs_one_instance_on_every_up_host(services: UpCluster,
                                                       tmp_path: Path) -> None:
    (tmp_path / "daemon.yaml").write_text(DAEMON_JOB)
    job_id = v0_job_id(services.cli("job", "create", "/svc", str(tmp_path / "daemon.yaml")).stdout)

    def placement() -> dict[str, int]:
        tasks = services.client.list_tasks(job_id).result.value
        hosts: dict[str, int] = {}
        for t in tasks.values():
            if t.runtime.state == 8:  # RUNNING
                hosts[t.runtime.host] = hosts.get(t.runtime.host, 0) + 1
        return hosts

    eventually(lambda: len(placement()) == 3, 90, "one instance on each of the 3 hosts")
    assert set(placement().values()) == {1}
    services.add_agent("late-host", "--cpus", "2", "--mem-mb", "4096", "--disk-mb", "100000")
    eventually(lambda: "late-host" in placement(), 90, "an instance on the host added later")
    assert len(placement()) == 4 and set(placement().values()) == {1}


def test_stateful_instance_never_runs_twice_and_stays_on_its_host(services: UpCluster,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "db.yaml").write_text(STATEFUL_JOB)
    job_id = v0_job_id(services.cli("job", "create", "/svc", str(tmp_path / "db.yaml")).stdout)
    first = eventually(lambda: (t := services.client.get_task(job_id, 0).result).runtime.state == 8
                       and t.runtime.host, 90, "running")
    for _ in range(3):
        run = services.client.get_task(job_id, 0).result.runtime.mesosTaskId.value
        services.cli("task", "restart", job_id)

        def restarted(r: str = run) -> bool:
            t = services.client.get_task(job_id, 0).result.runtime
            return t.state == 8 and t.mesosTaskId.value != r

        eventually(restarted, 90, "restarted run running")
    events = list(services.client.get_pod_events(job_id, 0).result)
    by_run: dict[str, dict[str, float]] = {}
    from peloton.api.convert.common import time_from_rfc3339

    for ev in events:
        by_run.setdefault(ev.taskId.value, {})[ev.actualState] = time_from_rfc3339(ev.timestamp, "t")
        assert not ev.hostname or ev.hostname == first, "a stateful task moved hosts"
    runs = sorted(by_run, key=lambda r: int(r.rsplit("-", 1)[1]))
    assert len(runs) == 4
    for older, newer in itertools.pairwise(runs):
        ended = by_run[older].get("KILLED")
        started = by_run[newer].get("RUNNING") or by_run[newer].get("STARTING")
        assert ended is not None and started is not None and started >= ended, (older, newer)

    # Restarts alone cannot move it (placement ties break by host position, so the same host
    # wins anyway).  Take its host away: two other hosts have room, yet the task waits.
    services.cli("host", "maintenance", "start", first)
    eventually(lambda: first in services.cli("host", "query", "-s", "HOST_STATE_DOWN").stdout,
               90, "its host DOWN")

    def waiting() -> pod_pb2.PodStatus | None:
        (pod,) = services.client.query_pods(job_id, pod_pb2.QuerySpec()).pods
        return pod.status if "desired host" in pod.status.reason else None

    status = eventually(waiting, 60, "placement refusing every other host")
    assert status.state == pod_pb2.POD_STATE_PENDING and not status.host, status
    assert status.desiredHost == first, status
    services.cli("host", "maintenance", "complete", first)
    back = eventually(lambda: (t := services.client.get_task(job_id, 0).result.runtime)
                      .state == 8 and t, 90, "running again after the maintenance")
    assert back.host == first, "a stateful task moved hosts"
    hosts = {ev.hostname for ev in services.client.get_pod_events(job_id, 0).result if ev.hostname}
    assert hosts == {first}, hosts
