"""`peloton up --backend mesos:<master>`: jobs run through a Mesos master, across restarts.

The master is the fake of tests/harness/fake_mesos.py (no real Mesos can be
installed here); its agents run the tasks as real processes.  `peloton up`
subscribes over HTTP like it would to a production master.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.storage import open_store
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create, job_state, task_states
from tests.harness.cluster import UpCluster, alive, eventually
from tests.harness.fake_mesos import FakeMesosMaster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_batch_job_succeeds_through_a_mesos_master(tmp_path: Path) -> None:
    master = FakeMesosMaster(tmp_path / "mesos").start()
    up = UpCluster(tmp_path, agents=0, extra=["--backend", f"mesos:{master.url}"])
    try:
        up.start()
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
        job = write_job(tmp_path, "on-mesos", 'echo "hello from $PELOTON_INSTANCE_ID"', count=3,
                        cpu=0.5, mem=64)
        job_id = create(up, "/e2e", job)
        eventually(lambda: job_state(up, job_id) == "SUCCEEDED", 60, "job SUCCEEDED")

        framework = master.framework()
        assert (framework.info["name"], framework.info["role"]) == ("Peloton", "peloton")
        launched = [t["task_id"]["value"] for c in master.calls if c["type"] == "ACCEPT"
                    for op in c["accept"]["operations"] for t in op["launch"]["task_infos"]]
        assert sorted(launched) == [f"{job_id}-{i}-1" for i in range(3)]
        outputs = {p.read_text() for p in (tmp_path / "mesos").rglob("stdout")}
        assert outputs == {f"hello from {i}\n" for i in range(3)}
        assert master.pending_updates() == 0  # every update was acknowledged
        store = open_store(f"sqlite:///{tmp_path / 'data' / 'state.db'}")
        try:
            stored = store.get_framework_info("Peloton")
        finally:
            store.close()
        assert stored is not None and stored.framework_id == framework.framework_id
    finally:
        up.close()
        master.stop()


def test_a_restarted_cluster_is_the_same_framework_and_keeps_its_tasks(tmp_path: Path) -> None:
    master = FakeMesosMaster(tmp_path / "mesos").start()
    up = UpCluster(tmp_path, agents=0, extra=["--backend", f"mesos:{master.url}"])
    try:
        up.start()
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
        job_id = create(up, "/e2e", write_job(tmp_path, "sleepers", "sleep 300", count=2))
        eventually(lambda: set(task_states(up, job_id).values()) == {"RUNNING"}, 60, "RUNNING")
        framework_id = master.framework().framework_id
        assert up.stop() == 0
        assert not [c for c in master.calls if c["type"] == "TEARDOWN"]
        procs = [t.proc for a in master.agents.values() for t in a.tasks.values()]
        assert len(procs) == 2 and all(p is not None and alive(p.pid) for p in procs)

        up.start()
        eventually(lambda: master.subscriptions >= 2, 30, "subscribed again")
        assert list(master.frameworks) == [framework_id]
        assert set(task_states(up, job_id).values()) == {"RUNNING"}
        up.cli("job", "stop", job_id)
        eventually(lambda: job_state(up, job_id) == "KILLED", 60, "job KILLED")
        assert all(p is not None and not alive(p.pid) for p in procs)
    finally:
        up.close()
        master.stop()
