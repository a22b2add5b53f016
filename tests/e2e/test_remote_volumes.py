"""Immutable remote volumes end to end (issue 25, item 2): a service names its config file by
URL (`mesos_spec.uris` with `cache: true`, a `#sha256=` checksum); each task reads it; a replace
moves the URL from v1 to v2 and every task reads v2; a rollback brings v1 back (from the
host's cache: nothing is downloaded again); a URL whose content does not match its checksum
fails its runs with the reason and the update rolls back by itself.  Real processes:
`peloton up` with one agent, the content served by an http.server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.agent.config import AgentConfig
from peloton.agent.remote_volumes import remote_root
from tests.e2e.conftest import write_pool
from tests.e2e.test_services import create, replace, version, wf_state
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
RUNNING = 8
INSTANCES = 2
CONTENT = {"/v1.txt": b"config-v1", "/v2.txt": b"config-v2", "/v3.txt": b"config-v3"}

SPEC = """\
name: remote-conf
owner: e2e
owningteam: e2e
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
      value: 'echo "$(cat etc/app.conf) $PELOTON_TASK_ID" && sleep 1000'
  mesosspec:
    shell: true
    uris:
    - value: '{url}'
      cache: true
      outputfile: etc/app.conf
"""


class _Server:
    """Serves CONTENT and counts the GETs of each path (what the agent downloaded)."""

    def __init__(self) -> None:
        gets: Counter[str] = Counter()
        self.gets = gets

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                gets[self.path] += 1
                body = CONTENT.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, content: bytes | None = None) -> str:
        """The URL of `path`, with the checksum of `content` (default: what is served)."""
        digest = hashlib.sha256(content if content is not None else CONTENT[path]).hexdigest()
        return f"http://127.0.0.1:{self.http.server_address[1]}{path}#sha256={digest}"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(5)


@pytest.fixture
def served() -> Iterator[_Server]:
    server = _Server()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[UpCluster]:
    up = UpCluster(tmp_path, agents=1, extra=["--agent-cpus", "2", "--agent-mem-mb", "4096",
                                              "--agent-disk-mb", "100000"]).start()
    try:
        up.cli("respool", "create", "/svc", str(write_pool(tmp_path, "svc", cpu_res=1,
                                                          mem_res=1024, disk_res=1000)))
        yield up
    finally:
        up.close()


def _spec(base: Path, url: str) -> Path:
    path = base / f"remote-{hashlib.sha256(url.encode()).hexdigest()[:12]}.yaml"
    path.write_text(SPEC.format(count=INSTANCES, url=url))
    return path


def _seen(up: UpCluster, job_id: str) -> dict[int, str]:
    """What each instance's current run read, as it printed it ("" until it has)."""
    seen = {}
    for inst in range(INSTANCES):
        rt = up.client.get_task(job_id, inst).result.runtime
        run = rt.mesosTaskId.value
        out = up.cli("task", "logs", job_id, str(inst), check=False).stdout.split()
        ok = rt.state == RUNNING and len(out) >= 2 and out[-1] == run
        seen[inst] = out[-2] if ok else ""
    return seen


def _all_see(up: UpCluster, job_id: str, content: bytes) -> None:
    want = {i: content.decode() for i in range(INSTANCES)}
    try:
        eventually(lambda: _seen(up, job_id) == want, 120, f"every instance reading {want[0]}")
    except AssertionError:
        raise AssertionError(f"{_seen(up, job_id)}\n{up.log()[-3000:]}") from None


def test_a_url_rolls_from_v1_to_v2_and_back_and_each_task_reads_it(
        cluster: UpCluster, served: _Server, tmp_path: Path) -> None:
    up = cluster
    job_id = create(up, _spec(tmp_path, served.url("/v1.txt")))
    _all_see(up, job_id, b"config-v1")
    v1_version = version(up, job_id)
    # Two instances on the one host: one download.
    assert served.gets["/v1.txt"] == 1

    # The cache is the agent's: content-addressed, read-only, not writable by a task.
    agents = list((tmp_path / "data" / "agents").iterdir())
    assert len(agents) == 1
    work = agents[0].resolve()
    cache = remote_root(work, AgentConfig(work_dir=work).sandbox_root())
    entry = cache / "blobs" / hashlib.sha256(b"config-v1").hexdigest()
    assert entry.read_bytes() == b"config-v1"
    st = entry.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (os.geteuid(), 0o444)

    # Changing the URL is an ordinary rolling replace: every instance ends up reading v2.
    replace(up, job_id, _spec(tmp_path, served.url("/v2.txt")), 1, "--wait")
    assert wf_state(up, job_id) == "WORKFLOW_STATE_SUCCEEDED"
    _all_see(up, job_id, b"config-v2")
    assert served.gets["/v2.txt"] == 1

    # Rolled back to the spec of v1: v1 again, from the cache (no second download).
    up.cli("job", "stateless", "rollback", job_id, "1", v1_version, "--wait", timeout=180)
    _all_see(up, job_id, b"config-v1")
    assert served.gets["/v1.txt"] == 1

    # A URL whose content is not what its checksum says: the runs fail with the reason, and
    # the update rolls back by itself to v1.
    bad = served.url("/v3.txt", content=b"what was reviewed")
    replace(up, job_id, _spec(tmp_path, bad), 1, "--rollbackOnFailure",
            "--maxInstanceRetries", "1", "--maxTolerableInstanceFailures", "1")

    def failed_message() -> str:
        """The message of a run that failed on the checksum (pod events keep every run's)."""
        for inst in range(INSTANCES):
            for event in up.client.get_pod_events(job_id, inst).result:
                if "sha256 mismatch" in event.message:
                    return str(event.message)
        return ""
    message = eventually(failed_message, 120, "a run failed on the checksum")
    assert f"expected {hashlib.sha256(b'what was reviewed').hexdigest()}" in message
    eventually(lambda: wf_state(up, job_id) == "WORKFLOW_STATE_ROLLED_BACK", 180,
               "the failing update rolled back")
    _all_see(up, job_id, b"config-v1")
