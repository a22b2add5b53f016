"""Property-based fuzzing of both fronts with authentication on (bounded: a fixed number of
examples, replayed identically in `make test` by the "ci" hypothesis profile).

gRPC: job configs built to hit the maxima (strings around 256 / 16 KiB / 64 KiB and with NUL,
label counts around 128, instance counts around 100,000, constraint trees around 8 deep) sent
as alice, and as nobody.  Aurora: random bodies in every content type, and createJob calls with
hostile strings and sizes.  Every answer must be a deliberate one - OK, or a client error that
names what is wrong - never INTERNAL, UNKNOWN or UNAVAILABLE, never an HTTP 5xx; whatever was
refused left nothing behind, and the cluster keeps answering.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TApacheJSONProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.limits import MAX_CONSTRAINT_DEPTH, MAX_DESCRIPTION, MAX_LABELS, MAX_SHORT
from tests.security.conftest import PASSWORDS, SecureCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
EXAMPLES = 40
DELIBERATE = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION,
              grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
              grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED}
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


def around(limit: int) -> st.SearchStrategy[int]:
    return st.sampled_from([0, 1, limit - 1, limit, limit + 1])


strings = st.one_of(
    st.text(max_size=40),
    around(MAX_SHORT).map(lambda n: "n" * n),
    around(MAX_DESCRIPTION).map(lambda n: "d" * n),
    st.sampled_from(["\x00", "a\x00b", "ü" * 300, "../../etc/shadow", "'; DROP TABLE jobs; --"]))


def constraint(depth: int) -> task_pb2.Constraint:
    leaf = task_pb2.Constraint(type=task_pb2.Constraint.LABEL_CONSTRAINT,
                               labelConstraint=task_pb2.LabelConstraint(
                                   kind=task_pb2.LabelConstraint.HOST,
                                   condition=task_pb2.LabelConstraint.CONDITION_LESS_THAN,
                                   label=peloton_pb2.Label(key="zone", value="a"), requirement=0))
    for _ in range(depth - 1):
        leaf = task_pb2.Constraint(type=task_pb2.Constraint.AND_CONSTRAINT,
                                   andConstraint=task_pb2.AndConstraint(constraints=[leaf]))
    return leaf


@st.composite
def job_configs(draw: st.DrawFn) -> job_pb2.JobConfig:
    config = job_pb2.JobConfig(name=draw(strings), description=draw(strings),
                               owningTeam=draw(strings), type=job_pb2.BATCH,
                               instanceCount=draw(st.sampled_from([0, 1, 2, 100_000, 100_001])))
    for i in range(draw(around(MAX_LABELS))):
        config.labels.add(key=f"k{i}", value=draw(st.sampled_from(["v", "v" * 5000])))
    config.sla.preemptible = True
    default = config.defaultConfig
    default.resource.cpuLimit = 0.01
    default.resource.memLimitMb = 1
    default.command.shell = True
    default.command.value = draw(st.sampled_from(["true", "x" * 70_000, "echo \x00"]))
    default.command.user = draw(st.sampled_from(["", "", "root", "nobody", "u" * 300]))
    depth = draw(around(MAX_CONSTRAINT_DEPTH))
    if depth:
        default.constraint.CopyFrom(constraint(depth))
    return config


@given(config=job_configs(), as_alice=st.booleans())
@FUZZ
def test_grpc_front_answers_hostile_job_configs_deliberately(
        secure: SecureCluster, config: job_pb2.JobConfig, as_alice: bool) -> None:
    alice = secure.client("alice")
    config.respoolID.value = alice.lookup_respool_id("/dev").id.value
    metadata = (("username", "alice"), ("password", PASSWORDS["alice"])) if as_alice else ()
    with grpc.insecure_channel(f"127.0.0.1:{secure.up.jobmgr_port}",
                               options=[("grpc.max_send_message_length", 128 << 20)]) as channel:
        stub = job_pb2_grpc.JobManagerStub(channel)
        try:
            reply, call = stub.Create.with_call(job_pb2.CreateRequest(config=config), timeout=30,
                                                metadata=metadata)
            code = call.code()
        except grpc.RpcError as err:
            reply, code = None, err.code()
            assert code in DELIBERATE, (code, err.details())
            assert "SELECT" not in (err.details() or "") and "INSERT" not in (err.details() or "")
    if reply is not None and reply.HasField("error"):
        return  # a v0 error in the reply (e.g. invalid config) is deliberate too
    if code == grpc.StatusCode.OK and reply is not None:
        job_id = reply.jobId.value
        assert alice.get_job(job_id).jobInfo.config.owner == "alice"
        secure.client("admin").stop_tasks(job_id)
    assert not as_alice or code != grpc.StatusCode.UNAUTHENTICATED
    assert as_alice or code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT,
                                grpc.StatusCode.RESOURCE_EXHAUSTED)


CONTENT_TYPES = ["application/x-thrift", "application/json", "application/vnd.apache.thrift.binary",
                 "application/vnd.apache.thrift.json", "text/plain", ""]


@given(body=st.binary(max_size=2000), content_type=st.sampled_from(CONTENT_TYPES),
       auth=st.sampled_from(["", "Basic " + base64.b64encode(b"alice:alice-pw").decode(),
                             "Basic !!!", "Bearer forged.token.here", "Digest x"]))
@FUZZ
def test_aurora_front_answers_garbage_without_a_server_error(
        secure: SecureCluster, body: bytes, content_type: str, auth: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    if auth:
        headers["Authorization"] = auth
    status = _post(secure, body, headers)
    assert status < 500 or status == 501, status


@given(name=strings, role=st.sampled_from(["alice", "bob", "a" * 300, "al\x00ice"]),
       metadata=around(MAX_LABELS), data=st.sampled_from(["{}", "x" * (2 << 20)]))
@FUZZ
def test_aurora_front_answers_hostile_jobs_deliberately(
        secure: SecureCluster, name: str, role: str, metadata: int, data: str) -> None:
    task = api.TaskConfig(
        job=api.JobKey(role=role, environment="devel", name=name), owner=api.Identity(user=role),
        isService=True, priority=0, maxTaskFailures=1, tier="preemptible",
        resources=[api.Resource(numCpus=0.01), api.Resource(ramMb=1), api.Resource(diskMb=1)],
        executorConfig=api.ExecutorConfig(name="AuroraExecutor", data=data),
        metadata=[api.Metadata(key=f"k{i}", value="v") for i in range(metadata)])
    config = api.JobConfiguration(key=task.job, owner=task.owner, taskConfig=task, instanceCount=1)
    buf = TMemoryBuffer()
    proto = TApacheJSONProtocol(buf)
    proto.write_message_begin("createJob", TMessageType.CALL, 1)
    api.AuroraAdmin.createJob_args(description=config).write(proto)
    proto.write_message_end()
    secret = base64.b64encode(f"alice:{PASSWORDS['alice']}".encode()).decode()
    headers = {"Content-Type": "application/x-thrift", "Authorization": f"Basic {secret}"}
    code = _response_code(secure, "createJob", api.AuroraAdmin.createJob_args(description=config),
                          headers)
    codes = api.ResponseCode
    assert code in (codes.OK, codes.INVALID_REQUEST, codes.AUTH_FAILED), code
    if code == codes.OK:
        _response_code(secure, "killTasks",
                       api.AuroraAdmin.killTasks_args(job=task.job, instances=None, message="fuzz"),
                       headers)


def _response_code(secure: SecureCluster, method: str, args: object, headers: dict[str, str]) -> int:
    """Send one TJSONProtocol call; the responseCode of its Response (HTTP must be 200)."""
    buf = TMemoryBuffer()
    proto = TApacheJSONProtocol(buf)
    proto.write_message_begin(method, TMessageType.CALL, 1)
    args.write(proto)  # type: ignore[attr-defined]
    proto.write_message_end()
    req = urllib.request.Request(f"http://127.0.0.1:{secure.up.aurora_port}/api",
                                 data=bytes(buf.getvalue()), method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 200
        doc = json.loads(resp.read())
    # [version, name, type, seqid, {"0": {"rec": Response}}]; responseCode is field 1.
    return int(doc[4]["0"]["rec"]["1"]["i32"])


def _post(secure: SecureCluster, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{secure.up.aurora_port}/api", data=body,
                                 method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
