"""The archive pass against a fake Peloton and a real directory sink.

What a user must be able to rely on: jobs leave hot storage only after
their record is durable and reads back; stream-only mode never deletes;
a crash anywhere is repaired by running again, without duplicates; pod
events of long-running services are trimmed to the last N runs.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
from google.protobuf import json_format

from archiver.config import ArchiverConfig
from archiver.dir_sink import DirSink
from archiver.engine import ArchiveEngine
from archiver.record import ArchiveCorrupt, ArchiveRecord
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.common.clock import FakeClock
from peloton.common.retry import Retrier
from peloton.core.errors import Unavailable
from tests.fakes.peloton_jobs import FakeJob, FakePelotonJobs

pytestmark = pytest.mark.timeout(30)

START = 1_000_000.0
CONFIG = ArchiverConfig(archive_age=100.0, archive_step_size=10.0, delete_delay=0.0,
                        pod_events_cleanup=False, max_archive_entries=50)


def new_id() -> str:
    return str(uuid.uuid4())


def engine(peloton: FakePelotonJobs, sink: DirSink, config: ArchiverConfig = CONFIG,
           clock: FakeClock | None = None) -> ArchiveEngine:
    clock = clock or FakeClock()
    return ArchiveEngine(peloton, sink, config, retrier=Retrier(config.retry_policy(),
                                                                sleep=clock.sleep, clock=clock),
                         sleep=clock.sleep)


@pytest.fixture
def sink(tmp_path: Path) -> DirSink:
    return DirSink(tmp_path / "archive")


def test_a_finished_batch_job_is_archived_in_full_then_deleted(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    job = peloton.add(FakeJob(new_id(), name="etl", completed=START - 105, runs=[3, 1]))
    report = engine(peloton, sink).run_pass(START)
    assert (report.archived, report.deleted) == (1, 1)
    assert job.job_id not in peloton.jobs
    doc = sink.get(job.job_id).document()
    info = json_format.ParseDict(doc["job"], job_pb2.JobInfo())  # the v0 messages, intact
    assert info.config.name == "etl" and info.runtime.state == job_pb2.SUCCEEDED
    tasks = {i: json_format.ParseDict(t, task_pb2.TaskInfo()) for i, t in doc["tasks"].items()}
    assert sorted(tasks) == ["0", "1"]
    runs = [e["taskId"]["value"].rsplit("-", 1)[1] for e in doc["pod_events"]["0"]]
    assert runs == ["3", "2", "1"]  # every run, newest first
    assert doc["summary"]["completion_time"] == pytest.approx(START - 105)
    # The order that makes it safe: the delete came after every read of the job.
    names = [name for name, _ in peloton.calls]
    assert names.index("delete_job") > max(i for i, n in enumerate(names) if n != "delete_job")


def test_windows_slide_back_and_follow_new_completions(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    at = {t: peloton.add(FakeJob(new_id(), completed=START - t)).job_id for t in (105, 115, 125, 95)}
    eng = engine(peloton, sink)
    archived_by_pass = []
    for n in range(4):
        before = set(peloton.jobs)
        eng.run_pass(START + n)
        archived_by_pass.append(before - set(peloton.jobs))
    # [S-110, S-100), then one step back each pass; the job that aged only later (S-95 at
    # pass time S+5..) is picked up by the forward window once S-95 < now-100.
    assert archived_by_pass[0] == {at[105]}
    assert archived_by_pass[1] == {at[115]}
    assert archived_by_pass[2] == {at[125]}
    assert archived_by_pass[3] == set() and at[95] in peloton.jobs
    later = peloton.add(FakeJob(new_id(), completed=START + 2))
    eng.run_pass(START + 103)
    assert at[95] not in peloton.jobs and later.job_id not in peloton.jobs


def test_a_full_page_keeps_the_window_until_it_is_drained(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    ids = [peloton.add(FakeJob(new_id(), completed=START - 105 + i / 10)).job_id for i in range(5)]
    eng = engine(peloton, sink, dataclasses.replace(CONFIG, max_archive_entries=2))
    counts = [eng.run_pass(START).deleted for _ in range(4)]
    assert counts == [2, 2, 1, 0]
    assert sink.count() == 5 and not set(ids) & set(peloton.jobs)


def test_stream_only_archives_everything_and_deletes_nothing(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    ids = [peloton.add(FakeJob(new_id(), completed=START - 105 + i / 10)).job_id for i in range(5)]
    config = dataclasses.replace(CONFIG, max_archive_entries=2, stream_only_mode=True)
    eng = engine(peloton, sink, config)
    for _ in range(4):
        eng.run_pass(START)
    assert peloton.deletes() == [] and set(ids) <= set(peloton.jobs)
    assert {s.job_id for s in sink.query()} == set(ids)  # paged through with offsets


def test_service_and_unfinished_jobs_are_left_alone(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    svc = peloton.add(FakeJob(new_id(), job_type="SERVICE", state="KILLED", completed=START - 105))
    running = peloton.add(FakeJob(new_id(), state="RUNNING", completed=START - 105))
    report = engine(peloton, sink).run_pass(START)
    assert report.skipped == 1 and report.archived == 0
    assert {svc.job_id, running.job_id} <= set(peloton.jobs) and sink.count() == 0


class RestartingPeloton(FakePelotonJobs):
    """A user restarts every job right after the archiver's query saw it finished."""

    def query_jobs(self, spec: object, *, respool_id: str = "", summary_only: bool = True) -> object:
        out = super().query_jobs(spec, respool_id=respool_id, summary_only=summary_only)
        for job in self.jobs.values():
            job.state = "RUNNING"
        return out


def test_a_job_restarted_after_the_query_is_neither_archived_nor_deleted(sink: DirSink) -> None:
    peloton = RestartingPeloton()
    job = peloton.add(FakeJob(new_id(), completed=START - 105))
    report = engine(peloton, sink).run_pass(START)
    assert (report.found, report.archived, report.deleted) == (1, 0, 0)
    assert job.job_id in peloton.jobs and sink.count() == 0


class BrokenFlush(DirSink):
    """A sink whose disk fails at the durability point."""

    def flush(self) -> None:
        raise OSError(28, "No space left on device")


def test_a_failing_sink_deletes_nothing_and_the_window_is_retried(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    job = peloton.add(FakeJob(new_id(), completed=START - 105))
    broken = engine(peloton, BrokenFlush(tmp_path / "a"))
    with pytest.raises(OSError):
        broken.run_pass(START)
    assert peloton.deletes() == [] and job.job_id in peloton.jobs
    # The same engine (same windows) with the disk back: the job is archived on the next pass.
    broken.sink = DirSink(tmp_path / "a")
    assert broken.run_pass(START + 1).deleted == 1


class LyingSink(DirSink):
    """A sink that stores something other than what it was given."""

    def get(self, job_id: str) -> ArchiveRecord:
        record = super().get(job_id)
        return ArchiveRecord(record.summary, record.body.replace(b"SUCCEEDED", b"FAILED"))


def test_a_record_that_does_not_read_back_identically_is_not_deleted(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    job = peloton.add(FakeJob(new_id(), completed=START - 105))
    with pytest.raises(ArchiveCorrupt):
        engine(peloton, LyingSink(tmp_path / "a")).run_pass(START)
    assert peloton.deletes() == [] and job.job_id in peloton.jobs


class Killed(BaseException):
    """The archiver process dying (kill -9) at a chosen point."""


def test_killed_between_append_and_delete_reruns_idempotently(tmp_path: Path) -> None:
    peloton = FakePelotonJobs()
    ids = [peloton.add(FakeJob(new_id(), completed=START - 105 + i / 10)).job_id for i in range(3)]
    first = DirSink(tmp_path / "a")
    peloton.failures["delete_job"] = [Killed()]  # dies at the first delete: all 3 durable, none deleted
    with pytest.raises(Killed):
        engine(peloton, first).run_pass(START)
    first.close()
    assert set(ids) <= set(peloton.jobs)
    stored = {i: DirSink(tmp_path / "a").get(i).body for i in ids}
    # A new process: new sink object, new windows starting at its own clock.
    restarted = DirSink(tmp_path / "a")
    report = engine(peloton, restarted).run_pass(START + 1)
    assert (report.archived, report.already_archived, report.deleted) == (0, 3, 3)
    assert restarted.count() == 3 and {i: restarted.get(i).body for i in ids} == stored
    assert len(list((tmp_path / "a" / "segments").iterdir())) == 1  # nothing written twice


def test_killed_during_deletes_finishes_the_rest_later(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    ids = [peloton.add(FakeJob(new_id(), completed=START - 105 + i / 10)).job_id for i in range(3)]
    peloton.on_delete = lambda job_id: (_ for _ in ()).throw(Killed()) if job_id == ids[1] else None
    with pytest.raises(Killed):
        engine(peloton, sink).run_pass(START)
    assert ids[0] not in peloton.jobs and {ids[1], ids[2]} <= set(peloton.jobs)
    peloton.on_delete = None
    report = engine(peloton, sink).run_pass(START + 1)
    assert report.deleted == 2 and not set(ids) & set(peloton.jobs) and sink.count() == 3


def test_unavailable_calls_are_retried_then_the_window_is_repeated(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    job = peloton.add(FakeJob(new_id(), completed=START - 105))
    clock = FakeClock()
    peloton.failures["delete_job"] = [Unavailable("jobmgr restarting")]
    report = engine(peloton, sink, clock=clock).run_pass(START)
    assert report.deleted == 1 and clock.sleeps  # one retry, after a recorded (not real) sleep
    other = peloton.add(FakeJob(new_id(), completed=START - 115))
    peloton.failures["delete_job"] = [Unavailable("down")] * CONFIG.max_retry_attempts_job_query
    eng = engine(peloton, sink, clock=clock)
    eng.run_pass(START)  # window [S-110, S-100) has nothing left; next is [S-120, S-110)
    report = eng.run_pass(START)
    assert report.delete_failures == 1 and other.job_id in peloton.jobs
    assert eng.run_pass(START).deleted == 1  # same window again, since the failure was transient
    assert job.job_id not in peloton.jobs and other.job_id not in peloton.jobs


def test_pod_events_of_running_services_keep_the_last_n_runs(sink: DirSink) -> None:
    peloton = FakePelotonJobs()
    svc = peloton.add(FakeJob(new_id(), job_type="SERVICE", state="RUNNING", runs=[250, 40, 101]))
    batch = peloton.add(FakeJob(new_id(), state="RUNNING", runs=[300]))
    config = dataclasses.replace(CONFIG, pod_events_cleanup=True, enable=False)
    report = engine(peloton, sink, config).run_pass(START)
    assert report.trimmed_instances == 2
    assert peloton.event_runs[(svc.job_id, 0)] == list(range(151, 251))
    assert peloton.event_runs[(svc.job_id, 1)] == list(range(1, 41))
    assert peloton.event_runs[(svc.job_id, 2)] == list(range(2, 102))
    assert len(peloton.event_runs[(batch.job_id, 0)]) == 300
    assert peloton.deletes() == []
