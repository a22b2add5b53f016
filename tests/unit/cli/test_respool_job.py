"""`peloton respool` and `peloton job`: requests sent, output rendered, errors reported."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from cli.exit_codes import ExitCode
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import JOB, POOL, World

# Written the way Peloton's example files are: lower-cased keys, nulls, a key Go ignored.
RESPOOL_YAML = """\
changelog: null
name: DefaultResPool
owningteam: team6
ldapgroups: [money, team6]
description: "A test respool"
resources:
- kind: cpu
  reservation: 12
  limit: 12
  share: 1
- kind: memory
  reservation: 6144
  limit: 6144
  share: 1
controllerlimit:
  maxpercent: 10
policy: 1
"""

JOB_YAML = """\
changelog: null
name: TestPelotonJob_123
owningteam: team6
labels:
- key: testKey0
  value: testVal0
instancecount: 3
sla:
  priority: 22
  minimuminstancecount: 12
  preemptible: false
defaultconfig:
  resource:
    cpulimit: 1.0
    memlimitmb: 2.0
  healthcheck: null
  command:
    shell: true
    value: 'echo "Job $PELOTON_JOB_ID" && sleep 30'
instanceconfig:
  0:
    name: controller0
    command:
      shell: true
      value: 'echo Hello instance 0'
"""


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_respool_create_sends_parent_from_path_and_yaml_as_written(
        peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("respool", "create", "/DefaultResPool", _file(tmp_path, "pool.yaml", RESPOOL_YAML))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Resource Pool pool-new created at /DefaultResPool"
    assert [r.path.value for r in world.requests("ResourceManager.LookupResourcePoolID")] == ["/"]
    call = world.call("ResourceManager.CreateResourcePool")
    config = call.request.config
    assert (config.name, config.parent.value, config.owningTeam) == ("DefaultResPool", "root", "team6")
    assert [(r.kind, r.reservation) for r in config.resources] == [("cpu", 12.0), ("memory", 6144.0)]
    assert call.metadata["rpc-service"] == "peloton-resmgr"
    assert call.metadata["rpc-caller"] == "peloton-cli"
    assert call.metadata["rpc-encoding"] == "proto"


def test_respool_create_checks_name_against_path(peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("respool", "create", "/Other", _file(tmp_path, "pool.yaml", RESPOOL_YAML))
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert "don't match" in result.stderr
    assert world.requests("ResourceManager.CreateResourcePool") == []


def test_respool_create_existing_pool_is_already_exists(peloton: Peloton, tmp_path: Path) -> None:
    text = RESPOOL_YAML.replace("name: DefaultResPool", "name: Dup")
    result = peloton("respool", "create", "/Dup", _file(tmp_path, "pool.yaml", text))
    assert result.exit_code == ExitCode.ALREADY_EXISTS
    assert "Error: resource pool Dup already exists" in result.stderr


def test_respool_dump_yaml_and_json(peloton: Peloton) -> None:
    dumped = yaml.safe_load(peloton("respool", "dump").stdout)
    assert {p["path"]["value"] for p in dumped} == {"/", "/DefaultResPool"}
    as_json = json.loads(peloton("-j", "respool", "dump").stdout)
    assert {p["id"]["value"] for p in as_json["resourcePools"]} == {"root", POOL}


def test_respool_lookup_unknown_path_is_not_found(peloton: Peloton) -> None:
    result = peloton("respool", "lookup", "/nope")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert result.stderr.strip() == "Error: resource pool /nope not found"
    assert peloton("respool", "lookup", "/DefaultResPool").stdout.strip() == POOL


def test_job_create_resolves_pool_and_warns_on_unknown_keys(
        peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"Job {JOB} created"
    assert "sla.minimuminstancecount: unknown field" in result.stderr
    call = world.call("JobManager.Create")
    assert call.request.id.value == JOB
    config = call.request.config
    assert (config.respoolID.value, config.instanceCount, config.sla.priority) == (POOL, 3, 22)
    assert config.defaultConfig.resource.cpuLimit == 1.0
    assert config.instanceConfig[0].name == "controller0"
    assert call.metadata["rpc-service"] == "peloton-jobmgr"


def test_job_create_invalid_config_names_the_field(peloton: Peloton, tmp_path: Path) -> None:
    text = JOB_YAML.replace("name: TestPelotonJob_123", "name: bad")
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", text))
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert "defaultConfig.resource.cpuLimit" in result.stderr


def test_job_create_twice_is_already_exists(peloton: Peloton, tmp_path: Path) -> None:
    config = _file(tmp_path, "job.yaml", JOB_YAML)
    assert peloton("job", "create", "/DefaultResPool", config, "-i", JOB).exit_code == 0
    result = peloton("job", "create", "/DefaultResPool", config, "-i", JOB)
    assert result.exit_code == ExitCode.ALREADY_EXISTS
    assert "already exists" in result.stderr


def test_job_create_bad_yaml_value_names_file_and_field(peloton: Peloton, tmp_path: Path) -> None:
    text = JOB_YAML.replace("instancecount: 3", "instancecount: lots")
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", text))
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert "job.yaml: instancecount" in result.stderr


def test_job_create_in_unknown_pool_changes_nothing(peloton: Peloton, world: World, tmp_path: Path) -> None:
    result = peloton("job", "create", "/missing", _file(tmp_path, "job.yaml", JOB_YAML))
    assert result.exit_code == ExitCode.NOT_FOUND
    assert world.requests("JobManager.Create") == []


def test_job_get_unknown_is_not_found_with_clear_message(peloton: Peloton) -> None:
    result = peloton("job", "get", "0a0a0a0a-0000-4000-8000-000000000000")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert result.stderr.strip() == "Error: job 0a0a0a0a-0000-4000-8000-000000000000 not found"
    as_json = json.loads(peloton("-j", "job", "get", "0a0a0a0a-0000-4000-8000-000000000000").stderr)
    assert as_json["error"]["kind"] == "not_found"


def test_job_get_and_status_yaml_and_json(peloton: Peloton, world: World, tmp_path: Path) -> None:
    peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB)
    got = yaml.safe_load(peloton("job", "get", JOB).stdout)
    assert got["jobInfo"]["config"]["name"] == "TestPelotonJob_123"
    status = json.loads(peloton("-j", "job", "status", JOB).stdout)
    assert status["state"] == "RUNNING" and status["configurationVersion"] == "3"


def test_job_query_table_and_json(peloton: Peloton, world: World, tmp_path: Path) -> None:
    peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB)
    result = peloton("job", "query", "-l", "a=b,c=d", "-r", "/DefaultResPool", "-s", "RUNNING,PENDING",
                     "--owner", "team6", "-n", "5", "-a", "ASC", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["ID", "Name", "Owner", "State"]
    row = next(line for line in lines if JOB[:8] in line).split()
    assert row[:6] == [JOB[:8], "TestPelotonJob_123", "team6", "RUNNING", "2019-05-01", "10:00:00"]
    assert row[6:] == ["3", "2", "1", "0", "0"]
    request = world.requests("JobManager.Query")[0]
    assert request.respoolID.value == POOL and request.summaryOnly
    spec = request.spec
    assert [(lb.key, lb.value) for lb in spec.labels] == [("a", "b"), ("c", "d")]
    assert list(spec.jobStates) == [3, 2] and spec.owner == "team6"
    assert (spec.pagination.limit, spec.pagination.maxLimit) == (5, 100)
    assert spec.pagination.orderBy[0].property.value == "creation_time"
    as_json = json.loads(peloton("-j", "job", "query").stdout)
    assert as_json["results"][0]["id"]["value"] == JOB


def test_job_query_unknown_state_is_usage_error(peloton: Peloton) -> None:
    result = peloton("job", "query", "-s", "SLEEPY")
    assert result.exit_code == ExitCode.USAGE
    assert "SLEEPY" in result.stderr


def test_job_create_wait_shows_progress_until_terminal(
        peloton: Peloton, world: World, tmp_path: Path) -> None:
    world.job_script[JOB] = [("PENDING", {"PENDING": 3}), ("RUNNING", {"RUNNING": 2, "SUCCEEDED": 1}),
                             ("SUCCEEDED", {"SUCCEEDED": 3})]
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB,
                     "--wait")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"Job {JOB} created", f"Job {JOB} SUCCEEDED"]
    assert "3/3" in result.stderr and "SUCCEEDED 3" in result.stderr
    assert len(world.requests("JobManager.Get")) == 3


def test_job_create_wait_reports_failed_job(peloton: Peloton, world: World, tmp_path: Path) -> None:
    world.job_script[JOB] = [("RUNNING", {"RUNNING": 3}), ("FAILED", {"SUCCEEDED": 2, "FAILED": 1})]
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB,
                     "--wait")
    assert result.exit_code == ExitCode.WAIT_FAILED
    assert f"job {JOB} ended FAILED: SUCCEEDED 2 FAILED 1" in result.stderr


def test_job_create_wait_timeout(peloton: Peloton, world: World, tmp_path: Path) -> None:
    world.job_script[JOB] = [("RUNNING", {"RUNNING": 3})]
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB,
                     "--wait", "--wait-timeout", "50ms")
    assert result.exit_code == ExitCode.TIMEOUT
    assert "gave up waiting" in result.stderr


def test_job_restart_uses_current_version_and_ranges(peloton: Peloton, world: World, tmp_path: Path) -> None:
    peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB)
    result = peloton("job", "rolling-restart", JOB, "2", "-r", "0:2", "-r", "5:")
    assert result.exit_code == 0, result.output
    request = world.requests("JobManager.Restart")[0]
    assert request.resourceVersion == 3 and request.restartConfig.batchSize == 2
    assert [(r.__getattribute__("from"), r.to) for r in request.ranges] == [(0, 2), (5, 2**31 - 1)]
    pinned = peloton("job", "restart", JOB, "--resourceVersion", "2")
    assert pinned.exit_code == ExitCode.CONFLICT


def test_job_stop_signals_tasks(peloton: Peloton, world: World, tmp_path: Path) -> None:
    peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB)
    result = peloton("job", "stop", JOB)
    assert result.exit_code == 0, result.output
    assert "Successfully signalled 3 tasks for stopping" in result.stdout
    assert world.requests("TaskManager.Stop")[0].jobId.value == JOB
    other = peloton("job", "stop", JOB, "--owner", "someone-else")
    assert other.stdout.strip() == "No matching job found"
