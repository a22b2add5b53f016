"""Import the Google cluster-usage trace v2 (clusterdata-2011) `task_events` table as a trace.

Input: the table's CSV files (`part-NNNNN-of-NNNNN.csv`, or `.csv.gz`), no header,
13 columns per row, as the v2 format + schema document (Reiss and Wilkes, 2011)
describes them:

  1 timestamp (µs)  2 missing info  3 job ID  4 task index  5 machine ID  6 event type
  7 user  8 scheduling class  9 priority  10 CPU request  11 memory request
  12 disk space request  13 different-machine restriction

Event types: 0 SUBMIT, 1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST,
7 UPDATE_PENDING, 8 UPDATE_RUNNING.  Timestamp 0 means "before the trace
window"; 2^63 - 1 means "after it".  The README beside this module has the
mapping to our trace format, field by field; in short:

- one Google job -> one trace job `g<job ID>`; its tasks (by task index, renumbered
  0..n-1) -> instances;
- submit = the job's earliest task SUBMIT, in seconds after the earliest non-zero
  SUBMIT of the input (a SUBMIT at timestamp 0 counts as t = 0);
- a task's duration = the length of its run that ended in FINISH (SCHEDULE to
  FINISH); without one, of its last run, whatever ended it (EVICT, FAIL, KILL, LOST,
  or the end of the input while still running); a task never scheduled has no
  duration and is left out (counted);
- resources: each normalised request times the capacity given for a machine whose
  normalised capacity is 1.0 (`--cpu-cores`, `--memory-mb`, `--disk-mb`); per job,
  the largest request of its tasks per kind (the SUBMIT's, or a later UPDATE_PENDING's
  before the first SCHEDULE);
- priority: kept (0-11; higher is more important in both); preemptible unless the
  priority is production (>= 9 by default); pool: by priority band (0-1 /free,
  2-8 /batch, 9-11 /production by default);
- the different-machine restriction -> `one_per_host`.
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import Resources
from peloton.simulation.errors import InputError
from peloton.simulation.trace import Trace, TraceHeader, TraceJob, check_trace

COLUMNS = ("timestamp", "missing info", "job ID", "task index", "machine ID", "event type", "user",
           "scheduling class", "priority", "CPU request", "memory request", "disk space request",
           "different-machine restriction")
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
EVENT_NAMES = ("SUBMIT", "SCHEDULE", "EVICT", "FAIL", "FINISH", "KILL", "LOST", "UPDATE_PENDING",
               "UPDATE_RUNNING")
#: Timestamp meaning "after the end of the trace window".
AFTER_END = 2**63 - 1
#: Priorities of clusterdata-2011 (0 and 1 "free", 9-11 "production").
MAX_PRIORITY = 11
#: Shortest duration written (a run that started and ended in the same microsecond).
MIN_DURATION = 1e-6
DEFAULT_POOL_MAP: tuple[tuple[int, int, str], ...] = (
    (0, 1, "/free"), (2, 8, "/batch"), (9, 11, "/production"))


@dataclass(frozen=True, slots=True)
class GoogleImportOptions:
    """How normalised requests, priorities and pools map (see the module docstring)."""

    cpu_cores: float = 32.0
    memory_mb: float = 131072.0
    disk_mb: float = 1_000_000.0
    #: (lowest priority, highest priority, pool path) bands; every priority met must be in one.
    pool_map: tuple[tuple[int, int, str], ...] = DEFAULT_POOL_MAP
    #: Priorities at or above this are not preemptible.
    production_priority: int = 9
    name: str = "google-v2"

    def pool_for(self, priority: int) -> str | None:
        """The pool of a priority (None if no band holds it)."""
        for lo, hi, pool in self.pool_map:
            if lo <= priority <= hi:
                return pool
        return None


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One row of the task events table (None: the field was empty)."""

    timestamp: int
    job_id: int
    task_index: int
    event_type: int
    priority: int | None
    cpu: float | None
    memory: float | None
    disk: float | None
    different_machine: bool | None
    #: Where the row came from, for messages.
    source: str
    line: int


@dataclass
class ImportStats:
    """What the import kept and left out, for the user to judge the trace."""

    rows: int = 0
    tasks_seen: int = 0
    tasks_kept: int = 0
    jobs_kept: int = 0
    never_scheduled: int = 0
    no_request: int = 0
    #: Tasks whose duration came from a run that did not FINISH.
    unfinished_runs: int = 0
    after_end_rows: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """A summary for stderr."""
        return [f"{self.rows} rows, {self.tasks_seen} tasks: kept {self.tasks_kept} tasks in "
                f"{self.jobs_kept} jobs",
                f"left out: {self.never_scheduled} tasks never scheduled, {self.no_request} tasks "
                "without a resource request",
                f"{self.unfinished_runs} tasks' durations come from a run that did not FINISH "
                "(evicted, failed, killed, lost, or running at the end of the input)", *self.notes]


def _int(text: str, column: int, source: str, line: int, *, required: bool) -> int | None:
    if not text:
        if required:
            raise InputError(source, "is empty but required", line=line, field=COLUMNS[column])
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(source, f"must be an integer, got {text!r}", line=line,
                         field=COLUMNS[column]) from None


def _request(text: str, column: int, source: str, line: int) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(source, f"must be a number, got {text!r}", line=line,
                         field=COLUMNS[column]) from None
    if not 0 <= value < float("inf"):
        raise InputError(source, f"must be a normalised request >= 0, got {text!r}", line=line,
                         field=COLUMNS[column])
    return value


def parse_rows(lines: Iterable[str], source: str) -> Iterator[TaskEvent]:
    """The rows of one task events file (InputError naming file, line and column)."""
    for line, row in enumerate(csv.reader(lines), start=1):
        if not row:
            continue
        if len(row) != len(COLUMNS):
            raise InputError(source, f"has {len(row)} columns; task_events rows have {len(COLUMNS)} "
                             f"({', '.join(COLUMNS)})", line=line)
        cells = [c.strip() for c in row]
        timestamp = _int(cells[0], 0, source, line, required=True)
        job_id = _int(cells[2], 2, source, line, required=True)
        task_index = _int(cells[3], 3, source, line, required=True)
        event = _int(cells[5], 5, source, line, required=True)
        assert timestamp is not None and job_id is not None and task_index is not None
        assert event is not None
        if timestamp < 0 or task_index < 0:
            bad = "timestamp" if timestamp < 0 else "task index"
            raise InputError(source, "must be >= 0", line=line, field=bad)
        if not 0 <= event < len(EVENT_NAMES):
            raise InputError(source, f"must be 0-8 ({', '.join(EVENT_NAMES)}), got {event}", line=line,
                             field="event type")
        priority = _int(cells[8], 8, source, line, required=False)
        if priority is not None and not 0 <= priority <= MAX_PRIORITY:
            raise InputError(source, f"must be 0-{MAX_PRIORITY}, got {priority}", line=line,
                             field="priority")
        flag = _int(cells[12], 12, source, line, required=False)
        if flag not in (None, 0, 1):
            raise InputError(source, f"must be 0 or 1, got {flag}", line=line,
                             field="different-machine restriction")
        yield TaskEvent(timestamp, job_id, task_index, event, priority,
                        _request(cells[9], 9, source, line), _request(cells[10], 10, source, line),
                        _request(cells[11], 11, source, line), None if flag is None else flag == 1,
                        source, line)


@dataclass
class _Task:
    submit: int | None = None
    priority: int | None = None
    cpu: float | None = None
    memory: float | None = None
    disk: float | None = None
    different_machine: bool = False
    started: int | None = None
    ever_scheduled: bool = False
    runs: list[tuple[int, int, int]] = field(default_factory=list)

    def request(self, ev: TaskEvent) -> None:
        if self.ever_scheduled:
            return  # the first run's request is the one the scheduler placed
        self.cpu = ev.cpu if ev.cpu is not None else self.cpu
        self.memory = ev.memory if ev.memory is not None else self.memory
        self.disk = ev.disk if ev.disk is not None else self.disk
        self.priority = ev.priority if ev.priority is not None else self.priority
        if ev.different_machine is not None:
            self.different_machine = ev.different_machine


def _replay(events: Iterable[TaskEvent], stats: ImportStats) -> tuple[dict[tuple[int, int], _Task], int]:
    tasks: dict[tuple[int, int], _Task] = {}
    last = 0
    ordered = sorted(events, key=lambda e: e.timestamp)  # stable: file order among ties
    for ev in ordered:
        stats.rows += 1
        if ev.timestamp == AFTER_END:
            stats.after_end_rows += 1
            continue
        last = max(last, ev.timestamp)
        task = tasks.setdefault((ev.job_id, ev.task_index), _Task())
        if ev.event_type == SUBMIT:
            if task.submit is None:
                task.submit = ev.timestamp
            task.request(ev)
        elif ev.event_type == UPDATE_PENDING:
            task.request(ev)
        elif ev.event_type == SCHEDULE:
            task.started = ev.timestamp
            task.ever_scheduled = True
        elif ev.event_type in (EVICT, FAIL, FINISH, KILL, LOST) and task.started is not None:
            task.runs.append((task.started, ev.timestamp, ev.event_type))
            task.started = None
    for task in tasks.values():
        if task.started is not None:  # still running when the input ends
            task.runs.append((task.started, last, -1))
            task.started = None
    return tasks, last


def _duration(task: _Task) -> tuple[float, bool] | None:
    """The task's duration and whether it comes from a FINISHed run (None: never scheduled)."""
    if not task.runs:
        return None
    finished = [r for r in task.runs if r[2] == FINISH]
    start, end, _ = finished[-1] if finished else task.runs[-1]
    return max(MIN_DURATION, (end - start) / 1e6), bool(finished)


def import_task_events(events: Iterable[TaskEvent],
                       options: GoogleImportOptions = GoogleImportOptions(),
                       source: str = "") -> tuple[Trace, ImportStats]:
    """Build a trace from task events (see the module docstring for every rule)."""
    stats = ImportStats()
    tasks, _ = _replay(events, stats)
    stats.tasks_seen = len(tasks)
    submits = [t.submit for t in tasks.values() if t.submit]
    origin = min(submits) if submits else 0
    by_job: dict[int, list[tuple[int, _Task, float]]] = defaultdict(list)
    for (job_id, index), task in sorted(tasks.items()):
        measured = _duration(task)
        if measured is None:
            stats.never_scheduled += 1
            continue
        if not (task.cpu or task.memory or task.disk):
            stats.no_request += 1
            continue
        duration, finished = measured
        stats.unfinished_runs += 0 if finished else 1
        by_job[job_id].append((index, task, duration))
    jobs = [_job(job_id, members, origin, options) for job_id, members in by_job.items()]
    jobs.sort(key=lambda j: (j.submit, int(j.job[1:])))
    stats.jobs_kept = len(jobs)
    stats.tasks_kept = sum(j.instances for j in jobs)
    try:
        check_trace(jobs)
    except InvalidArgument as exc:  # pragma: no cover - _job builds valid jobs
        raise InputError(source or "task_events", exc.message, field=exc.field) from None
    header = TraceHeader(name=options.name, source=f"google cluster-usage trace v2 task_events{source}")
    return Trace(header, tuple(jobs)), stats


def _job(job_id: int, members: Sequence[tuple[int, _Task, float]], origin: int,
         options: GoogleImportOptions) -> TraceJob:
    submit = min(max(0, (t.submit or 0) - origin) for _, t, _ in members) / 1e6
    priority = max(t.priority or 0 for _, t, _ in members)
    pool = options.pool_for(priority)
    if pool is None:
        raise InputError("task_events", f"job {job_id} has priority {priority}, which no pool band "
                         "of the pool map covers", field="priority")
    resources = Resources(cpu=max(t.cpu or 0.0 for _, t, _ in members) * options.cpu_cores,
                          mem_mb=max(t.memory or 0.0 for _, t, _ in members) * options.memory_mb,
                          disk_mb=max(t.disk or 0.0 for _, t, _ in members) * options.disk_mb)
    durations = tuple(d for _, _, d in members)
    same = all(d == durations[0] for d in durations)
    return TraceJob(job=f"g{job_id}", submit=submit, pool=pool, instances=len(members),
                    resources=resources, duration=durations[0] if same else statistics.median(durations),
                    durations=() if same else durations, priority=priority,
                    preemptible=priority < options.production_priority,
                    one_per_host=any(t.different_machine for _, t, _ in members))


def _open(path: Path) -> Iterator[str]:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", newline="") as stream:
                yield from stream
        else:
            with path.open(encoding="utf-8", newline="") as stream:
                yield from stream
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read: {exc}") from None


def load_task_events(paths: Sequence[str | Path],
                     options: GoogleImportOptions = GoogleImportOptions()) -> tuple[Trace, ImportStats]:
    """Import the task events files at `paths` (.csv or .csv.gz), all together."""
    if not paths:
        raise InvalidArgument("give at least one task_events file", field="files")
    events: list[TaskEvent] = []
    for path in paths:
        events.extend(parse_rows(_open(Path(path)), str(path)))
    names = ", ".join(Path(p).name for p in paths[:3]) + (", ..." if len(paths) > 3 else "")
    return import_task_events(events, options, f": {names}")
