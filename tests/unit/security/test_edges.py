"""The edge checks: request maxima on both fronts, Aurora permissions, the job guard, task
identities, the UI gate, and storage errors classified without SQL."""

from __future__ import annotations

import io
import os
import pwd
from typing import Any

import pytest

from aurorabridge.limits import check_args
from aurorabridge.security import permission_for
from aurorabridge.thrift_api import api
from peloton.agent.identity import IdentityPolicy
from peloton.api.auth_jobs import JobGuard
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2
from peloton.api.gen.pelotonpy.api.cron import cron_pb2
from peloton.api.limits import MAX_INSTANCES, check_request
from peloton.common.auth.policy import Principal, Role, Rule
from peloton.common.clock import FakeClock
from peloton.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    Unavailable,
)
from peloton.storage.errors import StorageFailure, classify_cassandra, classify_sql
from ui.gate import UiGate, allowed_hosts
from ui.sessions import Sessions

JOBS = "peloton.api.v0.job.JobManager"


# -- gRPC request maxima --------------------------------------------------------------------------
def config(**fields: Any) -> job_pb2.CreateRequest:
    return job_pb2.CreateRequest(config=job_pb2.JobConfig(**fields))


@pytest.mark.parametrize("request_, field", [
    (config(name="n" * 257), "config.name"),
    (config(description="d" * (16 * 1024 + 1)), "config.description"),
    (config(name="a\x00b"), "config.name"),
    (config(instanceCount=MAX_INSTANCES + 1), "config.instanceCount"),
    (config(labels=[{"key": f"k{i}", "value": "v"} for i in range(129)]), "config.labels"),
    (config(labels=[{"key": "k", "value": "v" * 4097}]), "config.labels[0].value"),
    (config(defaultConfig={"command": {"value": "x" * (64 * 1024 + 1)}}),
     "config.defaultConfig.command.value"),
])
def test_each_maximum_is_refused_naming_the_field(request_: Any, field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        check_request(request_)
    assert refused.value.field == field and refused.value.message.startswith(field)


def test_values_at_the_maxima_pass() -> None:
    check_request(config(name="n" * 256, description="d" * 16 * 1024, instanceCount=MAX_INSTANCES,
                         labels=[{"key": f"k{i}", "value": "v" * 4096} for i in range(128)]))


def constraint(depth: int) -> task_pb2.Constraint:
    node = task_pb2.Constraint(type=task_pb2.Constraint.LABEL_CONSTRAINT)
    for _ in range(depth - 1):
        node = task_pb2.Constraint(type=task_pb2.Constraint.AND_CONSTRAINT,
                                   andConstraint=task_pb2.AndConstraint(constraints=[node]))
    return node


def test_constraint_nesting_is_capped() -> None:
    ok = job_pb2.JobConfig()
    ok.defaultConfig.constraint.CopyFrom(constraint(8))
    check_request(job_pb2.CreateRequest(config=ok))
    deep = job_pb2.JobConfig()
    deep.defaultConfig.constraint.CopyFrom(constraint(9))
    with pytest.raises(InvalidArgument, match="constraints nested more than 8"):
        check_request(job_pb2.CreateRequest(config=deep))


# -- Aurora ---------------------------------------------------------------------------------------
def test_aurora_maxima_name_the_field() -> None:
    task = api.TaskConfig(metadata=[api.Metadata(key="k", value="v")] * 129)
    with pytest.raises(InvalidArgument, match=r"^description.taskConfig.metadata: 129 entries"):
        check_args("createJob", api.AuroraAdmin.createJob_args(
            description=api.JobConfiguration(taskConfig=task)))
    key = api.JobKey(role="r\x00", environment="e", name="n")
    with pytest.raises(InvalidArgument, match=r"job\.role: contains a NUL"):
        check_args("killTasks", api.AuroraAdmin.killTasks_args(job=key))


def _known(method: str, args: Any) -> tuple[str, ...]:
    """The permission of a call whose job can be told."""
    permission = permission_for(method, args)
    assert permission is not None
    return permission


def test_aurora_permissions_are_shiros_strings() -> None:
    key = api.JobKey(role="www", environment="prod", name="web")
    args = api.AuroraAdmin.createJob_args(description=api.JobConfiguration(key=key))
    assert permission_for("createJob", args) == ("thrift.AuroraSchedulerManager", "createJob", "www",
                                                 "prod", "web")
    update = api.AuroraAdmin.startJobUpdate_args(request=api.JobUpdateRequest(
        taskConfig=api.TaskConfig(job=key)))
    assert _known("startJobUpdate", update)[2:] == ("www", "prod", "web")
    pause = api.AuroraAdmin.pauseJobUpdate_args(key=api.JobUpdateKey(job=key, id="u"))
    assert _known("pauseJobUpdate", pause)[2] == "www"
    add = api.AuroraAdmin.addInstances_args(key=api.InstanceKey(jobKey=key, instanceId=0), count=1)
    assert _known("addInstances", add)[2] == "www"
    assert permission_for("drainHosts", api.AuroraAdmin.drainHosts_args()) == (
        "thrift.AuroraAdmin", "drainHosts")
    assert permission_for("getJobs", api.AuroraAdmin.getJobs_args()) == (
        "thrift.ReadOnlyScheduler", "getJobs")
    assert permission_for("killTasks", api.AuroraAdmin.killTasks_args()) is None


# -- the job guard --------------------------------------------------------------------------------
class Facts:
    def job_owner_and_pool(self, job_id: str) -> tuple[str, str] | None:
        return {"j-alice": ("alice", "p-dev")}.get(job_id)

    def job_of_update(self, update_id: str) -> str | None:
        return {"u-1": "j-alice"}.get(update_id)

    def pool_path(self, pool_id: str) -> str | None:
        return {"p-dev": "/dev", "p-prod": "/prod"}.get(pool_id)

    def cron_job_owner(self, name: str) -> str | None:
        return {"nightly": "alice"}.get(name)


DEV = Role("dev", (Rule.parse(f"{JOBS}:*"),), pools=("/dev",), owners=("self",))


def test_the_job_guard_checks_pools_owners_and_users() -> None:
    guard, alice, bob = JobGuard(Facts()), Principal("alice", DEV), Principal("bob", DEV)
    create = job_pb2.CreateRequest(config=job_pb2.JobConfig(respoolID={"value": "p-dev"}))
    assert guard.check(alice, JOBS, "Create", create) == "pool /dev"
    assert create.config.owner == "alice"  # owned by its creator
    create.config.respoolID.value = "p-prod"
    with pytest.raises(PermissionDenied, match="pool /prod"):
        guard.check(alice, JOBS, "Create", create)
    create.config.respoolID.value = "p-dev"
    create.config.instanceConfig[3].command.user = "root"
    with pytest.raises(PermissionDenied, match="'root'"):
        guard.check(alice, JOBS, "Create", create)
    stop = job_pb2.StopRequest(id={"value": "j-alice"})
    assert guard.check(alice, JOBS, "Stop", stop) == "job j-alice"
    with pytest.raises(PermissionDenied, match="owned by alice"):
        guard.check(bob, JOBS, "Stop", stop)
    abort = update_svc_pb2.AbortUpdateRequest(updateId={"value": "u-1"})
    with pytest.raises(PermissionDenied):
        guard.check(bob, "peloton.api.v0.update.svc.UpdateService", "AbortUpdate", abort)
    assert guard.check(bob, JOBS, "Get", job_pb2.GetRequest(id={"value": "j-alice"})) == ""


def test_cron_templates_are_checked_like_creates_and_cron_jobs_like_jobs() -> None:
    guard, alice, bob = JobGuard(Facts()), Principal("alice", DEV), Principal("bob", DEV)
    cron = "pelotonpy.api.cron.CronService"
    template = job_pb2.JobConfig(respoolID={"value": "p-prod"})
    schedule = cron_pb2.ScheduleCronJobRequest(job=cron_pb2.CronJob(
        name="hourly", schedule="0 * * * *", batch_config=template))
    with pytest.raises(PermissionDenied, match="pool /prod"):  # its runs would land there
        guard.check(alice, cron, "ScheduleCronJob", schedule)
    schedule.job.batch_config.respoolID.value = "p-dev"
    schedule.job.batch_config.defaultConfig.command.user = "root"
    with pytest.raises(PermissionDenied, match="'root'"):
        guard.check(alice, cron, "ScheduleCronJob", schedule)
    schedule.job.batch_config.defaultConfig.command.user = ""
    assert guard.check(alice, cron, "ScheduleCronJob", schedule) == "cron job hourly, pool /dev"
    assert schedule.job.batch_config.owner == "alice"
    schedule.job.name = "nightly"  # replacing alice's cron job
    with pytest.raises(PermissionDenied, match="owned by alice"):
        guard.check(bob, cron, "ScheduleCronJob", schedule)
    for method, request in (("DescheduleCronJob", cron_pb2.DescheduleCronJobRequest(name="nightly")),
                            ("StartCronJob", cron_pb2.StartCronJobRequest(name="nightly"))):
        with pytest.raises(PermissionDenied, match="owned by alice"):
            guard.check(bob, cron, method, request)
        assert guard.check(alice, cron, method, request) == "cron job nightly"
    assert guard.check(bob, cron, "GetCronJob", cron_pb2.GetCronJobRequest(name="nightly")) == ""


# -- task identities ------------------------------------------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_identities_of_tasks() -> None:
    policy = IdentityPolicy(dynamic_uids=(70000, 70009))
    dynamic = policy.resolve("", ())
    assert dynamic.dynamic and dynamic.uid == dynamic.gid == 70000 and dynamic.groups == ()
    assert policy.resolve("", {70000, 70001}).uid == 70002
    assert policy.resolve("no-such-user-here", ()).dynamic
    with pytest.raises(FailedPrecondition, match="uid 0"):
        policy.resolve("root", ())
    assert IdentityPolicy(allow_root=True).resolve("root", ()).uid == 0
    system = next(p for p in pwd.getpwall() if 0 < p.pw_uid < 1000 and p.pw_name != "nobody")
    with pytest.raises(FailedPrecondition, match="system account"):
        policy.resolve(system.pw_name, ())
    assert IdentityPolicy(system_users=(system.pw_name,)).resolve(system.pw_name, ()).uid == system.pw_uid
    assert policy.resolve("nobody", ()).name == "nobody"
    with pytest.raises(FailedPrecondition, match="no free dynamic uid"):
        policy.resolve("", set(range(70000, 70010)))


# -- the UI gate ----------------------------------------------------------------------------------
def environ(**items: str) -> dict[str, Any]:
    env: dict[str, Any] = {"wsgi.input": io.BytesIO(b"")}
    env.update(items)
    return env


def test_the_ui_answers_only_for_its_own_names() -> None:
    hosts = allowed_hosts("127.0.0.1", 5292)
    assert {"127.0.0.1:5292", "localhost:5292", "[::1]:5292"} <= hosts
    assert "evil.example:5292" not in hosts
    assert "ui.example.com" in allowed_hosts("10.0.0.5", 80, ["ui.example.com"])


def test_posts_need_the_sessions_csrf_token_and_logins_rotate_the_session() -> None:
    gate = UiGate(None, auth=True, secure=True, hosts=frozenset({"h:1"}))  # type: ignore[arg-type]
    session, new = gate.session(environ())
    assert new and gate.session(environ(HTTP_COOKIE=f"peloton_session={session.sid}"))[0] is session
    assert "Secure" in gate.cookie(session)[1] and "HttpOnly" in gate.cookie(session)[1]
    with pytest.raises(PermissionDenied, match="CSRF"):
        gate.check_post(environ(HTTP_HOST="h:1"), session)
    with pytest.raises(PermissionDenied, match="cross-origin"):
        gate.check_post(environ(HTTP_HOST="h:1", HTTP_ORIGIN="http://evil",
                                HTTP_X_CSRF_TOKEN=session.csrf), session)
    gate.check_post(environ(HTTP_HOST="h:1", HTTP_X_CSRF_TOKEN=session.csrf), session)
    clock = FakeClock()
    sessions = Sessions(clock)
    anonymous = sessions.new()
    logged = sessions.login(anonymous, "alice", "tok", clock.wall() + 60)
    assert logged.sid != anonymous.sid and logged.csrf != anonymous.csrf
    assert sessions.get(anonymous.sid) is None and sessions.get(logged.sid) is logged
    assert sessions.logged_in(logged) and not sessions.logged_in(anonymous)
    clock.advance(61)  # the login token expired: the session is no longer logged in
    assert not sessions.logged_in(logged)


# -- storage errors -------------------------------------------------------------------------------
class PgError(Exception):
    def __init__(self, sqlstate: str, text: str) -> None:
        super().__init__(text)
        self.sqlstate = sqlstate


@pytest.mark.parametrize("sqlstate, kind", [("08006", Unavailable), ("40001", Unavailable),
                                            ("57P01", Unavailable), ("22021", InvalidArgument),
                                            ("54000", InvalidArgument), ("23505", FailedPrecondition),
                                            ("XX000", StorageFailure)])
def test_storage_errors_are_classified_without_sql(sqlstate: str, kind: type[Exception]) -> None:
    orig = PgError(sqlstate, "boom [SQL: INSERT INTO jobs VALUES (%s)] [parameters: ('secret',)]")
    found = classify_sql("create job", "postgresql://db", orig, orig, False)
    assert isinstance(found, kind)
    assert "INSERT" not in found.message and "secret" not in found.message


def test_cassandra_errors_are_classified_too() -> None:
    class WriteTimeout(Exception): ...
    class InvalidRequest(Exception): ...
    assert isinstance(classify_cassandra("w", "c://", WriteTimeout("x")), Unavailable)
    bad = classify_cassandra("w", "c://", InvalidRequest("value too large: 'secret'"))
    assert isinstance(bad, InvalidArgument) and "secret" not in bad.message
