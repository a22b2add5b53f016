"""`peloton job forecast JOB [INSTANCE]`: when the job's pending tasks will start, what binds
them now, and what would start them sooner (pelotonpy.api.forecast on the resource manager).

The answer comes from the real scheduler run forward on a simulated clock from live state;
every answer states how far ahead it looked and how much wall time it was allowed.
"""

from __future__ import annotations

import click

from cli import context, ids
from peloton.core.forecast.render import text, to_json


@click.command("forecast")
@ids.job_argument()
@click.argument("instance", type=click.IntRange(min=0), required=False)
@click.option("--json", "json_flag", is_flag=True, help="Print the forecast as JSON (as -j does).")
@click.option("--horizon", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Simulated seconds to look ahead (server default: a day).")
@click.option("--wall", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Wall-clock seconds the forecast may spend (server default: 10).")
@click.option("--variations", type=click.IntRange(min=1), default=None,
              help="Seeded variations of the unknown durations (server default: 5).")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds each task of this job runs, if better known than its history.")
def forecast(job_id: str, instance: int | None, json_flag: bool, horizon: float | None,
             wall: float | None, variations: int | None, duration: float | None) -> None:
    """Forecast when a pending job (or one instance) starts, and what would start it sooner.

    \b
    Example:
      peloton job forecast 358fad26 0
      peloton job forecast 358fad26 --duration 600 --json
    """
    out = context.out()
    got = context.client().forecast(
        job_id, () if instance is None else (instance,), horizon_secs=horizon or 0.0,
        wall_secs=wall or 0.0, variations=variations or 0, duration_secs=duration or 0.0)
    if json_flag or out.json_mode:
        out.json(to_json(got))
        return
    for line in text(got).splitlines():
        out.line(line)


def register(group: click.Group) -> None:
    """Add `forecast` to the `job` group."""
    group.add_command(forecast)
