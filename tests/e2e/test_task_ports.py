"""A task's dynamic port held by something outside the scheduler: the retry gets another.

Placement draws a run's ports by its task and run number (peloton/core/placement/portpool.py);
when it handed out the host's lowest free ports, a port held by another program (an outgoing
connection's ephemeral port, a stray listener) failed every retry of the task the same way.
Here the agent offers ten ports; the test picks a job id whose first run draws neither the
lowest port nor the second run's, and holds the lowest port and the first run's with
listeners: the first run fails to bind, the second gets a free port and the job succeeds
with exactly one failure (two successive runs of a task never share a port while the host's
free ports stay the same), where lowest-first failed every run on the lowest port.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.core.model.ids import TaskId
from peloton.core.placement.portpool import port_draw
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import job_state
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
#: Ports the agent offers, from the cluster's claimed block on.
OFFERED = 10

PORTS_YAML = """\
  ports:
  - name: http
    value: 0
    envname: HTTP_PORT
"""

#: The task binds its port as a server would, and fails ("Address already in use") if held.
#: Inline: the task may run as a dynamic user who cannot read this test's directory.
BIND = ("python3 -c \"import os, socket; port = int(os.environ['HTTP_PORT']); "
        "socket.socket().bind(('0.0.0.0', port)); print('bound', port)\"")


@pytest.fixture
def narrow(tmp_path: Path) -> Iterator[UpCluster]:
    """One agent offering `OFFERED` ports (the cluster's block, narrowed)."""
    up = UpCluster(tmp_path, agents=1, extra=["--agent-cpus", "2", "--agent-mem-mb", "4096",
                                               "--agent-disk-mb", "100000"])
    # `--agent-ports` given again: the last one wins (click), within this cluster's block.
    up.extra = [*up.extra, "--agent-ports", f"{up.port_base}-{up.port_base + OFFERED - 1}"]
    try:
        yield up.start()
    finally:
        up.close()


def offered_port(base: int, job_id: str, run: int) -> int:
    """The port run `run` of instance 0 draws among the `OFFERED` free ones from `base`."""
    return base + ((port_draw(TaskId(job_id, 0), run) * OFFERED) >> 32)


def test_a_run_whose_port_is_held_is_retried_on_another_port(narrow: UpCluster,
                                                             tmp_path: Path) -> None:
    base = narrow.port_base
    while True:  # a job id whose first run draws neither the lowest port nor the second's
        job_id = str(uuid.uuid4())
        first, second = offered_port(base, job_id, 1), offered_port(base, job_id, 2)
        if base not in (first, second) and first != second:
            break
    held = []
    try:
        for port in (base, first):  # lowest-first would take `base` every time
            sock = socket.socket()
            held.append(sock)
            sock.bind(("0.0.0.0", port))
            sock.listen()
        narrow.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
        narrow.cli("job", "create", "--jobID", job_id, "/e2e",
                   str(write_job(tmp_path, "binder", BIND, max_failures=3, extra=PORTS_YAML)))
        eventually(lambda: job_state(narrow, job_id) in ("SUCCEEDED", "FAILED"), 150,
                   "job ended")
        info = narrow.client.get_task(job_id, 0).result
        assert job_state(narrow, job_id) == "SUCCEEDED", info.runtime.message
        assert info.runtime.failureCount == 1  # the first run, on its held port
        assert dict(info.runtime.ports) == {"http": second}
        events = narrow.client.get_pod_events(job_id, 0).result
        failed = [e for e in events if e.actualState == "FAILED"]
        assert [e.taskId.value.rsplit("-", 1)[1] for e in failed] == ["1"]
        assert "exited with code 1" in failed[0].message
    finally:
        for sock in held:
            sock.close()
