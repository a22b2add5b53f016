"""One archive pass: terminal batch jobs into the sink, then out of hot storage; pod-event trim.

Peloton's engine (`pkg/archiver/engine/engine.go`) logged each finished
job for filebeat to ship and then deleted it, so a lost log line was a
lost job.  Here the order is what makes it safe:

1. query terminal jobs (SUCCEEDED, FAILED, KILLED) completed in the
   window (archiver/window.py), sorted by completion time;
2. for each BATCH job build a full record (collect.build_record) and
   `append` it to the sink;
3. `flush` — the records are durable — then read each one back and
   compare it byte for byte (the sink verifies its checksum);
4. only then, unless `stream_only_mode`, delete the jobs (JobManager.Delete).

Crash safety: a kill anywhere before step 4 leaves every job in hot
storage, so a later pass archives it again; the record is built from the
same stored state, so it has the same bytes and the sink's `append`
dedups it.  A kill during step 4 leaves some jobs deleted — each only
after its record was durable and verified — and the rest re-archived
idempotently later.  Any sink failure in steps 2-3 raises out of the pass
before a single delete.  Service jobs are never deleted (as in Peloton).

The pod-events cleanup keeps the last `pod_events_keep_runs` runs of each
instance of every RUNNING service job: GetPodEvents(limit 1) gives the
newest run N; if N > keep, DeletePodEvents(run N - keep) drops runs 1..N - keep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from archiver.collect import PelotonJobs, build_record, run_number
from archiver.config import ArchiverConfig
from archiver.record import ArchiveCorrupt, ArchiveRecord
from archiver.sinks import ArchiveSink
from archiver.window import Window, Windows
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.common.retry import Retrier
from peloton.core.errors import NotFound, PelotonError, Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

TERMINAL = (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.KILLED)
TERMINAL_NAMES = frozenset(job_pb2.JobState.Name(s) for s in TERMINAL)


@dataclass
class PassReport:
    """What one pass did (logged, returned to `--once`, asserted on by tests)."""

    windows: list[Window] = field(default_factory=list)
    found: int = 0
    archived: int = 0
    already_archived: int = 0
    deleted: int = 0
    delete_failures: int = 0
    skipped: int = 0
    trimmed_instances: int = 0
    errors: list[str] = field(default_factory=list)


class ArchiveEngine:
    """Runs archive passes against one Peloton and one sink; holds the window state."""

    def __init__(self, client: PelotonJobs, sink: ArchiveSink, config: ArchiverConfig, *,
                 retrier: Retrier, sleep: Callable[[float], None]) -> None:
        self.client, self.sink, self.config = client, sink, config
        #: Set by the first pass (Peloton also places the first window after its bootstrap delay).
        self.windows: Windows | None = None
        self._retrier = retrier
        self._sleep = sleep

    def run_pass(self, now: float) -> PassReport:
        """Archive every due window, then trim pod events; raises only if the sink fails.

        A window in which a call failed transiently (Unavailable after the
        retries) is not moved: the next pass repeats it, and what this pass
        already archived or deleted is deduplicated or gone by then.
        """
        report = PassReport()
        if self.windows is None:
            self.windows = Windows(now, self.config.archive_age, self.config.archive_step_size)
        if self.config.enable:
            for window in self.windows.due(now):
                kept, full, transient = self.archive_window(window, report)
                if not transient:
                    self.windows.done(window, kept, full)
                report.windows.append(window)
        if self.config.pod_events_cleanup:
            self.cleanup_pod_events(report)
        return report

    # -- archiving ---------------------------------------------------------------------------
    def archive_window(self, window: Window, report: PassReport) -> tuple[int, bool, bool]:
        """Archive one page of `window`: (jobs left in hot storage, page full, transient failure)."""
        limit = self.config.max_archive_entries
        spec = job_pb2.QuerySpec(
            jobStates=TERMINAL, completionTimeRange=_time_range(window.lo, window.hi),
            # Peloton's maxLimit caps the matches before the offset skips some.
            pagination=query_pb2.PaginationSpec(
                offset=window.offset, limit=limit, maxLimit=window.offset + limit,
                orderBy=[query_pb2.OrderBy(order=query_pb2.OrderBy.ASC,
                                           property=query_pb2.PropertyPath(value="completion_time"))]))
        try:
            results = list(self._call(lambda: self.client.query_jobs(spec, summary_only=True)).results)
        except Unavailable as exc:
            report.errors.append(f"querying {window.kind} window: {exc}")
            return 0, False, True
        report.found += len(results)
        full = len(results) >= limit
        kept, transient = 0, False
        records: list[ArchiveRecord] = []
        for summary in results:
            if summary.type != job_pb2.BATCH:
                kept += 1
                report.skipped += 1
                continue
            try:
                record = self._call(partial(build_record, self.client, summary.id.value))
                if record.summary.state not in TERMINAL_NAMES:  # restarted since the query
                    kept += 1
                    continue
                records.append(record)
            except NotFound:
                continue  # deleted since the query (by a user or another archiver): nothing to keep
            except PelotonError as exc:
                kept, transient = kept + 1, transient or isinstance(exc, Unavailable)
                report.errors.append(f"reading job {summary.id.value}: {exc}")
        self._make_durable(records, report)
        if self.config.stream_only_mode:
            return kept + len(records), full, transient
        for record in records:
            error = self._delete(record.job_id, report)
            if error is not None:
                kept, transient = kept + 1, transient or isinstance(error, Unavailable)
        return kept, full, transient

    def _make_durable(self, records: list[ArchiveRecord], report: PassReport) -> None:
        """Append, flush, read back: returns only when every record is durable and intact."""
        for record in records:
            if self.sink.append(record):
                report.archived += 1
            else:
                report.already_archived += 1
        self.sink.flush()
        for record in records:
            stored = self.sink.get(record.job_id)
            if stored.body != record.body:
                raise ArchiveCorrupt(f"record of job {record.job_id}",
                                     "read back differs from what was appended; nothing deleted")

    def _delete(self, job_id: str, report: PassReport) -> PelotonError | None:
        """Delete one archived job from hot storage; the error if it stays there."""
        if self.config.delete_delay:
            self._sleep(self.config.delete_delay)  # spread the load on hot storage, as Peloton
        try:
            self._call(lambda: self.client.delete_job(job_id))
        except NotFound:
            return None  # already gone: the goal is reached
        except PelotonError as exc:
            report.delete_failures += 1
            report.errors.append(f"deleting job {job_id}: {exc}")
            log.warning("archived job %s but could not delete it: %s", job_id, exc)
            return exc
        report.deleted += 1
        return None

    # -- pod events --------------------------------------------------------------------------
    def cleanup_pod_events(self, report: PassReport) -> None:
        """Keep the last `pod_events_keep_runs` runs of every instance of RUNNING service jobs."""
        keep, limit = self.config.pod_events_keep_runs, self.config.max_archive_entries
        spec = job_pb2.QuerySpec(jobStates=[job_pb2.RUNNING],
                                 pagination=query_pb2.PaginationSpec(limit=limit, maxLimit=limit))
        try:
            results = self._call(lambda: self.client.query_jobs(spec, summary_only=True)).results
        except PelotonError as exc:
            report.errors.append(f"querying running jobs: {exc}")
            return
        for summary in results:
            if summary.type != job_pb2.SERVICE:
                continue
            job_id = summary.id.value
            for instance in range(summary.instanceCount):
                try:
                    newest = self.client.get_pod_events(job_id, instance, limit=1).result
                    run = run_number(newest[0].taskId.value) if newest else None
                    if run is not None and run > keep:
                        self.client.delete_task_pod_events(job_id, instance, run - keep)
                        report.trimmed_instances += 1
                except PelotonError as exc:  # one instance failing must not stop the rest
                    report.errors.append(f"pod events of {job_id}-{instance}: {exc}")

    def _call(self, fn: Callable[[], T]) -> T:
        return self._retrier.call(fn)


def _time_range(lo: float, hi: float) -> Any:
    low, high = Timestamp(), Timestamp()
    low.FromNanoseconds(int(lo * 1e9))
    high.FromNanoseconds(int(hi * 1e9))
    return peloton_pb2.TimeRange(min=low, max=high)
