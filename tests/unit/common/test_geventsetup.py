"""The process model every daemon and test runs: patched, gRPC in gevent mode, gevent reaps
children and keeps each one's exit status for the waiter (peloton.common.geventsetup)."""

from __future__ import annotations

import os
import subprocess
import sys

import gevent
from gevent import monkey

from peloton.common import geventsetup


def test_this_test_process_runs_the_daemons_model() -> None:
    geventsetup.setup()  # idempotent: tests/conftest.py ran it first
    assert monkey.is_module_patched("threading") and monkey.is_module_patched("os")
    assert gevent.get_hub().threadpool.maxsize == geventsetup.HUB_THREADPOOL_SIZE


def test_a_posix_spawned_child_is_reaped_by_gevent_and_its_status_kept() -> None:
    ticks: list[None] = []

    def tick() -> None:
        for _ in range(1000):
            gevent.sleep(0.01)
            ticks.append(None)

    ticker = gevent.spawn(tick)
    pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "sleep 0.2; exit 3"], dict(os.environ))
    with gevent.Timeout(10):
        _, status = os.waitpid(pid, 0)  # cooperative: other greenlets run meanwhile
    ticker.kill()
    assert os.waitstatus_to_exitcode(status) == 3
    assert len(ticks) > 5


def test_children_of_subprocess_and_posix_spawn_side_by_side() -> None:
    pids = [os.posix_spawn("/bin/sh", ["/bin/sh", "-c", f"exit {i}"], dict(os.environ))
            for i in range(5)]
    assert subprocess.run([sys.executable, "-c", "raise SystemExit(7)"],
                          check=False).returncode == 7
    with gevent.Timeout(10):
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    assert codes == [0, 1, 2, 3, 4]
