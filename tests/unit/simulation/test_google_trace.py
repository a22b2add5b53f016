"""The Google cluster-usage trace v2 importer, on the hand-written sample in data/google-v2."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from peloton.core.model.resources import Resources
from peloton.simulation.errors import InputError
from peloton.simulation.google_trace import GoogleImportOptions, load_task_events
from peloton.simulation.trace_io import dump_trace, read_trace

SAMPLE = Path(__file__).parent / "data" / "google-v2" / "task_events" / "part-00000-of-00001.csv"


def test_the_sample_maps_field_by_field() -> None:
    trace, stats = load_task_events([SAMPLE])
    jobs = {j.job: j for j in trace.jobs}
    assert [j.job for j in trace.jobs] == ["g6250000001", "g6250000004", "g6250000002", "g6250000003",
                                          "g6250000005"]
    # Submit: seconds after the earliest non-zero SUBMIT (600 s into the trace); timestamp 0 is t=0.
    assert [j.submit for j in trace.jobs] == [0, 0, 5, 10, 20]
    evicted = jobs["g6250000001"]
    # Task 1 was evicted after 20 s and then finished a 60 s run: the FINISH run counts.
    assert (evicted.instances, evicted.duration, evicted.durations, evicted.pool) == (3, 60, (), "/batch")
    assert evicted.resources == Resources(cpu=0.0625 * 32, mem_mb=0.03125 * 131072, disk_mb=100)
    assert (evicted.priority, evicted.preemptible, evicted.one_per_host) == (2, True, False)
    prod = jobs["g6250000002"]
    # One task killed after 300 s, one still running at the last timestamp (960 s): 354 s.
    # (Float literals: mypy 2.4 narrows tuple[float, ...] == a tuple of ints to Never.)
    assert prod.durations == (300.0, 354.0) and prod.duration == 327
    assert (prod.pool, prod.priority, prod.preemptible, prod.one_per_host) == ("/production", 9, False, True)
    # Task 1 of 6250000003 was never scheduled: left out.
    assert jobs["g6250000003"].instances == 1 and jobs["g6250000003"].pool == "/free"
    # UPDATE_PENDING raised the memory request before the first SCHEDULE; the run FAILED after 10 s.
    updated = jobs["g6250000005"]
    assert updated.resources.mem_mb == 0.125 * 131072 and updated.duration == 10
    assert jobs["g6250000004"].duration == 650
    assert (stats.rows, stats.tasks_seen, stats.tasks_kept, stats.jobs_kept) == (30, 9, 8, 5)
    assert (stats.never_scheduled, stats.unfinished_runs, stats.after_end_rows) == (1, 3, 1)


def test_the_output_is_a_valid_trace_and_gzip_reads_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "part-00000-of-00001.csv.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    plain, _ = load_task_events([SAMPLE])
    zipped, _ = load_task_events([packed])
    assert zipped.jobs == plain.jobs
    assert read_trace(dump_trace(plain).splitlines()) == plain


def test_options_scale_requests_and_choose_pools() -> None:
    options = GoogleImportOptions(cpu_cores=64, memory_mb=1024, pool_map=((0, 11, "/all"),),
                                  production_priority=11)
    trace, _ = load_task_events([SAMPLE], options)
    first = trace.jobs[0]
    assert first.resources.cpu == 4 and first.resources.mem_mb == 32
    assert {j.pool for j in trace.jobs} == {"/all"} and all(j.preemptible for j in trace.jobs[:2])
    with pytest.raises(InputError, match="priority 2, which no pool band"):
        load_task_events([SAMPLE], GoogleImportOptions(pool_map=((9, 11, "/prod"),)))


@pytest.mark.parametrize(("row", "message"), [
    ("1,,2,3", "x.csv:1: has 4 columns"),
    ("1,,2,3,,9,u,0,0,0.1,0.1,0,0", "x.csv:1: event type: must be 0-8"),
    ("x,,2,3,,0,u,0,0,0.1,0.1,0,0", "x.csv:1: timestamp: must be an integer"),
    (",,2,3,,0,u,0,0,0.1,0.1,0,0", "x.csv:1: timestamp: is empty but required"),
    ("1,,2,3,,0,u,0,12,0.1,0.1,0,0", "x.csv:1: priority: must be 0-11"),
    ("1,,2,3,,0,u,0,1,-0.1,0.1,0,0", "x.csv:1: CPU request: must be a normalised request"),
    ("1,,2,3,,0,u,0,1,0.1,0.1,0,2", "x.csv:1: different-machine restriction: must be 0 or 1"),
])
def test_bad_rows_are_named_by_file_line_and_column(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "x.csv"
    path.write_text(row + "\n")
    with pytest.raises(InputError) as err:
        load_task_events([path])
    assert str(err.value).startswith(str(tmp_path / message.split(":", 1)[0]))
    assert message.split(":", 1)[1] in str(err.value)
