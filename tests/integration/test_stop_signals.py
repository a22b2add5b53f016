"""`peloton up` stops on SIGINT/SIGTERM, and a second signal ends it at once (issue 23 item 11).

SIGINT during a long List printed "stopped" but the process ran on, and ignored SIGTERM:
the stop handler stayed installed for good, so nothing but SIGKILL could end a process
whose clean stop was slow or hung.  Now the first signal asks for the clean stop and gives
both signals their default action back (peloton/common/shutdown.py).

A Watch stream held open by a client is what makes the clean stop slow here: the gRPC
server gives in-flight calls their grace period before it stops.  Each test starts its
own `peloton up` on free ports in its temporary directory and stops only that process.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.cluster import UpCluster

#: Bound on anything a test waits for (the tests themselves take a few seconds).
WAIT = 30.0


@pytest.fixture
def up(tmp_path: Path) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path, agents=1)
    try:
        yield cluster.start()
    finally:
        cluster.close()


def _hold_a_watch(up: UpCluster) -> Iterator[object]:
    """A Watch stream this test keeps open (and never reads past its first message)."""
    stream = iter(up.client.watch_jobs(timeout=WAIT))
    next(stream)
    return stream


def _proc(up: UpCluster) -> subprocess.Popen[str]:
    assert up.proc is not None
    return up.proc


def test_sigterm_during_a_slow_stop_ends_the_process_at_once(up: UpCluster) -> None:
    proc = _proc(up)
    stream = _hold_a_watch(up)
    proc.send_signal(signal.SIGINT)  # the clean stop starts, and waits for the open stream
    # SIGTERM only once the first signal was handled (else it would be the first one).
    assert up.tail is not None and up.tail.wait_for("peloton up: stopping", WAIT)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(WAIT) == -signal.SIGTERM  # ended by the signal, not after the stop
    del stream


def test_sigint_stops_cleanly_and_the_process_ends(up: UpCluster) -> None:
    proc = _proc(up)
    stream = _hold_a_watch(up)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(WAIT) == 0
    assert up.tail is not None and up.tail.wait_for("peloton up: stopped", 5.0)
    assert time.monotonic() - started < WAIT
    del stream
