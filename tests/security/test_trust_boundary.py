"""The trust boundary's last holes (issue 23 item 9), against a real `peloton up --auth`.

Each test is what an attack run with authentication on found open, and what
it gets now: another owner's sandbox (logs, files) through BrowseSandbox; an
agent identity heartbeating and reporting status for a host another identity
registered; a flood of anonymous UI requests signing a user out; refusals
missing from the audit log; a users file others may read, loaded silently.
The flood test runs last: it empties this client's anonymous request budget.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from peloton.api.auth_grpc import target_of
from peloton.api.auth_jobs import JobGuard
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as agent_pb
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2_grpc as agent_grpc
from peloton.common.auth import build_security
from peloton.common.auth.policy import Principal
from peloton.common.clock import FakeClock
from peloton.core.errors import InvalidArgument, PermissionDenied, Unauthenticated
from tests.harness.aurora_apache_client import connect, generate
from tests.harness.http_calls import NoRedirect, http_call
from tests.security.conftest import PASSWORDS, SecureCluster, users_doc
from tests.security.test_attacks import job_config, run_job
from tests.unit.security.test_edges import DEV, Facts
from ui.ratelimit import BURST, RATE, ClientLimiter
from ui.sessions import Sessions

pytestmark = [pytest.mark.timeout(300)]
e2e = pytest.mark.e2e
TASKS, PODS = "peloton.api.v0.task.TaskManager", "peloton.api.v1alpha.pod.svc.PodService"


def _records(secure: SecureCluster, **match: str) -> list[dict[str, str]]:
    return [r for r in secure.audit() if all(r.get(k) == v for k, v in match.items())]


# -- a. the sandbox of another owner's task ----------------------------------------------------
@e2e
def test_a_user_cannot_browse_the_sandbox_of_another_owners_task(secure: SecureCluster) -> None:
    job_id, alice = run_job(secure, "alice", "private-logs", "echo alices-secret")
    assert "alices-secret" in alice.read_task_file(job_id, 0, "stdout").decode()
    bob, anyone = secure.client("bob"), secure.client()
    # The same check and the same words as Stop and Restart.
    with pytest.raises(PermissionDenied, match=f"bob may not Stop job {job_id}: it is owned by "
                                               "alice"):
        bob.stop_tasks(job_id)
    with pytest.raises(PermissionDenied, match=f"bob may not BrowseSandbox job {job_id}: it is "
                                               "owned by alice"):
        bob.browse_sandbox(job_id, 0)
    with pytest.raises(PermissionDenied, match="BrowseSandbox"):
        bob.read_task_file(job_id, 0, "stdout")  # what `peloton task logs` and the UI use
    with pytest.raises(PermissionDenied, match=f"may not BrowseSandbox job {job_id}"):
        anyone.browse_sandbox(job_id, 0)  # the default user reads jobs, not their tasks' files
    with pytest.raises(PermissionDenied, match=f"bob may not BrowsePodSandbox job {job_id}"):
        bob.browse_pod_sandbox(f"{job_id}-0")
    assert secure.client("admin").browse_sandbox(job_id, 0).paths  # its role covers every owner
    refused = [r for r in _records(secure, who="bob")
               if r["target"] in (f"job {job_id}", f"pod {job_id}-0")]
    assert {r["what"].rpartition("/")[2] for r in refused} >= {"BrowseSandbox", "BrowsePodSandbox"}
    assert all(r["result"].startswith("PERMISSION_DENIED") for r in refused)


def test_the_job_guard_holds_sandbox_reads_to_the_owner_check() -> None:
    guard, alice, bob = JobGuard(Facts()), Principal("alice", DEV), Principal("bob", DEV)
    browse = task_pb2.BrowseSandboxRequest(jobId={"value": "j-alice"}, instanceId=0)
    assert guard.check(alice, TASKS, "BrowseSandbox", browse) == "job j-alice"
    with pytest.raises(PermissionDenied, match="bob may not BrowseSandbox job j-alice: it is "
                                               "owned by alice"):
        guard.check(bob, TASKS, "BrowseSandbox", browse)
    pod = pod_svc_pb2.BrowsePodSandboxRequest(pod_name={"value": "j-alice-0"})
    with pytest.raises(PermissionDenied, match="bob may not BrowsePodSandbox job j-alice"):
        guard.check(bob, PODS, "BrowsePodSandbox", pod)
    assert guard.check(bob, TASKS, "Get", task_pb2.GetRequest(jobId={"value": "j-alice"})) == ""
    assert target_of(pod) == "pod j-alice-0" and target_of(browse) == "job j-alice"


# -- b. an agent reporting for another identity's host ---------------------------------------
def _agent_call(secure: SecureCluster, user: str, method: str, request: Any) -> Any:
    channel = grpc.insecure_channel(f"127.0.0.1:{secure.up.hostmgr_port}")
    try:
        stub = agent_grpc.AgentRegistryStub(channel)
        return getattr(stub, method)(request, timeout=10, metadata=(
            ("username", user), ("password", PASSWORDS[user])))
    finally:
        channel.close()


@e2e
def test_an_agent_may_heartbeat_and_report_only_for_hosts_it_registered(
        secure: SecureCluster) -> None:
    # A host too small for any task (cpu 0.01, 1 MB), so nothing is ever placed on it.
    info = agent_pb.AgentInfo(hostname="agent-1s-host", agent_id="a1", address="127.0.0.1:1",
                              capacity=agent_pb.Resources(cpu=0.01, mem_mb=1))
    _agent_call(secure, "agent-1", "Register", agent_pb.RegisterRequest(agent=info))
    beat = _agent_call(secure, "agent-1", "Heartbeat",
                       agent_pb.HeartbeatRequest(hostname="agent-1s-host", agent_id="a1"))
    assert not beat.reregister  # its own host: accepted
    forged = agent_pb.StatusUpdate(uuid="forged-1", run_id="0" * 8 + "-0000-0000-0000-"
                                   + "0" * 12 + "-0-1", message="forged: the task succeeded")
    for hostname, agent_id in (("agent-1s-host", "a1"), ("localhost", "forged")):
        for method, request in (
                ("Heartbeat", agent_pb.HeartbeatRequest(hostname=hostname, agent_id=agent_id)),
                ("ReportStatus", agent_pb.ReportStatusRequest(hostname=hostname, agent_id=agent_id,
                                                              updates=[forged]))):
            with pytest.raises(grpc.RpcError) as refused:
                _agent_call(secure, "agent-2", method, request)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, (method, hostname)
            assert "registered by another identity" in (refused.value.details() or "")
    for method in ("Heartbeat", "ReportStatus"):
        lines = _records(secure, who="agent-2", target="host agent-1s-host",
                         what=f"pelotonpy.internal.agent.AgentRegistry/{method}")
        assert lines and lines[0]["result"].startswith("PERMISSION_DENIED"), method


# -- f. a task and its supervisor ----------------------------------------------------------------
@e2e
def test_a_task_cannot_stop_its_supervisor_nor_forge_its_own_status(secure: SecureCluster) -> None:
    # The task tries to stop, freeze and kill its supervisor (its parent), then plants the
    # end record the supervisor writes, saying it succeeded, and exits 3.
    command = ("for sig in TERM STOP KILL; do kill -$sig $PPID 2>/dev/null && echo SIGNALLED-$sig "
               "|| echo REFUSED-$sig; done; "
               "printf 'state=exited run=forged code=0 signal=0 oom=0 killed=0\\n' > status.exit "
               "&& echo PLANTED; exit 3")
    job_id, alice = run_job(secure, "alice", "mutiny", command)
    out = alice.read_task_file(job_id, 0, "stdout").decode()
    assert all(f"REFUSED-{sig}" in out for sig in ("TERM", "STOP", "KILL")), out
    task = alice.get_task(job_id, 0).result.runtime
    assert task_pb2.TaskState.Name(task.state) == "FAILED", (task, out)  # its real exit, 3
    assert "3" in task.message, task.message


# -- d. every refusal in the audit log, on every front ------------------------------------------
@e2e
def test_refused_grpc_calls_are_audited_with_who_method_and_target(secure: SecureCluster) -> None:
    alice = secure.client("alice")
    job_id = alice.create_job(job_config(alice, "audited", "true")).jobId.value
    with pytest.raises(Unauthenticated):
        secure.client("alice", "wrong").get_job(job_id)  # a read, refused: audited too
    with pytest.raises(PermissionDenied):
        secure.client("bob").stop_tasks(job_id)
    with pytest.raises(PermissionDenied):
        secure.client().lockdown(["Write"])
    pools = secure.client("bob")
    prod = job_config(pools, "in-prod", "true", pool="/prod")
    with pytest.raises(PermissionDenied):
        pools.create_job(prod)
    wrong = _records(secure, what="peloton.api.v0.job.JobManager/Get", target=f"job {job_id}")
    assert wrong and wrong[-1]["who"] == "anonymous (claimed 'alice')"
    assert wrong[-1]["result"].startswith("UNAUTHENTICATED")
    assert _records(secure, who="bob", what="peloton.api.v0.task.TaskManager/Stop",
                    target=f"job {job_id}")
    lockdown = [r for r in secure.audit() if r["what"].endswith("/Lockdown")
                and r["who"] == "anonymous"]
    assert lockdown and lockdown[-1]["result"].startswith("PERMISSION_DENIED")
    created = _records(secure, who="bob", what="peloton.api.v0.job.JobManager/Create")
    assert created and created[-1]["target"] == f"pool {prod.respoolID.value}"
    assert created[-1]["result"].startswith("PERMISSION_DENIED")


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return generate(tmp_path_factory.mktemp("aurora-client"))


@e2e
def test_refused_aurora_calls_are_audited_with_who_method_and_target(
        secure: SecureCluster, apache: tuple[Any, Any]) -> None:
    admin, t = apache
    opened = []

    def as_user(user: str, password: str = "") -> Any:
        client = connect(admin, f"http://127.0.0.1:{secure.up.aurora_port}/api", "json")
        secret = base64.b64encode(f"{user}:{password or PASSWORDS[user]}".encode()).decode()
        client._iprot.trans.setCustomHeaders({"Authorization": f"Basic {secret}"})
        opened.append(client)
        return client

    web = t.JobKey(role="www", environment="prod", name="web")
    answers = [as_user("alice", "wrong").killTasks(web, None, "x"),
               as_user("alice").killTasks(web, None, "x"),
               as_user("agent-1").getJobSummary("www")]  # a read its role does not allow
    assert all(a.responseCode == t.ResponseCode.AUTH_FAILED for a in answers)
    records = [r for r in secure.audit() if r["front"] == "aurora"]
    assert any(r["who"] == "anonymous" and r["what"] == "killTasks"
               and r["target"] == "job www/prod/web" and r["result"].startswith("AUTH_FAILED")
               for r in records)
    assert any(r["who"] == "alice" and r["what"] == "killTasks" and r["target"] == "job www/prod/web"
               for r in records)
    assert any(r["who"] == "agent-1" and r["what"] == "getJobSummary" and r["target"] == "role www"
               for r in records)



def _ui_login(base: str, user: str, password: str = "") -> tuple[str, str]:
    """(the signed-in session cookie, its CSRF token); ("", "") when the login is refused."""
    _, headers, page = http_call(base + "/login")
    session = headers["Set-Cookie"].split(";")[0]
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    form = f"username={user}&password={password or PASSWORDS[user]}&csrf={csrf.group(1).decode()}"
    try:
        urllib.request.build_opener(NoRedirect).open(urllib.request.Request(
            base + "/login", data=form.encode(), method="POST",
            headers={"Cookie": session, "Content-Type": "application/x-www-form-urlencoded"}),
            timeout=10)
    except urllib.error.HTTPError as err:
        if err.code != 303:
            return "", ""
        cookie = err.headers["Set-Cookie"].split(";")[0]
        page = http_call(base + "/jobs", headers={"Cookie": cookie})[2]
        token = re.search(rb'name="peloton-csrf" content="([^"]+)"', page)
        assert token is not None
        return cookie, token.group(1).decode()
    raise AssertionError("login did not redirect")


@e2e
def test_refused_ui_requests_are_audited_with_who_request_and_target(secure: SecureCluster) -> None:
    base = f"http://127.0.0.1:{secure.up.ui_port}"
    job = "358fad26-73fa-43c8-a350-1e9067571a76"
    assert http_call(base + f"/ui/api/jobs/{job}")[0] == 401
    assert _ui_login(base, "alice", "not-her-password") == ("", "")
    cookie, csrf = _ui_login(base, "alice")
    status, _, _ = http_call(base + "/ui/api/hosts/localhost/maintenance/start", "POST", b"{}",
                         {"Cookie": cookie, "Content-Type": "application/json",
                          "X-CSRF-Token": csrf})
    assert status == 403
    ui = [r for r in secure.audit() if r["front"] == "ui"]
    assert any(r["who"] == "anonymous" and r["what"] == f"GET /ui/api/jobs/{job}"
               and r["target"] == f"job {job}" and r["result"].startswith("UNAUTHENTICATED")
               for r in ui), ui
    assert any(r["who"] == "anonymous" and r["what"] == "POST /login"
               and r["result"].startswith("UNAUTHENTICATED") for r in ui), ui
    assert any(r["who"] == "alice" and r["target"] == "host localhost"
               and r["result"].startswith("PERMISSION_DENIED") for r in ui), ui


# -- c. an anonymous flood does not sign anyone out (runs last: see the module docstring) -------
@e2e
def test_an_anonymous_flood_does_not_sign_a_user_out(secure: SecureCluster) -> None:
    port = secure.up.ui_port
    base = f"http://127.0.0.1:{port}"
    cookie, _ = _ui_login(base, "bob")
    assert http_call(base + "/ui/api/overview", headers={"Cookie": cookie})[0] == 200
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    mid_flood: list[int] = []

    def flood(n: int) -> None:
        seen: dict[int, int] = {}
        for _ in range(n):  # no cookie: each would be a new anonymous session
            # A connection per request, as a flood of clients makes them (and no keep-alive
            # exchange paced by delayed ACKs).
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            try:
                conn.request("GET", "/login", headers={"Connection": "close"})
                resp = conn.getresponse()
                resp.read()
                seen[resp.status] = seen.get(resp.status, 0) + 1
            finally:
                conn.close()
        with lock:
            for status, count in seen.items():
                statuses[status] = statuses.get(status, 0) + count

    start = time.monotonic()
    threads = [threading.Thread(target=flood, args=(2_500,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    mid_flood.append(http_call(base + "/ui/api/overview", headers={"Cookie": cookie})[0])
    for thread in threads:
        thread.join()
    took = time.monotonic() - start
    assert sum(statuses.values()) == 10_000
    # Past its burst the flooding client waits: it is served at most at the rate.
    assert statuses.get(200, 0) <= BURST + RATE * took + 10, (statuses, took)
    assert statuses.get(429, 0) >= 10_000 - BURST - RATE * took - 10, (statuses, took)
    assert mid_flood == [200]  # a signed-in user is never counted, even from the same address
    status, _, body = http_call(base + "/ui/api/overview", headers={"Cookie": cookie})
    assert status == 200, (status, body, took)


# -- the pieces behind c, on a fake clock --------------------------------------------------------
def test_anonymous_sessions_never_push_out_signed_in_ones() -> None:
    clock = FakeClock()
    sessions = Sessions(clock, max_signed_in=3, max_anonymous=5)
    alice = sessions.login(sessions.new(), "alice", "token", clock.wall() + 3600)
    for _ in range(10_000):
        sessions.new()
    assert sessions.get(alice.sid) is alice and sessions.counts() == (1, 5)
    users = [sessions.login(sessions.new(), f"u{i}", "t", clock.wall() + 3600) for i in range(3)]
    assert sessions.get(alice.sid) is None  # signed-in sessions are bounded among themselves
    assert all(sessions.get(u.sid) is u for u in users)


def test_anonymous_requests_are_limited_per_client() -> None:
    clock = FakeClock()
    limiter = ClientLimiter(rate=10, burst=20, max_clients=2, clock=clock)
    assert sum(limiter.allow("10.0.0.1") for _ in range(100)) == 20
    assert limiter.allow("10.0.0.2")  # another client has its own bucket
    clock.advance(1.0)
    assert sum(limiter.allow("10.0.0.1") for _ in range(100)) == 10  # refilled at the rate


# -- e. secrets others may read -------------------------------------------------------------------
def test_a_users_file_others_may_read_is_loaded_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    users = tmp_path / "users.yaml"
    users.write_text(yaml.safe_dump(users_doc()))
    for mode, warned in ((0o600, False), (0o640, True), (0o604, True)):
        os.chmod(users, mode)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            security = build_security(users, data_dir=tmp_path / f"data-{mode:o}")
        security.close()
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(str(users) in w and "chmod 600" in w for w in warnings) is warned, (mode, warnings)


def test_a_token_key_others_may_read_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "data" / "token.key"
    key.parent.mkdir()
    key.write_text("k" * 64)
    os.chmod(key, 0o644)
    users = tmp_path / "users.yaml"
    users.write_text(yaml.safe_dump(users_doc()))
    os.chmod(users, 0o600)
    with pytest.raises(InvalidArgument, match="readable or writable by others"):
        build_security(users, data_dir=key.parent)
