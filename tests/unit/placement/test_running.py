"""The resource manager and the placement engine running as greenlets, with a stand-in job manager.

The stand-in does what the job manager does with the ports: launches
placements, kills preemption victims and queues their next run.  The
fake host manager reports RUNNING at launch; the test ends runs itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest

from peloton.core.model.resources import EPSILON
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import TaskSpec
from peloton.core.respool.records import RmTask
from peloton.placement.app import PlacementEngine
from peloton.placement.config import PlacementEngineConfig
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.config import ResourceManagerConfig
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import make_pool, singles, tasks

FAST = ResourceManagerConfig(scheduling_period=0.01, entitlement_period=0.05,
                             entitlement_min_interval=0.0, preemption_period=0.05,
                             sustained_over_allocation_count=2, retry_delay=0.01,
                             retry_delay_max=0.05, poll_timeout=0.02)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'r.db'}", StoreOptions(bootstrap=True))
    yield s
    s.close()


class StandIn:
    """The job manager's side of the ports, as greenlets."""

    def __init__(self, rm: ResourceManager, fake: FakeHostManager) -> None:
        self.rm = rm
        self.fake = fake
        self.tasks: dict[str, RmTask] = {}
        self.pool_of: dict[str, str] = {}
        self.greenlets = [gevent.spawn(self._launch), gevent.spawn(self._evict)]

    def submit(self, pool: str, ts: list[RmTask]) -> None:
        for t in ts:
            self.tasks[str(t.task_id)] = t
            self.pool_of[str(t.task_id)] = pool
        assert self.rm.enqueue_gangs(pool, singles(ts)) == []

    def _launch(self) -> None:
        while True:
            for p in self.rm.get_placements(1000, 0.05):
                specs = [LaunchSpec(str(t.task_id.run(t.run_id)),
                                    TaskSpec(resources=self.tasks[str(t.task_id)].resources))
                         for t in p.tasks]
                assert self.fake.launch(p.hostname, specs) == []

    def _evict(self) -> None:
        while True:
            for v in self.rm.take_victims(100):
                self.fake.kill([str(v.task_id.run(v.run_id))])
                old = self.tasks[str(v.task_id)]
                new = RmTask(old.request, old.run_id + 1, old.priority, old.preemptible)
                self.tasks[str(v.task_id)] = new
                self.rm.enqueue_gangs(self.pool_of[str(v.task_id)], [[new]])
            gevent.sleep(0.02)

    def stop(self) -> None:
        gevent.killall(self.greenlets)


def running_cpu(fake: FakeHostManager, stand_in: StandIn, pool: str) -> float:
    """Cpus of launched runs of `pool` on the hosts."""
    total = 0.0
    for run in fake.runs():
        task_id = run.rsplit("-", 1)[0]
        if stand_in.pool_of.get(task_id) == pool:
            total += stand_in.tasks[task_id].resources.cpu
    return total


def test_batch_work_runs_to_completion_within_entitlement(store: Store) -> None:
    fake = FakeHostManager()
    for i in range(4):
        fake.add_host(f"host-{i}", cpu=4)
    rm = ResourceManager(store, fake, FAST)
    engine = PlacementEngine(rm, fake, PlacementEngineConfig(dequeue_timeout=0.05))
    rm.start()
    engine.start()
    stand_in = StandIn(rm, fake)
    try:
        small = make_pool(rm, "small", cpu=(0, 6))
        big = make_pool(rm, "big", cpu=(0, 16))
        stand_in.submit(small, tasks(30))
        stand_in.submit(big, tasks(40))
        done = 0
        with gevent.Timeout(20):
            while done < 70:
                for pool in (small, big):
                    entitled = rm.pools.get(pool).non_slack_entitlement.cpu
                    assert running_cpu(fake, stand_in, pool) <= entitled + EPSILON
                runs = list(fake.runs())
                for run in runs[:3]:
                    fake.finish(run)
                    done += 1
                gevent.sleep(0.005)
            while rm.pools.get(small).allocation.cpu or rm.pools.get(big).allocation.cpu:
                gevent.sleep(0.01)  # the last events free the last allocation
        assert not fake.runs() and not fake.reservations()
    finally:
        stand_in.stop()
        engine.stop()
        rm.stop()


def test_preemption_frees_room_for_a_reserved_pool(store: Store) -> None:
    fake = FakeHostManager()
    for i in range(4):
        fake.add_host(f"host-{i}", cpu=4)
    rm = ResourceManager(store, fake, FAST)
    engine = PlacementEngine(rm, fake, PlacementEngineConfig(dequeue_timeout=0.05))
    rm.start()
    engine.start()
    stand_in = StandIn(rm, fake)
    try:
        shared = make_pool(rm, "shared", cpu=(0, 16))
        reserved = make_pool(rm, "reserved", cpu=(8, 8))
        stand_in.submit(shared, tasks(16))
        with gevent.Timeout(10):
            while running_cpu(fake, stand_in, shared) < 16:
                gevent.sleep(0.01)
        critical = tasks(8, preemptible=False)
        stand_in.submit(reserved, critical)
        with gevent.Timeout(15):
            while running_cpu(fake, stand_in, reserved) < 8:
                gevent.sleep(0.01)
        assert running_cpu(fake, stand_in, shared) == 8
        assert len(fake.killed) == 8
    finally:
        stand_in.stop()
        engine.stop()
        rm.stop()
