"""`peloton task`, `pod` and `host`: requests, tables, JSON and sandbox logs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from cli.exit_codes import ExitCode
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import JOB, World

FILES = {"/sandbox/run-1/stdout": b"hello from instance 0\n", "/sandbox/run-1/stderr": b"oops\n"}


class _Agent(BaseHTTPRequestHandler):
    """Serves sandbox files the way the Mesos agent does: GET /files/download?path=..."""

    def do_GET(self) -> None:
        url = urlparse(self.path)
        path = parse_qs(url.query).get("path", [""])[0]
        body = FILES.get(path) if url.path == "/files/download" else None
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def agent(world: World) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    world.sandbox = ("127.0.0.1", str(server.server_address[1]), sorted(FILES))
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_task_list_table_sorted_by_instance(peloton: Peloton, world: World) -> None:
    result = peloton("task", "list", JOB, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["Inst", "Name", "State"]
    rows = [line.split() for line in lines[2:] if line.strip()]
    assert [(r[0], r[1], r[2]) for r in rows] == [("0", "task0", "SUCCEEDED"), ("1", "task1", "FAILED"),
                                                  ("2", "task2", "RUNNING")]
    assert rows[0][3:7] == ["2019-05-01", "10:00:00", "00:01:05", "host-a"]
    request = world.requests("TaskManager.List")[0]
    assert (request.range.__getattribute__("from"), request.range.to) == (0, 2**31 - 1)


def test_task_list_json_and_range(peloton: Peloton, world: World) -> None:
    data = json.loads(peloton("-j", "task", "list", JOB, "-r", "1:3").stdout)
    assert set(data["result"]["value"]) == {"0", "1", "2"}
    request = world.requests("TaskManager.List")[0]
    assert (request.range.__getattribute__("from"), request.range.to) == (1, 3)


def test_task_list_unknown_job_is_not_found(peloton: Peloton) -> None:
    result = peloton("task", "list", "0a0a0a0a-0000-4000-8000-000000000000")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "not found" in result.stderr


def test_task_get_out_of_range_is_invalid_argument(peloton: Peloton) -> None:
    result = peloton("task", "get", JOB, "7")
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert "valid instances are 0..2" in result.stderr


def test_task_start_and_stop_ranges(peloton: Peloton, world: World) -> None:
    started = peloton("task", "start", JOB, "-r", "0:2")
    assert "Tasks started successfully for instances: [0, 1]" in started.stdout
    assert peloton("task", "stop", JOB).stdout.strip() == "Successfully signalled 3 tasks for stopping"
    start_req = world.requests("TaskManager.Start")[0]
    assert [(r.__getattribute__("from"), r.to) for r in start_req.ranges] == [(0, 2)]
    assert list(world.requests("TaskManager.Stop")[0].ranges) == []  # no range: every instance


def test_task_bad_range_is_usage_error(peloton: Peloton, world: World) -> None:
    result = peloton("task", "start", JOB, "-r", "3")
    assert result.exit_code == ExitCode.USAGE
    assert "FROM:TO" in result.stderr
    assert world.calls == []


def test_task_logs_reads_the_sandbox_file(peloton: Peloton, world: World, agent: str) -> None:
    result = peloton("task", "logs", JOB, "0")
    assert result.exit_code == 0, result.output
    assert result.stdout == "hello from instance 0\n"
    assert peloton("task", "logs", JOB, "0", "-f", "stderr").stdout == "oops\n"
    request = world.requests("TaskManager.BrowseSandbox")[0]
    assert (request.jobId.value, request.instanceId) == (JOB, 0)


def test_task_logs_missing_file_lists_the_sandbox(peloton: Peloton, agent: str) -> None:
    result = peloton("task", "logs", JOB, "0", "-f", "nothere")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "/sandbox/run-1/stdout" in result.stderr


def test_task_logs_agent_down_is_unavailable(peloton: Peloton, world: World) -> None:
    world.sandbox = ("127.0.0.1", "1", ["/sandbox/stdout"])
    result = peloton("task", "logs", JOB, "0")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "cannot read sandbox file" in result.stderr


def test_pod_logs_uses_pod_sandbox(peloton: Peloton, world: World, agent: str) -> None:
    assert peloton("pod", "logs", f"{JOB}-0").stdout == "hello from instance 0\n"
    assert world.requests("PodService.BrowsePodSandbox")[0].pod_name.value == f"{JOB}-0"


def test_pod_events_table(peloton: Peloton, world: World) -> None:
    result = peloton("pod", "events", JOB, "0", "-l", "3", "-r", "run-2")
    assert result.exit_code == 0, result.output
    assert "Mesos Task Id" in result.stdout.splitlines()[0]
    assert f"{JOB[:8]}-0-1" in result.stdout and "started" in result.stdout
    request = world.requests("TaskManager.GetPodEvents")[0]
    assert (request.instanceId, request.limit, request.runId) == (0, 3, "run-2")


def test_pod_get_yaml_and_not_found(peloton: Peloton) -> None:
    assert "POD_STATE_RUNNING" in peloton("pod", "get", f"{JOB}-0", "-o", "yaml").stdout
    assert "RUNNING" in peloton("pod", "get", f"{JOB}-0").stdout
    missing = peloton("pod", "get", "0000dead-0000-4000-8000-000000000000-0")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert missing.stderr.strip() == "Error: pod 0000dead-0000-4000-8000-000000000000-0 not found"


def test_host_query_table_states_and_hostmgr_metadata(peloton: Peloton, world: World) -> None:
    result = peloton("host", "query")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Hostname", "State", "IP", "HostPool"]
    assert lines[2].split() == ["host-a", "UP", "10.0.0.1", "shared"]
    down = peloton("host", "query", "-s", "HOST_STATE_DOWN,DRAINING")
    assert "host-b" in down.stdout and "host-a" not in down.stdout
    assert list(world.requests("HostService.QueryHosts")[1].host_states) == [5, 3]
    assert world.calls[0].metadata["rpc-service"] == "peloton-hostmgr"
    assert json.loads(peloton("-j", "host", "query").stdout)["host_infos"][1]["state"] == "HOST_STATE_DOWN"


def test_host_maintenance_start(peloton: Peloton, world: World) -> None:
    result = peloton("host", "maintenance", "start", "host-a,host-b")
    assert result.stdout.splitlines() == ["Host successfully submitted for maintenance: host-a",
                                          "Host successfully submitted for maintenance: host-b"]
    assert [r.hostname for r in world.requests("HostService.StartMaintenance")] == ["host-a", "host-b"]
    unknown = peloton("host", "maintenance", "start", "host-z")
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert "host host-z not found" in unknown.stderr
