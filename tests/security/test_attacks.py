"""Every attack of issue 14, against a real `peloton up --auth` with a real agent.

Each test is named after what an attacker tried (as the issue reports it)
and asserts what they get now.  Each failed before this work: tasks ran as
root and read /etc/shadow, the store and other sandboxes; a forged agent
registration took a host over; Lockdown needed no credentials; a 50 MB
description was stored; a NUL in a name came back as INTERNAL with SQL text;
a foreign Host header drove the UI (see the report for how each was checked).
"""

from __future__ import annotations

import base64
import json
import random
import re
import sqlite3
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import psutil
import pytest

from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.pelotonpy.api.cron import cron_pb2
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as agent_pb
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2_grpc as agent_grpc
from peloton.api.yaml_load import load_job_config
from peloton.core.errors import InvalidArgument, PelotonError, PermissionDenied, Unauthenticated
from tests.harness.cluster import eventually
from tests.harness.http_calls import NoRedirect, http_call
from tests.security.conftest import PASSWORDS, SecureCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

JOB = """\
name: {name}
owningteam: security
description: "{description}"
instancecount: {count}
sla:
  preemptible: true
defaultconfig:
  resource:
    cpulimit: 0.1
    memlimitmb: 64
    disklimitmb: 10
  command:
    shell: true
    value: '{command}'
"""


def job_config(client: PelotonClient, name: str, command: str, *, pool: str = "/dev",
               count: int = 1, description: str = "d") -> job_pb2.JobConfig:
    config = load_job_config(JOB.format(name=name, command=command.replace("'", "''"), count=count,
                                        description=description)).message
    config.respoolID.value = client.lookup_respool_id(pool).id.value
    return config


def run_job(secure: SecureCluster, user: str, name: str, command: str, *, pool: str = "/dev",
            wait_state: str = "SUCCEEDED") -> tuple[str, PelotonClient]:
    client = secure.client(user)
    job_id = client.create_job(job_config(client, name, command, pool=pool)).jobId.value
    if wait_state:
        eventually(lambda: job_pb2.JobState.Name(client.get_job(job_id).jobInfo.runtime.state)
                   in (wait_state, "FAILED", "KILLED"), 60, f"job {name} to finish")
    return job_id, client


def stdout_of(client: PelotonClient, job_id: str, instance: int = 0) -> str:
    return client.read_task_file(job_id, instance, "stdout").decode(errors="replace")


# -- tasks: identity and isolation -------------------------------------------------------------
def test_a_task_runs_unprivileged_and_cannot_read_shadow_the_store_or_the_agent_state(
        secure: SecureCluster) -> None:
    data = secure.data.resolve()
    agent_dir = data / "agents" / "localhost"
    command = (f"id -u; grep ^Groups /proc/self/status; "
               f"head -c 20 /etc/shadow || echo SHADOW-REFUSED; "
               f"head -c 16 {data}/state.db || echo STORE-REFUSED; "
               f"cat {agent_dir}/agent_id || echo AGENT-STATE-REFUSED; "
               f"ls {agent_dir}/sandboxes/ || echo SANDBOX-LIST-REFUSED; "
               f"echo state=exited run=forged > {agent_dir}/notify || echo FIFO-REFUSED")
    job_id, client = run_job(secure, "alice", "snoop", command)
    out = stdout_of(client, job_id)
    lines = out.splitlines()
    assert int(lines[0]) >= 1000, out  # not root, not a system account
    groups = lines[1].split(":", 1)[1].split()
    assert "0" not in groups, f"the task kept the agent's groups: {lines[1]}"
    for refused in ("SHADOW-REFUSED", "STORE-REFUSED", "AGENT-STATE-REFUSED",
                    "SANDBOX-LIST-REFUSED", "FIFO-REFUSED"):
        assert refused in out, out
    assert "SQLite format" not in out


def test_a_task_cannot_read_another_tasks_sandbox_by_path_or_through_the_file_server(
        secure: SecureCluster) -> None:
    victim, client = run_job(secure, "bob", "victim", "echo top-secret-of-bob; sleep 120",
                             wait_state="RUNNING")
    eventually(lambda: "top-secret" in stdout_of(secure.client("bob"), victim), 30,
               "the victim's output")
    sandbox = client.browse_sandbox(victim, 0)
    stolen_path = next(p for p in sandbox.paths if p.endswith("stdout"))
    run_dir = (secure.data / "agents" / "localhost" / "sandboxes").resolve() / stolen_path.split("/")[0]
    plain = f"{stolen_path.split('/')[0]}/stdout"  # what an attacker can guess: no capability
    url = f"http://{sandbox.hostname}:{sandbox.port}/files/download?path={plain}"
    command = (f"cat {run_dir}/stdout || echo PATH-REFUSED; "
               f"python3 -c \"import urllib.request as u; print(u.urlopen('{url}').read())\" "
               f"|| echo FILESERVER-REFUSED")
    thief, alice = run_job(secure, "alice", "thief", command)
    out = stdout_of(alice, thief)
    assert "top-secret" not in out, out
    assert "PATH-REFUSED" in out and "FILESERVER-REFUSED" in out, out
    assert "403" in alice.read_task_file(thief, 0, "stderr").decode(errors="replace")
    secure.client("bob").stop_tasks(victim)


def test_escaped_processes_are_killed_with_their_task(secure: SecureCluster) -> None:
    # A sleep of a duration no other process on the machine has: the test looks only at the
    # process its own task started (other clusters' tasks may run as the same dynamic uid).
    mark = f"600.{random.randrange(10**8, 10**9)}"
    command = f"id -u; (setsid sh -c \"exec sleep {mark}\" &); sleep 1"
    job_id, client = run_job(secure, "alice", "escaper", command)
    uid = int(stdout_of(client, job_id).split()[0])

    def ours() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["uids", "cmdline"]):
            if proc.info["uids"] and proc.info["uids"].real == uid and mark in (proc.info["cmdline"] or ()):
                found.append(proc)
        return found

    eventually(lambda: not ours(), 20, f"the escaped sleep {mark} gone once the task ended")


def test_a_job_may_not_run_its_tasks_as_root(secure: SecureCluster) -> None:
    alice = secure.client("alice")
    config = job_config(alice, "as-root", "id")
    config.defaultConfig.command.user = "root"
    with pytest.raises(PermissionDenied, match="may not run tasks as Unix user 'root'"):
        alice.create_job(config)
    admin = secure.client("admin")  # even when the cluster lets it: the agent does not
    config = job_config(admin, "as-root-admin", "id -u")
    config.defaultConfig.command.user = "root"
    job_id = admin.create_job(config).jobId.value
    eventually(lambda: job_pb2.JobState.Name(admin.get_job(job_id).jobInfo.runtime.state)
               in ("FAILED", "SUCCEEDED"), 60, "the root job to end")
    task = admin.get_task(job_id, 0).result.runtime
    assert task_pb2.TaskState.Name(task.state) == "FAILED"
    assert "uid 0" in task.message and "--allow-root-tasks" in task.message


# -- hosts: forged agents ----------------------------------------------------------------------
def _register(secure: SecureCluster, hostname: str, creds: dict[str, str] | None) -> grpc.RpcError | None:
    channel = grpc.insecure_channel(f"127.0.0.1:{secure.up.hostmgr_port}")
    stub = agent_grpc.AgentRegistryStub(channel)
    info = agent_pb.AgentInfo(hostname=hostname, agent_id="forged", address="127.0.0.1:1",
                              capacity=agent_pb.Resources(cpu=64, mem_mb=1 << 20))
    try:
        stub.Register(agent_pb.RegisterRequest(agent=info), timeout=10,
                      metadata=tuple((creds or {}).items()))
        return None
    except grpc.RpcError as err:
        return err
    finally:
        channel.close()


def test_a_forged_agent_cannot_take_over_a_host(secure: SecureCluster) -> None:
    anonymous = _register(secure, "localhost", None)
    assert anonymous is not None and anonymous.code() == grpc.StatusCode.PERMISSION_DENIED
    user = _register(secure, "localhost", {"username": "alice", "password": PASSWORDS["alice"]})
    assert user is not None and user.code() == grpc.StatusCode.PERMISSION_DENIED
    other_agent = _register(secure, "localhost",
                            {"username": "agent-1", "password": PASSWORDS["agent-1"]})
    assert other_agent is not None and other_agent.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "registered by another identity" in (other_agent.details() or "")
    assert _register(secure, "new-host", {"username": "agent-1", "password": PASSWORDS["agent-1"]}) is None
    stolen = _register(secure, "new-host", {"username": "agent-2", "password": PASSWORDS["agent-2"]})
    assert stolen is not None and stolen.code() == grpc.StatusCode.PERMISSION_DENIED
    # The real agent still holds its host: a job runs there.
    job_id, client = run_job(secure, "alice", "after-hijack", "echo still-mine")
    assert "still-mine" in stdout_of(client, job_id)
    assert any(r["what"].endswith("AgentRegistry/Register") and r["result"].startswith("PERMISSION")
               for r in secure.audit())


def test_the_agent_service_refuses_calls_without_the_host_managers_call_token(
        secure: SecureCluster) -> None:
    channel = grpc.insecure_channel(secure.agent_address())
    stub = agent_grpc.AgentServiceStub(channel)
    with pytest.raises(grpc.RpcError) as refused:
        stub.Launch(agent_pb.LaunchRequest(), timeout=10,
                    metadata=(("username", "admin"), ("password", PASSWORDS["admin"])))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    channel.close()


# -- the API: authentication and authorization ---------------------------------------------------
def test_lockdown_needs_an_administrator(secure: SecureCluster) -> None:
    with pytest.raises(PermissionDenied, match=r"\(default user\) is not permitted to call "
                                               r"Lockdown"):
        secure.client().lockdown(["Write"])
    with pytest.raises(PermissionDenied, match="alice is not permitted to call Lockdown"):
        secure.client("alice").lockdown(["Write"])
    with pytest.raises(Unauthenticated, match="invalid username/password"):
        secure.client("alice", "wrong").lockdown(["Write"])
    assert secure.client("alice").query_hosts()  # reads still work for her


def test_users_create_only_in_their_pools_and_change_only_their_jobs(secure: SecureCluster) -> None:
    alice, bob = secure.client("alice"), secure.client("bob")
    with pytest.raises(PermissionDenied, match="may not create jobs in resource pool /prod"):
        alice.create_job(job_config(alice, "in-prod", "true", pool="/prod"))
    job_id = alice.create_job(job_config(alice, "alices", "sleep 60")).jobId.value
    assert alice.get_job(job_id).jobInfo.config.owner == "alice"  # no owner: its creator
    with pytest.raises(PermissionDenied, match=f"bob may not Stop job {job_id}: it is owned by alice"):
        bob.stop_tasks(job_id)
    with pytest.raises(PermissionDenied):
        secure.client().stop_tasks(job_id)  # the default user may only read
    assert bob.get_job(job_id).jobInfo.config.name == "alices"  # reading is allowed
    config = job_config(bob, "as-alice", "true")
    config.owner = "alice"
    with pytest.raises(PermissionDenied, match="bob may not Create a job owned by alice"):
        bob.create_job(config)
    secure.client("admin").stop_tasks(job_id)  # the administrator may
    records = secure.audit()
    assert any(r["who"] == "bob" and r["what"].endswith("TaskManager/Stop")
               and r["result"].startswith("PERMISSION_DENIED") for r in records)
    assert any(r["who"] == "admin" and r["what"].endswith("TaskManager/Stop")
               and r["result"] == "OK" for r in records)


def test_cron_templates_are_held_to_the_same_pools_users_and_owners(secure: SecureCluster) -> None:
    # Each run of a cron job is a job the job manager creates itself: the template is the only
    # thing the caller's rights can be checked against, so it is checked like a job create.
    alice, bob = secure.client("alice"), secure.client("bob")

    def cron(name: str, pool: str, user: str = "") -> cron_pb2.CronJob:
        config = job_config(alice, name, "true", pool=pool)
        config.defaultConfig.command.user = user
        return cron_pb2.CronJob(name=name, schedule="0 0 1 1 *", batch_config=config)

    with pytest.raises(PermissionDenied, match="may not create jobs in resource pool /prod"):
        alice.schedule_cron_job(cron("cron-prod", "/prod"))
    with pytest.raises(PermissionDenied, match="may not run tasks as Unix user 'root'"):
        alice.schedule_cron_job(cron("cron-root", "/dev", user="root"))
    assert alice.schedule_cron_job(cron("cron-alice", "/dev")).created
    assert alice.get_cron_job("cron-alice").batch_config.owner == "alice"
    for act in (lambda: bob.start_cron_job("cron-alice"),
                lambda: bob.deschedule_cron_job("cron-alice"),
                lambda: bob.schedule_cron_job(cron("cron-alice", "/dev"))):
        with pytest.raises(PermissionDenied, match="cron job cron-alice: it is owned by alice"):
            act()
    with pytest.raises(InvalidArgument, match=r"^job.name: 20,000 characters"):
        alice.schedule_cron_job(cron("c" * 20_000, "/dev"))  # held to the API's maxima too
    assert alice.deschedule_cron_job("cron-alice")
    assert {"cron-prod", "cron-root"}.isdisjoint(j.name for j in alice.list_cron_jobs())


def test_login_token_works_and_a_forged_one_does_not(secure: SecureCluster) -> None:
    login = secure.client("alice").login()
    assert login.username == "alice" and login.token.startswith("pt1.")
    base = secure.client()
    with_token = base.with_headers({"authorization": f"Bearer {login.token}"})
    assert with_token.whoami().username == "alice"
    prefix, payload, signature = login.token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["u"] = "admin"  # the same signature over a payload that says admin
    raw = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(Unauthenticated, match="invalid token"):
        base.with_headers({"authorization": f"Bearer {prefix}.{raw}.{signature}"}).whoami()


# -- hostile input ----------------------------------------------------------------------------
def test_oversized_input_is_refused_at_the_edge_naming_the_field(secure: SecureCluster) -> None:
    alice = secure.client("alice")
    big = job_config(alice, "big-description", "true")
    big.description = "x" * (50 << 20)  # the 50 MB description
    with pytest.raises(PelotonError) as refused:
        alice.create_job(big)
    assert refused.value.kind in ("resource_exhausted", "invalid_argument"), refused.value
    many = job_config(alice, "many-labels", "true")
    for i in range(20_000):
        many.labels.add(key=f"k{i}", value="v" * 1024)
    with pytest.raises(InvalidArgument,
                       match=r"^config.labels: 20,000 entries is more than the maximum of 128"):
        alice.create_job(many)
    long_name = job_config(alice, "n" * 20_000, "true")
    with pytest.raises(InvalidArgument, match=r"^config.name: 20,000 characters"):
        alice.create_job(long_name)
    nul = job_config(alice, "nul", "true")
    nul.name = "a\x00b"  # over the wire, as a client built from the protos can send it
    with pytest.raises(InvalidArgument, match=r"^config.name: contains a NUL character") as nul_err:
        alice.create_job(nul)
    assert "INSERT" not in nul_err.value.message and "SELECT" not in nul_err.value.message
    found = alice.query_jobs(job_pb2.QuerySpec(keywords=["many-labels"]))
    assert not list(found.results)
    with sqlite3.connect(f"file:{secure.data / 'state.db'}?mode=ro", uri=True) as db:
        orphans = db.execute("SELECT COUNT(*) FROM task_configs WHERE job_id NOT IN "
                             "(SELECT job_id FROM jobs)").fetchone()[0]
    assert orphans == 0


# -- the web UI ---------------------------------------------------------------------------------

def test_the_ui_refuses_foreign_hosts_cross_site_posts_and_anonymous_users(secure: SecureCluster) -> None:
    base = f"http://127.0.0.1:{secure.up.ui_port}"
    status, _, _ = http_call(base + "/hosts/localhost/maintenance/start", "POST", b"{}",
                         {"Host": "evil.example", "Origin": "http://evil.example",
                          "Content-Type": "application/json"})
    assert status == 421  # DNS rebinding: the page of another site
    status, _, body = http_call(base + "/ui/api/hosts/localhost/maintenance/start", "POST", b"{}",
                            {"Content-Type": "application/json"})
    assert status == 403 and b"CSRF" in body
    status, _, body = http_call(base + "/ui/api/overview")
    assert status == 401
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(base + "/jobs", timeout=10)
    except urllib.error.HTTPError as err:
        assert err.code == 303 and err.headers["Location"] == "/login"
    status, headers, page = http_call(base + "/login")
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    form = f"username=alice&password={PASSWORDS['alice']}&csrf={csrf.group(1).decode()}".encode()
    try:
        opener.open(urllib.request.Request(
            base + "/login", data=form, method="POST",
            headers={"Cookie": session, "Content-Type": "application/x-www-form-urlencoded"}),
            timeout=10)
        raise AssertionError("login did not redirect")
    except urllib.error.HTTPError as err:
        assert err.code == 303
        logged_in = err.headers["Set-Cookie"].split(";")[0]
    assert logged_in != session  # a fresh session id at login
    status, _, body = http_call(base + "/ui/api/overview", headers={"Cookie": logged_in})
    assert status == 200 and "hosts" in json.loads(body), body
    page = http_call(base + "/jobs", headers={"Cookie": logged_in})[2]
    token = re.search(rb'name="peloton-csrf" content="([^"]+)"', page)
    assert token is not None and b"alice" in page
    status, _, body = http_call(base + "/ui/api/hosts/localhost/maintenance/start", "POST", b"{}",
                            {"Cookie": logged_in, "Content-Type": "application/json",
                             "X-CSRF-Token": token.group(1).decode()})
    assert status == 403 and b"not permitted" in body  # alice may not drain hosts


# -- binding ------------------------------------------------------------------------------------
def test_serving_other_machines_without_auth_is_refused(tmp_path: Path) -> None:
    import subprocess

    from tests.harness.procs import PELOTON

    result = subprocess.run([PELOTON, "up", "--host", "0.0.0.0", "--data-dir", str(tmp_path / "d"),
                             "--jobmgr-port", "0", "--resmgr-port", "0", "--hostmgr-port", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--auth" in result.stderr and "--insecure" in result.stderr


def _wait(check: Callable[[], bool], what: str) -> None:
    eventually(check, 30, what)
    time.sleep(0)
