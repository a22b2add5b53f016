"""`peloton simulate`: replay a workload trace against the scheduler, and make traces.

`peloton simulate TRACE --cluster C --pools P [--what-if W]` is `simulate run`.
These commands read and write files (and, for `export`, a store and an archive);
no cluster needs to be running.  Formats: peloton/simulation/README.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from cli import context
from cli.archive import parse_when
from peloton.core.errors import InvalidArgument
from peloton.simulation.errors import InputError


def _seconds(text: str) -> float:
    from peloton.simulation.whatif import parse_seconds

    try:
        return parse_seconds(text, "duration")
    except InvalidArgument as exc:
        raise ValueError(exc.message) from None


class _Seconds(click.ParamType):  # type: ignore[type-arg]  # generic only in click >= 8.2
    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return _seconds(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SECONDS = _Seconds()


class _RunByDefault(click.Group):
    """A group whose unknown first word is the TRACE of its `run` command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("simulate", cls=_RunByDefault)
def simulate() -> None:
    """Replay a workload trace against the scheduler on simulated hosts, with a what-if beside it.

    \b
    Examples:
      peloton simulate trace.jsonl --cluster cluster.yaml --pools pools.yaml \\
          --what-if more-batch.yaml --out report/
      peloton simulate check trace.jsonl --cluster cluster.yaml --pools pools.yaml
      peloton simulate export --store sqlite:///var/peloton/state.db --since 7d -o week.jsonl
      peloton simulate import-google \\
          tests/unit/simulation/data/google-v2/task_events/part-00000-of-00001.csv -o google.jsonl
    """


def _inputs(trace_path: str, cluster_path: str, pools_path: str, whatif_path: str | None) -> Any:
    """Load and check every input file; InputError names the file, line and field."""
    from peloton.simulation.cluster import load_cluster
    from peloton.simulation.pools import load_pools
    from peloton.simulation.trace_io import load_trace
    from peloton.simulation.whatif import load_whatif

    trace = load_trace(trace_path)
    cluster = load_cluster(cluster_path)
    pools = load_pools(pools_path)
    whatif = load_whatif(whatif_path) if whatif_path else None
    return trace, cluster, pools, whatif


def _plan(files: tuple[str, str, str, str | None], options: Any) -> Any:
    from peloton.simulation.whatif import plan

    trace, cluster, pools, whatif = _inputs(*files)
    try:
        return plan(trace, cluster, pools, whatif, options)
    except InputError:
        raise
    except InvalidArgument as exc:
        source = files[3] if exc.field and exc.field.startswith("changes") else files[0]
        raise InputError(str(source), exc.message, field=exc.field) from None


def _input_options(f: Any) -> Any:
    for option in reversed([
        click.argument("trace", type=click.Path(dir_okay=False)),
        click.option("--cluster", "cluster_path", required=True, type=click.Path(dir_okay=False),
                     help="CLUSTER.yaml: the simulated hosts."),
        click.option("--pools", "pools_path", required=True, type=click.Path(dir_okay=False),
                     help="POOLS.yaml: the resource pool tree."),
        click.option("--what-if", "whatif_path", type=click.Path(dir_okay=False),
                     help="CHANGES.yaml: run it too, beside the baseline."),
        click.option("--seed", default=0, show_default=True, help="Seed of every random choice."),
        click.option("--sample-interval", default="60s", type=SECONDS, show_default=True,
                     help="How often pools and the cluster are sampled (simulated time)."),
        click.option("--horizon", type=SECONDS, default=None,
                     help="Stop at this simulated time (e.g. 2d); default: the trace's ideal end + 1h."),
    ]):
        f = option(f)
    return f


def _plan_options(seed: int, sample_interval: float, horizon: float | None) -> Any:
    from peloton.simulation.whatif import PlanOptions

    return PlanOptions(seed=seed, sample_interval=sample_interval, horizon=horizon)


def _human(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds >= 86400:
        return f"{seconds / 86400:.1f}d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 60:
        return f"{seconds / 60:.1f}m"
    return f"{seconds:.1f}s"


@simulate.command("run")
@_input_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Also write report.txt, report.json, report.html and the PNG plots here.")
@click.option("--json", "json_flag", is_flag=True, help="Print the report as JSON (as -j does).")
@click.option("--buckets", default=12, show_default=True, type=click.IntRange(1, 1000),
              help="Intervals of the over-time tables.")
@click.option("--no-plots", is_flag=True, help="With --out: skip the PNGs (and their HTML images).")
@click.option("--engine", default="peloton", hidden=True, help="Simulator to run (tests use others).")
def run(trace: str, cluster_path: str, pools_path: str, whatif_path: str | None, seed: int,
        sample_interval: float, horizon: float | None, out_dir: str | None, json_flag: bool,
        buckets: int, no_plots: bool, engine: str) -> None:
    """Replay TRACE on the simulated cluster; print the report (and a what-if beside it).

    The baseline runs the trace on CLUSTER.yaml and POOLS.yaml as they are; with
    --what-if, a second run applies CHANGES.yaml and the report shows both with
    deltas.  The same inputs and seed give the same report, byte for byte.  How
    fast the simulation ran (its speed-up over real time) is printed on stderr.

    \b
    Example:
      peloton simulate trace.jsonl --cluster cluster.yaml --pools pools.yaml \\
          --what-if more-batch.yaml --out report/
    """
    from peloton.simulation.engine import load_simulator, run_scenario
    from peloton.simulation.plots import require_matplotlib
    from peloton.simulation.report_files import render_report, write_report

    plots = bool(out_dir) and not no_plots
    if plots:
        require_matplotlib()  # before the simulation, which may run for minutes
    baseline, whatif = _plan((trace, cluster_path, pools_path, whatif_path),
                             _plan_options(seed, sample_interval, horizon))
    simulator = load_simulator(engine)
    results = []
    for scenario in [s for s in (baseline, whatif) if s is not None]:
        started = time.monotonic()
        result, stats = run_scenario(simulator, scenario)
        click.echo(f"{scenario.label}: simulated {_human(result.end)} in {_human(stats.wall_secs)} "
                   f"({stats.speedup:,.0f}x real time; {time.monotonic() - started:.1f}s with "
                   "checking)", err=True)
        results.append(result)
    rendered = render_report(results, buckets=buckets, plots=plots)
    if out_dir:
        for path in write_report(out_dir, rendered):
            click.echo(f"wrote {path}", err=True)
    click.echo(rendered.json if (json_flag or context.settings().json) else rendered.text, nl=False)


@simulate.command("check")
@_input_options
def check(trace: str, cluster_path: str, pools_path: str, whatif_path: str | None, seed: int,
          sample_interval: float, horizon: float | None) -> None:
    """Read and check every input file, and print what a run would replay.

    \b
    Example:
      peloton simulate check trace.jsonl --cluster cluster.yaml --pools pools.yaml \\
          --what-if more-batch.yaml
    """
    baseline, whatif = _plan((trace, cluster_path, pools_path, whatif_path),
                             _plan_options(seed, sample_interval, horizon))
    t = baseline.trace
    capacity = sum((h.resources.cpu for h in baseline.hosts), 0.0)
    lines = [f"trace {trace}: {len(t.jobs)} jobs, {t.task_count} tasks, submitted from "
             f"t={t.jobs[0].submit if t.jobs else 0:g}s to t={t.jobs[-1].submit if t.jobs else 0:g}s; "
             f"pools used: {', '.join(t.pools()) or '-'}",
             f"cluster {cluster_path}: {len(baseline.hosts)} hosts, {capacity:g} cpu; preemption "
             f"{'on' if baseline.preemption else 'off'}",
             f"pools {pools_path}: {len(baseline.pools.pools)} pools, leaves "
             f"{', '.join(baseline.pools.leaves())}",
             f"horizon {baseline.horizon:g}s, samples every {baseline.sample_interval:g}s, seed {seed}"]
    if whatif is not None:
        lines.append(f"what-if {whatif_path} ({whatif.label}):")
        lines += [f"  {c}" for c in whatif.changes]
    click.echo("\n".join(lines))
    click.echo("ok: every input is valid", err=True)


def _write(text: str, path: str | None) -> None:
    if path in (None, "-"):
        sys.stdout.write(text)
        return
    assert path is not None
    Path(path).write_text(text, encoding="utf-8")
    click.echo(f"wrote {path}", err=True)


@simulate.command("export")
@click.option("--store", "store_url", required=True, metavar="URL",
              help="The cluster's store: sqlite:///path, postgresql://..., cassandra://...")
@click.option("--since", required=True, help="Jobs created since: a time ago (36h, 7d) or a date.")
@click.option("--until", default=None, help="... and before this (default: now).")
@click.option("--archive", "archive_url", default=None, metavar="URL",
              help="Also read archived jobs: dir:///path, sqlite:///file.db, postgresql://...")
@click.option("--salt", default="", envvar="PELOTON_SIM_SALT",
              help="Secret for anonymised names ($PELOTON_SIM_SALT); same salt, same names.")
@click.option("--no-anonymise", is_flag=True, help="Keep job ids and pool names as they are.")
@click.option("--unknown-duration", default="10m", type=SECONDS, show_default=True,
              help="Duration of a batch job none of whose tasks started.")
@click.option("--name", default="export", show_default=True, help="The trace's name.")
@click.option("-o", "--output", "output_path", default="-", help="Trace file to write (- = stdout).")
@click.option("--pools-out", default=None, help="Also write the cluster's pools as POOLS.yaml here.")
def export(store_url: str, since: str, until: str | None, archive_url: str | None, salt: str,
           no_anonymise: bool, unknown_duration: float, name: str, output_path: str,
           pools_out: str | None) -> None:
    """Export the jobs of a live cluster's store (and archive) as a trace, anonymised.

    Reads through the storage gateway and the archive's readers; writes nothing
    to either.  Job ids and pool names are replaced by salted hashes unless
    --no-anonymise; what was guessed or left out is summarised on stderr.

    \b
    Example:
      peloton simulate export --store sqlite:///var/peloton/state.db --since 7d \\
          --archive dir:///var/peloton/archive -o week.jsonl --pools-out pools.yaml
    """
    import yaml

    from peloton.simulation.export import ExportRequest
    from peloton.simulation.export import export as run_export
    from peloton.simulation.pools import pools_to_data
    from peloton.simulation.trace_io import dump_trace

    now = time.time()
    request = ExportRequest(store_url=store_url, since=parse_when(since, now),
                            until=parse_when(until, now) if until else None, archive_url=archive_url,
                            salt=salt, anonymise=not no_anonymise, unknown_duration=unknown_duration,
                            name=name)
    trace, stats, pools = run_export(request, now=now)
    for line in stats.lines():
        click.echo(line, err=True)
    _write(dump_trace(trace), output_path)
    if pools_out:
        _write(yaml.safe_dump(pools_to_data(pools), sort_keys=False), pools_out)


def _pool_map(text: str) -> tuple[tuple[int, int, str], ...]:
    bands = []
    for item in [p.strip() for p in text.split(",") if p.strip()]:
        span, _, pool = item.partition("=")
        lo, _, hi = span.partition("-")
        try:
            bands.append((int(lo), int(hi or lo), pool.strip()))
        except ValueError:
            raise click.BadParameter(f"{item!r}: expected LOW-HIGH=/pool (e.g. 9-11=/production)",
                                     param_hint="--pool-map") from None
    return tuple(bands)


@simulate.command("import-google")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--cpu-cores", default=32.0, show_default=True,
              help="Cores of a machine whose normalised cpu capacity is 1.0.")
@click.option("--memory-mb", default=131072.0, show_default=True,
              help="Memory (MB) of a machine whose normalised memory capacity is 1.0.")
@click.option("--disk-mb", default=1_000_000.0, show_default=True,
              help="Disk (MB) of a machine whose normalised disk capacity is 1.0.")
@click.option("--pool-map", default="0-1=/free,2-8=/batch,9-11=/production", show_default=True,
              help="Priority bands to pools.")
@click.option("--pool", "single_pool", default=None, help="Put every job in this pool instead.")
@click.option("--production-priority", default=9, show_default=True,
              help="Jobs at or above this priority are not preemptible.")
@click.option("--name", default="google-v2", show_default=True, help="The trace's name.")
@click.option("-o", "--output", "output_path", default="-", help="Trace file to write (- = stdout).")
def import_google(files: tuple[str, ...], cpu_cores: float, memory_mb: float, disk_mb: float,
                  pool_map: str, single_pool: str | None, production_priority: int, name: str,
                  output_path: str) -> None:
    """Convert Google cluster-usage trace v2 task_events files (.csv, .csv.gz) into a trace.

    The field-by-field mapping is in peloton/simulation/README.md.  What was
    left out (tasks never scheduled, with no request) is summarised on stderr.

    \b
    Example:
      peloton simulate import-google \\
          tests/unit/simulation/data/google-v2/task_events/part-00000-of-00001.csv -o google.jsonl
    """
    from peloton.simulation.google_trace import GoogleImportOptions, load_task_events
    from peloton.simulation.trace_io import dump_trace

    bands = ((0, 11, single_pool),) if single_pool else _pool_map(pool_map)
    options = GoogleImportOptions(cpu_cores=cpu_cores, memory_mb=memory_mb, disk_mb=disk_mb,
                                  pool_map=bands, production_priority=production_priority, name=name)
    trace, stats = load_task_events(list(files), options)
    for line in stats.lines():
        click.echo(line, err=True)
    _write(dump_trace(trace), output_path)

