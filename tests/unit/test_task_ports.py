"""Test clusters' task port blocks (tests/harness/task_ports.py): below the kernel's ephemeral
range, where no outgoing connection can take a task's port, and never shared by two live
clusters, whichever processes they run in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import task_ports
from tests.harness.cluster import UpCluster

ROOT = Path(__file__).resolve().parents[2]
#: `peloton up`'s default agent ports (a `make run` cluster on the machine) and the
#: Kubernetes backend's default hostPorts.
OTHER_RANGES = (range(31000, 33000), range(28000, 30000))


def test_a_clusters_task_ports_are_never_ephemeral_ports(tmp_path: Path) -> None:
    cluster = UpCluster(tmp_path)  # not started: the ports are chosen when it is made
    try:
        ports = range(cluster.port_base, cluster.port_base + task_ports.BLOCK)
        assert ports.start >= 1024
        assert ports.stop <= task_ports.ephemeral_low(), (ports, task_ports.ephemeral_low())
        assert not any(set(ports) & set(other) for other in OTHER_RANGES)
    finally:
        cluster.close()


def test_every_block_fits_below_the_default_ephemeral_range() -> None:
    assert task_ports.usable_bases(32768) == task_ports.BASES
    assert task_ports.usable_bases(20000) == (10000, 12000, 14000, 16000, 18000)
    assert task_ports.usable_bases(19999) == (10000, 12000, 14000, 16000)


def test_ephemeral_low_reads_the_kernels_range(tmp_path: Path) -> None:
    (tmp_path / "range").write_text("40000\t60999\n")
    assert task_ports.ephemeral_low(tmp_path / "range") == 40000
    assert task_ports.ephemeral_low(tmp_path / "missing") == 32768


HOLDER = """\
import sys, time
from pathlib import Path
from tests.harness import task_ports
block = task_ports.claim(claims=Path(sys.argv[1]), bases=(20000,), wait_s=0)
print(block.base, flush=True)
time.sleep(600)
"""


def test_a_block_another_process_holds_is_passed_over_until_that_process_ends(
        tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "20000"
        other = task_ports.claim(claims=tmp_path, bases=(20000, 22000), wait_s=0)
        assert other.base == 22000
        with pytest.raises(AssertionError, match="stayed claimed"):
            task_ports.claim(claims=tmp_path, bases=(20000, 22000), wait_s=0)
        other.release()
        assert task_ports.claim(claims=tmp_path, bases=(22000,), wait_s=0).base == 22000
    finally:
        holder.kill()
        holder.wait(10)
    # A killed holder's claim goes with it: nothing stays claimed for good.
    assert task_ports.claim(claims=tmp_path, bases=(20000,), wait_s=0).base == 20000


def test_a_released_block_can_be_claimed_again_in_the_same_process(tmp_path: Path) -> None:
    first = task_ports.claim(claims=tmp_path, bases=(24000,), wait_s=0)
    with pytest.raises(AssertionError):
        task_ports.claim(claims=tmp_path, bases=(24000,), wait_s=0)
    first.release()
    first.release()  # idempotent
    assert task_ports.claim(claims=tmp_path, bases=(24000,), wait_s=0).base == 24000
