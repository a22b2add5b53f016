"""The archiver loop (bootstrap delay, interval, jitter, surviving a failed pass) and its windows."""

from __future__ import annotations

import uuid
from pathlib import Path

import gevent
import pytest

from archiver.app import Archiver
from archiver.config import ArchiverConfig, ArchiverFile
from archiver.dir_sink import DirSink
from archiver.window import Window, Windows
from peloton.common.config import load_config
from peloton.core.errors import InvalidArgument, Unavailable
from tests.fakes.peloton_jobs import FakeJob, FakePelotonJobs

pytestmark = pytest.mark.timeout(30)


class StopLoop(BaseException):
    """Ends `run_forever` after a number of sleeps (the loop itself never returns)."""


class ScriptedSleep:
    """A sleep that records delays, advances a fake wall clock, and stops after `limit` calls."""

    def __init__(self, limit: int, start: float = 1_000_000.0) -> None:
        self.limit, self.now, self.delays = limit, start, []  # type: ignore[var-annotated]

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.now += seconds
        if len(self.delays) >= self.limit:
            raise StopLoop


def test_the_loop_waits_bootstrap_then_passes_every_interval_with_jitter(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    sleep = ScriptedSleep(limit=4)
    config = ArchiverConfig(bootstrap_delay=10.0, archive_interval=60.0, jitter_max=0.5,
                            archive_age=0.0, delete_delay=0.0)
    archiver = Archiver(config, peloton, DirSink(tmp_path / "a"), clock=lambda: sleep.now,
                        sleep=sleep, rand=lambda: 0.5)
    peloton.add(FakeJob(str(uuid.uuid4()), completed=sleep.now + 30))  # done during bootstrap
    with pytest.raises(StopLoop):
        archiver.run_forever()
    assert sleep.delays == [10.25, 60.25, 60.25, 60.25]
    assert archiver.passes == 3 and archiver.sink.count() == 1


class FlakyDisk(DirSink):
    """A sink whose first flush fails (a full disk, then freed)."""

    failed = False

    def flush(self) -> None:
        if not self.failed:
            self.failed = True
            raise OSError(28, "No space left on device")
        super().flush()


def test_a_failed_pass_is_logged_and_the_loop_goes_on(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    sleep = ScriptedSleep(limit=3)
    config = ArchiverConfig(bootstrap_delay=0.0, archive_age=0.0, pod_events_cleanup=False,
                            delete_delay=0.0)
    archiver = Archiver(config, peloton, FlakyDisk(tmp_path / "a"), clock=lambda: sleep.now,
                        sleep=sleep, rand=lambda: 0.0)
    job = peloton.add(FakeJob(str(uuid.uuid4()), completed=sleep.now - 1))
    with pytest.raises(StopLoop):
        archiver.run_forever()
    assert isinstance(archiver.last_error, OSError)
    assert archiver.passes == 1 and job.job_id not in peloton.jobs  # pass 2 repeated the window


def test_transient_api_failures_are_retried_with_the_injected_sleep(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    peloton.failures["query_jobs"] = [Unavailable("jobmgr restarting")] * 2
    sleep = ScriptedSleep(limit=100)
    config = ArchiverConfig(archive_age=0.0, pod_events_cleanup=False, delete_delay=0.0,
                            retry_interval_job_query=10.0)
    archiver = Archiver(config, peloton, DirSink(tmp_path / "a"), clock=lambda: sleep.now,
                        sleep=sleep, rand=lambda: 0.5)
    job = peloton.add(FakeJob(str(uuid.uuid4()), completed=sleep.now - 1))
    report = archiver.run_once()
    assert sleep.delays == [10.0, 10.0] and report.deleted == 1 and job.job_id not in peloton.jobs


def test_start_and_stop_own_a_greenlet(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    config = ArchiverConfig(bootstrap_delay=0.0, archive_interval=0.01, jitter_max=0.0)
    archiver = Archiver(config, peloton, DirSink(tmp_path / "a"))
    archiver.start()
    with gevent.Timeout(10):
        while archiver.passes < 3:
            gevent.sleep(0.01)
    archiver.stop()
    passes = archiver.passes
    gevent.sleep(0.05)
    assert archiver.passes == passes  # really stopped


def test_config_from_a_peloton_style_file_and_validation(tmp_path: Path) -> None:
    path = tmp_path / "archiver.yaml"
    path.write_text("archiver:\n  archive_age: 60\n  stream_only_mode: true\n")
    loaded = load_config(ArchiverFile, [path], env={})
    assert loaded.archiver.archive_age == 60 and loaded.archiver.stream_only_mode
    with pytest.raises(InvalidArgument) as err:
        ArchiverConfig(max_archive_entries=6000)
    assert err.value.field == "max_archive_entries"


def test_windows_move_as_peloton_and_catch_up_forward() -> None:
    w = Windows(start=1000.0, age=100.0, step=10.0)
    assert w.due(1000.0) == [Window(890.0, 900.0)]
    w.done(w.due(1000.0)[0], kept=0, full=False)
    assert w.due(1000.0) == [Window(880.0, 890.0)]
    forward, backward = w.due(1050.0)
    assert forward == Window(900.0, 950.0, 0, "forward") and backward == Window(880.0, 890.0)
    w.done(forward, kept=3, full=True)  # a full page stays, skipping the 3 kept jobs
    assert w.due(1060.0)[0] == Window(900.0, 960.0, 3, "forward")
    w.done(w.due(1060.0)[0], kept=0, full=False)
    assert w.due(1060.0) == [Window(880.0, 890.0)]


def test_the_backward_window_stops_at_the_epoch() -> None:
    w = Windows(start=15.0, age=0.0, step=10.0)
    seen = []
    while (due := w.due(15.0)):
        seen.append(due[0])
        w.done(due[0], kept=0, full=False)
    assert seen == [Window(5.0, 15.0), Window(0.0, 5.0)]
