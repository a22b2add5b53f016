"""The `aurora` command against a real `peloton up`, driven as an Aurora user drives Aurora:
a clusters.json naming the cluster, `.aurora` files, Aurora's verbs and exit codes.

The configs are written for these tests (not copied from Aurora's docs); they use the constructs
of Aurora's tutorial and configuration reference: Process, SequentialTask, Resources in MB,
Service, Job with a cron schedule, UpdateConfig, a profile bound with .bind(), `--bind`,
`{{mesos.instance}}` and `{{thermos.ports[http]}}` bound when the task runs.  The service's
second process serves its sandbox over HTTP on its assigned port, and the first wrote the
instance number there: the test reads it back from each instance."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.cluster import UpCluster, eventually
from tests.harness.procs import PELOTON, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
AURORA = str(Path(PELOTON).with_name("aurora"))
RESOURCES = ["--agent-cpus", "4", "--agent-mem-mb", "4096", "--agent-disk-mb", "100000"]
CLUSTER = "devcluster"
HELLO = f"{CLUSTER}/www/devel/greeter"

HELLO_CONFIG = """\
class Profile(Struct):
  greeting = Default(String, 'hello')

write_id = Process(name = 'write_id',
                   cmdline = 'echo "{{profile.greeting}} from {{mesos.instance}}" > id.txt')
serve = Process(name = 'serve', cmdline = 'exec python3 -m http.server {{thermos.ports[http]}}')
hello_task = SequentialTask(processes = [write_id, serve],
                            resources = Resources(cpu = 0.1, ram = 64*MB, disk = 16*MB))
jobs = [Service(cluster = 'devcluster', role = 'www', environment = 'devel', name = 'greeter',
                instances = 2, task = hello_task,
                update_config = UpdateConfig(batch_size = 2, watch_secs = 1))
        .bind(profile = Profile())]
"""

CRON_CONFIG = """\
report = SimpleTask('report', 'echo report done')
jobs = [Job(cluster = 'devcluster', role = 'www', environment = 'devel', name = 'report',
            cron_schedule = '0 4 * * *', cron_collision_policy = 'CANCEL_NEW',
            task = report(resources = Resources(cpu = 0.1, ram = 16*MB, disk = 8*MB)))]
"""


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path_factory.mktemp("aurora-cmd"), agents=1, extra=RESOURCES).start()
    try:
        yield cluster
    finally:
        cluster.close()


class Aurora:
    """Runs `aurora` with its own clusters.json and home directory."""

    def __init__(self, base: Path, port: int) -> None:
        self.base = base
        etc, home = base / "etc", base / "home"
        etc.mkdir(parents=True, exist_ok=True)
        home.mkdir(exist_ok=True)
        (etc / "clusters.json").write_text(json.dumps([
            {"name": CLUSTER, "scheduler_uri": f"http://127.0.0.1:{port}"},
            {"name": "json-cluster", "scheduler_uri": f"http://127.0.0.1:{port}", "thrift_protocol": "json"},
            {"name": "down", "scheduler_uri": "http://127.0.0.1:1"}]))
        self.env = {**os.environ, "AURORA_CONFIG_ROOT": str(etc), "HOME": str(home)}

    def write(self, name: str, text: str) -> str:
        path = self.base / name
        path.write_text(text)
        return str(path)

    def __call__(self, *args: str, code: int = 0, cmd: str = AURORA) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([cmd, *args], cwd=self.base, env=self.env, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == code, f"aurora {' '.join(args)} exited {done.returncode}, not {code}:\n" \
            f"{done.stdout}\n{done.stderr}"
        return done


@pytest.fixture(scope="module")
def aurora(up: UpCluster, tmp_path_factory: pytest.TempPathFactory) -> Aurora:
    return Aurora(tmp_path_factory.mktemp("aurora-home"), up.aurora_port)


def status(aurora: Aurora, key: str) -> dict[str, Any]:
    result = aurora("job", "status", key, "--write-json")
    docs = json.loads(result.stdout)
    return docs[0] if isinstance(docs, list) and docs else {"active": [], "inactive": []}


def running(aurora: Aurora, key: str) -> dict[int, dict[str, Any]]:
    """Instance -> its RUNNING task."""
    return {t["assignedTask"]["instanceId"]: t for t in status(aurora, key)["active"]
            if t["status"] == "RUNNING"}


def served(task: dict[str, Any]) -> str:
    """What the instance serves as id.txt ('' until it answers)."""
    port = task["assignedTask"]["assignedPorts"]["http"]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/id.txt", timeout=2) as reply:
            return str(reply.read().decode().strip())
    except OSError:
        return ""


def serving(aurora: Aurora, key: str, expected: dict[int, str]) -> bool:
    tasks = running(aurora, key)
    return sorted(tasks) == sorted(expected) and all(served(tasks[i]) == text for i, text in expected.items())


def wait_serving(aurora: Aurora, key: str, expected: dict[int, str], what: str) -> None:
    """Wait until the instances serve `expected`; on timeout, show the job's status."""
    try:
        eventually(lambda: serving(aurora, key, expected), 90, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{aurora('job', 'status', key).stdout}") from None


def test_a_service_from_an_aurora_file_lives_its_whole_life(aurora: Aurora) -> None:
    config = aurora.write("hello.aurora", HELLO_CONFIG)
    created = aurora("job", "create", HELLO, config, "--wait-until", "RUNNING")
    assert "Job create succeeded: job url=" in created.stdout
    wait_serving(aurora, HELLO, {0: "hello from 0", 1: "hello from 1"},
                 "both instances serving their instance number on their http port")
    inspected = aurora("job", "inspect", HELLO, config)
    assert "Process 'serve':" in inspected.stdout and "write_id < serve" in inspected.stdout

    # An update to a new greeting (a --bind flag), rolled out with the config's UpdateConfig.
    before = {i: t["assignedTask"]["taskId"] for i, t in running(aurora, HELLO).items()}
    diff = aurora("job", "diff", HELLO, config, "--bind", "profile.greeting=hi")
    assert "update instances: [0-1]" in diff.stdout and '+' in diff.stdout
    updated = aurora("update", "start", HELLO, config, "--bind", "profile.greeting=hi", "--wait")
    assert "Job update has started." in updated.stdout and "Current state ROLLED_FORWARD" in updated.stdout
    wait_serving(aurora, HELLO, {0: "hi from 0", 1: "hi from 1"}, "the new greeting")
    after = {i: t["assignedTask"]["taskId"] for i, t in running(aurora, HELLO).items()}
    assert all(after[i] != before[i] for i in before), (before, after)
    info = aurora("update", "info", HELLO, json.loads(aurora("update", "list", HELLO, "--write-json")
                                                      .stdout)[0]["id"])
    assert "Current status: ROLLED_FORWARD" in info.stdout
    assert "not change instances: [0-1]" in aurora("job", "diff", HELLO, config, "--bind",
                                                   "profile.greeting=hi").stdout

    # A rolling restart: new tasks for both instances, each RUNNING for the watch time.
    restarted = aurora("job", "restart", HELLO, "--batch-size", "2", "--watch-secs", "1")
    assert f"Job {HELLO} restarted successfully" in restarted.stdout
    again = {i: t["assignedTask"]["taskId"] for i, t in running(aurora, HELLO).items()}
    assert sorted(again) == [0, 1] and all(again[i] != after[i] for i in after), (after, again)

    killed = aurora("job", "kill", f"{HELLO}/1")
    assert "Successfully killed instances [1]" in killed.stdout and "Job kill succeeded" in killed.stdout
    assert sorted(running(aurora, HELLO)) == [0]
    assert "Job killall succeeded" in aurora("job", "killall", HELLO).stdout
    assert status(aurora, HELLO)["active"] == []


def test_cron_schedule_start_and_deschedule(aurora: Aurora) -> None:
    key = f"{CLUSTER}/www/devel/report"
    config = aurora.write("report.aurora", CRON_CONFIG)
    refused = aurora("job", "create", key, config, code=4)
    assert 'Cron jobs may only be scheduled with "aurora cron schedule" command' in refused.stderr
    assert "Cron job scheduled" in aurora("cron", "schedule", key, config).stdout
    assert aurora("cron", "show", key).stdout.strip() == f"{key}\t 0 4 * * *"
    aurora("cron", "start", key)
    eventually(lambda: [t["status"] for t in status(aurora, key)["inactive"]] == ["FINISHED"], 90,
               "the cron run started by hand FINISHED")
    assert "Cron descheduling succeeded." in aurora("cron", "deschedule", key).stdout
    assert "No cron entry found" in aurora("cron", "show", key, code=6).stderr


def test_quota_listing_and_both_entry_points(aurora: Aurora) -> None:
    quota = aurora("quota", "get", f"{CLUSTER}/www")
    assert quota.stdout.startswith("Allocated:\n  CPU: ")
    assert aurora("quota", "get", "json-cluster/www").stdout == quota.stdout  # Thrift JSON too
    same = aurora("aurora", "quota", "get", f"{CLUSTER}/www", cmd=PELOTON)
    assert same.stdout == quota.stdout
    listed = aurora("job", "list", CLUSTER).stdout.split()
    assert all(k.startswith(f"{CLUSTER}/") for k in listed)


def test_failures_end_with_auroras_exit_codes(aurora: Aurora) -> None:
    missing = f"{CLUSTER}/www/devel/no-such-job"
    assert "Found no jobs matching" in aurora("job", "status", missing, code=6).stderr
    assert "No tasks to kill found" in aurora("job", "killall", missing, code=6).stderr
    assert "No active update found" in aurora("update", "pause", missing, code=6).stderr
    bad = aurora.write("bad.aurora", HELLO_CONFIG.replace("cpu = 0.1", "cpu = 'lots'"))
    refused = aurora("job", "create", HELLO, bad, code=3)
    assert f"Error loading configuration: {bad}:8: jobs[0].task.resources.cpu: Cannot coerce" in \
        refused.stderr
    unbound = aurora.write("unbound.aurora", HELLO_CONFIG.replace("{{profile.greeting}}", "{{greet}}"))
    assert f"{unbound}:4: jobs[0].task.processes[0].cmdline: unbound template variable {{{{greet}}}}" in \
        aurora("update", "start", HELLO, unbound, code=3).stderr
    config = aurora.write("hello.aurora", HELLO_CONFIG)
    assert "Unknown cluster: nowhere" in aurora("job", "status", "nowhere/www/devel/hello",
                                                code=3).stderr
    assert "Could not find job" in aurora("job", "create", "nowhere/www/devel/hello", config,
                                          code=3).stderr
    assert "use killall" in aurora("job", "kill", HELLO, code=6).stderr
    assert "Connection refused" in aurora("job", "status", "down/www/devel/hello", code=7).stderr
    assert "Invalid role" in aurora("job", "killall", f"{CLUSTER}/bad role/devel/x", code=2).stderr
    assert "not supported" in aurora("task", "run", HELLO, "true", "--executor-sandbox", code=6).stderr


def test_the_readme_section_runs_as_written(up: UpCluster, tmp_path: Path) -> None:
    """README "Coming from Aurora": its shell block, with this cluster's port, in a fresh home."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Coming from Aurora"):]
    block = section[section.index("```sh\n") + len("```sh\n"):section.index("\n```\n")]
    script = block.replace("127.0.0.1:5396", f"127.0.0.1:{up.aurora_port}").replace(
        "source .venv/bin/activate", f"source {REPO}/.venv/bin/activate")
    (tmp_path / "home").mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "AURORA_CONFIG_ROOT": str(tmp_path / "none")}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Job create succeeded" in done.stdout and "Current state ROLLED_FORWARD" in done.stdout
    assert "Job killall succeeded" in done.stdout
